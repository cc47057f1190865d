"""The observed state of every job, computed from the store and the lifecycle: what the Cluster and
Job panes show and what ``snapshot --json`` prints. Pure computation: no I/O, no Textual."""

from __future__ import annotations

import functools
import math
import re
from dataclasses import asdict, dataclass, field

from cmdare.collectors import metrics as M
from cmdare.collectors.lifecycle import Lifecycle, NodeStatus
from cmdare.collectors.samples import JobFacts, TaskState
from cmdare.collectors.store import Store, TaskSeries

RATE_WINDOW_S = 10.0  # rates over the last 10 s of samples (divided by measured elapsed time)
STEP_WINDOW_S = RATE_WINDOW_S  # mean step compute time over the same window (histogram sum / count)


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


@dataclass(frozen=True)
class NodeView:
    name: str
    role: str
    gpu: str
    region: str
    zone: str
    provisioning: str
    status: str  # up | silent | revoked
    steps_per_sec: float | None  # this task's own steps/s (measured)
    step_seconds: float | None  # mean compute time of one local step (measured histogram)
    gpu_util: float | None  # % (DCGM), when exported
    net_in_bps: float | None  # bytes/s: node_exporter NIC, or PS traffic for a PS
    net_out_bps: float | None
    uptime_s: float | None
    last_error: str | None
    restarts: int
    cause: str
    stage: str = ""
    dc: str = ""

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class TrainingFigures:
    """What the job logs about its training (TensorBoard scalars): newest values, and recent loss
    points ``(time, loss)`` for a plot; None when not logged."""

    loss: float | None
    learning_rate: float | None
    examples_per_sec: float | None  # as logged (a gauge), summed over the job's up tasks
    loss_points: list[tuple[float, float]] = field(default_factory=list)


def training_figures(tasks: list[TaskSeries], window: float = 3600.0) -> TrainingFigures | None:
    """The training figures of a job's tasks: loss and learning rate of the task that logged the newest
    loss (the chief, in practice), logged examples/s summed."""
    with_loss = [ts for ts in tasks if ts.latest(M.K_LOSS) is not None]
    lrs = [x for ts in tasks if (x := ts.latest(M.K_LEARNING_RATE)) is not None]
    ex = [x for ts in tasks if (x := ts.latest(M.K_EXAMPLES_RATE)) is not None]
    if not (with_loss or lrs or ex):
        return None
    main = max(with_loss, key=lambda ts: ts.last_seen) if with_loss else None
    points: list[tuple[float, float]] = []
    if main is not None:
        t, v = main.window(M.K_LOSS, window)
        points = [(float(a), float(b)) for a, b in zip(t, v, strict=True) if math.isfinite(b)]
    lr = main.latest(M.K_LEARNING_RATE) if main is not None and main.has(M.K_LEARNING_RATE) else None
    return TrainingFigures(main.latest(M.K_LOSS) if main else None, lr if lr is not None else (lrs[0] if lrs else None),
                           sum(ex) if ex else None, points)


@dataclass(frozen=True)
class JobView:
    name: str
    facts: JobFacts
    steps_per_sec: float | None  # cluster-wide global steps/s (measured)
    examples_per_sec: float | None
    global_step: float | None
    eta_seconds: float | None  # (target − global step) / steps/s, when a target is known
    nodes: list[NodeView]
    history: list[float] = field(default_factory=list)  # recent cluster steps/s, oldest first
    training: TrainingFigures | None = None  # loss, learning rate, logged examples/s (from logs)

    @property
    def counts(self) -> dict[str, int]:
        out = {s.value: 0 for s in TaskState}
        for n in self.nodes:
            out[n.status] = out.get(n.status, 0) + 1
        return out

    def workers(self) -> list[NodeView]:
        return [n for n in self.nodes if n.role in ("worker", "chief")]

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "model": self.facts.model,
            "steps_per_sec": _finite(self.steps_per_sec),
            "examples_per_sec": _finite(self.examples_per_sec),
            "global_step": _finite(self.global_step),
            "target_steps": self.facts.target_steps or None,
            "eta_seconds": _finite(self.eta_seconds),
            "nodes": [n.to_json() for n in self.nodes],
            "training": None if self.training is None else {
                "loss": _finite(self.training.loss),
                "learning_rate": _finite(self.training.learning_rate),
                "logged_examples_per_sec": _finite(self.training.examples_per_sec),
            },
        }


def node_view(ts: TaskSeries, status: NodeStatus | None, now: float, window: float = RATE_WINDOW_S) -> NodeView:
    i = ts.info
    state = status.state.value if status else TaskState.UP.value
    up = state == TaskState.UP.value
    if i.role == "ps":
        net_in, net_out = ts.rate(M.K_PS_IN, window), ts.rate(M.K_PS_OUT, window)
    else:
        net_in, net_out = None, None
    if i.role == "stage":
        sent = [r for k in ts.keys() if k.startswith(M.K_STAGE_BYTES_PREFIX) and (r := ts.rate(k, window)) is not None]
        net_out = sum(sent) if sent else None
    net_in = ts.rate(M.K_NET_RX, window) if ts.has(M.K_NET_RX) else net_in
    net_out = ts.rate(M.K_NET_TX, window) if ts.has(M.K_NET_TX) else net_out
    started = status.started if status else ts.first_seen
    own_start = ts.latest(M.K_PROCESS_START)  # the task's own start (exporter / process_start_time_seconds)
    if own_start is not None and 0 < own_start <= now:
        started = own_start
    return NodeView(
        name=i.task,
        role=i.role,
        gpu=i.gpu,
        region=i.region,
        zone=i.zone,
        provisioning=i.provisioning,
        status=state,
        steps_per_sec=_finite(ts.rate(M.K_WORKER_STEPS, window)) if up and i.role in ("worker", "chief") else None,
        step_seconds=_finite(ts.mean_of_ratio(M.K_STEP_SECONDS_SUM, M.K_STEP_SECONDS_COUNT, STEP_WINDOW_S)) if up else None,
        gpu_util=_finite(ts.latest(M.K_GPU_UTIL)) if up else None,
        net_in_bps=_finite(net_in) if up else None,
        net_out_bps=_finite(net_out) if up else None,
        uptime_s=(now - started) if up and started and math.isfinite(started) else None,
        last_error=status.last_error if status else None,
        restarts=status.restarts if status else 0,
        cause=status.cause if status else "",
        stage=i.stage,
        dc=i.dc,
    )


def build_jobs(store: Store, lifecycle: Lifecycle, now: float, history: int = 120) -> list[JobView]:
    """One :class:`JobView` per job seen, nodes sorted by role then name."""
    order = {"chief": 0, "ps": 1, "worker": 2, "stage": 3}
    jobs: dict[str, list[NodeView]] = {}
    series: dict[str, list[TaskSeries]] = {}
    for key, ts in store.tasks.items():
        jobs.setdefault(ts.info.job, []).append(node_view(ts, lifecycle.nodes.get(key), now))
        series.setdefault(ts.info.job, []).append(ts)
    for key, status in lifecycle.nodes.items():  # tasks never answered: show them too
        if key not in store.tasks:
            i = status.info
            jobs.setdefault(i.job, []).append(NodeView(i.task, i.role, i.gpu, i.region, i.zone, i.provisioning,
                                                       status.state.value, None, None, None, None, None, None,
                                                       status.last_error, status.restarts, status.cause, i.stage, i.dc))
    out = []
    for name, nodes in jobs.items():  # in the order jobs were first seen
        nodes.sort(key=lambda n: (order.get(n.role, 9), _natural(n.name)))
        js = store.job(name)
        hist = [float(x) for x in js.last("steps_per_sec", history)]
        rate = _last_finite(hist)
        gstep = _last_finite([float(x) for x in js.last("global_step", 1)])
        ex = _last_finite([float(x) for x in js.last("examples_per_sec", 1)])
        facts = js.facts or JobFacts(job=name)
        eta = None
        if facts.target_steps and gstep is not None and rate:
            eta = max(0.0, facts.target_steps - gstep) / rate
        out.append(JobView(name, facts, rate, ex, gstep, eta, nodes, hist, training_figures(series.get(name, []))))
    return out


def _last_finite(xs: list[float]) -> float | None:
    for x in reversed(xs):
        if math.isfinite(x):
            return x
    return None


@functools.lru_cache(maxsize=1 << 16)
def _natural(name: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))
