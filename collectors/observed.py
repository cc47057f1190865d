"""The observed state of every job, computed from the store and the lifecycle: what the Cluster and
Job panes show, what ``snapshot --json`` prints and what the planner reads (its job views). Measured,
not predicted: no model here. Pure computation: no I/O, no Textual."""

from __future__ import annotations

import functools
import logging
import math
import re
from array import array
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import Any, Literal, TypeVar, cast

from cmdare.collectors import hostdetail as H
from cmdare.collectors import metrics as M
from cmdare.collectors.lifecycle import Lifecycle, NodeStatus
from cmdare.collectors.samples import Coverage, JobFacts, TaskInfo, TaskState
from cmdare.collectors.store import TRAINING_KEYS, Store, TaskSeries

log = logging.getLogger(__name__)
T = TypeVar("T")
RATE_WINDOW_S = 10.0  # rates over the last 10 s of samples (divided by measured elapsed time)
STEP_WINDOW_S = RATE_WINDOW_S  # mean step compute time over the same window (histogram sum / count)
WORKER_ROLES = frozenset({"worker", "chief"})  # the roles that compute steps (JobView.workers)
Kind = tuple[
    str, str, str, str, str
]  # what a task counts as in its job's census: role, GPU, region, provisioning, status


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


class _MadeFrom:
    """Base of :class:`NodeView`: what a session's overview made a task's view from (:func:`cached_view`),
    in slots of the view's own: the versions of the task's points and identity, of its host's points and
    of its lifecycle status, the host series it read (the same object, not only the same version), and
    the task's number in its job (first met first; :attr:`OverviewCache.members`). No dataclass field:
    not in ``asdict``, equality, a pickle or a recording; a view made elsewhere has none of them set.
    These five slots cost 40 bytes a view; the record they replace (an object beside each view, and a
    job's dict of its tasks' numbers) cost ~150 bytes a task (~15 MB at 100,000 tasks)."""

    __slots__ = ("_version", "_host_version", "_status_version", "_host", "_number")
    _version: int
    _host_version: int | None
    _status_version: int | None
    _host: TaskSeries | None
    _number: int


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeRemarks:
    """What a task's view says that is its default for nearly every task of a fleet: its pipeline stage
    and datacenter, a failure, revocation or restart, identity flags, checkpoints (most tasks of a job
    write none), a finished log run's end. Every view with none of them holds :data:`NO_REMARKS`, one
    object, so a view holds one slot for these ten (9 slots less: ~7 MB at 100,000 tasks); a view with
    any of them holds a remarks object of its own (112 bytes: few tasks of a fleet)."""

    stage: str = ""
    dc: str = ""
    last_error: str | None = None
    restarts: int = 0
    cause: str = ""
    flags: tuple[str, ...] = ()  # identity remarks, e.g. duplicate-identity
    last_checkpoint_at: float | None = (
        None  # Unix s the task's last checkpoint was written (exporter or logs)
    )
    checkpoint_seconds: float | None = None  # mean time to write one (cmdare_checkpoint_seconds, measured)
    checkpoint_interval_s: float | None = None  # mean time between its checkpoints over the last hour
    ended_at: float | None = None  # a finished log run: its last event's time (shown for an uptime)


NO_REMARKS = NodeRemarks()  # what nearly every view holds (one object: frozen)
_KEEP: Any = object()  # a remark not given to NodeView(): its remarks' own (NO_REMARKS', or a copy's)


@dataclass(frozen=True, slots=True, kw_only=True, init=False)  # 10,000 a job, read in passes by the rules
class NodeView(_MadeFrom):
    """One task's row: its identity and what was measured of it. Made with every figure by name
    (``NodeView(name=…, role=…, last_error=…)``); the ten figures of :class:`NodeRemarks` are read as
    attributes like the others (``view.flags``) and held in ``remarks`` (:data:`NO_REMARKS` when all of
    them are their defaults). ``dataclasses.replace`` changes any of them too (the copy's remarks are
    the original's with the figures given)."""

    name: str
    role: str
    gpu: str
    region: str
    zone: str
    provisioning: str
    status: str  # up | silent | revoked
    steps_per_sec: float | None  # this task's own steps/s (measured)
    step_seconds: float | None  # mean compute time of one local step (measured histogram)
    gpu_util: float | None  # % (DCGM, the task's own GPUs), when exported
    net_in_bps: float | None  # bytes/s: the PS's own traffic for a PS, else node_exporter NIC
    net_out_bps: float | None
    started_at: float | None  # Unix s: start of the task's current lifetime (None unless up); see uptime_s()
    host: str = ""
    owns_gpu: bool = False  # the task has GPUs (declared, or a worker on a host DCGM reports GPUs of)
    gpu_model: str = ""  # DCGM ``modelName`` of the host's GPUs (when the task owns GPUs)
    cpu_pct: float | None = None  # host CPU busy % (node_exporter)
    mem_used_bytes: float | None = None  # host memory in use: MemTotal − MemAvailable (node_exporter)
    mem_total_bytes: float | None = None
    gpu_mem_used_mib: float | None = None  # the task's GPUs' memory (DCGM FB_USED / FB_USED + FB_FREE)
    gpu_mem_total_mib: float | None = None
    allreduce_seconds: float | None = None  # sync jobs: mean exposed all-reduce of one step (measured)
    rank: str = ""  # sync jobs: global rank and rank on its node, as the exporter declares them
    local_rank: str = ""
    remarks: NodeRemarks = NO_REMARKS  # stage, dc, failure, restarts, flags, checkpoints, end (see above)

    def __init__(
        self,
        *,
        name: str,
        role: str,
        gpu: str,
        region: str,
        zone: str,
        provisioning: str,
        status: str,
        steps_per_sec: float | None,
        step_seconds: float | None,
        gpu_util: float | None,
        net_in_bps: float | None,
        net_out_bps: float | None,
        started_at: float | None,
        last_error: str | None = _KEEP,
        restarts: int = _KEEP,
        cause: str = _KEEP,
        stage: str = _KEEP,
        dc: str = _KEEP,
        host: str = "",
        owns_gpu: bool = False,
        gpu_model: str = "",
        cpu_pct: float | None = None,
        mem_used_bytes: float | None = None,
        mem_total_bytes: float | None = None,
        gpu_mem_used_mib: float | None = None,
        gpu_mem_total_mib: float | None = None,
        flags: tuple[str, ...] = _KEEP,
        allreduce_seconds: float | None = None,
        rank: str = "",
        local_rank: str = "",
        last_checkpoint_at: float | None = _KEEP,
        checkpoint_seconds: float | None = _KEEP,
        checkpoint_interval_s: float | None = _KEEP,
        ended_at: float | None = _KEEP,
        remarks: NodeRemarks = NO_REMARKS,
    ) -> None:
        figures = (stage, dc, last_error, restarts, cause, flags, last_checkpoint_at, checkpoint_seconds)
        made = _remarks(remarks, (*figures, checkpoint_interval_s, ended_at))
        put = object.__setattr__  # frozen: each slot set once, as the generated __init__ does
        put(self, "name", name)
        put(self, "role", role)
        put(self, "gpu", gpu)
        put(self, "region", region)
        put(self, "zone", zone)
        put(self, "provisioning", provisioning)
        put(self, "status", status)
        put(self, "steps_per_sec", steps_per_sec)
        put(self, "step_seconds", step_seconds)
        put(self, "gpu_util", gpu_util)
        put(self, "net_in_bps", net_in_bps)
        put(self, "net_out_bps", net_out_bps)
        put(self, "started_at", started_at)
        put(self, "host", host)
        put(self, "owns_gpu", owns_gpu)
        put(self, "gpu_model", gpu_model)
        put(self, "cpu_pct", cpu_pct)
        put(self, "mem_used_bytes", mem_used_bytes)
        put(self, "mem_total_bytes", mem_total_bytes)
        put(self, "gpu_mem_used_mib", gpu_mem_used_mib)
        put(self, "gpu_mem_total_mib", gpu_mem_total_mib)
        put(self, "allreduce_seconds", allreduce_seconds)
        put(self, "rank", rank)
        put(self, "local_rank", local_rank)
        put(self, "remarks", made)

    @property
    def stage(self) -> str:
        return self.remarks.stage

    @property
    def dc(self) -> str:
        return self.remarks.dc

    @property
    def last_error(self) -> str | None:
        return self.remarks.last_error

    @property
    def restarts(self) -> int:
        return self.remarks.restarts

    @property
    def cause(self) -> str:
        return self.remarks.cause

    @property
    def flags(self) -> tuple[str, ...]:
        return self.remarks.flags

    @property
    def last_checkpoint_at(self) -> float | None:
        return self.remarks.last_checkpoint_at

    @property
    def checkpoint_seconds(self) -> float | None:
        return self.remarks.checkpoint_seconds

    @property
    def checkpoint_interval_s(self) -> float | None:
        return self.remarks.checkpoint_interval_s

    @property
    def ended_at(self) -> float | None:
        return self.remarks.ended_at

    def uptime_s(self, now: float) -> float | None:
        """Seconds since the task's current lifetime began, at ``now`` (None unless up). The view
        holds the start, not the uptime, so a task with nothing new keeps the same view from one
        refresh to the next (renderers and rules pass the state's time)."""
        return None if self.started_at is None else now - self.started_at

    def to_json(self, now: float) -> dict[str, Any]:
        out: dict[str, Any] = {k: getattr(self, k) for k in _JSON_FIELDS}  # remarks among the others
        del out["started_at"]
        out["uptime_s"] = self.uptime_s(now)
        out["flags"] = list(self.flags)
        return out


def _remarks(base: NodeRemarks, given: tuple[Any, ...]) -> NodeRemarks:
    """The remarks of a view made with ``given`` (its ten figures in :class:`NodeRemarks`' order, each
    the figure or :data:`_KEEP`: not given) over ``base`` (:data:`NO_REMARKS`, or the remarks of the view
    ``dataclasses.replace`` copies): ``base`` itself, or :data:`NO_REMARKS`, when the figures are theirs
    (nearly every task: no object made)."""
    if base is NO_REMARKS and given == _PLAIN:  # nearly every view made: one comparison
        return NO_REMARKS
    base_figures = _REMARK_FIGURES(base)
    own = tuple(b if x is _KEEP else x for x, b in zip(given, base_figures, strict=True))
    if own == base_figures:
        return base
    return NO_REMARKS if own == _PLAIN else NodeRemarks(**dict(zip(_REMARK_NAMES, own, strict=True)))


_REMARK_NAMES = tuple(f.name for f in fields(NodeRemarks))
_REMARK_FIGURES = attrgetter(*_REMARK_NAMES)  # a remarks' ten figures, in order
_PLAIN = _REMARK_FIGURES(NO_REMARKS)
# A view's figures in the JSON, in the order they have always had there
_JSON_FIELDS = (
    "name", "role", "gpu", "region", "zone", "provisioning", "status", "steps_per_sec", "step_seconds",
    "gpu_util", "net_in_bps", "net_out_bps", "started_at", "last_error", "restarts", "cause", "stage", "dc",
    "host", "owns_gpu", "gpu_model", "cpu_pct", "mem_used_bytes", "mem_total_bytes", "gpu_mem_used_mib",
    "gpu_mem_total_mib", "flags", "allreduce_seconds", "rank", "local_rank", "last_checkpoint_at",
    "checkpoint_seconds", "checkpoint_interval_s", "ended_at",
)  # fmt: skip


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
    logged = [
        ts for ts in tasks if TRAINING_KEYS.intersection(ts.values)
    ]  # most tasks log none: skip them cheaply
    with_loss = [ts for ts in logged if ts.latest(M.K_LOSS) is not None]
    lrs = [x for ts in logged if (x := ts.latest(M.K_LEARNING_RATE)) is not None]
    ex = [x for ts in logged if (x := ts.latest(M.K_EXAMPLES_RATE)) is not None]
    if not (with_loss or lrs or ex):
        return None
    main = max(with_loss, key=lambda ts: ts.last_seen) if with_loss else None
    points: list[tuple[float, float]] = []
    if main is not None:
        t, v = main.window_values(M.K_LOSS, window)
        points = [(a, b) for a, b in zip(t, v, strict=True) if math.isfinite(b)]
    lr = main.latest(M.K_LEARNING_RATE) if main is not None and main.has(M.K_LEARNING_RATE) else None
    return TrainingFigures(
        main.latest(M.K_LOSS) if main else None,
        lr if lr is not None else (lrs[0] if lrs else None),
        sum(ex) if ex else None,
        points,
    )


@dataclass(frozen=True, slots=True)
class NodesChange:
    """A job's node list (``nodes``) made as a copy of ``base`` with other views at ``positions``
    (ascending, each once): every other position holds the same view object. Both lists are held by
    identity, so a reader checks it holds ``base`` and is given ``nodes`` before trusting the positions
    (at 100,000 tasks, comparing the lists costs ~100,000 steps a refresh; a sweep changes ~800)."""

    base: list[NodeView]
    nodes: list[NodeView]
    positions: list[int]


@dataclass(frozen=True, kw_only=True)
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
    sync: str = ""  # async-ps | sync-allreduce | pipeline ("" = one worker, or nothing measured yet)
    sync_how: str = ""  # declared | inferred
    rate_basis: str = ""  # where steps/s and examples/s come from when not the tasks' own samples
    stalled_since: float | None = None  # no task up: when a task last answered (steps/s, ETA then None)
    last_steps_per_sec: float | None = None  # a stalled job's last measured steps/s (a past figure)
    # a summed figure over part of the job's tasks (a fleet's first refreshes): how many, of how many
    steps_coverage: Coverage | None = None
    examples_coverage: Coverage | None = None
    # Tasks by (role, GPU label, region, provisioning, status) as :func:`build_jobs` counted them while the
    # views changed; None: counted from ``nodes`` when first asked (:attr:`_kinds`). It goes with ``nodes``: a
    # copy with other nodes (``dataclasses.replace(job, nodes=…)``) passes ``tally=None``.
    tally: dict[Kind, int] | None = field(default=None, repr=False, compare=False)
    # How ``nodes`` was made from the job's previous node list: :class:`NodesChange` (None: unknown, e.g. a
    # job whose tasks were ordered anew, or a copy): who keeps columns over the nodes reads only those.
    change: NodesChange | None = field(default=None, repr=False, compare=False)
    # What :meth:`memo` computed of this view, by the function that computed it (the view's own cache).
    _memo: dict[Callable[[JobView], object], object] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def coverage_note(self, figure: Literal["", "steps", "examples"] = "") -> str:
        """'412 of 2,200 tasks so far' for a figure (``steps`` or ``examples``) summed over part of the
        tasks; both, named, when ``figure`` is ""; "" when the figures cover every task."""
        parts = {"steps": self.steps_coverage, "examples": self.examples_coverage}
        if figure:
            c = parts[figure]
            return c.words() if c is not None and c.partial else ""
        return "; ".join(f"{k}/s: {c.words()}" for k, c in parts.items() if c is not None and c.partial)

    @property
    def stalled(self) -> bool:
        """Whether the job has answered before and no task of it is up now (it is not training)."""
        return self.stalled_since is not None

    @property
    def finished(self) -> bool:
        """Whether the job is stalled with its target step reached, or every task of it is a finished log
        run (its writers are done): it ended, rather than died."""
        target = self.facts.target_steps
        if self.stalled and bool(target) and (self.global_step or 0) >= target:
            return True
        return self.stalled and self.counts.get(TaskState.FINISHED.value, 0) == len(self.nodes) > 0

    def memo(self, compute: Callable[[JobView], T]) -> T:
        """``compute(self)``, once per view: the rules, the planner and the panes ask the same things of
        a job's 10,000 nodes in one refresh (its shape, its ranks, their split...)."""
        if compute not in self._memo:
            self._memo[compute] = compute(self)
        return cast(T, self._memo[compute])  # held under the function that returned it: its T

    @functools.cached_property
    def counts(self) -> dict[str, int]:
        """Tasks by status (counted once per view: panes, rules and the JSON all ask)."""
        out = {s.value: 0 for s in TaskState}
        for (*_, status), count in self._kinds.items():
            out[status] = out.get(status, 0) + count
        return out

    def workers(self) -> tuple[NodeView, ...]:
        """The workers (and the chief), in the nodes' order."""
        return self._workers

    @functools.cached_property
    def _workers(self) -> tuple[NodeView, ...]:
        return tuple(n for n in self.nodes if n.role in WORKER_ROLES)

    def up_workers(self) -> tuple[NodeView, ...]:
        """The workers (and the chief) that are up, in the nodes' order (found once per view: the
        rules and the sync helpers all ask)."""
        return self._up_by_role[0]  # a tuple: no copy (a copy of 10,000 touches every view again)

    def up_ps_nodes(self) -> tuple[NodeView, ...]:
        """The parameter servers that are up, in the nodes' order (found with the up workers)."""
        return self._up_by_role[1]

    @functools.cached_property
    def _up_by_role(self) -> tuple[tuple[NodeView, ...], tuple[NodeView, ...]]:
        """(up workers and chief, up parameter servers): one pass over the nodes for both."""
        workers: list[NodeView] = []
        ps: list[NodeView] = []
        for n in self.nodes:
            if n.status == "up":
                if n.role in WORKER_ROLES:
                    workers.append(n)
                elif n.role == "ps":
                    ps.append(n)
        return tuple(workers), tuple(ps)

    @functools.cached_property
    def census(self) -> dict[tuple[str, str, bool], int]:
        """Tasks by (role, GPU label, up): what the shape and the rules count, in one pass."""
        out: Counter[tuple[str, str, bool]] = Counter()
        for (role, gpu, _, _, up), count in self.kinds.items():
            out[(role, gpu, up)] += count
        return dict(out)

    @functools.cached_property
    def kinds(self) -> dict[tuple[str, str, str, str, bool], int]:
        """Tasks by (role, GPU label, region, provisioning, up): what the cost meter prices."""
        out: Counter[tuple[str, str, str, str, bool]] = Counter()
        for (role, gpu, region, prov, status), count in self._kinds.items():
            out[(role, gpu, region, prov, status == "up")] += count
        return dict(out)

    @functools.cached_property
    def _kinds(self) -> dict[Kind, int]:
        """Tasks by (role, GPU label, region, provisioning, status): the one pass over the nodes that
        :attr:`counts`, :attr:`kinds` and :attr:`census` are made from (:attr:`tally` when given)."""
        if self.tally is not None:
            return self.tally
        return dict(Counter((n.role, n.gpu, n.region, n.provisioning, n.status) for n in self.nodes))

    def has_role(self, role: str) -> bool:
        """Whether any task has this role."""
        return any(r == role for r, *_ in self._kinds)

    def to_json(self, now: float) -> dict[str, Any]:
        """The job as a JSON-ready dict at ``now`` (the state's time: node uptimes are counted to it)."""
        return {
            "name": self.name,
            "model": self.facts.model.name,
            "steps_per_sec": _finite(self.steps_per_sec),
            "examples_per_sec": _finite(self.examples_per_sec),
            "global_step": _step(self.global_step),
            "target_steps": self.facts.target_steps or None,
            "eta_seconds": _finite(self.eta_seconds),
            "sync": self.sync,
            "sync_how": self.sync_how,
            "rate_basis": self.rate_basis or None,
            "coverage": {  # null when every figure covers every task
                name: c.to_json()
                for name, c in (
                    ("steps_per_sec", self.steps_coverage),
                    ("examples_per_sec", self.examples_coverage),
                )
                if c is not None and c.partial
            }
            or None,
            "stalled_since": self.stalled_since,
            "finished": self.finished,
            "last_steps_per_sec": _finite(self.last_steps_per_sec),
            "nodes": [n.to_json(now) for n in self.nodes],
            "training": None
            if self.training is None
            else {
                "loss": _finite(self.training.loss),
                "learning_rate": _finite(self.training.learning_rate),
                "logged_examples_per_sec": _finite(self.training.examples_per_sec),
            },
        }


def _step(x: float | None) -> int | None:
    """A step count as the integer it is (the store keeps floats), None when unknown."""
    x = _finite(x)
    return None if x is None else round(x)


def _net(ts: TaskSeries, host: TaskSeries | None, window: float) -> tuple[float | None, float | None]:
    """A PS's own traffic counters win over its host's NIC; a stage's bytes sent to peers likewise;
    otherwise the task's own node_exporter series, else its host's."""
    i = ts.info
    own_in = own_out = None
    if i.role == "ps":
        own_in, own_out = ts.rate(M.K_PS_IN, window), ts.rate(M.K_PS_OUT, window)
    if i.role == "stage":
        sent = [
            r
            for k in ts.keys()
            if k.startswith(M.K_STAGE_BYTES_PREFIX) and (r := ts.rate(k, window)) is not None
        ]
        own_out = sum(sent) if sent else None
    nic = ts if ts.has(M.K_NET_RX) else host
    nic_in = nic.rate(M.K_NET_RX, window) if nic is not None and nic.has(M.K_NET_RX) else None
    nic_out = nic.rate(M.K_NET_TX, window) if nic is not None and nic.has(M.K_NET_TX) else None
    return (own_in if own_in is not None else nic_in), (own_out if own_out is not None else nic_out)


@dataclass(frozen=True, kw_only=True)
class HostFigures:
    cpu_pct: float | None = None
    mem_used: float | None = None
    mem_total: float | None = None
    owns_gpu: bool = False
    gpu_model: str = ""
    gpu_util: float | None = None
    gpu_used: float | None = None
    gpu_total: float | None = None


def host_figures(ts: TaskSeries, host: TaskSeries | None, window: float) -> HostFigures:
    """CPU and memory of the task's host, and its GPU detail (:func:`_gpu_figures`). The task's own
    page wins where it carries the same series."""
    src = [x for x in (ts, host) if x is not None]
    busy = next((x for x in src if x.has(M.K_CPU_BUSY) and x.has(M.K_CPU_ALL)), None)
    cpu = None
    if busy is not None:
        b, a = busy.rate(M.K_CPU_BUSY, window), busy.rate(M.K_CPU_ALL, window)
        cpu = min(100.0, max(0.0, 100.0 * b / a)) if b is not None and a else None  # rounding aside
    mem = next((x for x in src if x.has(M.K_MEM_TOTAL)), None)
    total = mem.latest(M.K_MEM_TOTAL) if mem else None
    avail = mem.latest(M.K_MEM_AVAIL) if mem else None
    used = total - avail if total is not None and avail is not None and avail <= total else None
    return _gpu_figures(ts, host, _finite(cpu), _finite(used), _finite(total))


def _gpu_figures(
    ts: TaskSeries,
    host: TaskSeries | None,
    cpu_pct: float | None,
    mem_used: float | None,
    mem_total: float | None,
) -> HostFigures:
    """The host's CPU and memory figures given, with GPU detail only for a task that owns GPUs: the
    devices it declares (``gpu_ids``; none shown when none of them is on the host), else all of its
    host's. One object made (a view a task: a fleet's sweep makes ~800 a refresh)."""
    i = ts.info
    gsrc = ts if ts.has(M.K_GPU_UTIL) or ts.has(M.K_GPU_COUNT) else host
    devices, latest = gsrc.gpu_detail() if gsrc is not None else ([], {})
    owns = H.owns_gpus(i.role, i.gpu, i.gpu_ids, bool(devices) or M.K_GPU_UTIL in latest)
    if not owns or gsrc is None:
        return HostFigures(cpu_pct=cpu_pct, mem_used=mem_used, mem_total=mem_total, owns_gpu=owns)
    if i.gpu_ids:
        g = H.fold_devices(H.owned_devices(devices, i.gpu_ids), latest)
    else:
        g = {k: latest[k] for k in M.GPU_KEYS if k in latest}
    fb_used, fb_free = g.get(M.K_GPU_FB_USED), g.get(M.K_GPU_FB_FREE)
    total = fb_used + fb_free if fb_used is not None and fb_free is not None else None
    model = gsrc.info.gpu if gsrc.info.role == "node" else ""  # host detail carries the DCGM model
    return HostFigures(
        cpu_pct=cpu_pct,
        mem_used=mem_used,
        mem_total=mem_total,
        owns_gpu=True,
        gpu_model=model,
        gpu_util=_finite(g.get(M.K_GPU_UTIL)),
        gpu_used=_finite(fb_used),
        gpu_total=_finite(total),
    )


_BAD_HOSTS: set[str] = set()  # hosts whose detail could not be read (logged once each)


def _host_figures_or_none(ts: TaskSeries, host: TaskSeries | None, window: float) -> HostFigures:
    """:func:`host_figures`, or none for this task when its host's detail cannot be read: one hostile
    host page costs that host's columns, never the refresh of every job."""
    try:
        return host_figures(ts, host, window)
    except (ValueError, KeyError, IndexError, TypeError, ArithmeticError) as exc:
        name = host.info.task if host is not None else ts.info.key
        if name not in _BAD_HOSTS and len(_BAD_HOSTS) < 1000:
            _BAD_HOSTS.add(name)
            log.warning("host detail of %s unreadable, left out: %s: %s", name, type(exc).__name__, exc)
        return HostFigures()


def node_view(
    ts: TaskSeries,
    status: NodeStatus | None,
    now: float,
    window: float = RATE_WINDOW_S,
    host: TaskSeries | None = None,
    flags: tuple[str, ...] = (),
) -> NodeView:
    i = ts.info
    state = status.state.value if status else TaskState.UP.value
    up = _is_up(status)
    net_in, net_out = _net(ts, host, window)
    hf = _host_figures_or_none(ts, host, window) if up else _NO_HOST
    started = _started(ts, status, now)
    last_checkpoint, checkpoint_s, checkpoint_every = _checkpoints(ts, now)
    return NodeView(
        name=i.name,
        role=i.role,
        gpu=i.gpu or (H.short_model(hf.gpu_model) if hf.owns_gpu else ""),  # a GPU task never shows "CPU"
        region=i.region,
        zone=i.zone,
        provisioning=i.provisioning,
        status=state,
        steps_per_sec=_finite(ts.rate(M.K_WORKER_STEPS, window)) if up and i.role in WORKER_ROLES else None,
        step_seconds=_finite(ts.mean_of_ratio(M.K_STEP_SECONDS_SUM, M.K_STEP_SECONDS_COUNT, STEP_WINDOW_S))
        if up
        else None,
        gpu_util=hf.gpu_util,
        net_in_bps=_finite(net_in) if up else None,
        net_out_bps=_finite(net_out) if up else None,
        started_at=_started_at(started, up),
        ended_at=ts.last_seen if state == TaskState.FINISHED.value and math.isfinite(ts.last_seen) else None,
        last_error=status.last_error if status else None,
        restarts=status.restarts if status else 0,
        cause=status.cause if status else "",
        stage=i.stage,
        dc=i.dc,
        host=ts.host,
        owns_gpu=hf.owns_gpu,
        gpu_model=hf.gpu_model,
        cpu_pct=hf.cpu_pct,
        mem_used_bytes=hf.mem_used,
        mem_total_bytes=hf.mem_total,
        gpu_mem_used_mib=hf.gpu_used,
        gpu_mem_total_mib=hf.gpu_total,
        flags=flags,
        # a ratio of two series is None when either is not held (most tasks export no all-reduce time)
        allreduce_seconds=_finite(
            ts.mean_of_ratio(M.K_ALLREDUCE_SECONDS_SUM, M.K_ALLREDUCE_SECONDS_COUNT, STEP_WINDOW_S)
        )
        if up and ts.has(M.K_ALLREDUCE_SECONDS_SUM) and ts.has(M.K_ALLREDUCE_SECONDS_COUNT)
        else None,
        rank=i.rank,
        local_rank=i.local_rank,
        last_checkpoint_at=last_checkpoint,
        checkpoint_seconds=checkpoint_s,
        checkpoint_interval_s=checkpoint_every,
    )


_NO_HOST = HostFigures()  # a task not up shows no host figures (one object: frozen)


CHECKPOINT_WINDOW_S = 3600.0  # the checkpoint interval is measured over the last hour (two or more writes)
MAX_CHECKPOINT_WRITE_S = (
    86400.0  # a mean write time beyond a day is not a measurement (a page's value refused)
)


def _within(x: float, bound: float) -> float | None:
    """``x`` when finite and within (0, bound], else None."""
    return float(x) if math.isfinite(x) and 0 < x <= bound else None


def _checkpoints(ts: TaskSeries, now: float) -> tuple[float | None, float | None, float | None]:
    """The task's last checkpoint (a plausible Unix time, not ahead of ``now`` by more than a minute), its mean
    write time and, with two or more writes in the last hour, the mean interval between them (none of
    them, unread, for a task that holds none of the series: most of a fleet)."""
    if not (ts.has(M.K_LAST_CHECKPOINT) or ts.has(M.K_CHECKPOINT_SECONDS_COUNT)):
        return None, None, None  # what each figure below is with neither series held
    last = ts.latest(M.K_LAST_CHECKPOINT)
    total, count = ts.latest(M.K_CHECKPOINT_SECONDS_SUM), ts.latest(M.K_CHECKPOINT_SECONDS_COUNT)
    interval = None
    if count and count >= 2:
        times, values = ts.window_values(M.K_CHECKPOINT_SECONDS_COUNT, CHECKPOINT_WINDOW_S)
        pts = [(t, v) for t, v in zip(times, values, strict=True) if v == v]
        # between the first and the last point where the count grew (a write seen): whole intervals only
        grew = [k for k in range(1, len(pts)) if pts[k][1] > pts[k - 1][1]]
        if len(grew) >= 2 and pts[grew[-1]][1] > pts[grew[0]][1]:
            a, b = pts[grew[0]], pts[grew[-1]]
            interval = (b[0] - a[0]) / (b[1] - a[1]) or None
    return (
        last if last is not None and 1e9 < last <= now + 60 else None,
        _within(total / count, MAX_CHECKPOINT_WRITE_S) if total is not None and count else None,
        interval,
    )


def _is_up(status: NodeStatus | None) -> bool:
    """Whether a task with this lifecycle status is up (one with none yet is: it answered)."""
    return status is None or status.state is TaskState.UP


def _started_at(started: float, up: bool) -> float | None:
    """A view's ``started_at``: the task's start (:func:`_started`) while it is up and the start is known."""
    return started if up and started and math.isfinite(started) else None


def _started(ts: TaskSeries, status: NodeStatus | None, now: float) -> float:
    """When the task's current lifetime began: its own start (exporter / process_start_time_seconds)
    when plausible, else the lifecycle's, else its first point."""
    started = status.started if status else ts.first_seen
    own_start = ts.latest(M.K_PROCESS_START)
    return own_start if own_start is not None and 0 < own_start <= now else started


def cached_view(
    ts: TaskSeries,
    status: NodeStatus | None,
    now: float,
    host: TaskSeries | None,
    flags: tuple[str, ...],
    built: dict[str, NodeView],
) -> NodeView:
    """:func:`node_view`, the same object while nothing it reads has changed (``built``: the views made
    so far, by task key, each with what it was made from in its own slots (:class:`_MadeFrom`); through
    Prometheus at a 15 s scrape and a 2 s refresh most refreshes bring nothing new for most tasks). The
    view holds no time of its own (uptime is counted from ``started_at`` by who shows it), so reuse is
    exact. Its flags and its start are read back from the view itself: it holds the flags it was given,
    and its start (:func:`_started_at`) is all a view reads of the task's start. The task's number in
    its job is :func:`build_jobs`' to set."""
    host_version = None if host is None else host.version
    status_version = None if status is None else status.version
    hit = built.get(ts.info.key)
    if (
        hit is not None
        and hit._version == ts.version
        and hit._host is host
        and hit._host_version == host_version
        and hit._status_version == status_version
    ):
        was = hit.remarks.flags
        started = _started(ts, status, now) if _is_up(status) else None  # what its started_at is made of
        if (was is flags or was == flags) and hit.started_at == (
            started if started and math.isfinite(started) else None  # as _started_at makes it
        ):
            return hit
    view = node_view(ts, status, now, host=host, flags=flags)
    made = object.__setattr__  # a frozen view: its own slots set once, as it is made
    made(view, "_version", ts.version)
    made(view, "_host_version", host_version)
    made(view, "_status_version", status_version)
    made(view, "_host", host)
    built[ts.info.key] = view
    return view


def _unanswered(status: NodeStatus) -> NodeView:
    """A task that never answered (a pending target, or known only from a failed poll)."""
    i: TaskInfo = status.info
    return NodeView(
        name=i.name,
        role=i.role,
        gpu=i.gpu,
        region=i.region,
        zone=i.zone,
        provisioning=i.provisioning,
        status=status.state.value,
        steps_per_sec=None,
        step_seconds=None,
        gpu_util=None,
        net_in_bps=None,
        net_out_bps=None,
        started_at=None,
        last_error=status.last_error,
        restarts=status.restarts,
        cause=status.cause,
        stage=i.stage,
        dc=i.dc,
    )


@dataclass
class OverviewCache:
    """What :func:`build_jobs` kept from its last call, so that a refresh rebuilds the views of the
    tasks that changed (the store's and the lifecycle's ``take_dirty``) and leaves the rest alone: at
    10,000 tasks read in a sweep most refreshes touch a few hundred. One per session (the only
    reader of the dirty sets)."""

    # job -> its task keys, first seen first: a task's number in its job is its place here, held by its view
    # (:class:`_MadeFrom`; a list: not a dict of 100,000 keys beside ``built``, ~6 MB at 100,000 tasks)
    members: dict[str, list[str]] = field(default_factory=dict)
    nodes: dict[str, list[NodeView]] = field(default_factory=dict)  # job -> its views, ordered (reused)
    grown: set[str] = field(default_factory=set)  # jobs that gained tasks or whose tasks' roles or names
    # changed (their order is made again)
    changed: dict[str, list[str]] = field(default_factory=dict)  # job -> tasks whose view changed
    # job -> each task's place in nodes, by its number in members (an array: not a dict of 100,000)
    at: dict[str, array[int]] = field(default_factory=dict)
    kinds: dict[str, Counter[Kind]] = field(default_factory=dict)  # job -> its tasks by kind (JobView.tally)
    built: dict[str, NodeView] = field(
        default_factory=dict
    )  # task key -> its view (what made it in its slots)
    # job -> how many of its tasks were ordered, and the permutation that sorts them (:func:`_ordered`)
    orders: dict[str, tuple[int, array[int]]] = field(default_factory=dict)
    renamed: set[str] = field(default_factory=set)  # jobs whose tasks' roles or names changed (sorted anew)
    # the lifecycle's keys no task of the store holds, in its order (None: not found yet), and as a set
    unanswered: list[str] | None = None
    unanswered_set: set[str] = field(default_factory=set)

    @property
    def views(self) -> Mapping[str, NodeView]:
        """Each task's view, by task key (:attr:`built`, read only: not a second book of 100,000)."""
        return self.built


def _task_views(
    store: Store, lifecycle: Lifecycle, now: float, cache: OverviewCache, dirty: set[str]
) -> None:
    """Update ``cache`` for the tasks in ``dirty`` and those it has not met yet."""
    built = cache.built
    met = [k for k in store.tasks if k not in built] if len(built) < len(store.tasks) else []
    for key in [*met, *dirty.difference(met)]:  # tasks met since first, in the store's order (jobs' order)
        ts = store.tasks.get(key)
        if ts is None:
            continue  # a pending target: an unanswered row, made on every call
        flags: tuple[str, ...] = ("duplicate-identity",) if key in lifecycle.duplicates else ()
        if key in lifecycle.duplicate_ranks:  # another task of the job claims its rank
            flags += ("duplicate-rank",)
        old = built.get(key)
        view = cached_view(ts, lifecycle.nodes.get(key), now, store.host_of(ts), flags, built)
        if old is view:
            continue
        job = ts.info.job  # a task's key holds its job: a task never moves to another
        kinds = cache.kinds.setdefault(job, Counter())
        if old is not None:
            object.__setattr__(view, "_number", old._number)  # the task's number in its job goes with it
            kinds[_kind(old)] -= 1
            if (old.role, old.name) != (view.role, view.name):  # its place in the order may move
                cache.grown.add(job)
                cache.renamed.add(job)
        else:
            known = cache.members.setdefault(job, [])
            object.__setattr__(view, "_number", len(known))  # its place in ``known`` (:class:`_MadeFrom`)
            known.append(key)
            cache.grown.add(job)
        kinds[_kind(view)] += 1
        cache.changed.setdefault(job, []).append(key)


def _unanswered_keys(store: Store, lifecycle: Lifecycle, cache: OverviewCache, dirty: set[str]) -> list[str]:
    """The lifecycle's keys that no task of the store holds (targets never answered), in the lifecycle's
    order. Found again only when a task in ``dirty`` is or becomes one of them: a key joins or leaves
    either book, or moves in the lifecycle's order, only with its task marked dirty (the store's and the
    lifecycle's ``take_dirty``), so at 100,000 tasks a refresh looks at its dirty tasks, not every key."""
    held = cache.unanswered
    if held is not None:
        was, nodes, tasks = cache.unanswered_set, lifecycle.nodes, store.tasks
        if not any(k in was or (k in nodes and k not in tasks) for k in dirty):
            return held
    unanswered = lifecycle.nodes.keys() - store.tasks.keys()  # set operations: 100,000 keys
    held = cache.unanswered = [k for k in lifecycle.nodes if k in unanswered] if unanswered else []
    cache.unanswered_set = unanswered
    return held


def _extra_rows(
    store: Store, lifecycle: Lifecycle, now: float, cache: OverviewCache, dirty: set[str]
) -> dict[str, list[NodeView]]:
    """Rows that are no task of the store: targets never answered (pending), and the node_exporter /
    DCGM detail of hosts no task runs on (a row of its own)."""
    extra: dict[str, list[NodeView]] = {}
    for key in _unanswered_keys(store, lifecycle, cache, dirty):  # lifecycle order
        status = lifecycle.nodes[key]
        extra.setdefault(status.info.job, []).append(_unanswered(status))
    if store.hosts:
        for host, hs in store.hosts.items():
            if not store.has_tasks_on(host):
                extra.setdefault(hs.info.job, []).append(node_view(hs, None, now))
    return extra


def build_jobs(
    store: Store, lifecycle: Lifecycle, now: float, history: int = 120, cache: OverviewCache | None = None
) -> list[JobView]:
    """One :class:`JobView` per job seen, nodes sorted by role then name. With ``cache`` (a session's)
    only the views of tasks that changed are made again, and a job's node list is reused while none
    of its tasks changed."""
    if cache is None:  # a one-off overview: every task, and the session's dirty sets left alone
        cache, dirty = OverviewCache(), set(store.tasks)
    else:
        dirty = store.take_dirty() | lifecycle.take_dirty()
    _task_views(store, lifecycle, now, cache, dirty)
    extra = _extra_rows(store, lifecycle, now, cache, dirty)
    out = []
    for name in dict.fromkeys([*cache.members, *extra]):  # in the order jobs were first seen
        change: NodesChange | None = None
        if name in cache.grown or name not in cache.nodes:
            _order_job(name, cache)
        elif name in cache.changed:  # the same tasks, some with new views: put those in their places
            base = cache.nodes[name]
            nodes = list(base)
            at, built = cache.at[name], cache.built
            places = []
            for key in cache.changed.get(name, ()):
                view = built[key]
                place = at[view._number]
                nodes[place] = view
                places.append(place)
            cache.nodes[name] = nodes
            change = NodesChange(base, nodes, sorted(set(places)))
        cache.changed.pop(name, None)
        rows = extra.get(name, [])
        kinds = Counter(cache.kinds.get(name, ())) + Counter(_kind(n) for n in rows)
        nodes = _with_rows(cache.nodes[name], rows) if rows else cache.nodes[name]
        # rows of no task move the places: no change said then
        out.append(_job_view(store, name, nodes, history, +kinds, None if rows else change))
    return out


def _kind(n: NodeView) -> Kind:
    """What a task counts as in its job's census: role, GPU label, region, provisioning, status."""
    return (n.role, n.gpu, n.region, n.provisioning, n.status)


def _order_job(name: str, cache: OverviewCache) -> None:
    """A job's node list made again, in order (it gained tasks, or a task's role or name changed)."""
    keys = cache.members.get(name, [])
    order = _ordered(cache, name, keys)
    built = cache.built
    at = cache.at[name] = array("q", [0]) * len(keys)
    for place, i in enumerate(order):
        at[i] = place
    cache.nodes[name] = [built[keys[i]] for i in order]
    cache.grown.discard(name)


def _job_view(
    store: Store,
    name: str,
    nodes: list[NodeView],
    history: int,
    kinds: Counter[Kind] | None = None,
    change: NodesChange | None = None,
) -> JobView:
    """The job's figures from its series, with its tasks' views."""
    js = store.job(name)
    hist = js.tail("steps_per_sec", history)
    rate = _last_finite(hist)
    gstep = _last_finite(js.tail("global_step", 1))
    ex = _last_finite(js.tail("examples_per_sec", 1))
    facts = js.facts or JobFacts(job=name)
    members = store.members.get(name, {})
    statuses = (k[4] for k in kinds) if kinds is not None else (n.status for n in nodes)
    stalled_since = None
    if members and TaskState.UP.value not in statuses:  # answered before, no task up now: not training
        seen = [ts.last_seen for ts in members.values() if math.isfinite(ts.last_seen)]
        stalled_since = max(seen) if seen else None
    last_rate = None
    if stalled_since is not None:  # the last rate is a past figure, not the job's speed now
        last_rate, rate, ex = rate, None, None
    eta = None
    partial = js.steps_coverage is not None and js.steps_coverage.partial  # a fraction of the speed: no ETA
    if facts.target_steps and gstep is not None and rate and not partial:
        eta = max(0.0, facts.target_steps - gstep) / rate
    series = list(members.values()) if store.logs_training else []
    return JobView(
        name=name,
        facts=facts,
        steps_per_sec=rate,
        examples_per_sec=ex,
        global_step=gstep,
        eta_seconds=eta,
        nodes=nodes,
        history=hist,
        training=training_figures(series),
        sync=js.sync,
        sync_how=js.sync_how,
        rate_basis=js.rate_basis,
        stalled_since=stalled_since,
        last_steps_per_sec=last_rate,
        steps_coverage=js.steps_coverage,
        examples_coverage=js.examples_coverage,
        tally=None if kinds is None else dict(kinds),  # counted as the views changed (as _kinds would)
        change=change,
    )


_ROLE_ORDER = {"chief": 0, "ps": 1, "worker": 2, "stage": 3}


def _order_key(n: NodeView) -> tuple[int, tuple[int | str, ...]]:
    """Where a row goes in its job: by role, then by name in natural order (``worker-2`` before
    ``worker-10``)."""
    return _ROLE_ORDER.get(n.role, 9), _natural(n.name)


def _ordered(cache: OverviewCache, name: str, keys: list[str]) -> array[int]:
    """The permutation that sorts job ``name``'s task views (``keys``: its tasks, first met first) by
    :func:`_order_key`, as a stable sort would. Kept in ``cache``: tasks met since the last order (a
    fleet's sweep meets ~800 of 100,000 a refresh) are each put in their place by bisection, the rest
    keep theirs; sorted anew only when a task's role or name changed."""
    built = cache.built
    kept = cache.orders.get(name)
    n = len(keys)
    if kept is None or name in cache.renamed or kept[0] > n:
        perm = array("q", sorted(range(n), key=lambda i: _order_key(built[keys[i]])))
    elif kept[0] < n:
        perm = _inserted(kept[1], range(kept[0], n), lambda i: _order_key(built[keys[i]]))
    else:
        perm = kept[1]
    cache.orders[name] = (n, perm)
    cache.renamed.discard(name)
    return perm


def _inserted(
    perm: array[int], new: range, key: Callable[[int], tuple[int, tuple[int | str, ...]]]
) -> array[int]:
    """``perm`` (indices sorted by ``key``, stably) with the indices ``new`` (all past those in it) put
    in their places: what a stable sort of them all gives, with a bisection each, not a sort of all."""
    out = array("q")
    prev = 0
    for i in sorted(new, key=key):
        at = bisect_right(perm, key(i), prev, key=key)  # after equal keys: a later index sorts after
        out.extend(perm[prev:at])
        out.append(i)
        prev = at
    out.extend(perm[prev:])
    return out


def _with_rows(nodes: list[NodeView], rows: list[NodeView]) -> list[NodeView]:
    """A job's sorted task views with its rows that are no task (pending targets, hosts' detail) put in
    their places: what a stable sort of the views then the rows gives (a row after an equal view)."""
    out: list[NodeView] = []
    prev = 0
    for row in sorted(rows, key=_order_key):
        at = bisect_right(nodes, _order_key(row), prev, key=_order_key)
        out.extend(nodes[prev:at])
        out.append(row)
        prev = at
    out.extend(nodes[prev:])
    return out


def _last_finite(xs: list[float]) -> float | None:
    for x in reversed(xs):
        if math.isfinite(x):
            return x
    return None


def _natural(name: str) -> tuple[int | str, ...]:
    """``name`` as its runs of text and numbers (numbers compared as numbers). Not memoised: a cache
    of 65,536 names cost ~23 MB and missed on every call once a fleet had more tasks than that."""
    return tuple(int(p) if p.isdigit() else p for p in _DIGITS.split(name))


_DIGITS = re.compile(r"(\d+)")
