"""``--record FILE``: append every poll cycle to an SQLite database (a :class:`Poller` sink).

* WAL journal, one transaction per cycle: a crash loses at most the cycle being written.
* Schema versioned in ``meta``; a file of another version is refused, never migrated in place.
* At most the ``cycle_polls`` cap of polls per cycle (what a replay reads), the rest said in the cycle's
  errors; rows written one by one, never a whole cycle's rows in memory.
* Failed polls, state transitions and closed server lifetimes are recorded too.
* No secrets: sources are stored without user:password or query strings, and the Prometheus
  token never reaches a poll in the first place.

The database is opened through :func:`cmdare.collectors.writes.open_sqlite` (read-only mode refuses).
"""

from __future__ import annotations

import json
import logging
import math
import sqlite3
import time
from dataclasses import asdict
from itertools import islice
from pathlib import Path

from cmdare.collectors import caps, writes
from cmdare.collectors.lifecycle import Lifecycle
from cmdare.collectors.poller import Cycle
from cmdare.collectors.redaction import redact_optional
from cmdare.collectors.samples import TaskPoll

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS cycles (
    id INTEGER PRIMARY KEY, t REAL NOT NULL, elapsed REAL NOT NULL, source_errors TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS polls (
    cycle INTEGER NOT NULL REFERENCES cycles(id), seq INTEGER NOT NULL, source TEXT NOT NULL, t REAL NOT NULL,
    ok INTEGER NOT NULL, info TEXT, vals TEXT NOT NULL, error TEXT, facts TEXT, elapsed REAL NOT NULL,
    PRIMARY KEY (cycle, seq));
CREATE TABLE IF NOT EXISTS transitions (
    cycle INTEGER NOT NULL REFERENCES cycles(id), task TEXT NOT NULL, old TEXT, new TEXT NOT NULL,
    t REAL NOT NULL, reason TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS lifetimes (
    cycle INTEGER, task TEXT NOT NULL, start REAL NOT NULL, end REAL, cause TEXT NOT NULL,
    gpu TEXT NOT NULL, region TEXT NOT NULL, provisioning TEXT NOT NULL);
"""


class RecordingError(Exception):
    """The file is not a recording this version can use (one-line message)."""


scrub = redact_optional  # recordings never hold credentials


def check_version(conn: sqlite3.Connection, path: str | Path) -> None:
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except sqlite3.DatabaseError as exc:
        raise RecordingError(f"{path}: not a cmdare recording ({exc})") from None
    if row is None:
        raise RecordingError(f"{path}: not a cmdare recording (no schema version)")
    if str(row[0]).strip() != str(SCHEMA_VERSION):  # a hostile file may hold anything here
        raise RecordingError(
            f"{path}: recording schema {str(row[0])[:20]!r}, this version reads {SCHEMA_VERSION}"
        )


def _json(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"), allow_nan=True)


def poll_row(cycle_id: int, seq: int, p: TaskPoll) -> tuple:
    vals = {k: v for k, v in p.values.items() if not (isinstance(v, float) and math.isnan(v))}
    return (
        cycle_id,
        seq,
        scrub(p.source),
        p.t,
        int(p.ok),
        _json({**asdict(p.info), "host": p.host, "host_only": p.host_only}) if p.info else None,
        _json(vals),
        scrub(p.error),
        _json(p.job_facts.labels()) if p.job_facts else None,
        p.elapsed,
    )


class Recorder:
    """A Poller sink: ``Poller(..., sinks=[Recorder(path, lifecycle=lc, interval=2.0)])``."""

    def __init__(
        self, path: str | Path, *, lifecycle: Lifecycle | None = None, interval: float | None = None
    ) -> None:
        self.path = Path(path)
        self.lifecycle = lifecycle
        self.conn = writes.open_sqlite(self.path, writable=True)
        try:
            self._init(interval)
        except BaseException:
            self.conn.close()
            raise
        self._lifetimes_written = len(lifecycle.lifetimes) if lifecycle else 0

    def _init(self, interval: float | None) -> None:
        c = self.conn
        c.execute("PRAGMA journal_mode=WAL")
        c.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: a process crash loses no committed cycle
        has_meta = c.execute("SELECT 1 FROM sqlite_master WHERE name='meta'").fetchone() is not None
        if has_meta:
            check_version(c, self.path)
            return
        if c.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
            raise RecordingError(
                f"{self.path}: an SQLite file that is not a cmdare recording; refusing to append"
            )
        with c:
            c.executescript(SCHEMA)
            meta = {
                "schema_version": str(SCHEMA_VERSION),
                "created": f"{time.time():.3f}",
                "interval": "" if interval is None else repr(float(interval)),
            }
            c.executemany("INSERT INTO meta VALUES (?, ?)", meta.items())

    def __call__(self, cycle: Cycle) -> None:
        self.record(cycle)

    def record(self, cycle: Cycle) -> int:
        """Write one cycle in one transaction; returns its id."""
        c = self.conn
        limit = caps.current().cycle_polls  # what a replay reads of one cycle: no more is written
        with c:
            errors = {scrub(k): scrub(v) for k, v in cycle.source_errors.items()}
            if len(cycle.polls) > limit:
                errors["recording"] = (
                    f"only the first {limit:,} of {len(cycle.polls):,} polls recorded (cap cycle_polls)"
                )
            cur = c.execute(
                "INSERT INTO cycles (t, elapsed, source_errors) VALUES (?, ?, ?)",
                (cycle.t, cycle.elapsed, _json(errors)),
            )
            cid = int(cur.lastrowid or 0)
            c.executemany(  # row by row: a cycle's rows are never all in memory at once
                "INSERT INTO polls VALUES (?,?,?,?,?,?,?,?,?,?)",
                (poll_row(cid, i, p) for i, p in enumerate(islice(cycle.polls, limit))),
            )
            c.executemany(
                "INSERT INTO transitions VALUES (?,?,?,?,?,?)",
                [
                    (cid, tr.task, tr.old.value if tr.old else None, tr.new.value, tr.t, scrub(tr.reason))
                    for tr in cycle.transitions
                ],
            )
            self._write_lifetimes(cid)
        return cid

    def _write_lifetimes(self, cid: int | None, *, running: bool = False) -> None:
        if self.lifecycle is None:
            return
        new = self.lifecycle.lifetimes[self._lifetimes_written :]
        self._lifetimes_written += len(new)
        if running:
            new = new + [lt for lt in self.lifecycle.all_lifetimes() if lt.end is None]
        self.conn.executemany(
            "INSERT INTO lifetimes VALUES (?,?,?,?,?,?,?,?)",
            [(cid, lt.task, lt.start, lt.end, lt.cause, lt.gpu, lt.region, lt.provisioning) for lt in new],
        )

    def close(self) -> None:
        """Write the still-running lifetimes (``end`` NULL, cause ``running``) and close the file."""
        try:
            with self.conn:
                self._write_lifetimes(None, running=True)
        except sqlite3.Error as exc:
            log.error("recording %s: could not write final lifetimes: %s", self.path, exc)
        self.conn.close()
