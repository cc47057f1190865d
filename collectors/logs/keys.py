"""How the keys of one logged record (a JSON line, a CSV row, an HF ``log_history`` entry) are read:
one table of recognised keys, shared by every log-record reader. Add a key here, not in a reader.

Dialects the table covers (what each writer puts in a record):

* plain dicts: ``{"time": <epoch s>, "step": …, "loss": …}``, identity fields ``job``/``task``/``role``…
* MMEngine ``LocalVisBackend`` (``vis_data/scalars.json``, ``<timestamp>.json``): ``{"lr": …, "data_time":
  0.01, "loss": …, "loss_cls": …, "time": 0.1, "epoch": 1, "iter": 50, "memory": 3341, "step": 50}``: its
  ``time`` is seconds per iteration, ``step`` the global iteration (``iter`` the one within the epoch).
* detectron2 ``JSONWriter`` (``metrics.json``): ``{"data_time": …, "eta_seconds": …, "iteration": 19,
  "loss_cls": …, "lr": …, "time": 0.2, "total_loss": …}`` (sorted keys): ``time`` is seconds per
  iteration, the step is ``iteration``, the loss is ``total_loss``.
* Lightning ``CSVLogger`` (``metrics.csv``: ``epoch,step,train_loss,…``) and Hugging Face's
  ``trainer_state.json`` ``log_history`` (``{"epoch": 0.5, "learning_rate": …, "loss": …, "step": 10}``):
  no time at all; records are timed by when they are read.

A ``time`` (or ``timestamp``) is told a timestamp from a duration by its value: at least
:data:`MIN_EPOCH_S` (1973) it is seconds since the epoch; under :data:`MAX_DURATION_S` (11.6 days) it is a
duration (seconds per iteration) and kept as a scalar; a ``timestamp`` may also be ISO-8601 text.
Nested objects (``{"train": {"loss": …}}``) are flattened with dotted names (``train.loss``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from cmdare.collectors import metrics as M
from cmdare.collectors.clock import plausible_time

# The step of a record: the first of these keys it carries, in this order. MMEngine writes both
# ``step`` (global) and ``iter`` (within the epoch, when training by epoch): ``step`` wins.
STEP_KEYS = ("step", "global_step", "iteration", "iter", "update", "epoch")
# Keys always holding a timestamp (seconds since the epoch, or ISO-8601 text for ``timestamp``).
TIMESTAMP_KEYS = ("wall_time", "t", "_timestamp")
# Keys holding a timestamp or a duration, told apart by value (MMEngine and detectron2 write ``time``
# as seconds per iteration; plain logs write it as seconds since the epoch).
TIME_OR_DURATION_KEYS = ("time", "timestamp")
ID_FIELDS = ("job", "task", "role", "gpu", "region", "zone", "provisioning", "dc", "stage")
# Keys read as a series of the metric contract under another name.
ALIASES = {
    "examples": M.K_EXAMPLES,
    "worker_steps": M.K_WORKER_STEPS,
}
CONTRACT_KEYS = frozenset(
    {M.K_GLOBAL_STEP, M.K_PREEMPTED, M.K_GPU_UTIL, M.K_LAST_CHECKPOINT, *M.COUNTER_KEYS}
)
# Keys naming a checkpoint written (``checkpoint``, ``ckpt``, ``checkpoint_path``…: metrics.is_checkpoint_tag)
# are read by the source as an event, whatever their value: never "not understood".

MIN_EPOCH_S = 1e8  # 1973-03-03: a smaller "time" is no wall-clock time a log was written at
MAX_DURATION_S = 1e6  # 11.6 days: a larger "time" is no one iteration's duration
MAX_DEPTH = 4  # nesting levels flattened; deeper objects are not understood (said)
MAX_TEXT_CHARS = 64  # an ISO-8601 timestamp longer than this is not one


@dataclass
class Record:
    """What one logged record says, read through the table."""

    values: dict[str, float] = field(default_factory=dict)  # series keys and ``scalar{tag=…}`` names
    logged: dict[str, float] = field(default_factory=dict)  # every other number by (dotted) name
    ident: dict[str, str] = field(default_factory=dict)
    step: float | None = None
    step_key: str = ""
    t: float | None = None  # the record's timestamp, when it has one
    bad_time: bool = False  # a time that is neither a plausible timestamp nor a duration
    durations: list[str] = field(default_factory=list)  # keys read as durations (seconds per iteration)
    not_understood: dict[str, str] = field(default_factory=dict)  # key -> why


def number(x: object) -> float | None:
    """A finite float from a JSON number (not a bool), or None."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    try:
        return float(x) if math.isfinite(x) else None
    except OverflowError:  # an integer beyond float range
        return None


def iso_time(text: str) -> float | None:
    """Seconds since the epoch of an ISO-8601 time (``2026-12-03T10:15:00Z``, ``…+02:00``, a naive time
    is UTC), or None."""
    if len(text) > MAX_TEXT_CHARS:
        return None
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def time_kind(x: float) -> str:
    """``timestamp``, ``duration`` or ``""`` (neither) for a number under a time-or-duration key."""
    if x >= MIN_EPOCH_S and plausible_time(x):
        return "timestamp"
    if 0.0 <= x < MAX_DURATION_S:
        return "duration"
    return ""


def flatten(
    obj: dict[str, Any], max_names: int, prefix: str = "", depth: int = 0
) -> tuple[dict[str, Any], dict[str, str]]:
    """``obj`` with nested objects flattened to dotted names (at most ``max_names`` leaves), and what
    was not understood (deeper nesting, lists)."""
    out: dict[str, Any] = {}
    bad: dict[str, str] = {}
    for k, v in obj.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict):
            if depth + 1 >= MAX_DEPTH:
                bad[name] = f"nested over {MAX_DEPTH} levels"
                continue
            sub, sub_bad = flatten(v, max_names - len(out), f"{name}.", depth + 1)
            out.update(sub)
            bad.update(sub_bad)
        elif isinstance(v, list):
            bad[name] = "a list"
        elif len(out) < max_names:
            out[name] = v
    return out, bad


def read_record(obj: dict[str, Any], max_scalars: int) -> Record:
    """Read one record through the table (``max_scalars`` bounds the other numbers kept)."""
    rec = Record()
    flat, rec.not_understood = flatten(obj, 4 * max_scalars)
    rec.ident = {k: str(obj[k]) for k in ID_FIELDS if isinstance(obj.get(k), str | int) and str(obj[k])}
    for k in STEP_KEYS:
        x = number(flat.get(k))
        if x is not None and x >= 0:
            rec.step, rec.step_key = x, k
            break
    for k in TIMESTAMP_KEYS + TIME_OR_DURATION_KEYS:
        raw = flat.get(k)
        x = number(raw)
        if isinstance(raw, str) and k in ("timestamp", "_timestamp"):
            x = iso_time(raw)
            if x is None:
                rec.not_understood[k] = "not an ISO-8601 time"
                continue
            kind = "timestamp"
        elif x is None:
            continue
        else:
            kind = "timestamp" if k in TIMESTAMP_KEYS else time_kind(x)
        if kind == "timestamp" and rec.t is None:
            rec.t = x
        elif kind == "duration":
            rec.durations.append(k)
        elif kind == "":
            rec.bad_time = True
    n_scalars = 0
    for k, v in flat.items():
        if k in ID_FIELDS and "." not in k:
            continue
        if k in TIMESTAMP_KEYS or (k in TIME_OR_DURATION_KEYS and k not in rec.durations):
            continue
        x = number(v)
        if x is None:
            if isinstance(v, str) and k not in rec.not_understood and not M.is_checkpoint_tag(k):
                rec.not_understood[k] = "text"
            continue
        if k == rec.step_key:
            rec.values[M.K_GLOBAL_STEP] = x
            continue
        key = ALIASES.get(k) or (k if k in CONTRACT_KEYS else None)
        if key is not None:
            rec.values[key] = x
        elif n_scalars < max_scalars:
            n_scalars += 1
            rec.logged[k] = x
    return rec


def describe(not_understood: dict[str, str], limit: int = 4) -> str:
    """One status-line phrase naming what was not understood (``mode (text), hist (a list)``)."""
    items = sorted(not_understood.items())
    text = ", ".join(f"{k} ({why})" for k, why in items[:limit])
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return f"not understood: {text}{more}"
