"""Hostile files (issue 15): a deeply nested or over-long JSONL line is skipped with a note and the
source keeps going; absurd times are ignored with a note; a hostile recording replays to its end
quickly, skipping (with a note) cycles with absurd times and malformed rows."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from pathlib import Path

import httpx
import pytest

from cmdare.collectors import metrics as M
from cmdare.collectors.clock import ManualClock
from cmdare.collectors.logs.source import MAX_LINE_BYTES, JsonlSource
from cmdare.collectors.poller import Cycle
from cmdare.collectors.recording import replay as replay_mod
from cmdare.collectors.recording.recorder import Recorder, RecordingError
from cmdare.collectors.recording.replay import MAX_PACE_S, ReplayFinished, ReplaySource
from cmdare.collectors.samples import TaskInfo, TaskPoll


def _line(step: int, **extra: object) -> str:
    return json.dumps({"job": "j", "task": "w0", "step": step, "time": 1.7e9 + step, **extra}) + "\n"


async def test_deep_and_huge_jsonl_lines_are_skipped_and_the_source_keeps_going(tmp_path: Path):
    log = tmp_path / "train.jsonl"
    log.write_text(_line(1) + "[" * 200_000 + "]" * 200_000 + "\n" + '{"a":' * 5000 + "\n" + _line(2))
    src, clock = JsonlSource(log), ManualClock(1.7e9 + 10)
    async with httpx.AsyncClient() as client:
        [poll] = await src.poll(client, clock)
        assert poll.ok and poll.values[M.K_GLOBAL_STEP] == 2
        assert "2 bad or truncated line(s) skipped" in poll.error
        with log.open("a") as fh:  # a line over the cap, with and without its newline yet
            fh.write('{"step": 3, "pad": "' + "x" * (MAX_LINE_BYTES + 10) + '"}\n' + _line(4))
            fh.write('{"pad": "' + "y" * (5 * MAX_LINE_BYTES))
        for _ in range(3):
            [poll] = await src.poll(client, clock)
        with log.open("a") as fh:
            fh.write('"}\n' + _line(5))
        [poll] = await src.poll(client, clock)
    assert poll.ok and poll.values[M.K_GLOBAL_STEP] == 5  # the tail of the huge line never parsed
    assert src.bad_lines == 4


async def test_jsonl_nan_literals_and_absurd_times(tmp_path: Path):
    log = tmp_path / "train.jsonl"
    huge = 10**400  # past any float
    log.write_text(f'{{"step": 7, "loss": NaN, "time": 1e300}}\n{{"step": 8, "time": -5, "seed": {huge}}}\n')
    clock = ManualClock(1.7e9)
    async with httpx.AsyncClient() as client:
        [poll] = await JsonlSource(log).poll(client, clock)
    assert poll.ok and poll.values[M.K_GLOBAL_STEP] == 8 and poll.t == clock.now()
    assert "2 implausible time(s) ignored" in poll.error


def _recording(path: Path, cycles: int = 6) -> None:
    rec = Recorder(path, interval=2.0)
    info = TaskInfo(job="j", task="w0")
    for i in range(cycles):
        t = 1.7e9 + 2 * i
        poll = TaskPoll(
            source="http://w0/metrics", t=t, ok=True, info=info, values={M.K_WORKER_STEPS: 10.0 * i}
        )
        rec.record(Cycle(t=t, elapsed=0.01, polls=[poll], transitions=[]))
    rec.close()


def _tamper(path: Path) -> None:
    c = sqlite3.connect(path)
    with c:
        c.execute("UPDATE cycles SET t = 9e999 WHERE id = 2")  # +inf
        c.execute("UPDATE cycles SET t = 1e300 WHERE id = 3")  # years of pacing
        c.execute("UPDATE polls SET info = '{\"evil\": 1}' WHERE cycle = 4")  # unknown identity field
        c.execute("UPDATE polls SET vals = ? WHERE cycle = 5", ("[" * 100_000 + "]" * 100_000,))
        c.execute("UPDATE polls SET t = -1e308 WHERE cycle = 6")
        c.execute("UPDATE meta SET value = '1e300' WHERE key = 'interval'")
    c.close()


async def test_hostile_recording_replays_to_its_end_quickly_with_notes(tmp_path: Path, monkeypatch):
    path = tmp_path / "rec.sqlite"
    _recording(path)
    _tamper(path)
    clock = ManualClock()
    src = ReplaySource(path, clock, speed=100.0)  # honest gaps of 2-6 s take 20-60 ms
    assert src.interval is not None and src.interval <= 60
    planned = _planned_waits(src, monkeypatch)
    polls, notes = [], []
    async with httpx.AsyncClient() as client:
        with pytest.raises(ReplayFinished):
            for _ in range(10):
                got = await asyncio.wait_for(src.poll(client, clock), MAX_PACE_S)
                polls += [p for p in got if p.ok]
                notes += [p.error for p in got if not p.ok]
    src.close()
    assert max(planned) <= 6 / 100  # no tampered time made the replay wait (the cap would be 10 s)
    assert [p.values[M.K_WORKER_STEPS] for p in polls] == [0.0]  # cycles 2, 3 skipped; 4-6 rows bad
    text = " ".join(notes)
    assert "cycle 2: implausible time" in text and "cycle 3: implausible time" in text
    assert "cycle 4: 1 malformed row(s) skipped" in text and "cycle 6: 1 malformed row(s) skipped" in text


def _planned_waits(src: ReplaySource, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The real-time waits the replay plans before each cycle (what its pacing decides, not how long the
    machine took), collected as they are planned."""
    planned: list[float] = [0.0]
    real = src._delay

    def recorded(t: float) -> float:
        planned.append(real(t))
        return planned[-1]

    monkeypatch.setattr(src, "_delay", recorded)
    return planned


async def test_replay_pacing_is_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "rec.sqlite"
    _recording(path, cycles=2)
    c = sqlite3.connect(path)
    with c:
        c.execute("UPDATE cycles SET t = 4e10 WHERE id = 2")  # a plausible time, but 1,200 years later
        c.execute("UPDATE polls SET t = 4e10 WHERE cycle = 2")
    c.close()
    monkeypatch.setattr(replay_mod, "MAX_PACE_S", 0.2)  # the cap (10 s), scaled down for the test
    clock = ManualClock()
    src = ReplaySource(path, clock, speed=1e-9)  # and the replay slowed down a billion times
    planned = _planned_waits(src, monkeypatch)
    t0 = time.monotonic()
    async with httpx.AsyncClient() as client:
        await src.poll(client, clock)
        await asyncio.wait_for(src.poll(client, clock), 60.0)  # a watchdog: uncapped, years
    src.close()
    assert time.monotonic() - t0 > 0.15 and clock.now() == 4e10  # it waited, for the cap
    assert 0.0 < max(planned) <= 0.2


def test_recording_with_a_hostile_schema_is_a_one_line_error(tmp_path: Path):
    path = tmp_path / "rec.sqlite"
    _recording(path, cycles=1)
    c = sqlite3.connect(path)
    with c:
        c.execute("UPDATE meta SET value = 'one' WHERE key = 'schema_version'")
    c.close()
    with pytest.raises(RecordingError, match="recording schema 'one'"):
        ReplaySource(path, ManualClock())
    c = sqlite3.connect(path)
    with c:
        c.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
        c.execute("DROP TABLE cycles")
    c.close()
    with pytest.raises(RecordingError, match="not a usable recording .table cycles lacks id"):
        ReplaySource(path, ManualClock())
