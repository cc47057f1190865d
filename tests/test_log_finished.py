"""Finished runs (issue 31, item 5): a TensorBoard run whose newest event is long past, and a JSON-lines
log that stays silent past its own cadence, are "finished (last event at HH:MM)", not "● up" with an
uptime counting on; the job is finished when all its runs are. torch's real SummaryWriter."""

from __future__ import annotations

import json
import re
import time

import pytest

torch_tb = pytest.importorskip("torch.utils.tensorboard")

from cmdare.collectors.clock import ManualClock  # noqa: E402
from cmdare.collectors.logs.source import JsonlSource  # noqa: E402
from cmdare.collectors.observed import build_jobs  # noqa: E402
from cmdare.collectors.poller import Poller  # noqa: E402
from cmdare.collectors.samples import TaskState  # noqa: E402
from cmdare.collectors.store import Store  # noqa: E402
from cmdare.collectors.tensorboard.source import TensorBoardSource  # noqa: E402
from cmdare.tui.panes.cluster_rows import node_cells  # noqa: E402

T0 = 1_790_000_000.0


def _tb_run(path, t0: float, steps: int = 50) -> None:
    w = torch_tb.SummaryWriter(str(path))
    for s in range(steps):
        w.add_scalar("loss", 1.0 / (s + 1), s, walltime=t0 + s / 10)
    w.close()


async def test_an_old_tensorboard_run_is_finished_from_its_first_read(tmp_path):
    _tb_run(tmp_path / "old", T0 - 20 * 60)  # ended 20 minutes before the reader started
    _tb_run(tmp_path / "live", T0 - 5)
    clock = ManualClock(T0)
    poller = Poller([TensorBoardSource(tmp_path, job="j", poll_budget_s=30)], Store(), clock=clock)
    await poller.poll_once()
    (job,) = build_jobs(poller.store, poller.lifecycle, clock.now())
    by = {n.name: n for n in job.nodes}
    assert by["old"].status == "finished" and by["old"].uptime_s(clock.now()) is None  # was up, 20 min uptime
    cells = node_cells(by["old"], [], clock.now())
    assert str(cells[0]).startswith("■ finished")
    assert (
        f"@{time.strftime('%H:%M', time.localtime(T0 - 20 * 60 + 4.9))}" in cells
    )  # when it ended, for an uptime
    assert by["old"].last_error.startswith("finished: last event at ")
    assert by["live"].status == "up" and not job.finished


async def test_a_silent_jsonl_log_is_finished_past_its_cadence_and_the_job_with_it(tmp_path):
    log = tmp_path / "train.jsonl"
    clock = ManualClock(T0)
    poller = Poller([JsonlSource(log, job="j")], Store(), clock=clock, interval=1.0)
    for i in range(6):  # a line a second
        with log.open("a") as f:
            f.write(json.dumps({"time": clock.now(), "step": 10 * i, "loss": 1.0}) + "\n")
        await poller.poll_once()
        clock.advance(1.0)
    states = []
    for _ in range(4):  # then nothing: its cadence is 1 s, so 2 s of silence ends it
        cycle = await poller.poll_once()
        states.append(next(iter(poller.lifecycle.nodes.values())).state)
        clock.advance(1.0)
    assert states[0] is TaskState.UP and states[-1] is TaskState.FINISHED  # was up forever
    (p,) = cycle.polls
    when = time.strftime("%H:%M", time.localtime(T0 + 5))
    assert re.search(rf"finished: no new line for \d+ s \(last line at {when}, step 50\)", p.error)
    (job,) = build_jobs(poller.store, poller.lifecycle, clock.now())
    assert job.finished and job.nodes[0].uptime_s(clock.now()) is None
    with log.open("a") as f:  # it writes again: up
        f.write(json.dumps({"time": clock.now(), "step": 60, "loss": 1.0}) + "\n")
    await poller.poll_once()
    assert next(iter(poller.lifecycle.nodes.values())).state is TaskState.UP
