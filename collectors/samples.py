"""Plain values the collectors produce: who a task is, what one poll of it returned, its state.

Every source builds these, so they are where text from outside is made safe, once: each text field
and series key passes :func:`~cmdare.collectors.untrusted.clean_text` on construction."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from operator import attrgetter

from cmdare.collectors.untrusted import LABEL_LIMIT, MESSAGE_LIMIT, clean_keys, clean_optional, clean_text


def _clean_fields(obj: object, names: tuple[str, ...], limit: int = LABEL_LIMIT) -> None:
    """Clean the text fields ``names`` (two or more) of a frozen dataclass in place, at construction.
    Fast path: one C-level scan of all of them joined, when that is printable ASCII within the limit."""
    values = attrgetter(*names)(obj)
    try:
        joined = "".join(values)
    except TypeError:  # not all str (e.g. a number from a recording)
        joined = None
    if joined is not None and len(joined) <= limit and joined.isascii() and joined.isprintable():
        return
    for name, value in zip(names, values, strict=True):
        clean = clean_text(value, limit)
        if clean is not value:
            object.__setattr__(obj, name, clean)


class TaskState(StrEnum):
    UP = "up"
    SILENT = "silent"
    REVOKED = "revoked"


@dataclass(frozen=True)
class TaskInfo:
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

    def __post_init__(self) -> None:
        _clean_fields(self, _INFO_TEXT)

    @property
    def key(self) -> str:
        return f"{self.job}/{self.task}"


_INFO_TEXT = ("job", "task", "role", "gpu", "region", "zone", "provisioning", "dc", "stage")


@dataclass(frozen=True)
class JobFacts:
    """What a job trains, from ``cmdare_job_info`` labels or the config (empty when unknown)."""

    job: str
    model: str = ""
    model_flops: float = 0.0
    params: float = 0.0
    batch_size: int = 0
    target_steps: int = 0

    def __post_init__(self) -> None:
        _clean_fields(self, ("job", "model"))


@dataclass(frozen=True)
class TaskPoll:
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

    def __post_init__(self) -> None:
        source = clean_text(self.source, MESSAGE_LIMIT)
        if source is not self.source:
            object.__setattr__(self, "source", source)
        if self.error is not None:
            object.__setattr__(self, "error", clean_optional(self.error, MESSAGE_LIMIT))
        values = clean_keys(self.values)
        if values is not self.values:
            object.__setattr__(self, "values", values)


@dataclass(frozen=True)
class Lifetime:
    """One server lifetime, as the revocation model learns it."""

    task: str
    start: float
    end: float | None
    cause: str  # running | preempted | vanished | stopped
    gpu: str = ""
    region: str = ""
    provisioning: str = ""

    def __post_init__(self) -> None:
        _clean_fields(self, ("task", "cause", "gpu", "region", "provisioning"))

    @property
    def revoked(self) -> bool:
        return self.cause in ("preempted", "vanished")
