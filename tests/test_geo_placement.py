"""Placement search, the TOML loader and the ``plan --geo`` command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cmdare.planner.geo.geo_model import evaluate
from cmdare.planner.geo.geo_placement import gains, search
from cmdare.planner.geo.geo_workload import GeoWorkloadError, load_geo_workload, parse_geo_workload
from cmdare.tui.commands import UsageError
from cmdare.tui.commands.plan_geo import run_geo

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "geo-3dc.toml"

SMALL = """
[model]
layers = 8
hidden = 1024
seq_len = 512
params = 1e9
n_microbatches = 16

[parallel]
tp = 1

[[dc]]
name = "big"
gpu = "A100"
gpus = 8
usd_per_gpu_hour = 2.0
region = "r1"

[[dc]]
name = "small"
gpu = "A100"
gpus = 4
usd_per_gpu_hour = 1.0
region = "r2"

[[dc]]
name = "tiny"
gpu = "A100"
gpus = 1
region = "r3"

[[link]]
a = "big"
b = "small"
bandwidth_gbps = 5
rtt_ms = 40
loss = 1e-5
n_conn = 32
"""


def test_example_loads_and_evaluates():
    work = load_geo_workload(EXAMPLE)
    assert work.fixed_layout and work.job.layout.pp == 4
    r = evaluate(work.job)
    slow = [b for b in r.boundaries if b.to_dc == "europe"]
    assert slow and slow[0].wan_bound  # the one slow link
    g = gains(work.job)
    assert g.multi_connection_speedup > 1 and g.temporal_speedup >= 1


def test_search_fills_largest_dc_first_and_skips_small_ones():
    work = parse_geo_workload(SMALL, "small.toml")
    res = search(work.job, top=50)
    assert res.evaluated > 0
    for p in res.by_time:
        stages = p.layout.placement
        assert "tiny" not in stages or p.layout.dp * p.layout.tp <= 1
        if "small" in stages:  # only once "big" is full
            assert stages.count("big") * p.layout.dp * p.layout.tp > 8 - p.layout.dp * p.layout.tp
    tps = [p.tokens_per_second for p in res.by_time]
    assert tps == sorted(tps, reverse=True)
    usd = [p.usd_per_million_tokens for p in res.by_cost]
    assert usd == sorted(usd)


def test_cost_counts_gpu_hours_and_egress():
    work = load_geo_workload(EXAMPLE)
    r = evaluate(work.job)
    price = {dc.name: dc.usd_per_gpu_hour for dc in work.job.dcs}
    stages = work.job.layout.placement
    gpu_usd = sum(price[dc] * r.gpus_used / len(stages) for dc in stages) * r.iteration_seconds / 3600
    assert r.gpu_usd_per_iteration == pytest.approx(gpu_usd)
    wan = [b for b in r.boundaries if b.wan]
    assert r.egress_usd_per_iteration == pytest.approx(sum(b.egress_gb_per_iteration * 0.02 for b in wan))


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (SMALL.replace("params = 1e9", "params = 1e9\nbogus = 1"), "[model] bogus"),
        (SMALL.replace('gpu = "A100"\ngpus = 4', 'gpu = "Z9"\ngpus = 4'), "[[dc]] #2 gpu"),
        (SMALL.replace("rtt_ms = 40", 'rtt_ms = "x"'), "[[link]] #1 rtt_ms"),
        (SMALL.replace("tp = 1", 'tp = 1\nplacement = ["big", "tiny"]'), "[parallel] placement"),
        (SMALL.replace("hidden = 1024\n", ""), "[model] hidden"),
    ],
)
def test_bad_files_name_file_line_and_key(text, needle):
    with pytest.raises(GeoWorkloadError) as err:
        parse_geo_workload(text, "bad.toml")
    assert "bad.toml" in str(err.value) and needle in str(err.value)


def test_run_geo_json(capsys):
    assert run_geo(str(EXAMPLE), True, 3) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("iteration_seconds", "bubble_fraction", "gpu_utilization", "prefill_capacity", "placements"):
        assert key in out
    assert len(out["placements"]) == 3
    b = out["boundaries"][-1]
    assert {
        "from_dc",
        "to_dc",
        "bytes_per_microbatch",
        "effective_gbps",
        "transfer_seconds",
        "wan_bound",
    } <= set(b)


def test_run_geo_table_and_search_layout(tmp_path, capsys):
    assert run_geo(str(EXAMPLE), False, 2) == 0
    assert "stage boundaries" in capsys.readouterr().out
    small = tmp_path / "small.toml"
    small.write_text(SMALL)
    assert run_geo(str(small), True, 2) == 0
    assert json.loads(capsys.readouterr().out)["layout"]["chosen_by"] == "search"


def test_run_geo_errors_are_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="missing.toml"):
        run_geo(str(tmp_path / "missing.toml"), True, 3)
    bad = tmp_path / "bad.toml"
    bad.write_text(SMALL.replace("[[link]]\n", "[[link]]\nfoo = 1\n"))
    with pytest.raises(UsageError, match=r"bad.toml:\d+: \[\[link\]\] #1 foo"):
        run_geo(str(bad), True, 3)
