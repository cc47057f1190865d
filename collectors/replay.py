"""``--replay FILE``: play a recording back as a source, at any speed, with pause and step.

The file is opened read-only. Each ``poll`` returns the polls of the next recorded cycle and sets the
session's :class:`ManualClock` to that cycle's recorded time, so rates, uptimes and alerts come out
exactly as they did live. Pacing: the source waits ``recorded gap / speed`` of real time between
cycles (``speed=0`` or ``math.inf`` means as fast as possible); while paused it waits for
``resume()`` or ``step()``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from cmdare.collectors import writes
from cmdare.collectors.clock import Clock, ManualClock
from cmdare.collectors.recorder import RecordingError, check_version
from cmdare.collectors.samples import JobFacts, TaskInfo, TaskPoll

log = logging.getLogger(__name__)


class ReplayFinished(Exception):
    """The recording has no more cycles (shown as the replay source's status)."""


@dataclass(frozen=True)
class RecordedCycle:
    id: int
    t: float
    polls: list[TaskPoll]
    source_errors: dict[str, str]


def open_recording(path: str | Path) -> sqlite3.Connection:
    """Open a recording read-only and check its schema; raises :class:`RecordingError`."""
    p = Path(path)
    if not p.is_file():
        raise RecordingError(f"{p}: no such recording")
    try:
        conn = writes.open_sqlite(p, writable=False)
        check_version(conn, p)
    except sqlite3.Error as exc:
        raise RecordingError(f"{p}: cannot read recording ({exc})") from None
    return conn


def _poll(row: tuple) -> TaskPoll:
    source, t, ok, info, vals, error, facts, elapsed = row
    ident = json.loads(info) if info else None
    where = {k: ident.pop(k) for k in ("host", "host_only") if k in ident} if ident else {}  # poll fields
    return TaskPoll(
        source=source,
        t=t,
        ok=bool(ok),
        info=TaskInfo(**ident) if ident else None,
        host=str(where.get("host", "")),
        host_only=bool(where.get("host_only", False)),
        values=json.loads(vals),
        error=error,
        job_facts=JobFacts(**json.loads(facts)) if facts else None,
        elapsed=elapsed,
    )


class ReplaySource:
    """A source that replays ``path``; drive the session with the same ``clock``."""

    name = "replay"

    def __init__(self, path: str | Path, clock: ManualClock, *, speed: float = 1.0) -> None:
        self.path = Path(path)
        self.clock = clock
        self.speed = speed
        self.conn = open_recording(self.path)
        meta = dict(self.conn.execute("SELECT key, value FROM meta").fetchall())
        self.interval: float | None = float(meta["interval"]) if meta.get("interval") else None
        self._ids = [r[0] for r in self.conn.execute("SELECT id FROM cycles ORDER BY id")]
        self._pos = 0
        self._last_t: float | None = None
        self._last_real: float | None = None
        self._running = asyncio.Event()
        self._running.set()
        self._step = False
        first = self.conn.execute("SELECT t FROM cycles ORDER BY id LIMIT 1").fetchone()
        if first is not None:
            clock.set(first[0])

    # --- controls -------------------------------------------------------------------------
    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    @property
    def position(self) -> tuple[int, int]:
        """(cycles played, cycles in the recording)."""
        return self._pos, len(self._ids)

    def pause(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    def step(self) -> None:
        """Play exactly one more cycle while paused."""
        self._step = True
        self._running.set()

    def median_gap(self) -> float | None:
        ts = [r[0] for r in self.conn.execute("SELECT t FROM cycles ORDER BY id LIMIT 200")]
        gaps = sorted(b - a for a, b in zip(ts, ts[1:], strict=False) if b > a)
        return gaps[len(gaps) // 2] if gaps else None

    # --- reading --------------------------------------------------------------------------
    def read_cycle(self, cycle_id: int) -> RecordedCycle:
        t, errors = self.conn.execute(
            "SELECT t, source_errors FROM cycles WHERE id = ?", (cycle_id,)
        ).fetchone()
        rows = self.conn.execute(
            "SELECT source, t, ok, info, vals, error, facts, elapsed FROM polls WHERE cycle = ? ORDER BY seq",
            (cycle_id,),
        ).fetchall()
        return RecordedCycle(cycle_id, t, [_poll(r) for r in rows], json.loads(errors))

    async def _pace(self, t: float) -> None:
        if self._last_t is None or self._last_real is None or not self.speed or math.isinf(self.speed):
            return
        due = self._last_real + max(0.0, t - self._last_t) / self.speed
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)

    async def poll(self, client: httpx.AsyncClient, clock: Clock) -> list[TaskPoll]:
        await self._running.wait()
        if self._step:
            self._step = False
            self._running.clear()
        if self._pos >= len(self._ids):
            raise ReplayFinished(f"end of recording ({len(self._ids)} cycles)")
        cycle = self.read_cycle(self._ids[self._pos])
        await self._pace(cycle.t)
        self._pos += 1
        self._last_t, self._last_real = cycle.t, time.monotonic()
        self.clock.set(cycle.t)
        return cycle.polls

    def close(self) -> None:
        self.conn.close()
