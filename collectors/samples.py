"""Plain values the collectors produce: who a task is, what one poll of it returned, its state."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


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

    @property
    def key(self) -> str:
        return f"{self.job}/{self.task}"


@dataclass(frozen=True)
class JobFacts:
    """What a job trains, from ``cmdare_job_info`` labels or the config (empty when unknown)."""

    job: str
    model: str = ""
    model_flops: float = 0.0
    params: float = 0.0
    batch_size: int = 0
    target_steps: int = 0


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
    catching_up: bool = False  # values are real but behind: the source is still reading a backlog


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

    @property
    def revoked(self) -> bool:
        return self.cause in ("preempted", "vanished")
