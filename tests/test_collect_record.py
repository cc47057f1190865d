"""Record & replay: one transaction per cycle, failures and lifetimes kept, no secrets, and a replay
that reproduces the live numbers (rates, states, lifetimes) on the recorded clock."""

from __future__ import annotations

import asyncio
import sqlite3

import httpx
import pytest

from cmdare.collectors import metrics as M
from cmdare.collectors import writes
from cmdare.collectors.clock import Clock, ManualClock
from cmdare.collectors.lifecycle import Lifecycle
from cmdare.collectors.poller import Poller
from cmdare.collectors.recording.recorder import Recorder, RecordingError, scrub
from cmdare.collectors.recording.replay import ReplayFinished, ReplaySource
from cmdare.collectors.samples import TaskInfo, TaskPoll, TaskState
from cmdare.collectors.store import Store

W = [
    TaskInfo(
        job="j", task=f"worker-{i}", role="worker", gpu="K80", region="us-west1", provisioning="preemptible"
    )
    for i in range(3)
]
SECRET_URL = "http://admin:hunter2@10.0.0.1:9400/metrics?token=abc123"


class Scripted:
    """A source whose tasks step at fixed rates; worker-2 dies at cycle 5 (seen as refused)."""

    name = "scripted"

    def __init__(self, clock: ManualClock) -> None:
        self.clock, self.n = clock, 0

    async def poll(self, client: httpx.AsyncClient, clock: Clock) -> list[TaskPoll]:
        self.clock.advance(2.0 + 0.1 * (self.n % 3))  # irregular polls: rates use measured time
        self.n += 1
        out = []
        for i, info in enumerate(W):
            src = SECRET_URL if i == 0 else f"http://w{i}/metrics"
            if i == 2 and self.n >= 5:
                out.append(TaskPoll(source=src, t=self.clock.now(), ok=False, error="connection refused"))
                continue
            steps = (i + 1) * 10.0 * self.n
            out.append(
                TaskPoll(
                    source=src,
                    t=self.clock.now(),
                    ok=True,
                    info=info,
                    values={M.K_WORKER_STEPS: steps, M.K_GLOBAL_STEP: 60.0 * self.n},
                )
            )
        return out


async def record_live(path, cycles: int = 14) -> tuple[Store, Lifecycle, Poller]:
    """A scripted live session of ``cycles`` polls on a manual clock, recorded to ``path``."""
    clock = ManualClock(1_000.0)
    store, lc = Store(), Lifecycle(silent_after=3, vanished_after=6)
    rec = Recorder(path, lifecycle=lc, interval=2.0)
    poller = Poller([Scripted(clock)], store, lifecycle=lc, clock=clock, interval=2.0, sinks=[rec])
    for _ in range(cycles):
        await poller.poll_once()
    rec.close()
    await poller.aclose()
    return store, lc, poller


async def _replay(path, speed: float = 0.0) -> tuple[Store, Lifecycle, ReplaySource]:
    clock = ManualClock()
    src = ReplaySource(path, clock, speed=speed)
    store, lc = Store(), Lifecycle(silent_after=3, vanished_after=6)
    poller = Poller([src], store, lifecycle=lc, clock=clock, interval=src.interval or 2.0)
    while (await poller.poll_once()).source_errors.get("replay") is None:
        pass
    await poller.aclose()
    return store, lc, src


async def test_replay_reproduces_rates_states_and_lifetimes(tmp_path):
    path = tmp_path / "rec.sqlite"
    live_store, live_lc, _ = await record_live(path)
    store, lc, src = await _replay(path)
    assert src.position == (14, 14)
    for key, ts in live_store.tasks.items():
        assert store.tasks[key].rate(M.K_WORKER_STEPS, 10.0) == pytest.approx(ts.rate(M.K_WORKER_STEPS, 10.0))
    for name, js in live_store.jobs.items():
        replayed = list(store.jobs[name].last("steps_per_sec", 100))[:14]  # + the cycle that found the end
        assert replayed == pytest.approx(list(js.last("steps_per_sec", 100)), nan_ok=True)
    assert {k: n.state for k, n in lc.nodes.items()} == {k: n.state for k, n in live_lc.nodes.items()}
    assert live_lc.lifetimes and lc.lifetimes == live_lc.lifetimes  # worker-2 vanished while peers ran
    assert live_lc.nodes["j/worker-2"].state is TaskState.REVOKED


async def test_recording_schema_failures_lifetimes_and_no_secrets(tmp_path):
    path = tmp_path / "rec.sqlite"
    await record_live(path)
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == ("1",)
    assert db.execute("SELECT count(*) FROM cycles").fetchone() == (14,)
    assert db.execute("SELECT count(*) FROM polls WHERE ok = 0").fetchone()[0] == 10
    causes = dict(db.execute("SELECT task, cause FROM lifetimes WHERE end IS NOT NULL").fetchall())
    assert causes == {"j/worker-2": "vanished"}
    dump = "\n".join(db.iterdump())
    assert "hunter2" not in dump and "abc123" not in dump and "http://10.0.0.1:9400/metrics" in dump


async def test_crash_loses_at_most_the_current_cycle(tmp_path):
    path = tmp_path / "rec.sqlite"
    clock = ManualClock()
    rec = Recorder(path)
    poller = Poller([Scripted(clock)], Store(), clock=clock, sinks=[rec])
    for _ in range(3):
        await poller.poll_once()
    # no close(): the process "dies" here; another reader sees every committed cycle
    ro = writes.open_sqlite(path, writable=False)
    assert ro.execute("SELECT count(*) FROM cycles").fetchone() == (3,)
    assert ro.execute("SELECT count(DISTINCT cycle) FROM polls").fetchone() == (3,)
    await poller.aclose()


def test_scrub_and_refusals(tmp_path):
    assert scrub(SECRET_URL) == "http://10.0.0.1:9400/metrics?token=***"
    assert scrub("Authorization: Bearer xyz.abc") == "Authorization: Bearer ***"
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(RecordingError):
        Recorder(other)
    with pytest.raises(RecordingError):
        ReplaySource(other, ManualClock())
    writes.set_read_only(True)
    with pytest.raises(writes.ReadOnlyError):
        Recorder(tmp_path / "new.sqlite")
    assert not (tmp_path / "new.sqlite").exists()


async def test_replay_is_read_only_and_pauses_steps_and_paces(tmp_path, monkeypatch):
    path = tmp_path / "rec.sqlite"
    await record_live(path, cycles=4)
    writes.set_read_only(True)  # replay writes nothing
    clock = ManualClock()
    src = ReplaySource(path, clock, speed=20.0)  # 2 s recorded gaps → 0.1 s
    planned, delay = [], src._delay  # the real-time waits the pacing plans (not how long they took)
    monkeypatch.setattr(src, "_delay", lambda t: planned.append(delay(t)) or planned[-1])
    async with httpx.AsyncClient() as c:
        first = await src.poll(c, clock)
        assert clock.now() == first[0].t
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        await src.poll(c, clock)
        assert loop.time() - t0 > 0.05 and 0.05 < max(planned) < 0.15  # ~2 s gaps / 20, not 2 s
        src.pause()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(src.poll(c, clock), 0.2)
        src.step()
        await src.poll(c, clock)
        assert src.paused and src.position == (3, 4)
        src.resume()
        await src.poll(c, clock)
        with pytest.raises(ReplayFinished):
            await src.poll(c, clock)
    src.close()
