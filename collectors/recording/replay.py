"""``--replay FILE``: play a recording back as a source, at any speed, with pause and step.

The file is opened without writing anything, its ``-wal`` included (:mod:`cmdare.collectors.recording.sqlite_image`),
and refused when it cannot be played (:func:`check_usable`); the end says how much was played. Each
``poll`` returns the polls of the next recorded cycle and sets the session's :class:`ManualClock` to
that cycle's recorded time, so rates, uptimes and alerts come out exactly as they did live. Pacing:
the source waits ``recorded gap / speed`` of real time between cycles (``speed=0`` or ``math.inf``
means as fast as possible); while paused it waits for ``resume()`` or ``step()``.

A recording is untrusted input: a cycle with a non-finite or absurd time is skipped, a malformed or
oversized row is skipped (each with a note: a failed poll of the source ``<file>#replay`` and a log
line), a cycle's polls are capped, and no wait between cycles exceeds :data:`MAX_PACE_S`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import sqlite3
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from cmdare.collectors import caps, writes
from cmdare.collectors.clock import Clock, ManualClock, plausible_time
from cmdare.collectors.recording.recorder import RecordingError, check_version
from cmdare.collectors.recording.sqlite_image import ImageTooLarge, open_immutable, open_private
from cmdare.collectors.redaction import redact_cut
from cmdare.collectors.samples import TaskInfo, TaskPoll
from cmdare.collectors.scrape.exposition import facts_from_labels

log = logging.getLogger(__name__)

MAX_PACE_S = 10.0  # the longest real wait between two cycles, whatever the recorded gap
MAX_INTERVAL_S = 60.0  # the poll interval a replay may claim (the poller waits up to this per cycle)
MAX_JSON_CHARS = 256 * 1024  # a row's info / values / facts text; longer rows are skipped
MAX_TEXT_CHARS = 4096  # a row's source and error text are cut to this when read


class ReplayFinished(Exception):
    """The recording has no more cycles (shown as the replay source's status, without a class name)."""

    clean_end = True  # the poller shows its message alone: an end, not an error


@dataclass(frozen=True)
class RecordedCycle:
    id: int
    t: float
    polls: list[TaskPoll]
    source_errors: dict[str, str]


def open_recording(path: str | Path, *, replay: bool = True) -> sqlite3.Connection:
    """Open a recording without writing anything (:func:`open_private`: its ``-wal`` included) and
    check it; with ``replay``, also that it can be played (see :func:`check_usable`). Raises
    :class:`RecordingError` (one line: what is wrong with the file)."""
    return _open(Path(path), replay)[0]


def _open(p: Path, replay: bool = True) -> tuple[sqlite3.Connection, str]:
    """The recording's connection, and a note when part of it cannot be read (read-only mode and a
    ``-wal`` too large to copy)."""
    from cmdare.collectors.textfile import file_problem

    problem = file_problem(p)
    if problem is not None:
        raise RecordingError(f"{p}: {problem}")
    note = ""
    try:
        try:
            conn = open_private(p)
        except ImageTooLarge as exc:
            if not writes.is_read_only():  # SQLite reads the -wal itself (and writes a -shm beside it)
                conn = writes.open_sqlite(p, writable=False)
            else:
                conn = open_immutable(p)
                note = (f"{exc}: in read-only mode only the main file is read, the cycles in the -wal are "
                        "not replayed (replay without --read-only to see them)")  # fmt: skip
    except OSError as exc:
        raise RecordingError(f"{p}: cannot read ({exc.strerror or type(exc).__name__})") from None
    except sqlite3.Error as exc:
        raise RecordingError(f"{p}: not a usable recording ({exc})") from None
    try:
        check_version(conn, p)
        if replay:
            check_usable(conn, p)
    except sqlite3.Error as exc:
        conn.close()
        raise RecordingError(f"{p}: not a usable recording ({exc})") from None
    except BaseException:
        conn.close()
        raise
    return conn, note


QUICK_CHECK_BYTES = 64 * 1024 * 1024  # recordings up to this size have every page checked when opened
_COLUMNS = {
    "cycles": ("id", "t", "source_errors"),
    "polls": ("cycle", "seq", "source", "t", "ok", "info", "vals", "error", "facts", "elapsed"),
}


def check_usable(conn: sqlite3.Connection, p: Path) -> None:
    """Refuse (:class:`RecordingError`) a recording that cannot be played: a table or column missing,
    a damaged page (every page checked up to :data:`QUICK_CHECK_BYTES`; past it the first and last
    cycles are read), no cycle or no poll recorded. Raises ``sqlite3.Error`` for what SQLite refuses."""
    for table, columns in _COLUMNS.items():
        have = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
        missing = [c for c in columns if c not in have]
        if missing:
            raise RecordingError(f"{p}: not a usable recording (table {table} lacks {', '.join(missing)})")
    pages, page_size = (conn.execute(f"PRAGMA {k}").fetchone()[0] for k in ("page_count", "page_size"))
    if pages * page_size <= QUICK_CHECK_BYTES:
        verdict = str(conn.execute("PRAGMA quick_check(1)").fetchone()[0])
        verdict = " ".join(verdict.replace("*** in database main ***", "").split())  # one line
        if verdict != "ok":
            raise RecordingError(f"{p}: not a usable recording (damaged: {verdict[:160]})")
    ends = conn.execute("SELECT min(id), max(id) FROM cycles").fetchone()
    if ends is None or ends[0] is None:
        raise RecordingError(f"{p}: not a usable recording (no cycle recorded)")
    if conn.execute("SELECT 1 FROM polls LIMIT 1").fetchone() is None:
        raise RecordingError(f"{p}: not a usable recording (no poll recorded)")
    for cycle in ends:  # the ends of a large file read as a replay reads them (as many rows as it reads)
        conn.execute(_ROWS, (cycle, caps.current().cycle_polls + 1)).fetchall()


def _json(text: str | None) -> object:
    """A JSON column (None for NULL); raises ValueError when malformed (depth is bounded by the
    row's size cap, and RecursionError is caught too)."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _values(obj: object) -> dict[str, float]:
    if not isinstance(obj, dict):
        raise ValueError("values are not an object")
    return {
        str(k): float(v)
        for k, v in obj.items()
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    }


def _poll(row: tuple[Any, ...]) -> TaskPoll:
    """One recorded poll; raises ValueError/TypeError when the row is malformed."""
    source, t, ok, info, vals, error, facts, elapsed = row
    if not isinstance(t, int | float) or not plausible_time(t):
        raise ValueError("implausible time")
    info_d, facts_d = _json(info), _json(facts)
    where = (
        {k: info_d.pop(k) for k in ("host", "host_only", "finished", "catching_up") if k in info_d}
        if isinstance(info_d, dict)
        else {}
    )
    return TaskPoll(
        source=str(source),
        t=float(t),
        ok=bool(ok),
        info=TaskInfo(**{k: str(v) for k, v in info_d.items()}) if isinstance(info_d, dict) else None,
        host=str(where.get("host", "")),  # poll fields recorded beside the identity
        host_only=where.get("host_only") is True,
        finished=where.get("finished") is True,  # a log run whose writer was done (recorded since issue 31)
        catching_up=where.get("catching_up") is True,  # a backlog being read (older recordings: up to date)
        values=_values(_json(vals)),
        error=None if error is None else str(error),
        job_facts=facts_from_labels({k: str(v) for k, v in facts_d.items()})
        if isinstance(facts_d, dict)
        else None,
        elapsed=float(elapsed) if isinstance(elapsed, int | float) and math.isfinite(elapsed) else 0.0,
    )


_ROWS = f"""
SELECT substr(source, 1, {MAX_TEXT_CHARS}), t, ok,
       CASE WHEN length(info) <= {MAX_JSON_CHARS} THEN info ELSE '"too long"' END,
       CASE WHEN length(vals) <= {MAX_JSON_CHARS} THEN vals ELSE '"too long"' END,
       substr(error, 1, {MAX_TEXT_CHARS}),
       CASE WHEN length(facts) <= {MAX_JSON_CHARS} THEN facts ELSE '"too long"' END,
       elapsed
FROM polls WHERE cycle = ? ORDER BY seq LIMIT ?"""


class ReplaySource:
    """A source that replays ``path``; drive the session with the same ``clock``."""

    name = "replay"

    def __init__(self, path: str | Path, clock: ManualClock, *, speed: float = 1.0) -> None:
        self.path = Path(path)
        self.clock = clock
        self._changed = asyncio.Event()  # a pause, step or speed change re-plans the wait at once
        self._speed = speed
        self.ended = False  # set once the recording has no more cycles
        self.conn, note = _open(self.path)
        self._opening_notes = [note] if note else []  # said with the first cycle
        self._left_out = note  # and at the end
        self._played = self._skipped = self._polls = 0
        try:
            meta = dict(self.conn.execute("SELECT key, value FROM meta").fetchall())
            self._ids = [r[0] for r in self.conn.execute("SELECT id FROM cycles ORDER BY id")]
            first = self.conn.execute("SELECT t FROM cycles ORDER BY id LIMIT 1").fetchone()
        except sqlite3.Error as exc:
            self.conn.close()
            raise RecordingError(f"{self.path}: cannot read recording ({exc})") from None
        self.interval = _interval(str(meta.get("interval") or ""))
        self._pos = 0
        self._last_t: float | None = None
        self._last_real: float | None = None
        self._running = asyncio.Event()
        self._running.set()
        self._step = False
        if first is not None and isinstance(first[0], int | float) and plausible_time(first[0]):
            clock.set(first[0])

    # --- controls -------------------------------------------------------------------------
    @property
    def speed(self) -> float:
        """The replay speed: recorded gaps are waited ``1 / speed`` of (0 or inf: no wait)."""
        return self._speed

    @speed.setter
    def speed(self, value: float) -> None:
        self._speed = value
        self._changed.set()

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    @property
    def position(self) -> tuple[int, int]:
        """(cycles played, cycles in the recording)."""
        return self._pos, len(self._ids)

    def pause(self) -> None:
        """Hold the next cycle, even one already being waited for."""
        self._running.clear()
        self._changed.set()

    def resume(self) -> None:
        self._running.set()
        self._changed.set()

    def step(self) -> None:
        """Play exactly one more cycle now, then stay paused."""
        self._step = True
        self._running.set()
        self._changed.set()

    async def hold_while_paused(self) -> None:
        """Wait while paused: a cycle read just before a pause is held until play resumes, and a
        step plays it (then the replay is paused again)."""
        if not self.paused:
            return
        await self._running.wait()
        if self._step:
            self._step = False
            self._running.clear()

    def median_gap(self) -> float | None:
        """The median recorded gap between cycles (at most :data:`MAX_INTERVAL_S`), or None."""
        try:
            ts = [r[0] for r in self.conn.execute("SELECT t FROM cycles ORDER BY id LIMIT 200")]
        except sqlite3.Error:
            return None
        ts = [t for t in ts if isinstance(t, int | float) and plausible_time(t)]
        gaps = [b - a for a, b in zip(ts, ts[1:], strict=False) if b > a]
        return min(statistics.median(gaps), MAX_INTERVAL_S) if gaps else None

    # --- reading --------------------------------------------------------------------------
    def read_cycle(self, cycle_id: int) -> RecordedCycle:
        """One recorded cycle; malformed rows are left out and named in ``source_errors``
        (key ``replay``). Raises ValueError when the cycle's own time is implausible."""
        t, errors = self.conn.execute(
            "SELECT t, substr(source_errors, 1, ?) FROM cycles WHERE id = ?", (MAX_JSON_CHARS, cycle_id)
        ).fetchone()
        if not isinstance(t, int | float) or not plausible_time(t):
            raise ValueError(f"cycle {cycle_id}: implausible time {redact_cut(str(t), 24)}, skipped")
        polls, bad = [], 0
        cap = caps.current().cycle_polls  # [caps] cycle_polls: the rest of the cycle is not read
        rows = self.conn.execute(_ROWS, (cycle_id, cap + 1)).fetchall()
        for row in rows[:cap]:
            try:
                polls.append(_poll(row))
            except (ValueError, TypeError):
                bad += 1
        said = [
            f"{bad} malformed row(s) skipped" if bad else "",
            f"only the first {cap:,} polls read (cap cycle_polls)" if len(rows) > cap else "",
        ]
        notes = {"replay": f"cycle {cycle_id}: " + "; ".join(w for w in said if w)} if any(said) else {}
        return RecordedCycle(cycle_id, float(t), polls, {**_source_errors(errors), **notes})

    def _delay(self, t: float) -> float:
        """Seconds of real time until the cycle recorded at ``t`` is due (<= 0: now)."""
        if self._last_t is None or self._last_real is None or not self.speed or math.isinf(self.speed):
            return 0.0
        gap = min(MAX_PACE_S, max(0.0, t - self._last_t) / self.speed)  # never years, never NaN
        return self._last_real + gap - time.monotonic()

    async def _due(self, t: float) -> bool:
        """Wait until the cycle recorded at ``t`` is due: True then, False as soon as a pause comes
        first. A speed change re-plans the wait."""
        while not self.paused:
            delay = self._delay(t)
            if delay <= 0:
                return True
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), delay)
        return False

    def _next_cycle(self) -> tuple[RecordedCycle | None, list[str]]:
        """The next playable cycle (None at the end) and the notes on cycles skipped on the way."""
        notes: list[str] = []
        while self._pos < len(self._ids):
            cid = self._ids[self._pos]
            try:
                return self.read_cycle(cid), notes
            except (ValueError, TypeError, sqlite3.Error) as exc:
                notes.append(
                    redact_cut(str(exc), 160)
                    if isinstance(exc, ValueError)
                    else f"cycle {cid}: unreadable, skipped"
                )
                self._pos += 1
        return None, notes

    async def poll(self, client: httpx.AsyncClient, clock: Clock) -> list[TaskPoll]:
        """The next recorded cycle's polls, once due (waits while paused); raises
        :class:`ReplayFinished` at the end."""
        skipped: list[str] = []
        while True:
            await self._running.wait()
            stepping = self._step
            cycle, more = self._next_cycle()
            skipped += more  # cycles skipped on the way stay skipped, even across a pause
            self._skipped += len(more)
            if cycle is None:
                if skipped:
                    return [self._note("; ".join(skipped))]
                self.ended = True
                raise self._finished()
            if stepping or await self._due(cycle.t):
                break
        if stepping:
            self._step = False
            self._running.clear()
        self._pos += 1
        self._played += 1
        self._polls += len(cycle.polls)
        self._last_t, self._last_real = cycle.t, time.monotonic()
        self.clock.set(cycle.t)
        notes = self._opening_notes + skipped
        notes += [cycle.source_errors["replay"]] if "replay" in cycle.source_errors else []
        self._opening_notes = []
        return cycle.polls + ([self._note("; ".join(notes))] if notes else [])

    def _finished(self) -> ReplayFinished:
        """The end of the recording, in words that say what of it was played."""
        n = len(self._ids)
        if self._polls == 0:
            return ReplayFinished(
                f"recording ended: nothing in it could be played ({n:,} cycle(s): {self._skipped:,} unreadable, "
                f"{self._played:,} without a readable poll)"
            )
        if self._skipped:
            return ReplayFinished(
                f"recording ended ({n:,} cycles: {self._played:,} replayed, {self._skipped:,} unreadable, skipped)"
            )
        if self._left_out:
            return ReplayFinished(f"recording ended ({n:,} cycles replayed; {self._left_out})")
        return ReplayFinished(f"recording ended cleanly ({n:,} cycles replayed)")

    def _note(self, text: str) -> TaskPoll:
        """A failed poll of the recording itself that carries what was skipped (and a log line)."""
        log.warning("replay %s: %s", self.path, text)
        return TaskPoll(source=f"{self.path.name}#replay", t=self.clock.now(), ok=False, error=text[:300])

    def close(self) -> None:
        self.conn.close()


def _interval(text: str | None) -> float | None:
    """The recorded refresh interval (None unless positive and finite), at most :data:`MAX_INTERVAL_S`."""
    try:
        x = float(text or "nan")
    except ValueError:
        return None
    return min(x, MAX_INTERVAL_S) if x > 0 else None  # NaN fails the test


def _source_errors(text: str | None) -> dict[str, str]:
    try:
        obj = _json(text)
    except ValueError:
        return {"replay": "unreadable source errors"}
    return (
        {redact_cut(str(k), 200): redact_cut(str(v), 300) for k, v in obj.items()}
        if isinstance(obj, dict)
        else {}
    )
