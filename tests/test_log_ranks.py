"""Per-rank logs of one synchronous job (issue 31, item 3): two DDP ranks each logging the same steps to
``exp/rank0`` and ``exp/rank1`` (torch's real ``SummaryWriter``; JSON lines per rank) are one job stepping
at 10 steps/s, not 20: the lockstep inference of the exporter path, applied to log runs named for a
rank. Independent runs of a sweep (other names) still add up."""

from __future__ import annotations

import json

import pytest

torch_tb = pytest.importorskip("torch.utils.tensorboard")

from cmdare.collectors.clock import ManualClock  # noqa: E402
from cmdare.collectors.logs.source import JsonlSource  # noqa: E402
from cmdare.collectors.observed import build_jobs  # noqa: E402
from cmdare.collectors.poller import Poller  # noqa: E402
from cmdare.collectors.store import Store  # noqa: E402
from cmdare.collectors.tensorboard.source import TensorBoardSource  # noqa: E402

T0 = 1_790_000_000.0


async def _tensorboard_job(tmp_path, names: tuple[str, ...], rates: tuple[float, ...]):
    clock = ManualClock(T0)
    poller = Poller(
        [TensorBoardSource(tmp_path, job="exp", poll_budget_s=30)], Store(), clock=clock, interval=2.0
    )
    writers = [torch_tb.SummaryWriter(str(tmp_path / n)) for n in names]
    for k in range(8):  # every rank logs every 10th step; read every 2 s
        for r, (w, sps) in enumerate(zip(writers, rates, strict=True)):
            for s in range(int(20 * sps * k / 10), int(20 * sps * (k + 1) / 10), 10):
                w.add_scalar("loss", 1.0 / (s + 1), s, walltime=T0 + s / sps + 0.003 * r)  # ranks ms apart
            w.flush()
        await poller.poll_once()
        clock.advance(2.0)
    for w in writers:
        w.close()
    (job,) = build_jobs(poller.store, poller.lifecycle, clock.now())
    return job


async def test_tensorboard_rank_logs_in_lockstep_are_one_sync_job(tmp_path):
    job = await _tensorboard_job(tmp_path, ("rank0", "rank1"), (10.0, 10.0))
    assert (job.sync, job.sync_how) == ("sync-allreduce", "inferred")
    assert job.steps_per_sec == pytest.approx(10.0, rel=0.02)  # was 20 ("async-ps, inferred")


async def test_a_sweep_of_runs_still_adds_up(tmp_path):
    job = await _tensorboard_job(tmp_path, ("lr_a", "lr_b"), (10.0, 10.0))
    assert job.sync == "async-ps" and job.steps_per_sec == pytest.approx(20.0, rel=0.02)


async def test_rank_logs_at_different_rates_are_not_lockstep(tmp_path):
    job = await _tensorboard_job(tmp_path, ("rank0", "rank1"), (10.0, 15.0))
    assert job.sync == "async-ps" and job.steps_per_sec == pytest.approx(25.0, rel=0.02)


async def test_jsonl_rank_files_in_lockstep_are_one_sync_job(tmp_path):
    logs = [tmp_path / "rank0.jsonl", tmp_path / "rank1.jsonl"]
    clock = ManualClock(T0)
    poller = Poller([JsonlSource(f, job="exp") for f in logs], Store(), clock=clock, interval=2.0)
    for k in range(8):
        for r, f in enumerate(logs):
            with f.open("a") as fh:
                for s in range(20 * k, 20 * (k + 1), 10):
                    fh.write(json.dumps({"time": T0 + s / 10 + 0.003 * r, "step": s, "loss": 1.0}) + "\n")
        await poller.poll_once()
        clock.advance(2.0)
    (job,) = build_jobs(poller.store, poller.lifecycle, clock.now())
    assert [n.name for n in job.nodes] == ["rank0", "rank1"]
    assert (job.sync, job.sync_how) == ("sync-allreduce", "inferred")
    assert job.steps_per_sec == pytest.approx(10.0, rel=0.02)
