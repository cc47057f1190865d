"""Read MLflow's local file store (``mlruns/``, what ``mlflow.log_metric`` writes without a tracking server)
and turn its runs into task polls (:mod:`cmdare.collectors.mlflow.run`: the rules every log source shares).

Layout read (MLflow's ``FileStore``)::

    mlruns/<experiment id>/meta.yaml                  name, lifecycle_stage
    mlruns/<experiment id>/<run id>/meta.yaml         run_name, status (1 RUNNING … 3 FINISHED, 4 FAILED, 5 KILLED)
    mlruns/<experiment id>/<run id>/metrics/<key>     one line per point: "<timestamp ms> <value> <step>"

A key with ``/`` in it (``train/loss``) is a file in a subfolder. Deleted experiments and runs
(``lifecycle_stage: deleted``, ``.trash``) are not shown. The directory given may be the ``mlruns``
folder itself or the folder holding it.

A metric file met for the first time is read from :data:`START_TAIL_BYTES` before its end (its recent
points: the newest value, the recent steps and a recent restart; the history before moves no figure
shown; ``benchmarks/mlflow_store.py``: a store of 256 runs × 10 keys × 1,000 points is shown after 3 polls
of 0.42, 0.23 and 0.12 s, against 3.49, 2.75 and 2.45 s reading every file whole, load 5 on 2 cores), then
tailed from where the last poll stopped (a file that shrank is read again from the start), at most
:data:`READ_CHUNK_BYTES` a file and :data:`POLL_BYTES` in all per poll (then the run says it is catching
up); a finished run read to its end is not read again until its status changes; a line without its newline is left until the writer finishes it; a malformed line is
skipped and counted. Every file is opened as a regular file only (a FIFO put in its place never blocks a
poll); ``meta.yaml`` is read up to :data:`MAX_META_BYTES` by a reader of its flat ``key: value`` lines (no
YAML library, no object construction). The walk is bounded (experiments, runs, keys, depth).
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import httpx

from cmdare.collectors.clock import Clock
from cmdare.collectors.mlflow.run import (
    IDLE_AFTER_S,
    MAX_KEYS,
    STATUS_CODES,
    RunTimeline,
    last_step,
    run_names,
    turning_points,
)
from cmdare.collectors.samples import TaskInfo, TaskPoll
from cmdare.collectors.textfile import file_problem, open_regular

log = logging.getLogger(__name__)

MAX_EXPERIMENTS = 1000  # experiment folders looked at
MAX_RUNS = 256  # runs shown (the most recently started)
MAX_META_BYTES = 64 * 1024  # a meta.yaml larger than this is not MLflow's
MAX_LINE_BYTES = 256  # "<13 digits> <a float> <a step>" is ~60 bytes; a longer line is garbage
MAX_KEY_DEPTH = 8  # folder levels of one metric key (``a/b/c``)
READ_CHUNK_BYTES = 1024 * 1024  # per metric file per poll (~17k points)
POLL_BYTES = 2 * 1024 * 1024  # all metric files together per poll (0.5 s of parsing at load 12 on 2 cores)
START_TAIL_BYTES = 2 * 1024  # a metric file met first is read from this far before its end (~80 points)
LIST_EVERY_S = 10.0  # the folders are listed again this often (new runs); running runs' files every poll
LIVE = ("RUNNING", "SCHEDULED")


def read_meta(path: Path) -> dict[str, str]:
    """The flat ``key: value`` lines of an MLflow ``meta.yaml`` (values unquoted; nested or list values
    are left out). Raises OSError when it cannot be read; an over-large file reads as empty."""
    with open_regular(path) as fh:
        raw = fh.read(MAX_META_BYTES + 1)
    if len(raw) > MAX_META_BYTES:
        return {}
    out: dict[str, str] = {}
    for line in raw.decode("utf-8", "replace").splitlines():
        if not line or line[0] in " \t-#" or ": " not in line and not line.endswith(":"):
            continue
        key, _, value = line.partition(":")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] == "'":
            value = value[1:-1].replace("''", "'")
        elif len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        out[key.strip()] = value
    return out


def parse_point(line: bytes) -> tuple[float, float, float] | None:
    """``(timestamp ms, value, step)`` of a metric file's line (MLflow before 1.0 wrote no step: 0), or
    None when it is not one."""
    parts = line.split()
    if len(parts) not in (2, 3):
        return None
    try:
        ts, value = float(parts[0]), float(parts[1])
        step = float(int(parts[2])) if len(parts) == 3 else 0.0
    except ValueError:
        return None
    return (ts, value, step) if math.isfinite(ts) else None


@dataclass
class _MetricTail:
    key: str
    offset: int = -1  # where the next read starts (-1: not read yet)
    bad: int = 0  # malformed lines since the last poll
    align: bool = False  # the offset may be mid-line: the partial first line is skipped


@dataclass
class _StoreRun:
    folder: Path
    timeline: RunTimeline
    started: float = 0.0
    tails: dict[Path, _MetricTail] = field(default_factory=dict)
    done: bool = False  # finished and read to its end: not read again unless its status changes


class MlrunsSource:
    """Tails every run of an MLflow file store; one :class:`TaskPoll` per run per poll."""

    name = "mlruns"

    def __init__(
        self, root: str | Path, *, experiments: Sequence[str] = (), idle_after_s: float = IDLE_AFTER_S
    ) -> None:
        root = Path(root)
        self.root = root / "mlruns" if (root / "mlruns").is_dir() else root
        self.only = set(experiments)  # experiment names to show (all when empty)
        self.idle_after_s = idle_after_s
        self._runs: dict[str, _StoreRun] = {}  # run id -> run
        self._listed_at = -math.inf
        self._notes: list[str] = []

    # --- listing ----------------------------------------------------------------------------------
    def _list(self) -> None:
        """Find the active experiments and runs (names, statuses); keeps the tails of runs already read."""
        notes: list[str] = []
        found: list[tuple[str, str, str, Path, dict[str, str]]] = []  # exp id, run id, exp name, folder, meta
        try:
            exps = sorted(
                (e for e in os.scandir(self.root) if e.is_dir(follow_symlinks=False) and e.name[0] != "."),
                key=lambda e: e.name,
            )
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror or "cannot list") from None
        if len(exps) > MAX_EXPERIMENTS:
            notes.append(f"{len(exps):,} experiment folders: only {MAX_EXPERIMENTS:,} read")
        for exp in exps[:MAX_EXPERIMENTS]:
            try:
                meta = read_meta(Path(exp.path) / "meta.yaml")
            except OSError:
                continue  # not an experiment (``models`` of the registry, a stray folder)
            if meta.get("lifecycle_stage", "active") != "active":
                continue
            name = meta.get("name") or exp.name
            if self.only and name not in self.only:
                continue
            try:
                folders = [r for r in os.scandir(exp.path) if r.is_dir(follow_symlinks=False)]
            except OSError:
                continue
            for entry in folders:
                try:
                    run_meta = read_meta(Path(entry.path) / "meta.yaml")
                except OSError:
                    continue
                if run_meta.get("lifecycle_stage", "active") == "active":
                    found.append((exp.name, entry.name, name, Path(entry.path), run_meta))
        found.sort(key=lambda f: -(_number(f[4].get("start_time")) if f[4].get("start_time") else 0.0))
        if len(found) > MAX_RUNS:
            notes.append(f"{len(found):,} runs: only the {MAX_RUNS} started last shown")
            found = found[:MAX_RUNS]
        names = run_names([(e, r, m.get("run_name") or _tag(p, "mlflow.runName")) for e, r, _, p, m in found])
        runs: dict[str, _StoreRun] = {}
        for exp_id, run_id, exp_name, folder, meta in found:
            run = self._runs.get(run_id)
            info = TaskInfo(job=exp_name, task=names[run_id], role="chief")
            if run is None:
                source = f"{self.root}/{exp_id}/{run_id}"
                run = _StoreRun(folder, RunTimeline(info, source), _number(meta.get("start_time")))
            run.timeline.info = info
            run.timeline.status = _status(meta)
            runs[run_id] = run
        self._runs, self._notes = runs, notes

    # --- reading ----------------------------------------------------------------------------------
    def _metric_files(self, run: _StoreRun) -> list[tuple[Path, str]]:
        """The run's metric files and their keys (bounded: MAX_KEYS files, MAX_KEY_DEPTH levels)."""
        top = run.folder / "metrics"
        out: list[tuple[Path, str]] = []
        stack = [(top, 0)]
        while stack and len(out) < MAX_KEYS:
            folder, depth = stack.pop()
            try:
                entries = sorted(os.scandir(folder), key=lambda e: e.name)
            except OSError:
                continue
            for e in entries:
                if e.is_dir(follow_symlinks=False):
                    if depth < MAX_KEY_DEPTH:
                        stack.append((Path(e.path), depth + 1))
                elif len(out) < MAX_KEYS:  # a FIFO or a device too: refused when read, and said
                    out.append((Path(e.path), Path(e.path).relative_to(top).as_posix()))
        return out

    def _tail(self, run: _StoreRun, budget: list[int]) -> bool:
        """Read what was appended to the run's metric files; True when something is left to read."""
        behind = False
        for path, key in self._metric_files(run):
            tail = run.tails.setdefault(path, _MetricTail(key))
            try:
                st = path.stat()
                if not stat.S_ISREG(st.st_mode):
                    run.timeline.notes.append(f"{key}: {file_problem(path)}")
                    continue
                size = st.st_size
                if tail.offset < 0:  # first sight: its recent points (older ones move no figure shown)
                    tail.offset = max(0, size - START_TAIL_BYTES)
                    tail.align = tail.offset > 0
                if size < tail.offset:  # rewritten: read again from the start
                    tail.offset, tail.align = 0, False
                if size == tail.offset:
                    continue
                if budget[0] <= 0:
                    behind = True
                    continue
                with open_regular(path) as fh:
                    fh.seek(tail.offset)
                    buf = fh.read(min(READ_CHUNK_BYTES, budget[0]))
            except OSError as exc:
                run.timeline.notes.append(f"{key}: {exc.strerror or type(exc).__name__}")
                continue
            budget[0] -= len(buf)
            start = 0
            if tail.align:  # the rest of a line begun before the first read
                start, tail.align = buf.find(b"\n") + 1, False
            end = max(buf.rfind(b"\n") + 1, start)
            if end == 0 and len(buf) > MAX_LINE_BYTES:  # no newline in a long stretch: garbage, skipped
                end, tail.bad = len(buf), tail.bad + 1
            points = []
            for line in buf[start:end].split(b"\n"):
                if not line.strip():
                    continue
                point = parse_point(line) if len(line) <= MAX_LINE_BYTES else None
                if point is None:
                    tail.bad += 1
                else:
                    points.append(point)
            for ts, value, step in turning_points(points, last_step(run.timeline, key)):
                run.timeline.add(key, value, ts, step)
            tail.offset += end
            behind |= size - tail.offset > MAX_LINE_BYTES  # more than a line being written is left
            if tail.bad:
                run.timeline.notes.append(f"{key}: {tail.bad} malformed line(s) skipped")
                tail.bad = 0
        return behind

    def _read(self, list_now: bool) -> dict[str, bool]:
        """List (when due) or refresh the running runs' statuses, then tail the metric files; which runs
        are behind. A finished run read to its end is not looked at again until its status changes."""
        if list_now:
            self._list()
        else:  # between listings, the status of every run still running (it ends, fails, is killed)
            for run in self._runs.values():
                if run.timeline.status in LIVE:
                    try:
                        run.timeline.status = _status(read_meta(run.folder / "meta.yaml"))
                    except OSError:
                        pass  # deleted meanwhile: the next listing drops it
        budget, behind = [POLL_BYTES], {}
        for run_id, run in self._runs.items():
            if run.done and run.timeline.status not in LIVE:
                behind[run_id] = False
                continue
            behind[run_id] = self._tail(run, budget)
            run.done = run.timeline.status not in LIVE and not behind[run_id]
        return behind

    async def poll(self, client: httpx.AsyncClient, clock: Clock) -> list[TaskPoll]:
        """One poll per run (the folders listed again every :data:`LIST_EVERY_S`); a missing store is a
        failed poll. The files are read in a worker thread: a large store never holds up the UI."""
        t0 = clock.monotonic()
        if not self.root.is_dir():
            return [
                TaskPoll(
                    source=str(self.root), t=clock.now(), ok=False, error="MLflow store directory not found"
                )
            ]
        list_now = clock.monotonic() - self._listed_at >= LIST_EVERY_S
        try:
            behind = await asyncio.to_thread(self._read, list_now)
        except OSError as exc:
            return [
                TaskPoll(source=str(self.root), t=clock.now(), ok=False, error=f"cannot list: {exc.strerror}")
            ]
        if list_now:
            self._listed_at = clock.monotonic()
        if not self._runs:
            error = "; ".join(["no MLflow runs found", *self._notes])
            return [TaskPoll(source=str(self.root), t=clock.now(), ok=False, error=error)]
        polls = [
            run.timeline.poll(clock, self.idle_after_s, clock.monotonic() - t0, behind.get(run_id, False))
            for run_id, run in self._runs.items()
        ]
        if self._notes and polls:
            first = polls[0]
            polls[0] = replace(first, error="; ".join(filter(None, [first.error, *self._notes])))
        return polls


def _number(text: str | None) -> float:
    """A meta.yaml number (``start_time: 1796302411657``), NaN when it is none."""
    try:
        return float(text) if text else math.nan
    except ValueError:
        return math.nan


def _status(meta: dict[str, str]) -> str:
    """A run's status from its meta.yaml (a number there: 3 is FINISHED); RUNNING when unreadable."""
    code = _number(meta.get("status"))
    return STATUS_CODES.get(int(code), "RUNNING") if math.isfinite(code) else "RUNNING"


def _tag(run_folder: Path, name: str) -> str:
    """A run's tag file (``tags/mlflow.runName``), at most a line; "" when missing."""
    try:
        with open_regular(run_folder / "tags" / name) as fh:
            return fh.read(MAX_LINE_BYTES).decode("utf-8", "replace").strip()
    except OSError:
        return ""
