"""Tail TensorBoard event files (``events.out.tfevents.*``) and turn their scalars into task polls.

No TensorFlow/TensorBoard dependency: records come from :mod:`cmdare.collectors.tfrecord` and the
few ``Event``/``Summary`` protobuf fields we need are decoded by hand (field numbers from
tensorflow/core/util/event.proto, summary.proto and tensor.proto):

* ``Event``: 1 wall_time (double, s), 2 step (int64), 5 summary.
* ``Summary``: 1 repeated value; ``Summary.Value``: 1 tag, 2 simple_value (float), 8 tensor.
* ``TensorProto``: 1 dtype, 4 tensor_content, 5 float_val, 6 double_val, 7 int_val, 10 int64_val.

Each run directory (a folder holding event files; the log dir itself is named after it) is one task (role ``chief``: the process that
writes summaries). The event ``step`` is the global step; its increase over the events' own wall
times is the cluster's steps/s, so ``cmdare_global_step`` and ``cmdare_worker_steps_total`` both
carry it and rates come out right without a wall-clock poll jitter. Every scalar is also kept as
the series key ``scalar{tag=<tag>}`` (``global_step/sec`` included).
"""

from __future__ import annotations

import logging
import math
import struct
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from cmdare.collectors import metrics as M
from cmdare.collectors.clock import Clock
from cmdare.collectors.samples import TaskInfo, TaskPoll
from cmdare.collectors.tfrecord import read_records

log = logging.getLogger(__name__)

PATTERN = "events.out.tfevents.*"
READ_CHUNK_BYTES = 4 * 1024 * 1024  # at most this much new data per file per poll
MAX_TAGS = 64  # scalars kept per run (bounded memory)
MAX_DEPTH = 3  # run directories searched below the log dir
_DT_FLOAT, _DT_DOUBLE, _DT_INT32, _DT_INT64 = 1, 2, 3, 9


class ProtoError(ValueError):
    pass


def scalar_key(tag: str) -> str:
    return f"scalar{{tag={tag}}}"


# --- a minimal protobuf wire-format decoder ---------------------------------------------------
def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ProtoError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def fields(buf: bytes) -> list[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) for every field; varints as ints, fixed as raw bytes."""
    out: list[tuple[int, int, int | bytes]] = []
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        num, wire = key >> 3, key & 7
        if wire == 0:
            val, pos = _varint(buf, pos)
            out.append((num, wire, val))
            continue
        size = {1: 8, 5: 4}.get(wire)
        if wire == 2:
            size, pos = _varint(buf, pos)
        if size is None or pos + size > len(buf):
            raise ProtoError(f"bad wire type {wire} or truncated field {num}")
        out.append((num, wire, buf[pos : pos + size]))
        pos += size
    return out


def _packed(raw: int | bytes, fmt: str, width: int) -> list[float]:
    if isinstance(raw, int):
        return [float(raw)]
    return [float(x) for x in struct.unpack(f"<{len(raw) // width}{fmt}", raw[: len(raw) // width * width])]


def _tensor_scalar(buf: bytes) -> float | None:
    dtype = 0
    vals: list[float] = []
    content = b""
    for num, wire, raw in fields(buf):
        if num == 1 and isinstance(raw, int):
            dtype = raw
        elif num == 4 and isinstance(raw, bytes):
            content = raw
        elif num == 5:
            vals += _packed(raw, "f", 4)
        elif num == 6:
            vals += _packed(raw, "d", 8)
        elif num in (7, 10) and wire == 0 and isinstance(raw, int):
            vals.append(float(raw))
    if not vals and content:
        fmt = {_DT_FLOAT: ("f", 4), _DT_DOUBLE: ("d", 8), _DT_INT32: ("i", 4), _DT_INT64: ("q", 8)}.get(dtype)
        if fmt:
            vals = _packed(content, *fmt)
    return vals[0] if len(vals) == 1 else None


@dataclass(frozen=True)
class Event:
    wall_time: float  # seconds since the epoch
    step: int
    scalars: dict[str, float]


def decode_event(buf: bytes) -> Event:
    """Decode an ``Event`` keeping only wall time, step and scalar summary values."""
    wall, step = 0.0, 0
    scalars: dict[str, float] = {}
    for num, _, raw in fields(buf):
        if num == 1 and isinstance(raw, bytes):
            (wall,) = struct.unpack("<d", raw)
        elif num == 2 and isinstance(raw, int):
            step = raw - (1 << 64) if raw >= 1 << 63 else raw
        elif num == 5 and isinstance(raw, bytes):
            for vnum, _, value in fields(raw):
                if vnum == 1 and isinstance(value, bytes):
                    tag, val = _summary_value(value)
                    if tag and val is not None and math.isfinite(val):
                        scalars[tag] = val
    return Event(wall, step, scalars)


def _summary_value(buf: bytes) -> tuple[str, float | None]:
    tag, val = "", None
    for num, _, raw in fields(buf):
        if num == 1 and isinstance(raw, bytes):
            tag = raw.decode("utf-8", errors="replace")
        elif num == 2 and isinstance(raw, bytes):
            (val,) = struct.unpack("<f", raw)
        elif num == 8 and isinstance(raw, bytes) and val is None:
            val = _tensor_scalar(raw)
    return tag, val


# --- tailing ------------------------------------------------------------------------------------
@dataclass
class _FileTail:
    offset: int = 0
    broken: bool = False


@dataclass
class _Run:
    info: TaskInfo
    wall_time: float = math.nan
    step: float = math.nan
    scalars: dict[str, float] = field(default_factory=dict)
    corrupt: int = 0  # records skipped so far (CRC or protobuf)
    notes: list[str] = field(default_factory=list)


class TensorBoardSource:
    """Tails every event file under ``logdir``; one :class:`TaskPoll` per run directory per poll."""

    name = "tensorboard"

    def __init__(self, logdir: str | Path, *, job: str | None = None, role: str = "chief") -> None:
        self.logdir = Path(logdir)
        self.job = job or self.logdir.resolve().name or "tensorboard"
        self.role = role
        self._tails: dict[Path, _FileTail] = {}
        self._runs: dict[Path, _Run] = {}

    def _files(self) -> list[Path]:
        found: list[Path] = []
        for depth in range(MAX_DEPTH + 1):
            found += self.logdir.glob("/".join(["*"] * depth + [PATTERN]))
        return sorted(p for p in found if p.is_file())

    def _run(self, run_dir: Path) -> _Run:
        run = self._runs.get(run_dir)
        if run is None:
            rel = run_dir.relative_to(self.logdir).as_posix()
            task = self.logdir.resolve().name if rel in ("", ".") else rel
            run = self._runs[run_dir] = _Run(TaskInfo(job=self.job, task=task, role=self.role))
        return run

    def _read_file(self, path: Path, run: _Run) -> None:
        tail = self._tails.setdefault(path, _FileTail())
        if tail.broken:
            return
        with path.open("rb") as fh:
            fh.seek(tail.offset)
            buf = fh.read(READ_CHUNK_BYTES)
        res = read_records(buf, base_offset=tail.offset)
        tail.offset += res.consumed
        if res.corrupt:
            run.corrupt += res.corrupt
            run.notes.append(f"{path.name}: {res.corrupt} record(s) with a bad CRC skipped")
            log.warning("tensorboard %s: %d record(s) with a bad CRC skipped", path, res.corrupt)
        if res.broken:
            tail.broken = True
            run.notes.append(f"{path.name}: {res.broken}")
            log.warning("tensorboard %s: %s", path, res.broken)
        for rec in res.records:
            self._apply(rec, run, path)

    def _apply(self, rec: bytes, run: _Run, path: Path) -> None:
        try:
            ev = decode_event(rec)
        except (ProtoError, struct.error) as exc:
            run.corrupt += 1
            run.notes.append(f"{path.name}: undecodable event skipped ({exc})")
            return
        if not ev.scalars:
            return  # file_version, graphs, histograms: nothing to chart
        if math.isnan(run.wall_time) or ev.wall_time >= run.wall_time:
            run.wall_time = ev.wall_time
            run.step = ev.step if math.isnan(run.step) else max(run.step, ev.step)
        for tag, val in ev.scalars.items():
            if tag in run.scalars or len(run.scalars) < MAX_TAGS:
                run.scalars[tag] = val

    async def poll(self, client: httpx.AsyncClient, clock: Clock) -> list[TaskPoll]:
        """Read what was appended since the last poll. A missing log dir is a failed poll."""
        t0 = clock.monotonic()
        if not self.logdir.is_dir():
            return [TaskPoll(str(self.logdir), clock.now(), False, error="log directory not found")]
        for path in self._files():
            run = self._run(path.parent)
            try:
                self._read_file(path, run)
            except OSError as exc:
                run.notes.append(f"{path.name}: {exc.strerror or type(exc).__name__}")
        return [self._poll_of(d, run, clock, t0) for d, run in sorted(self._runs.items())]

    def _poll_of(self, run_dir: Path, run: _Run, clock: Clock, t0: float) -> TaskPoll:
        notes, run.notes = run.notes, []
        src = str(run_dir)
        if math.isnan(run.step):
            return TaskPoll(
                src,
                clock.now(),
                False,
                info=run.info,
                error="; ".join(notes) or "no scalar events yet",
                elapsed=clock.monotonic() - t0,
            )
        values = {M.K_GLOBAL_STEP: run.step, M.K_WORKER_STEPS: run.step}
        values.update({scalar_key(k): v for k, v in run.scalars.items()})
        # Stamp the poll with the newest event's own time: rates are then exact steps / logged seconds.
        return TaskPoll(
            src,
            run.wall_time,
            True,
            info=run.info,
            values=values,
            error="; ".join(notes) or None,
            elapsed=clock.monotonic() - t0,
        )
