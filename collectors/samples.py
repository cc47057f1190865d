"""Plain values the collectors produce: who a task is, what one poll of it returned, its state.

Every source builds these, so they are where text from outside is made safe, once: every text field
(``str`` or ``str | None``) and every series key passes
:func:`~cmdare.collectors.untrusted.clean_text` on construction (:class:`CleanText`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from enum import StrEnum
from operator import attrgetter
from typing import Any

from cmdare.collectors.redaction import SECRET_FORMS, holds_secret
from cmdare.collectors.untrusted import MESSAGE_LIMIT, clean_keys, clean_text, label_limit

_TEXT_TYPES = frozenset({"str", "str | None"})


_FIELDS: dict[type, tuple[Callable[[Any], tuple[Any, ...]], tuple[str, ...]]] = {}


def _text_fields(cls: type) -> tuple[Callable[[Any], tuple[Any, ...]], tuple[str, ...]]:
    """A getter of the text fields of dataclass ``cls`` (as a tuple), and their names."""
    names = tuple(f.name for f in fields(cls) if f.type in _TEXT_TYPES)
    get = attrgetter(*names)
    _FIELDS[cls] = (get if len(names) > 1 else lambda obj: (get(obj),)), names
    return _FIELDS[cls]


def _clean_fields(obj: Any, limit: int) -> None:
    """Clean the text fields of frozen dataclass ``obj`` in place. Fast path: one C-level scan of
    all of them joined, when that is printable ASCII within the limit."""
    get, names = _FIELDS.get(type(obj)) or _text_fields(type(obj))
    values = get(obj)
    try:
        joined: str | None = "".join(filter(None, values))
    except TypeError:  # not all text (e.g. a number in a hostile recording)
        joined = None
    if (
        joined is not None
        and len(joined) <= limit
        and joined.isascii()
        and joined.isprintable()
        and not (SECRET_FORMS and holds_secret(joined))  # a credential reflected into a label
    ):
        return
    for name, value in zip(names, values, strict=True):
        clean = value if value is None else clean_text(value, limit)
        if clean is not value:
            object.__setattr__(obj, name, clean)


class CleanText:
    """Base of the frozen value types: their text fields are cleaned at construction."""

    __slots__ = ()  # a subclass made with ``slots=True`` has no __dict__ (one a task: 100,000 in a fleet)

    def __post_init__(self) -> None:
        _clean_fields(self, label_limit())


class CleanPoll:
    """Base of :class:`TaskPoll`: messages may be longer; series keys are cleaned too."""

    values: dict[str, float]  # TaskPoll's field (an annotation only: this base is no dataclass)

    def __post_init__(self) -> None:
        _clean_fields(self, MESSAGE_LIMIT)
        values = clean_keys(self.values)
        if values is not self.values:
            object.__setattr__(self, "values", values)


class TaskState(StrEnum):
    PENDING = "pending"  # a target that has not answered yet (shown under its URL)
    UP = "up"
    SILENT = "silent"
    REVOKED = "revoked"
    FINISHED = "finished"  # a log run whose writer is done: silent past its own cadence, or long ago


class _KeyOnce(CleanText):
    """Base of :class:`TaskInfo`: a slot for its key, made on first use (no dataclass field: not in
    ``asdict``, equality or a recording)."""

    __slots__ = ("_key_made",)
    _key_made: str  # the slot's type (set on first use of :attr:`TaskInfo.key`)


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskInfo(_KeyOnce):
    """Identity of one training task; from ``cmdare_task_info`` labels, the config, or TF_CONFIG."""

    job: str
    task: str
    role: str = "worker"  # chief | worker | ps | stage | node
    gpu: str = ""
    region: str = ""
    zone: str = ""
    provisioning: str = ""  # spot | preemptible | standard
    dc: str = ""
    stage: str = ""
    gpu_ids: str = ""  # GPUs this task uses (DCGM ``gpu`` indices or UUIDs, comma-separated), when declared
    rank: str = ""  # synchronous jobs: the process's global rank (torchrun RANK, Horovod rank())
    local_rank: str = ""  # its rank on its node (LOCAL_RANK): ranks sharing a node share its NIC

    @property
    def name(self) -> str:
        """The task's name within its job: a bare TF per-role index is qualified by its role
        (``task="0"`` of role ps is ``ps-0``), so a worker 0 and a ps 0 never collide."""
        return f"{self.role}-{self.task}" if self.task.isdigit() else self.task

    @property
    def key(self) -> str:
        """``job/name``: one string a task (every book of tasks holds it: made once, not one copy each)."""
        try:
            return self._key_made
        except AttributeError:
            key = f"{self.job}/{self.name}"
            object.__setattr__(self, "_key_made", key)
            return key


#: The batch per worker of the CM-DARE measurements: what the models assume when a job declares none.
STUDY_BATCH_SIZE = 128


@dataclass(frozen=True, kw_only=True)
class ModelSpec(CleanText):
    """What a job trains: the one description, from ``cmdare_job_info`` labels, the config's
    ``[[jobs]]``, a workload file's ``[model]`` or a ``predict`` row; the speed model's input.

    Units: ``model_flops`` is the CM-DARE study's ``Model FLOPs`` figure for the network (the
    TensorFlow profiler's count for one training step, measured at the study's batch of 128; the speed
    model reads it as work per step and does not rescale it with ``batch_size``); ``params`` is a
    count of parameters; ``batch_size`` is examples per worker per step; ``tensors`` a count of
    parameter tensors; ``checkpoint_mb`` megabytes. Zero or ``None`` means "not declared": the
    models then use :attr:`effective_batch_size`, the catalogue's tensor count (or an estimate) and a
    checkpoint size estimated from ``params``.
    """

    name: str = ""  # free network name, e.g. "ResNet-32" ("" = unnamed: no catalogue lookup)
    model_flops: float = 0.0
    params: float = 0.0
    batch_size: int = 0
    tensors: int | None = None
    checkpoint_mb: float | None = None
    sync: str = ""  # async-ps | sync-allreduce | pipeline ("" = undeclared: inferred from the steps)

    @property
    def effective_batch_size(self) -> int:
        """Examples per worker per step as the models count them: the declared batch, else the study's."""
        return self.batch_size or STUDY_BATCH_SIZE

    @property
    def predictable(self) -> bool:
        """True when the speed model can predict it (FLOPs and parameters declared)."""
        return bool(self.model_flops and self.params)


@dataclass(frozen=True)
class JobFacts(CleanText):
    """What one job declares about itself: its name, what it trains and how far (``target_steps``
    global steps, 0 = unknown); from ``cmdare_job_info`` labels or the config's ``[[jobs]]``."""

    job: str
    model: ModelSpec = ModelSpec()
    target_steps: int = 0

    def labels(self) -> dict[str, object]:
        """The ``cmdare_job_info`` labels these facts stand for (as recorded; parsed back by
        :func:`cmdare.collectors.scrape.exposition.facts_from_labels`)."""
        m = self.model
        return {"job": self.job, "model": m.name, "model_flops": m.model_flops, "params": m.params,
                "batch_size": m.batch_size, "target_steps": self.target_steps, "sync": m.sync}  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class TaskPoll(CleanPoll):
    """One poll of one source about one task.

    ``values`` maps series keys (see :mod:`cmdare.collectors.metrics`) to floats. ``error`` is a short
    human message when the poll failed or was degraded (then ``ok`` tells whether values are usable).
    """

    source: str  # e.g. the target URL, "prometheus", a log path
    t: float  # when the poll completed (clock seconds)
    ok: bool
    info: TaskInfo | None = None
    values: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    job_facts: JobFacts | None = None
    elapsed: float = 0.0  # seconds the poll took
    host: str = ""  # the host the task runs on (target URL or Prometheus instance), for node detail
    host_only: bool = False  # node_exporter / DCGM page: detail for the tasks on ``host``, not a task
    catching_up: bool = False  # values are real but behind: the source is still reading a backlog
    finished: bool = False  # a log's writer is done (silent past its own cadence, or its last event long ago)


@dataclass(frozen=True, kw_only=True, slots=True)
class Lifetime(CleanText):
    """One server lifetime: observed by the lifecycle tracker, recorded and replayed, learnt by the
    revocation model. ``start`` and ``end`` in seconds (clock or epoch; ``end`` None while it runs)."""

    task: str
    start: float
    end: float | None
    cause: str  # running | preempted | vanished | stopped (also a planned stop such as the 24 h limit)
    gpu: str = ""
    region: str = ""
    provisioning: str = ""  # spot | preemptible | standard ("" = unknown)

    @property
    def revoked(self) -> bool:
        """True when the cloud took the server (preempted, or vanished without notice)."""
        return self.cause in ("preempted", "vanished")

    def hours(self, now: float | None = None) -> float:
        """Age in hours at its end, or at ``now`` while it runs (a running server has survived so far)."""
        end = self.end if self.end is not None else now
        if end is None:
            raise ValueError(f"lifetime of {self.task} is still running: give now")
        return max(0.0, (end - self.start) / 3600.0)


@dataclass(frozen=True, kw_only=True)
class RoleFigures(CleanText):
    """One role of one job as Prometheus' per-task rates sum it up (a large fleet, read through
    ``collectors/prometheus/fleet.py``): how many tasks it has, how many have a step rate, the sum of
    their step and example rates and the P10/P50/P90 of the per-task step rates, over ``window_s``."""

    job: str
    role: str
    tasks: int
    rated: int  # tasks with a step rate over the window
    steps_per_sec: float | None  # sum of the per-task step rates
    examples_per_sec: float | None  # sum of the per-task example rates
    p10: float | None
    p50: float | None
    p90: float | None
    window_s: float
    examples_rated: int = 0  # tasks with an example rate over the window


@dataclass(frozen=True)
class Coverage:
    """How many of a job's tasks a summed figure rests on (``rated``), of how many feed it (``tasks``):
    in a fleet's first refreshes a sum over part of the tasks is a fraction of the job's speed, and
    says so ("412 of 2,200 tasks so far")."""

    rated: int
    tasks: int

    @property
    def partial(self) -> bool:
        """Whether the figure leaves tasks out."""
        return self.rated < self.tasks

    def words(self) -> str:
        """'412 of 2,200 tasks so far'."""
        return f"{self.rated:,} of {self.tasks:,} tasks so far"

    def to_json(self) -> dict[str, int]:
        return {"tasks": self.rated, "of": self.tasks}
