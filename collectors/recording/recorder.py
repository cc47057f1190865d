"""``--record FILE``: append every poll cycle to an SQLite database (a :class:`Poller` sink).

* WAL journal, one transaction per cycle: a crash loses at most the cycle being written.
* The WAL is checkpointed into the main file as the recording goes (the first cycle at once, then at most
  every :data:`CHECKPOINT_EVERY_S`) and at :meth:`Recorder.close`: a copy of the ``.sqlite`` alone, without its
  ``-wal``, is a recording of all but the last seconds even after a crash (SIGKILL), and all of it once closed.
* Schema versioned in ``meta``; a file of another version is refused, never migrated in place.
* At most the ``cycle_polls`` cap of polls per cycle (what a replay reads), the rest said in the cycle's
  errors; rows written one by one, never a whole cycle's rows in memory.
* Failed polls, state transitions and closed server lifetimes are recorded too; a log run's ``finished``
  mark rides in the poll's identity column (``"finished": true``), so a replay shows it finished; so does a
  source's ``catching_up`` (a backlog still being read), so a replay says "catching up" where the session did.
* No secrets: sources are stored without user:password or query strings, and the Prometheus
  token never reaches a poll in the first place.

The database is opened through :func:`cmdare.collectors.writes.open_sqlite` (read-only mode refuses).
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from dataclasses import asdict
from itertools import islice
from pathlib import Path

from cmdare.collectors import caps, writes
from cmdare.collectors.lifecycle import Lifecycle
from cmdare.collectors.poller import Cycle
from cmdare.collectors.redaction import redact_cut, redact_optional
from cmdare.collectors.samples import TaskPoll

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
# How stale the main file may be behind its WAL while recording (a copy without the -wal misses at most this).
# A passive checkpoint of a few cycles' pages takes milliseconds; it never waits for a reader.
CHECKPOINT_EVERY_S = 5.0
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
            f"{path}: recording schema {redact_cut(str(row[0]), 20)!r}, this version reads {SCHEMA_VERSION}"
        )


def _json(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"), allow_nan=True)


def _poll_info(p: TaskPoll) -> dict[str, str | bool]:
    """A poll's identity and the poll fields recorded beside it (where it runs; a log run finished: a
    replay shows it finished as the session did, not silent)."""
    out: dict[str, str | bool] = (
        {**asdict(p.info), "host": p.host, "host_only": p.host_only} if p.info else {}
    )
    if p.finished:
        out["finished"] = True
    if p.catching_up:  # values real but behind (a backlog being read): a replay says so as the session did
        out["catching_up"] = True
    return out


def poll_row(cycle_id: int, seq: int, p: TaskPoll) -> tuple[int | float | str | None, ...]:
    vals = {k: v for k, v in p.values.items() if v == v}  # NaN (not read) left out
    return (
        cycle_id,
        seq,
        scrub(p.source),
        p.t,
        int(p.ok),
        _json(_poll_info(p)) if p.info else None,
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
            self.checkpoint()  # the file alone is a recording from the start
        except BaseException:
            self.conn.close()
            raise
        self._lifetimes_written = len(lifecycle.lifetimes) if lifecycle else 0
        self.closed = False
        self.cycles = 0  # cycles written by this recorder
        self._checkpointed_at = time.monotonic()
        self._checkpointed_cycles = 0

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

    def record(self, cycle: Cycle) -> int | None:
        """Write one cycle in one transaction; returns its id (None once closed: a poll that ended after
        the app began to quit is not written to a closed file)."""
        if self.closed:
            log.debug("recording %s closed: a late cycle not written", self.path)
            return None
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
        self.cycles += 1
        now = time.monotonic()
        if self._checkpointed_cycles == 0 or now - self._checkpointed_at >= CHECKPOINT_EVERY_S:
            self.checkpoint()
            self._checkpointed_at, self._checkpointed_cycles = now, self.cycles
        return cid

    def checkpoint(self) -> None:
        """Copy what the WAL holds into the main file (passive: never waits for a reader; a failure is logged,
        the recording goes on in the WAL)."""
        try:
            self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error as exc:
            log.warning("recording %s: checkpoint failed: %s", self.path, exc)

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
        """Write the still-running lifetimes (``end`` NULL, cause ``running``), move the whole WAL into the main
        file and close it: the ``.sqlite`` alone is then the complete recording. Once; later calls do nothing."""
        if self.closed:
            return
        self.closed = True
        try:
            with self.conn:
                self._write_lifetimes(None, running=True)
        except sqlite3.Error as exc:
            log.error("recording %s: could not write final lifetimes: %s", self.path, exc)
        try:
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        except sqlite3.Error as exc:
            log.error("recording %s: final checkpoint failed: %s", self.path, exc)
        self.conn.close()


def checkpoint_file(path: str | Path) -> None:
    """Checkpoint a recording's WAL through a connection of its own: the last resort of a process that must exit
    at once (a forced quit, from another thread) while its recorder may be mid-write. Committed cycles reach the
    main file; the one being written stays out."""
    try:
        conn = writes.open_sqlite(path, writable=True)
    except (OSError, sqlite3.Error) as exc:  # read-only mode (ReadOnlyError) included
        log.error("recording %s: not checkpointed on a forced exit: %s", path, exc)
        return
    try:
        conn.execute("PRAGMA busy_timeout = 500")
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
    except sqlite3.Error as exc:
        log.error("recording %s: not checkpointed on a forced exit: %s", path, exc)
    finally:
        conn.close()
