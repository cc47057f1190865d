"""Plain values the collectors produce: who a task is, what one poll of it returned, its state."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class TaskState(StrEnum):
    PENDING = "pending"  # a target that has not answered yet (shown under its URL)
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
    gpu_ids: str = ""  # GPUs this task uses (DCGM ``gpu`` indices or UUIDs, comma-separated), when declared

    @property
    def name(self) -> str:
        """The task's name within its job: a bare TF per-role index is qualified by its role
        (``task="0"`` of role ps is ``ps-0``), so a worker 0 and a ps 0 never collide."""
        return f"{self.role}-{self.task}" if self.task.isdigit() else self.task

    @property
    def key(self) -> str:
        return f"{self.job}/{self.name}"


@dataclass(frozen=True)
class JobFacts:
    """What a job trains, from ``cmdare_job_info`` labels or the config (empty when unknown)."""

    job: str
    model: str = ""
    model_flops: float = 0.0
    params: float = 0.0
    batch_size: int = 0
    target_steps: int = 0
    sync: str = ""  # async-ps | sync-allreduce | pipeline ("" = undeclared: inferred from the steps)


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
    host: str = ""  # the host the task runs on (target URL or Prometheus instance), for node detail
    host_only: bool = False  # node_exporter / DCGM page: detail for the tasks on ``host``, not a task


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
