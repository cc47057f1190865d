"""A finished run stays finished in its recording (issue 31, item 5): a JSON-lines log that went silent past
its own cadence is "finished" live, and a replay of the session's recording shows it finished too, with
the same words, where it used to turn "silent" (the poll's ``finished`` mark was not recorded). Likewise a
source still reading a backlog: its polls replay as "catching up", not as up to date."""

from __future__ import annotations

import asyncio
import json

from cmdare.collectors.clock import ManualClock
from cmdare.collectors.lifecycle import Lifecycle
from cmdare.collectors.logs.source import JsonlSource
from cmdare.collectors.poller import Poller
from cmdare.collectors.recording.recorder import Recorder
from cmdare.collectors.recording.replay import ReplaySource
from cmdare.collectors.samples import TaskState
from cmdare.collectors.store import Store
from tests.cli_harness import run_main

T0 = 1_790_000_000.0


async def _record(tmp_path):
    """A session that sees a log write 6 lines a second apart, then nothing for 5 s; its recording."""
    log, rec = tmp_path / "train.jsonl", tmp_path / "session.sqlite"
    clock, lifecycle = ManualClock(T0), Lifecycle()
    recorder = Recorder(rec, lifecycle=lifecycle, interval=1.0)
    poller = Poller([JsonlSource(log, job="j")], Store(), lifecycle=lifecycle, clock=clock, interval=1.0,
                    sinks=[recorder])  # fmt: skip
    for i in range(11):
        if i < 6:
            with log.open("a") as f:
                f.write(json.dumps({"time": clock.now(), "step": 10 * i, "loss": 0.5}) + "\n")
        await poller.poll_once()
        clock.advance(1.0)
    recorder.close()
    (node,) = lifecycle.nodes.values()
    return rec, node


async def test_a_finished_run_replays_finished(tmp_path):
    rec, live = await _record(tmp_path)
    assert live.state is TaskState.FINISHED
    clock = ManualClock()
    replay = ReplaySource(rec, clock, speed=1e6)
    poller = Poller([replay], Store(), clock=clock, interval=1.0)
    for _ in range(11):
        await poller.poll_once()
    replay.close()
    (node,) = poller.lifecycle.nodes.values()
    assert node.state is TaskState.FINISHED  # was silent
    assert node.last_error == live.last_error and node.last_error.startswith("finished: no new line for")


def test_snapshot_of_the_replay_shows_the_job_finished(tmp_path):
    rec, _ = asyncio.run(_record(tmp_path))
    code, out, err = run_main(["snapshot", "--json", "--replay", str(rec), "--replay-speed", "1000000",
                               "--samples", "11", "--interval", "0"])  # fmt: skip
    assert code == 0, err
    (job,) = json.loads(out)["jobs"]
    assert job["finished"] and job["nodes"][0]["status"] == "finished"


async def test_a_backlog_being_read_replays_as_catching_up(tmp_path, monkeypatch):
    """A TensorBoard file read chunk by chunk: the session's polls say "catching up" (values real but behind)
    until the reader reaches the end; the replay of its recording says so on the same polls (it used to
    read every one of them as up to date)."""
    import cmdare.collectors.tensorboard.source as tb_source
    from cmdare.collectors.tensorboard.source import TensorBoardSource
    from tests.test_conformance_tensorboard import big_event_file

    monkeypatch.setattr(tb_source, "READ_CHUNK_BYTES", 16 * 1024)  # a small file, many chunks
    monkeypatch.setattr(tb_source, "PROGRESS_MIN_BYTES", 16 * 1024)
    big_event_file(tmp_path / "logs" / "big" / "events.out.tfevents.1.host", 4_000)
    rec = tmp_path / "session.sqlite"
    clock, lifecycle = ManualClock(T0), Lifecycle()
    recorder = Recorder(rec, lifecycle=lifecycle, interval=1.0)
    source = TensorBoardSource(tmp_path / "logs", job="big")
    poller = Poller([source], Store(), lifecycle=lifecycle, clock=clock, interval=1.0, sinks=[recorder])
    live: list[bool] = []
    try:
        for _ in range(2_000):
            cycle = await poller.poll_once()
            (p,) = cycle.polls
            live.append(p.catching_up)
            if p.ok and not p.catching_up and True in live:  # read to its end
                break
            clock.advance(1.0)
            await asyncio.sleep(0.005)  # the reader thread reads a chunk beside the polls
    finally:
        await source.aclose()
        recorder.close()
    assert True in live and not live[-1]  # how many polls the reading spans depends on the machine

    rclock = ManualClock()
    replay = ReplaySource(rec, rclock, speed=1e6)
    rpoller = Poller([replay], Store(), clock=rclock, interval=1.0)
    replayed: list[bool] = []
    for _ in range(len(live)):
        (p,) = (await rpoller.poll_once()).polls
        replayed.append(p.catching_up)
    replay.close()
    assert replayed == live
