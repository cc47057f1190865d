"""Tail a JSON-lines metric log: one JSON object per line, appended by a training script.

Recognised fields (all optional except a step or a contract key)::

    {"time": 1700000000.5, "job": "resnet", "task": "worker-0", "role": "worker",
     "step": 1200, "examples": 153600, "loss": 0.41, "cmdare_worker_steps_total": 600}

* ``time`` / ``wall_time`` / ``t``: seconds since the epoch when the line was written (default: the
  poll time). Rates use these times, so they are exact even when polls are irregular.
* ``step`` / ``global_step``: the global step (also used as the task's step counter when the line
  has no ``worker_steps``/``cmdare_worker_steps_total``).
* ``examples``: cumulative examples processed; ``worker_steps``: cumulative local steps.
* a field naming a checkpoint (``checkpoint``, ``ckpt``, ``checkpoint_path``…, any value but null, false,
  0 or "") marks a checkpoint written at the line's time (``cmdare_last_checkpoint_timestamp_seconds``).
* any series key of the metric contract (``cmdare_global_step``, ``node_network_receive_bytes_total``…)
  is taken as is; every other number becomes ``scalar{tag=<name>}``.

A line that is not a JSON object (garbage, a line cut short by a crash, nesting deeper than 1,024
levels, a line over 1 MiB) is skipped and counted; the source keeps going. A time that is not a
plausible epoch time (non-finite, negative, in milliseconds) is ignored with a note. A last line
without its newline is left until the writer finishes it.
"""

from __future__ import annotations

import errno
import json
import logging
import math
import stat
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import orjson

from cmdare.collectors import caps as C
from cmdare.collectors import metrics as M
from cmdare.collectors.clock import Clock, plausible_time
from cmdare.collectors.samples import TaskInfo, TaskPoll
from cmdare.collectors.tensorboard import scalar_key
from cmdare.collectors.textfile import open_regular

log = logging.getLogger(__name__)

READ_CHUNK_BYTES = 4 * 1024 * 1024  # at most this much new data per poll
MAX_LINE_BYTES = 1024 * 1024  # assumption: a "line" longer than 1 MiB without a newline is garbage
MAX_TAGS = 64  # scalars taken from one line (``[caps] tags_per_task`` bounds a task's, over its life)
MAX_OVER_NAMES = 1_000_000  # task names past the tasks cap remembered (to say how many were dropped)
MAX_DROPPED_TAGS = 1000  # tag names past a task's cap remembered, per task
_TIME_FIELDS = ("time", "wall_time", "t", "timestamp")
_ID_FIELDS = ("job", "task", "role", "gpu", "region", "zone", "provisioning", "dc", "stage")
_CONTRACT_KEYS = frozenset(
    {M.K_GLOBAL_STEP, M.K_PREEMPTED, M.K_GPU_UTIL, M.K_LAST_CHECKPOINT, *M.COUNTER_KEYS}
)
_ALIASES = {
    "step": M.K_GLOBAL_STEP,
    "global_step": M.K_GLOBAL_STEP,
    "examples": M.K_EXAMPLES,
    "worker_steps": M.K_WORKER_STEPS,
}


@dataclass
class _Task:
    info: TaskInfo
    t: float = math.nan
    values: dict[str, float] = field(default_factory=dict)
    explicit_steps: bool = False  # the log carries its own worker step counter
    tags: int = 0  # logged scalar tags kept (``[caps] tags_per_task``)
    tags_dropped: set[str] = field(default_factory=set)  # tags past the cap (bounded by the line cap)


def _number(x: object) -> float | None:
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    try:
        return float(x) if math.isfinite(x) else None
    except OverflowError:  # an integer beyond float range
        return None


def load_line(raw: bytes) -> object | None:
    """One JSON line, or None when it is not JSON. orjson first (fast; it refuses nesting deeper than
    1,024 levels); what it refuses besides (NaN/Infinity literals that Python's json writes, integers
    past 64 bits) goes to json, whose RecursionError on deep nesting is caught: a line costs at most
    two bounded parses (lines are capped at MAX_LINE_BYTES)."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


class JsonlSource:
    """Tails one JSON-lines file; one :class:`TaskPoll` per (job, task) named in it."""

    name = "jsonl"

    def __init__(self, path: str | Path, *, job: str | None = None, task: str | None = None) -> None:
        self.path = Path(path)
        self.default_info = TaskInfo(job=job or self.path.stem, task=task or self.path.stem, role="chief")
        self.offset = 0
        self.bad_lines = 0  # total lines skipped since start
        self._tasks: dict[str, _Task] = {}
        self._inode: tuple[int, int] | None = None
        self._skipping = False  # inside a line over MAX_LINE_BYTES: drop up to its newline
        self._bad_times = 0  # implausible times met by the current poll
        self._over: set[str] = set()  # tasks named past the tasks cap (up to MAX_OVER_NAMES)
        self.cap_note: str | None = None  # what the caps dropped (the poller shows it)

    def _read_new(self) -> bytes:
        st = self.path.stat()
        if not stat.S_ISREG(st.st_mode):  # a FIFO put in its place would block the poll for ever
            raise OSError(errno.EINVAL, "not a regular file")
        ident = (st.st_dev, st.st_ino)
        if self._inode is not None and (ident != self._inode or st.st_size < self.offset):
            log.info("jsonl %s was replaced or truncated: reading from the start", self.path)
            self.offset, self._skipping = 0, False
        self._inode = ident
        with open_regular(self.path) as fh:  # a FIFO put there between the two looks: refused too
            fh.seek(self.offset)
            return fh.read(READ_CHUNK_BYTES)

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
        obj = load_line(raw)
        if not isinstance(obj, dict):
            return False
        ident = {k: str(obj[k]) for k in _ID_FIELDS if isinstance(obj.get(k), str | int) and str(obj[k])}
        values = self._values(obj)
        checkpoint = any(M.is_checkpoint_tag(k) and v not in (None, False, "", 0) for k, v in obj.items())
        if not values and not checkpoint:
            return False
        info = TaskInfo(**{**self.default_info.__dict__, **ident})
        task = self._tasks.get(info.key)
        if task is None:
            if len(self._tasks) >= C.current().tasks:  # past the cap: counted, not kept
                if len(self._over) < MAX_OVER_NAMES:
                    self._over.add(info.key)
                return True
            task = self._tasks[info.key] = _Task(info)
        task.info = info
        t = next((v for k in _TIME_FIELDS if (v := _number(obj.get(k))) is not None), now)
        if not plausible_time(t):
            self._bad_times += 1
            t = now
        task.t = t if math.isnan(task.t) else max(task.t, t)
        if checkpoint:  # a checkpoint written at the line's time (the work since it is at risk)
            values[M.K_LAST_CHECKPOINT] = max(t, task.values.get(M.K_LAST_CHECKPOINT, t))
        task.explicit_steps |= M.K_WORKER_STEPS in values
        if not task.explicit_steps and M.K_GLOBAL_STEP in values:
            values[M.K_WORKER_STEPS] = values[M.K_GLOBAL_STEP]  # the global step is the job's step counter
        task.values.update(self._within_tags(task, values))
        return True

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

    def _values(self, obj: dict) -> dict[str, float]:
        out: dict[str, float] = {}
        logged: dict[str, float] = {}  # other numbers by name: loss, lr… (metrics.training_keys)
        n_scalars = 0
        for k, v in obj.items():
            x = _number(v)
            if x is None or k in _TIME_FIELDS or k in _ID_FIELDS:
                continue
            key = _ALIASES.get(k) or (k if k in _CONTRACT_KEYS else None)
            if key is None and n_scalars < MAX_TAGS:
                key, n_scalars, logged[k] = scalar_key(k), n_scalars + 1, x
            if key is not None:
                out[key] = x
        out.update(M.training_keys(logged))
        return out

    async def poll(self, client: httpx.AsyncClient, clock: Clock) -> list[TaskPoll]:
        t0 = clock.monotonic()
        try:
            buf = self._read_new()
        except OSError as exc:
            return [
                TaskPoll(
                    str(self.path),
                    clock.now(),
                    False,
                    info=self.default_info,
                    error=f"cannot read log: {exc.strerror or type(exc).__name__}",
                )
            ]
        self._bad_times = 0
        bad = self._consume(buf, clock.now())
        self.bad_lines += bad
        self.cap_note = self._cap_note()
        notes = [
            f"{bad} bad or truncated line(s) skipped" if bad else "",
            f"{self._bad_times} implausible time(s) ignored" if self._bad_times else "",
        ]
        note = "; ".join(n for n in notes if n) or None
        if note:
            log.warning("jsonl %s: %s", self.path, note)
        if not self._tasks:
            return [
                TaskPoll(
                    str(self.path),
                    clock.now(),
                    False,
                    info=self.default_info,
                    error=note or "no metric lines yet",
                    elapsed=clock.monotonic() - t0,
                )
            ]
        return [
            TaskPoll(
                f"{self.path}#{task.info.task}",
                task.t,
                True,
                info=task.info,
                values=dict(task.values),
                error=note,
                elapsed=clock.monotonic() - t0,
            )
            for task in self._tasks.values()
        ]
