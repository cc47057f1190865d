"""Tail a JSON-lines metric log: one JSON object per line, appended by a training script. The same
source reads Lightning's ``CSVLogger`` file (``*.csv``: a header row, then one row per logging call;
read again from the start when Lightning rewrites it with a new column) and Hugging Face's
``trainer_state.json`` (its ``log_history``, read again whenever the Trainer rewrites the file).

Recognised fields (all optional except a step or a contract key; the keys, and the dialects of
MMEngine, detectron2, Lightning and Hugging Face, are one table in :mod:`cmdare.collectors.logs.keys`)::

    {"time": 1700000000.5, "job": "resnet", "task": "worker-0", "role": "worker",
     "step": 1200, "examples": 153600, "loss": 0.41, "cmdare_worker_steps_total": 600}

* ``time`` / ``wall_time`` / ``t`` / ``timestamp`` (ISO-8601 text too): seconds since the epoch when
  the line was written (default: the poll time). Rates use these times, so they are exact even when
  polls are irregular. A ``time`` under 11.6 days is a duration (MMEngine's and detectron2's seconds
  per iteration): kept as a scalar, the line timed when read, and said on the status line.
* ``step`` / ``global_step`` / ``iteration`` / ``iter`` / ``update`` / ``epoch`` (the first present):
  the global step (also used as the task's step counter when the line has no
  ``worker_steps``/``cmdare_worker_steps_total``). A line whose step goes back without a training loss
  (an evaluation record stamped with the epoch) keeps its figures but not its step; with a loss it is
  a restart from a checkpoint: counted, and the step follows it.
* ``examples``: cumulative examples processed; ``worker_steps``: cumulative local steps.
* a field naming a checkpoint (``checkpoint``, ``ckpt``, ``checkpoint_path``…, any value but null, false,
  0 or "") marks a checkpoint written at the line's time (``cmdare_last_checkpoint_timestamp_seconds``).
* any series key of the metric contract (``cmdare_global_step``, ``node_network_receive_bytes_total``…)
  is taken as is; every other number becomes ``scalar{tag=<name>}``, nested objects with dotted names
  (``train.loss``); the loss shown is the total by name (``total_loss``, ``loss``, ``train/loss``) before
  any component (``loss_cls``). What is not understood (text, lists) is named on the status line.

A line that is not a JSON object (garbage, a line cut short by a crash, nesting deeper than 1,024
levels, a line over 1 MiB) is skipped and counted; the source keeps going. A time that is not a
plausible epoch time (non-finite, negative, in milliseconds) is ignored with a note. A last line
without its newline is left until the writer finishes it. A task whose log stays silent past its
own cadence (or whose newest line is long past) is finished ("finished: … last line at HH:MM").
"""

from __future__ import annotations

import csv
import errno
import json
import logging
import math
import stat
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import orjson

from cmdare.collectors import caps as C
from cmdare.collectors import metrics as M
from cmdare.collectors.clock import Clock, clock_time, plausible_time
from cmdare.collectors.logs.keys import Record, describe, read_record
from cmdare.collectors.samples import TaskInfo, TaskPoll
from cmdare.collectors.tensorboard.source import scalar_key
from cmdare.collectors.textfile import open_regular

log = logging.getLogger(__name__)

READ_CHUNK_BYTES = 4 * 1024 * 1024  # at most this much new data per poll
MAX_LINE_BYTES = 1024 * 1024  # assumption: a "line" longer than 1 MiB without a newline is garbage
MAX_TAGS = 64  # scalars taken from one line (``[caps] tags_per_task`` bounds a task's, over its life)
MAX_OVER_NAMES = 1_000_000  # task names past the tasks cap remembered (to say how many were dropped)
MAX_DROPPED_TAGS = 1000  # tag names past a task's cap remembered, per task
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024  # assumption: a trainer_state.json of 64 MiB is no training log
TRAINER_STATE = "trainer_state.json"  # Hugging Face Trainer's state, with its log_history
IDLE_AFTER_S = 150.0  # no new line for this long (until the log's own cadence is known): finished
OLD_RUN_S = 600.0  # assumption: a newest line this old by its own time is a finished run
MAX_NOTED_KEYS = 100  # keys not understood remembered (the status line names the first few)
NOTE_POLLS = 5  # a note on how the log is read stays on the status line this many polls after news


@dataclass
class _Task:
    info: TaskInfo
    t: float = math.nan
    values: dict[str, float] = field(default_factory=dict)
    restarts: int = 0  # times the step went back with training figures (a restart from a checkpoint)
    base: float = 0.0  # the step the current timeline began at
    new_lines: int = 0  # lines read since the last poll
    idle_polls: int = 0  # polls in a row without a new line
    last_new: float = math.nan  # clock.monotonic() of the last poll that read a new line
    gaps: deque[float] = field(default_factory=lambda: deque(maxlen=8))  # between polls with new lines
    explicit_steps: bool = False  # the log carries its own worker step counter
    tags: int = 0  # logged scalar tags kept (``[caps] tags_per_task``)
    tags_dropped: set[str] = field(default_factory=set)  # tags past the cap (bounded by the line cap)


def load_line(raw: bytes) -> object | None:
    """One JSON line, or None when it is not JSON. orjson first (fast; it refuses nesting deeper than
    1,024 levels); what it refuses besides (NaN/Infinity literals that Python's json writes, integers
    past 64 bits) goes to json, whose RecursionError on deep nesting is caught: a line costs at most
    two bounded parses (lines are capped at MAX_LINE_BYTES)."""
    value: object
    try:
        value = orjson.loads(raw)
        return value
    except orjson.JSONDecodeError:
        pass
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return value


def _cell(text: str) -> float | str:
    """A CSV cell: a number when it reads as one (Lightning writes ``0.5``, ``1e-05``, ``nan``)."""
    try:
        return float(text)
    except ValueError:
        return text


class JsonlSource:
    """Tails one JSON-lines file; one :class:`TaskPoll` per (job, task) named in it."""

    name = "jsonl"

    def __init__(
        self,
        path: str | Path,
        *,
        job: str | None = None,
        task: str | None = None,
        idle_after_s: float = IDLE_AFTER_S,
    ) -> None:
        self.path = Path(path)
        self.idle_after_s = idle_after_s
        self.default_info = TaskInfo(job=job or self.path.stem, task=task or self.path.stem, role="chief")
        self.offset = 0
        self.bad_lines = 0  # total lines skipped since start
        self._tasks: dict[str, _Task] = {}
        self._inode: tuple[int, int] | None = None
        self._skipping = False  # inside a line over MAX_LINE_BYTES: drop up to its newline
        self._bad_times = 0  # implausible times met by the current poll
        self._over: set[str] = set()  # tasks named past the tasks cap (up to MAX_OVER_NAMES)
        self.cap_note: str | None = None  # what the caps dropped (the poller shows it)
        self._not_understood: dict[str, str] = {}  # keys of the log not understood, and why
        self._durations: set[str] = set()  # keys read as seconds per iteration
        self._step_keys: set[str] = set()  # keys the step was read from
        self._fresh_notes = 0  # polls left to say how the log is read
        name = self.path.name.lower()
        self.kind = "csv" if name.endswith(".csv") else "document" if name == TRAINER_STATE else "lines"
        self._csv_header: list[str] | None = None  # a CSV log's column names
        self._csv_header_raw = b""
        self._replay_to = 0  # a rewritten CSV: rows before this offset were read already
        self._doc_sig: tuple[int, int, int] | None = None  # the document last read (inode, size, mtime)
        self._doc_done = 0  # log_history entries read
        self._doc_first: object = None  # its first entry (another run's document starts differently)

    def _read_new(self) -> bytes:
        st = self.path.stat()
        if not stat.S_ISREG(st.st_mode):  # a FIFO put in its place would block the poll for ever
            raise OSError(errno.EINVAL, "not a regular file")
        ident = (st.st_dev, st.st_ino)
        if self._inode is not None and (ident != self._inode or st.st_size < self.offset):
            log.info("jsonl %s was replaced or truncated: reading from the start", self.path)
            self._restart_reading()
        self._inode = ident
        with open_regular(self.path) as fh:  # a FIFO put there between the two looks: refused too
            if self.kind == "csv" and self.offset:  # Lightning rewrites the file when a new column comes
                head = fh.readline(MAX_LINE_BYTES)
                if head != self._csv_header_raw:
                    log.info("csv %s has a new header: reading from the start", self.path)
                    # the rows already read come again under the new header: no restart, no step back
                    self._replay_to = self.offset + len(head) - len(self._csv_header_raw)
                    self._restart_reading()
            fh.seek(self.offset)
            return fh.read(READ_CHUNK_BYTES)

    def _restart_reading(self) -> None:
        self.offset, self._skipping = 0, False
        self._csv_header, self._csv_header_raw = None, b""

    def _line(self, raw: bytes) -> dict[str, Any] | None:
        """One line as a record: a JSON object, or a CSV row under the file's header."""
        if self.kind != "csv":
            obj = load_line(raw)
            return obj if isinstance(obj, dict) else None
        try:
            cells = next(csv.reader([raw.decode("utf-8", "replace").rstrip("\r")]))
        except (csv.Error, StopIteration):
            return None
        if self._csv_header is None:  # the header row: a record of nothing
            self._csv_header, self._csv_header_raw = cells, raw + b"\n"
            return {}
        if len(cells) != len(self._csv_header):
            return None
        return {k: _cell(v) for k, v in zip(self._csv_header, cells, strict=True) if v != ""}

    def _read_document(self, now: float) -> int:
        """Hugging Face ``trainer_state.json`` (one JSON document, rewritten at every save): its
        ``log_history`` entries past those already read; returns 1 when the document is unreadable."""
        st = self.path.stat()
        if not stat.S_ISREG(st.st_mode):  # a FIFO put in its place would block the poll for ever
            raise OSError(errno.EINVAL, "not a regular file")
        sig = (st.st_ino, st.st_size, st.st_mtime_ns)
        if sig == self._doc_sig:
            return 0
        if st.st_size > MAX_DOCUMENT_BYTES:
            self._doc_sig = sig
            return 1
        with open_regular(self.path) as fh:  # a FIFO put there between the two looks: refused too
            doc = load_line(fh.read(MAX_DOCUMENT_BYTES + 1))
        history = doc.get("log_history") if isinstance(doc, dict) else None
        if not isinstance(history, list):
            return 1  # a document cut short while written: read again when it changes
        self._doc_sig = sig
        first = history[0] if history else None
        if len(history) < self._doc_done or first != self._doc_first:  # a new run in its place
            self._doc_done = 0
        for entry in history[self._doc_done :]:
            if isinstance(entry, dict):
                self.apply_record(entry, now)
        self._doc_done, self._doc_first = len(history), first
        return 0

    def _consume(self, buf: bytes, now: float) -> int:
        """Apply every complete line; returns the number of bad lines skipped."""
        start, bad = 0, 0
        if self._skipping:  # the rest of an over-long line
            start = buf.find(b"\n") + 1
            if start == 0:
                self.offset += len(buf)
                return 0
            self._skipping = False
        end = buf.rfind(b"\n") + 1
        for raw in buf[start:end].split(b"\n") if end > start else ():
            if len(raw) > MAX_LINE_BYTES:
                bad += 1
            elif raw.strip() and not self._apply(raw, now):
                bad += 1
        if len(buf) - max(end, start) >= MAX_LINE_BYTES:  # a huge line with no newline: give up on it
            end, bad, self._skipping = len(buf), bad + 1, True
        self.offset += max(end, start)
        return bad

    def _apply(self, raw: bytes, now: float) -> bool:
        obj = self._line(raw)
        if obj is None:
            return False
        return obj == {} or self.apply_record(obj, now)

    def apply_record(self, obj: dict[str, Any], now: float) -> bool:
        """Fold one logged record (a JSON line, or a record of another log format read through
        :mod:`cmdare.collectors.logs.keys`) into its task; False when it carries nothing to show."""
        rec = read_record(obj, MAX_TAGS)
        self._learn(rec)
        values = dict(rec.values)
        values.update({scalar_key(k): x for k, x in rec.logged.items()})
        training = M.training_keys(rec.logged)
        values.update(training)
        checkpoint = any(M.is_checkpoint_tag(k) and v not in (None, False, "", 0) for k, v in obj.items())
        if not values and not checkpoint:
            return False
        info = replace(self.default_info, **rec.ident)
        task = self._tasks.get(info.key)
        if task is None:
            if len(self._tasks) >= C.current().tasks:  # past the cap: counted, not kept
                if len(self._over) < MAX_OVER_NAMES:
                    self._over.add(info.key)
                return True
            task = self._tasks[info.key] = _Task(info)
        task.info = info
        t = now if rec.t is None else rec.t
        if rec.bad_time or not plausible_time(t):
            self._bad_times += 1
            t = now
        step = values.get(M.K_GLOBAL_STEP)
        current = task.values.get(M.K_GLOBAL_STEP)
        if step is not None and current is not None and step < current:
            if M.K_LOSS not in training or self.offset < self._replay_to:
                # an evaluation record stamped with the epoch (MMEngine) or an older step: its figures
                # are kept, the step and the iteration timings stay the training's
                for k in (M.K_GLOBAL_STEP, *(scalar_key(d) for d in rec.durations)):
                    values.pop(k, None)
                step = None
            else:  # training again from an earlier step: a restart from a checkpoint (a new timeline:
                task.restarts += 1  # its step counter starts again from 0, as a counter's reset)
                task.base = step
                values[M.K_LOG_RESTARTS] = float(task.restarts)
        task.t = t if math.isnan(task.t) else max(task.t, t)
        task.new_lines += 1
        if checkpoint:  # a checkpoint written at the line's time (the work since it is at risk)
            values[M.K_LAST_CHECKPOINT] = max(t, task.values.get(M.K_LAST_CHECKPOINT, t))
        task.explicit_steps |= M.K_WORKER_STEPS in values
        if not task.explicit_steps and step is not None:
            values[M.K_WORKER_STEPS] = step - task.base  # the global step is the job's step counter
        task.values.update(self._within_tags(task, values))
        return True

    def _learn(self, rec: Record) -> None:
        """Remember what a record showed of its dialect: keys not understood and durations read as
        seconds per iteration are said on the status line (for a few polls after they first appear)."""
        for key, why in rec.not_understood.items():
            if key not in self._not_understood and len(self._not_understood) < MAX_NOTED_KEYS:
                self._not_understood[key] = why
                self._fresh_notes = NOTE_POLLS
        for key in rec.durations:
            if key not in self._durations:
                self._durations.add(key)
                self._fresh_notes = NOTE_POLLS
        if rec.step_key and rec.step_key not in self._step_keys:
            self._step_keys.add(rec.step_key)
            self._fresh_notes = NOTE_POLLS

    def _dialect_note(self) -> str | None:
        """What the status line says of how the log was read (for ``NOTE_POLLS`` polls after news)."""
        if self._fresh_notes <= 0:
            return None
        self._fresh_notes -= 1
        notes = []
        if self._durations:
            keys = ", ".join(sorted(self._durations))
            notes.append(f"{keys} read as seconds per iteration (records timed when read)")
        if self._step_keys and "step" not in self._step_keys:
            notes.append(f"step from {', '.join(sorted(self._step_keys))}")
        if self._not_understood:
            notes.append(describe(self._not_understood))
        return "; ".join(notes) or None

    @staticmethod
    def _within_tags(task: _Task, values: dict[str, float]) -> dict[str, float]:
        """``values`` without the scalar tags that would take ``task`` past ``[caps] tags_per_task``."""
        cap = C.current().tags_per_task
        out = {}
        for key, x in values.items():
            if key.startswith("scalar{") and key not in task.values:
                if task.tags >= cap:
                    if len(task.tags_dropped) < MAX_DROPPED_TAGS:
                        task.tags_dropped.add(key)
                    continue
                task.tags += 1
            out[key] = x
        return out

    def _cap_note(self) -> str | None:
        """What the caps turned away so far (tasks past the cap, tags past a task's cap)."""
        notes = []
        if self._over:
            n = len(self._tasks)
            more = "+" if len(self._over) >= MAX_OVER_NAMES else ""
            notes.append(f"showing {n:,} of {n + len(self._over):,}{more} tasks (cap {C.current().tasks:,})")
        capped = [t for t in self._tasks.values() if t.tags_dropped]
        if capped:
            dropped = sum(len(t.tags_dropped) for t in capped)
            more = "+" if any(len(t.tags_dropped) >= MAX_DROPPED_TAGS for t in capped) else ""
            notes.append(
                f"{dropped:,}{more} tag(s) of {len(capped):,} task(s) past {C.current().tags_per_task} tags a task"
            )
        return "; ".join(notes) or None

    async def poll(self, client: httpx.AsyncClient, clock: Clock) -> list[TaskPoll]:
        t0 = clock.monotonic()
        self._bad_times = 0
        try:
            if self.kind == "document":
                bad = self._read_document(clock.now())
            else:
                bad = self._consume(self._read_new(), clock.now())
        except OSError as exc:
            error = f"cannot read log: {exc.strerror or type(exc).__name__}"
            if self._tasks:  # the tasks it named fail (and turn silent), no other row appears
                return [
                    TaskPoll(
                        source=f"{self.path}#{task.info.task}",
                        t=clock.now(),
                        ok=False,
                        info=task.info,
                        error=error,
                    )
                    for task in self._tasks.values()
                ]
            return [TaskPoll(source=str(self.path), t=clock.now(), ok=False, error=error)]
        self.bad_lines += bad
        self.cap_note = self._cap_note()
        notes = [
            f"{bad} bad or truncated line(s) skipped" if bad else "",
            f"{self._bad_times} implausible time(s) ignored" if self._bad_times else "",
            self._dialect_note() or "",
        ]
        note = "; ".join(n for n in notes if n) or None
        if note:
            log.warning("jsonl %s: %s", self.path, note)
        if not self._tasks:  # not a task yet: no identity (its lines may name other tasks), so no row
            return [
                TaskPoll(
                    source=str(self.path),
                    t=clock.now(),
                    ok=False,
                    error=note or "no metric lines yet",
                    elapsed=clock.monotonic() - t0,
                )
            ]
        return [self._task_poll(task, clock, note, clock.monotonic() - t0) for task in self._tasks.values()]

    def _task_poll(self, task: _Task, clock: Clock, note: str | None, elapsed: float) -> TaskPoll:
        """A task's poll; a task whose log stayed silent past its own cadence (twice its slowest recent
        gap between lines, ``idle_after_s`` until three are known) is finished, and so is one whose
        newest line is older than ``OLD_RUN_S`` by its own time."""
        now = clock.monotonic()
        if task.new_lines and not math.isnan(task.last_new):
            task.gaps.append(now - task.last_new)
        if task.new_lines or math.isnan(task.last_new):
            task.idle_polls, task.last_new = 0, now
        else:
            task.idle_polls += 1
        task.new_lines = 0
        src = f"{self.path}#{task.info.task}"
        idle = now - task.last_new
        limit = 2.0 * max(task.gaps) if len(task.gaps) >= 3 else self.idle_after_s
        if task.idle_polls > 0 and idle >= limit:
            last = (
                f"last line at {clock_time(task.t)}, step {task.values.get(M.K_GLOBAL_STEP, math.nan):,.0f}"
            )
            error = "; ".join(filter(None, [f"finished: no new line for {idle:.0f} s ({last})", note]))
            return TaskPoll(
                source=src,
                t=clock.now(),
                ok=False,
                info=task.info,
                error=error,
                elapsed=elapsed,
                finished=True,
            )
        old = clock.now() - task.t >= max(OLD_RUN_S, limit)
        return TaskPoll(source=src, t=task.t, ok=True, info=task.info, values=dict(task.values), error=note,
                        elapsed=elapsed, finished=old)  # fmt: skip
