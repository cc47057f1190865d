"""The demo's geo-distributed pipeline job serves real stage metrics; its slow link paces it."""

from __future__ import annotations

import urllib.request

import pytest

from cmdare.collectors import metrics as M
from cmdare.collectors.scrape.exposition import parse_exposition
from cmdare.demo.geo import GeoPipelineDemo

pytestmark = pytest.mark.slow


def test_slow_link_sets_the_pipeline_period():
    demo = GeoPipelineDemo()
    sc = demo.sc
    slow = 2 * 50e6 * 8 / 0.36e9  # D·A/B over the 0.36 Gbit/s link
    assert demo.period() == pytest.approx(slow)
    assert demo.period() > sc["stage_compute_seconds"]  # WAN-bound, as the scenario intends


def test_stages_export_compute_wait_and_bytes_per_peer():
    demo = GeoPipelineDemo()
    try:
        targets = demo.start()
        assert len(targets) == 8
        demo.advance(demo.period() * 20)  # 20 micro-batches
        text = urllib.request.urlopen(targets[5].url, timeout=5).read().decode()
        p = parse_exposition(text)
        assert p.info.role == "stage" and p.info.dc == "us-west1" and p.info.stage == "5"
        mbs = p.values[M.K_STAGE_MICROBATCHES]
        assert mbs == 20
        assert p.values[M.K_STAGE_COMPUTE] == pytest.approx(20 * 0.21)
        assert p.values[M.K_STAGE_WAIT] > p.values[M.K_STAGE_COMPUTE]  # waiting on the slow link
        assert p.values[M.stage_bytes_key("stage-6")] == 20 * 2 * 50_000_000
        last = parse_exposition(urllib.request.urlopen(targets[-1].url, timeout=5).read().decode())
        assert last.values[M.K_GLOBAL_STEP] == 1  # 16 micro-batches make one iteration
    finally:
        demo.stop()
