"""Tail TensorBoard event files (``events.out.tfevents.*``) and turn their scalars into task polls.

* **One task per training run** (:mod:`cmdare.collectors.tensorboard.runs`): writer subfolders
  (``add_scalars``, ``add_hparams``, Keras ``train``/``validation``, Estimator ``eval``) belong to
  their run; runs are found at any depth, within bounds. Role ``chief``: the process that writes
  summaries.
* **Events** are decoded by :mod:`cmdare.collectors.tensorboard.proto` (every scalar encoding TensorBoard reads).
  The event ``step`` is the global step; its increase over the events' own wall times is the run's
  steps/s, so ``cmdare_global_step`` and ``cmdare_worker_steps_total`` both carry it and rates come
  out right without poll jitter. An event logging a checkpoint tag (``checkpoint``, ``ckpt_seconds``…,
  :func:`cmdare.collectors.metrics.is_checkpoint_tag`) marks a checkpoint written at its wall time
  (``cmdare_last_checkpoint_timestamp_seconds``). Every scalar is kept as ``scalar{tag=<tag>}`` (a writer
  subfolder's tags prefixed by it, e.g. ``validation/epoch_loss``); loss, learning rate and logged
  examples/s also as ``cmdare_loss`` etc. (:func:`cmdare.collectors.metrics.training_keys`).
* **Reading never blocks a poll**: files are read in the source's own thread (nice +10), 256 KiB
  at a time, round robin over files, offering the GIL every 256 records; a poll waits for it at
  most ``poll_budget_s`` and reports what has been read, with "reading 31% of 48 MB" and
  ``catching_up`` while anything is left to read. A record larger than the chunk is read whole (up
  to 64 MiB, larger ones are skipped with a note, once: one whose end lies past the file's end, a
  CRC-valid 1 GiB length say, is waited for without reading the file again); events with a
  non-finite or absurd wall time are rejected with a note. Nothing stops the tail silently.
* **A run that stops writing is finished**: a poll with no new event, longer after the last one
  than twice the longest of the run's recent gaps between new events (its own flush cadence), or
  ``idle_after_s`` (150 s: writers flush every 120 s by default) until three gaps are known, is a
  failed poll marked ``finished`` ("finished: … last event at HH:MM"); the lifecycle shows the task
  finished at once (up again at its next event). A run whose newest event is older than
  ``OLD_RUN_S`` on the reader's clock is finished from its first read (its values are shown).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import struct
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import httpx

from cmdare.collectors import metrics as M
from cmdare.collectors.clock import Clock, clock_time
from cmdare.collectors.redaction import redact_cut
from cmdare.collectors.samples import TaskInfo, TaskPoll
from cmdare.collectors.tensorboard.proto import Event, ProtoError, decode_event
from cmdare.collectors.tensorboard.runs import event_file_order, find_runs, run_name, sub_prefix
from cmdare.collectors.tensorboard.tfrecord import HEADER_BYTES, MAX_RECORD_BYTES, read_records
from cmdare.collectors.textfile import open_regular

__all__ = ["TensorBoardSource", "decode_event", "scalar_key"]

log = logging.getLogger(__name__)

READ_CHUNK_BYTES = 256 * 1024  # one read (~4k events); files are read round robin, a chunk each in turn
YIELD_EVERY = 256  # records decoded between offers of the GIL to the event loop
MAX_TAGS = 64  # scalars kept per run (bounded memory)
POLL_BUDGET_S = 0.03  # a poll waits at most this long for the reader thread (tails of a few kB: done by then)
IDLE_AFTER_S = 150.0  # no new event for this long (and a poll): the run has stopped writing
PROGRESS_MIN_BYTES = 1  # any bytes left while the reader runs: the poll says it is behind
NOTE_POLLS = 5  # a note (records skipped, events rejected) stays in the run's status this many polls
HEAD_BYTES = 64  # compared on every poll to notice a file rewritten in place
OLD_RUN_S = (
    600.0  # assumption: a newest event this old on the reader's clock is a finished run (skew is less)
)
MAX_WALL_TIME = 1e11  # seconds since the epoch (year 5138): a larger wall time is corruption


def scalar_key(tag: str) -> str:
    """The series key of a logged scalar (the tag is data from a file: the sanitiser sees it here)."""
    return f"scalar{{tag={tag}}}"


def _mb(n: float) -> str:
    return f"{n / 1e6:,.0f} MB" if n >= 10e6 else f"{n / 1e6:,.1f} MB"


@dataclass
class _FileTail:
    offset: int = 0
    size: int = 0
    need: int = 0  # bytes of a record longer than one chunk, to read at once
    broken: str = ""  # why the rest of the file cannot be read (said on every poll of its run)
    head: bytes = b""  # the file's first bytes: a file rewritten in place is read again
    # where reading stopped when a skipped record's end lies past the file's end (0: none): the file
    # is rewritten only when it shrinks below this; until it reaches ``offset`` nothing is read again
    skip_from: int = 0


@dataclass
class _Run:
    info: TaskInfo
    files: list[Path] = field(default_factory=list)
    wall_time: float = math.nan  # of the event with the highest step (the run's clock)
    step: float = math.nan
    scalars: dict[str, float] = field(default_factory=dict)  # tag -> value at its highest step
    tag_steps: dict[str, int] = field(default_factory=dict)
    capped: bool = False  # the tag cap has turned a tag away (said once)
    notes: list[str] = field(default_factory=list)  # since the last poll
    shown: list[tuple[str, int]] = field(default_factory=list)  # recent notes, polls left to show them
    new_events: int = 0  # scalar events read since the last poll
    idle_polls: int = 0  # polls in a row without a new event
    last_new: float = math.nan  # clock.monotonic() of the last poll that saw a new event
    gaps: deque[float] = field(default_factory=lambda: deque(maxlen=8))  # between polls with new events
    # restarts from a checkpoint: a newer event file in the run's own folder whose steps go back
    first: dict[Path, tuple[int, float]] = field(default_factory=dict)  # run-folder files: first (step, wall)
    top: dict[Path, tuple[int, float]] = field(default_factory=dict)  # … and highest (orphans included)
    restarted: set[Path] = field(default_factory=set)  # files that began a new timeline
    base: float = 0.0  # the step the current timeline began at (0 before any restart)
    orphaned: int = 0  # events of an abandoned timeline discarded (as TensorBoard's purge does)
    checkpoint_at: float = math.nan  # wall time of the newest event logging a checkpoint tag


class TensorBoardSource:
    """Tails every event file under ``logdir``; one :class:`TaskPoll` per training run per poll."""

    name = "tensorboard"

    def __init__(
        self,
        logdir: str | Path,
        *,
        job: str | None = None,
        role: str = "chief",
        idle_after_s: float = IDLE_AFTER_S,
        poll_budget_s: float = POLL_BUDGET_S,
    ) -> None:
        self.logdir = Path(logdir)
        self.job = job or self.logdir.resolve().name or "tensorboard"
        self.role = role
        self.idle_after_s = idle_after_s
        self.poll_budget_s = poll_budget_s
        self._tails: dict[Path, _FileTail] = {}
        self._runs: dict[Path, _Run] = {}
        self._layout_notes: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._work: asyncio.Future[None] | None = None
        self._executor = ThreadPoolExecutor(
            1, thread_name_prefix="cmdare-tensorboard", initializer=_background
        )

    # --- the reader thread ------------------------------------------------------------------------
    def _advance(self) -> None:
        """Find the runs, then read every file up to its current end (round robin, chunk by chunk)."""
        layout = find_runs(self.logdir)
        with self._lock:
            self._layout_notes = layout.notes
            for run_dir, files in layout.runs.items():
                self._run(run_dir).files = files
        todo = []
        for run_dir, files in layout.runs.items():
            for path in files:
                tail = self._tails.setdefault(path, _FileTail())
                try:
                    tail.size = path.stat().st_size
                except OSError as exc:
                    self._note(self._runs[run_dir], f"{path.name}: {exc.strerror or type(exc).__name__}")
                    continue
                read_to = tail.skip_from or tail.offset  # a skip past the end is no shrinking
                if tail.offset and (tail.size < read_to or _head(path)[: len(tail.head)] != tail.head):
                    # rewritten: tensorboardX names files by the second, so a second writer replaces it
                    self._note(self._runs[run_dir], f"{path.name}: file rewritten, read again from the start")
                    tail.offset, tail.need, tail.broken, tail.head, tail.skip_from = 0, 0, "", b"", 0
                todo.append((path, run_dir))
        while todo and not self._stop.is_set():
            todo = [(p, r) for p, r in todo if self._read_chunk(p, r)]

    def _note(self, run: _Run, text: str) -> None:
        with self._lock:
            run.notes.append(text)
        log.warning("tensorboard %s: %s", run.info.task, text)

    def _read_chunk(self, path: Path, run_dir: Path) -> bool:
        """Read and apply one chunk of ``path``; True when more is left to read now."""
        tail, run = self._tails[path], self._runs[run_dir]
        if tail.broken or tail.offset >= tail.size:
            return False
        try:
            with open_regular(path) as fh:  # a FIFO put in its place would block the reader for ever
                fh.seek(tail.offset)
                buf = fh.read(min(max(READ_CHUNK_BYTES, tail.need), MAX_RECORD_BYTES + 16))
        except OSError as exc:
            self._note(run, f"{path.name}: {exc.strerror or type(exc).__name__}")
            return False
        res = read_records(buf, base_offset=tail.offset)
        events, undecodable = _decode(res.records)
        for text in res.skipped:
            self._note(run, f"{path.name}: {text}")
        if res.corrupt:
            self._note(run, f"{path.name}: {res.corrupt} record(s) with a bad CRC skipped")
        if undecodable:
            self._note(run, f"{path.name}: {undecodable} undecodable event(s) skipped")
        if res.broken:
            tail.broken = f"{path.name}: {res.broken}"
            log.warning("tensorboard %s: %s", run.info.task, tail.broken)
        self._apply(run, events, sub_prefix(path, run_dir), path)
        if tail.offset == 0:
            tail.head = buf[:HEAD_BYTES]
        if tail.offset + res.consumed > tail.size:  # a skipped record ends past the file's end: wait
            tail.skip_from = tail.offset + len(buf)  # for the file to reach its end, reading nothing
        else:
            tail.skip_from = 0
        tail.offset += res.consumed
        tail.need = res.need
        return res.consumed > 0 and tail.offset < tail.size

    def _apply(self, run: _Run, events: list[Event], prefix: str, path: Path) -> None:
        """Fold a chunk's events into the run: summarised without the lock, merged under it (the
        event loop takes the lock to report, so it is held for a few dict updates only)."""
        rejected, new, top, ckpt = 0, 0, None, math.nan
        latest: dict[str, tuple[int, float]] = {}  # tag -> (step, value) of its highest step
        main = prefix == ""  # the run's own folder: a newer file there may restart the timeline
        with self._lock:
            later = _later_firsts(run, path) if main else {}
        first, highest, orphans, by = None, None, 0, set()
        for ev in events:
            if not (0.0 <= ev.wall_time <= MAX_WALL_TIME):  # NaN fails too
                rejected += 1
                continue
            if not ev.scalars:
                continue  # file_version, graphs, histograms: nothing to chart
            first = (ev.step, ev.wall_time) if first is None else first
            highest = (ev.step, ev.wall_time) if highest is None or ev.step > highest[0] else highest
            # a step a later file of the run went back before, written before it: abandoned
            gone = [f for f, (fs, fw) in later.items() if ev.step >= fs and ev.wall_time <= fw]
            if gone:
                orphans += 1
                by.update(gone)
                continue
            new += 1
            if top is None or (ev.step, ev.wall_time) > top:
                top = (ev.step, ev.wall_time)
            if any(M.is_checkpoint_tag(tag) for tag in ev.scalars) and not ev.wall_time <= ckpt:
                ckpt = ev.wall_time  # the event's time is when the checkpoint was written
            for tag, val in ev.scalars.items():
                old = latest.get(tag)
                if old is None or ev.step >= old[0]:
                    latest[tag] = (ev.step, val)
        if main and first is not None and highest is not None:
            self._timeline(run, path, first, highest, orphans, by)
        capped = self._merge(run, new, top, {prefix + tag: sv for tag, sv in latest.items()})
        if not math.isnan(ckpt) and not ckpt <= run.checkpoint_at:
            with self._lock:
                run.checkpoint_at = ckpt
        if capped:
            self._note(run, f"more than {MAX_TAGS} scalar tags: {capped} not kept")
        if rejected:
            self._note(
                run, f"{path.name}: {rejected} event(s) with a non-finite or absurd wall time rejected"
            )

    def _timeline(
        self, run: _Run, path: Path, first: tuple[int, float], highest: tuple[int, float], orphans: int,
        by: set[Path],
    ) -> None:  # fmt: skip
        """Note a run-folder file's steps. A newer file whose first step is at or below a step an older
        file reached before it began restarts the timeline: counted once, the older file's steps from
        there on discarded (TensorBoard's purge of orphaned steps), the step and scalars from the new
        file. Two writers logging the same steps at once are no restart (their times overlap)."""
        with self._lock:
            run.orphaned += orphans
            run.restarted |= by
            old = run.top.get(path)
            run.top[path] = highest if old is None or highest[0] > old[0] else old
            if path in run.first:
                return
            run.first[path] = first
            older = [t for f, t in run.top.items() if event_file_order(f) < event_file_order(path)]
            if not any(s >= first[0] and w <= first[1] for s, w in older):
                return
            run.restarted.add(path)
            if max(run.first, key=event_file_order) != path:
                return  # an older restart read late: the newest file's timeline stands
            run.base = float(first[0])
            run.step, run.wall_time = math.nan, math.nan
            for key in [k for k, st in run.tag_steps.items() if st >= first[0]]:
                del run.tag_steps[key]  # the abandoned values give way to the new timeline's
        self._note(
            run, f"restarted from step {first[0]:,} ({path.name}): the earlier file's later steps discarded"
        )

    def _merge(
        self, run: _Run, new: int, top: tuple[int, float] | None, latest: dict[str, tuple[int, float]]
    ) -> int:
        """Merge a chunk's summary into the run under the lock; returns how many new tags the cap
        turned away (said once per run)."""
        capped = 0
        with self._lock:
            run.new_events += new
            if top is not None and (math.isnan(run.step) or top > (run.step, run.wall_time)):
                run.step, run.wall_time = top
            for key, (step, val) in latest.items():
                if key not in run.scalars and len(run.scalars) >= MAX_TAGS:
                    capped += 1
                elif step >= run.tag_steps.get(key, step):  # newest by step, whatever the file order
                    run.scalars[key], run.tag_steps[key] = val, step
            first = capped > 0 and not run.capped
            run.capped = run.capped or capped > 0
        return capped if first else 0

    def _run(self, run_dir: Path) -> _Run:
        run = self._runs.get(run_dir)
        if run is None:
            info = TaskInfo(job=self.job, task=run_name(run_dir, self.logdir), role=self.role)
            run = self._runs[run_dir] = _Run(info)
        return run

    # --- the event loop side -----------------------------------------------------------------------
    async def poll(self, client: httpx.AsyncClient, clock: Clock) -> list[TaskPoll]:
        """Report what has been read; start reading what was appended since. A missing log dir is a
        failed poll."""
        t0 = clock.monotonic()
        if not self.logdir.is_dir():
            return [
                TaskPoll(source=str(self.logdir), t=clock.now(), ok=False, error="log directory not found")
            ]
        if self._work is None or self._work.done():
            self._check_failure()
            self._work = asyncio.get_running_loop().run_in_executor(self._executor, self._advance)
        await asyncio.wait({self._work}, timeout=self.poll_budget_s)
        busy = not self._work.done()
        with self._lock:
            polls = [self._poll_of(d, run, clock, t0, busy) for d, run in sorted(self._runs.items())]
            if polls and self._layout_notes:
                polls[0] = replace(
                    polls[0], error="; ".join(filter(None, [polls[0].error, *self._layout_notes]))
                )
        if not polls:
            what = "reading the log directory" if busy else "no event files found (searched any depth)"
            return [TaskPoll(source=str(self.logdir), t=clock.now(), ok=False, error=what)]
        return polls

    def _check_failure(self) -> None:
        """A reader thread that raised (a bug, or an unforeseen OS error) is logged, never silent."""
        if self._work is not None and not self._work.cancelled() and self._work.exception() is not None:
            exc = self._work.exception()
            log.error("tensorboard reader failed: %s: %s", type(exc).__name__, exc)
            with self._lock:
                for run in self._runs.values():
                    run.notes.append(redact_cut(f"reader failed: {type(exc).__name__}: {exc}", 160))

    def _progress(self, run: _Run) -> str | None:
        tails = [self._tails[p] for p in run.files if p in self._tails]
        total = sum(t.size for t in tails)
        left = sum(_readable(t) for t in tails)
        if left < PROGRESS_MIN_BYTES:
            return None
        return f"reading {100 * (total - left) / total:.0f}% of {_mb(total)}"

    def _notes(self, run: _Run) -> list[str]:
        """What the run's poll says: unreadable files (always), then notes of the last few polls."""
        run.shown = [(n, k - 1) for n, k in run.shown if k > 1] + [(n, NOTE_POLLS) for n in run.notes]
        run.notes = []
        broken = [t.broken for p in run.files if (t := self._tails.get(p)) is not None and t.broken]
        return broken + list(dict.fromkeys(n for n, _ in run.shown))

    def _poll_of(self, run_dir: Path, run: _Run, clock: Clock, t0: float, busy: bool) -> TaskPoll:
        notes = self._notes(run)
        new, run.new_events = run.new_events, 0
        now = clock.monotonic()
        if new and not busy and not math.isnan(run.last_new):  # a backlog's pace is not the writer's
            run.gaps.append(now - run.last_new)
        if new or math.isnan(run.last_new):
            run.idle_polls, run.last_new = 0, now
        else:
            run.idle_polls += 1
        progress = self._progress(run) if busy else None
        notes = [progress, *notes] if progress else notes
        src, elapsed = str(run_dir), clock.monotonic() - t0
        if math.isnan(run.step):  # not a task yet (no identity: the lifecycle must not call it silent)
            error = "; ".join(notes) or "no scalar events yet"
            return TaskPoll(source=src, t=clock.now(), ok=False, error=error, elapsed=elapsed)
        idle = now - run.last_new
        if progress is None and run.idle_polls > 0 and idle >= self._idle_limit(run):
            # the writer stayed silent past its own cadence: the run is finished (or hung: it says when)
            last = f"last event at {clock_time(run.wall_time)}, step {run.step:,.0f}"
            error = "; ".join([f"finished: no new event for {idle:.0f} s ({last})", *notes])
            return TaskPoll(
                source=src,
                t=clock.now(),
                ok=False,
                info=run.info,
                error=error,
                elapsed=elapsed,
                finished=True,
            )
        # a run whose newest event is long past on the reader's clock is an old run, finished
        old = progress is None and clock.now() - run.wall_time >= max(OLD_RUN_S, self._idle_limit(run))
        # the step counter of the current timeline: after a restart it starts again from 0 (a counter's
        # reset), so the rate counts the new timeline's steps, never the jump back
        values = {M.K_GLOBAL_STEP: run.step, M.K_WORKER_STEPS: run.step - run.base}
        if run.restarted:
            values[M.K_LOG_RESTARTS] = float(len(run.restarted))
        values.update({scalar_key(k): v for k, v in run.scalars.items()})
        values.update(M.training_keys(run.scalars))
        if not math.isnan(run.checkpoint_at):
            values[M.K_LAST_CHECKPOINT] = run.checkpoint_at
        bad = [k for k, v in values.items() if not M.valid_value(k, v)]  # e.g. 1e38 or a negative step
        if bad:
            notes.append(f"{len(bad)} value(s) out of range dropped")
            values = {k: v for k, v in values.items() if k not in bad}
        # Stamp the poll with the run's own clock: rates are then exact steps / logged seconds.
        return TaskPoll(
            source=src,
            t=run.wall_time,
            ok=True,
            info=run.info,
            values=values,
            error="; ".join(notes) or None,
            elapsed=elapsed,
            catching_up=progress is not None,
            finished=old,
        )

    def _idle_limit(self, run: _Run) -> float:
        """Seconds without a new event after which the run has stopped: twice its slowest recent gap
        (a writer flushing every 120 s is not stopped after 60 s), ``idle_after_s`` until 3 are known."""
        return 2.0 * max(run.gaps) if len(run.gaps) >= 3 else self.idle_after_s

    async def aclose(self) -> None:
        """Stop the reader thread (it stops between chunks)."""
        self._stop.set()
        if self._work is not None and not self._work.done():
            await asyncio.wait({self._work}, timeout=5)
        self._executor.shutdown(wait=False, cancel_futures=True)


def _later_firsts(run: _Run, path: Path) -> dict[Path, tuple[int, float]]:
    """The first (step, wall time) of the run-folder files created after ``path``."""
    return {f: fw for f, fw in run.first.items() if event_file_order(f) > event_file_order(path)}


def _readable(tail: _FileTail) -> int:
    """Bytes of a file the reader can still read now (not a record the writer is still writing)."""
    left = tail.size - tail.offset
    if tail.broken or left < HEADER_BYTES or tail.need > left:
        return 0
    return left


def _background() -> None:
    """The reader's own thread yields the CPU to the event loop (the UI) on a busy machine: nice +10
    for this thread only (Linux threads have their own nice value; elsewhere a no-op)."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
    except (AttributeError, OSError):
        pass


def _head(path: Path) -> bytes:
    try:
        with open_regular(path) as fh:
            return fh.read(HEAD_BYTES)
    except OSError:
        return b""


def _decode(records: list[bytes]) -> tuple[list[Event], int]:
    """Decode a chunk's records. Every ``YIELD_EVERY`` records the thread offers the GIL: a waiting
    event loop gets it at once instead of after the interpreter's 5 ms switch interval, which it
    would otherwise pay on every wake-up while a backlog is read."""
    events, bad = [], 0
    for i, rec in enumerate(records):
        if i % YIELD_EVERY == YIELD_EVERY - 1:
            time.sleep(0)
        try:
            events.append(decode_event(rec))
        except (ProtoError, struct.error):
            bad += 1
    return events, bad
