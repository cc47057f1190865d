"""The exporter's synchronous mode (issue 17 item 1) without a training job: the all-reduce timer's
arithmetic on an injected clock, the histograms a step records, and the page the collectors read back
(rank labels, ``cmdare_allreduce_seconds``). The real DDP job is in test_conformance_ddp.py."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest

from cmdare.collectors import metrics as M
from cmdare.collectors.exporter import TrainingExporter
from cmdare.collectors.exporter.allreduce_timer import AllreduceTimer
from cmdare.collectors.scrape.exposition import parse_exposition


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_exposed_is_the_tail_after_the_last_bucket_launch() -> None:
    clock = Clock()
    timer = AllreduceTimer(clock)
    for launch, done in ((1.0, 1.5), (2.0, 2.2), (3.0, 3.4)):  # the last bucket launches when backward ends
        clock.t = launch
        timer.launched()
        clock.t = done
        timer.done()
    assert timer.take() == pytest.approx(0.4)
    assert timer.take() == 0.0  # reset for the next step


def test_hidden_all_reduce_costs_nothing_and_waits_add_up() -> None:
    clock = Clock()
    timer = AllreduceTimer(clock)
    clock.t = 1.0
    timer.launched()
    clock.t = 1.1
    timer.done()
    clock.t = 2.0
    timer.launched()
    clock.t = 1.9  # reduced before the last launch completes (stamped out of order by threads)
    timer.done()
    assert timer.take() == 0.0
    clock.t = 5.0
    with timer.waiting():  # Horovod: optimizer.synchronize()
        clock.t = 5.25
    assert timer.take() == pytest.approx(0.25)


def _exporter() -> TrainingExporter:
    return TrainingExporter(
        "ddp", "worker", "worker-3", sync="sync-allreduce", rank=3, local_rank=1, gpu="T4"
    )


def test_sync_step_splits_compute_from_the_exposed_all_reduce() -> None:
    exp = _exporter()
    with exp.sync_step(examples=32):
        with exp.allreduce_wait():
            pass
    exp.observe_allreduce(0.5)
    page = generate_latest(exp.registry).decode()
    parsed = parse_exposition(page)
    assert parsed.info is not None and (parsed.info.rank, parsed.info.local_rank) == ("3", "1")
    assert parsed.values[M.K_ALLREDUCE_SECONDS_COUNT] == 2 and parsed.values[M.K_STEP_SECONDS_COUNT] == 1
    assert parsed.values[M.K_ALLREDUCE_SECONDS_SUM] >= 0.5 and parsed.values[M.K_EXAMPLES] == 32


def test_the_histogram_exists_only_in_sync_mode() -> None:
    exp = TrainingExporter("ps-job", "worker", "0", sync="async-ps")
    with pytest.raises(ValueError, match="sync-allreduce"):
        exp.observe_allreduce(0.1)
    assert "cmdare_allreduce_seconds" not in generate_latest(exp.registry).decode()
    assert 'rank=""' in generate_latest(exp.registry).decode()  # no rank declared: empty label
