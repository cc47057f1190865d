"""A restart from a checkpoint (issue 31, item 2): the job writes a new event file (or JSON lines)
whose steps go back. The source follows the new timeline at once, drops the abandoned steps as
tensorboard's own reader shows them (``EventAccumulator``: the last event in file order), counts the
restart on the task, and rates the new timeline, not the jump back. Written with torch's real
``SummaryWriter``; no mock."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("tensorboard")
torch_tb = pytest.importorskip("torch.utils.tensorboard")

from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator  # noqa: E402
from tensorboard.util import tensor_util  # noqa: E402

from cmdare.collectors import metrics as M  # noqa: E402
from cmdare.collectors.clock import ManualClock  # noqa: E402
from cmdare.collectors.logs.source import JsonlSource  # noqa: E402
from cmdare.collectors.observed import build_jobs  # noqa: E402
from cmdare.collectors.poller import Poller  # noqa: E402
from cmdare.collectors.store import Store  # noqa: E402
from cmdare.collectors.tensorboard.source import TensorBoardSource  # noqa: E402
from cmdare.tui.panes.cluster_rows import node_cells  # noqa: E402

T0 = 1_790_000_000.0


def _loss(step: int, restarted: bool) -> float:
    return (0.8 if restarted else 2.0) - step / 10_000


def _write(w, steps: range, t0: float, restarted: bool) -> None:
    """Steps at 10 steps/s from wall time ``t0`` (the first of ``steps``)."""
    for s in steps:
        w.add_scalar("loss", _loss(s, restarted), s, walltime=t0 + (s - steps.start) / 10)
    w.flush()


def _reference(run: Path) -> tuple[int, float]:
    ea = EventAccumulator(str(run))
    ea.Reload()
    last = ea.Tensors("loss")[-1]
    return last.step, tensor_util.make_ndarray(last.tensor_proto).item()


async def test_static_restart_matches_event_accumulator_and_is_counted(tmp_path):
    run = tmp_path / "run"
    w = torch_tb.SummaryWriter(str(run))
    _write(w, range(0, 1501, 100), T0, False)
    w.close()
    w = torch_tb.SummaryWriter(str(run))  # resumed from the checkpoint at step 1000
    _write(w, range(1000, 1301, 10), T0 + 200, True)
    w.close()
    clock = ManualClock(T0 + 300)
    poller = Poller([TensorBoardSource(tmp_path, job="j", poll_budget_s=30)], Store(), clock=clock)
    (p,) = (await poller.poll_once()).polls
    step, loss = _reference(run)
    assert (p.values[M.K_GLOBAL_STEP], p.values[M.K_LOSS]) == (step, pytest.approx(loss))  # 1300, not 1500
    assert step == 1300 and "restarted from step 1,000" in p.error
    (job,) = build_jobs(poller.store, poller.lifecycle, clock.now())
    assert job.nodes[0].restarts == 1
    assert "↻1" in str(node_cells(job.nodes[0], [], clock.now())[0])  # the Cluster row says it


async def test_live_restart_follows_the_new_timeline_and_rates_it(tmp_path):
    run = tmp_path / "run"
    clock = ManualClock(T0)
    poller = Poller(
        [TensorBoardSource(tmp_path, job="j", poll_budget_s=30)], Store(), clock=clock, interval=5.0
    )
    w = torch_tb.SummaryWriter(str(run))
    for k in range(5):  # steps 0..249 at 10/s, read every 5 s
        _write(w, range(50 * k, 50 * k + 50), T0 + 5 * k, False)
        await poller.poll_once()
        clock.advance(5.0)
    w.close()
    w = torch_tb.SummaryWriter(str(run))  # crashed; resumed from the checkpoint at step 100, 5 s later
    seen = []
    for k in range(16):
        start = 100 + 50 * k
        _write(w, range(start, start + 50), T0 + 30 + 5 * k, True)
        (p,) = (await poller.poll_once()).polls
        seen.append((p.values[M.K_GLOBAL_STEP], p.values[M.K_LOSS]))
        clock.advance(5.0)
    w.close()
    step, loss = _reference(run)
    assert seen[0] == (149, pytest.approx(_loss(149, True)))  # the new timeline at once (was 249 and 1.56)
    assert seen[-1] == (step, pytest.approx(loss))
    (job,) = build_jobs(poller.store, poller.lifecycle, clock.now())
    assert job.nodes[0].restarts == 1
    assert job.steps_per_sec == pytest.approx(10.0, rel=0.02)  # the new timeline's rate (was 0.3)


async def test_jsonl_restart_is_counted_and_rated_on_the_new_timeline(tmp_path):
    log = tmp_path / "train.jsonl"
    clock = ManualClock(T0)
    poller = Poller([JsonlSource(log, job="j")], Store(), clock=clock, interval=5.0)

    def lines(steps: range, t0: float, restarted: bool) -> None:
        with log.open("a") as f:
            for s in steps:
                f.write(
                    json.dumps({"time": t0 + (s - steps.start) / 10, "step": s, "loss": _loss(s, restarted)})
                    + "\n"
                )

    for k in range(5):
        lines(range(50 * k, 50 * k + 50), T0 + 5 * k, False)
        await poller.poll_once()
        clock.advance(5.0)
    for k in range(16):
        lines(range(100 + 50 * k, 150 + 50 * k), T0 + 30 + 5 * k, True)
        (p,) = (await poller.poll_once()).polls
        clock.advance(5.0)
    assert p.values[M.K_GLOBAL_STEP] == 899 and p.values[M.K_LOG_RESTARTS] == 1
    (job,) = build_jobs(poller.store, poller.lifecycle, clock.now())
    assert job.nodes[0].restarts == 1
    assert job.steps_per_sec == pytest.approx(10.0, rel=0.02)


def test_a_resumed_writers_file_is_read_after_the_first_whatever_its_number(tmp_path):
    """torch numbers the event files of one process in turn: a job resumed within the second writes ``….10``
    beside ``….9``, and the resumed file must be read second (compared as text it came first, and the restart
    read as the old timeline: found in the full suite, where earlier tests had made nine writers)."""
    from cmdare.collectors.tensorboard.runs import find_runs

    run = tmp_path / "run"
    run.mkdir()
    names = [f"events.out.tfevents.1796308021.vm.3617.{n}" for n in (9, 10, 100)]
    for name in reversed(names):
        (run / name).write_bytes(b"")
    (files,) = find_runs(tmp_path).runs.values()
    assert [f.name for f in files] == names


@pytest.mark.parametrize("old_n, new_n", [(9, 10), (99, 100)])
async def test_a_restart_in_the_same_second_is_told_by_the_files_numbers(tmp_path, old_n, new_n):
    """Writers of one process number their files in turn (``….<pid>.9``, then ``….10``); a resumed writer in the
    same second differs from the old one only there. Compared as text, ``.10`` came before ``.9``: the restart
    was taken for an old file read late, and the abandoned timeline stood (seen as a flake in the full suite,
    where earlier tests in the same process had made nine writers)."""
    run = tmp_path / "run"
    w = torch_tb.SummaryWriter(str(run))
    _write(w, range(0, 1501, 100), T0, False)
    w.close()
    (old,) = run.iterdir()
    old.rename(run / f"events.out.tfevents.1790000000.host.4242.{old_n}")
    w = torch_tb.SummaryWriter(str(run))  # resumed from the checkpoint at step 1000, in the same second
    _write(w, range(1000, 1301, 10), T0 + 200, True)
    w.close()
    (new,) = [p for p in run.iterdir() if not p.name.endswith(f".{old_n}")]
    new.rename(run / f"events.out.tfevents.1790000000.host.4242.{new_n}")
    poller = Poller(
        [TensorBoardSource(tmp_path, job="j", poll_budget_s=30)], Store(), clock=ManualClock(T0 + 300)
    )
    (p,) = (await poller.poll_once()).polls
    assert (p.values[M.K_GLOBAL_STEP], p.values[M.K_LOSS]) == (1300, pytest.approx(_loss(1300, True)))
    assert "restarted from step 1,000" in p.error
