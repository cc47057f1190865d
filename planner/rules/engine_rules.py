"""The bottleneck rules as a Prometheus rule file (``cmdare-tui rules``): recording rules for the figures the
verdicts rest on and one alerting rule per verdict the engine can judge from measurements alone.

One source for thresholds: every number below is read from :class:`Thresholds` (the app's own rules read the
same record), :data:`PS_NIC_GBPS` / ``PS_SHAPE.vcpus`` (the PS node) and :data:`WORKER_ROLES`; ``for:`` is the
app's hysteresis in evaluation intervals (a verdict raised after K refreshes has held for K − 1 intervals:
Prometheus fires when ``for:`` has elapsed since the first true evaluation) and ``keep_firing_for:`` the clear
hysteresis the same way. The file is valid for Prometheus ≥ 2.42; ``engine="vmalert"`` writes vmalert's
variant: no ``keep_firing_for`` (older vmalert releases refuse it) and alerts that read the scraped series
themselves (:func:`inline_recordings`: vmalert reads recorded series back through the datasource, a chain of
them lags an evaluation per link).

Three groups: the identity (:func:`identity_rules`) and the graph-only figures (:func:`figure_rules`) once a
window; the figures the verdicts read and the verdicts every interval, in order (:func:`recording_rules`,
:func:`alerting_rules`). At 10,000 tasks the cost is the number of times a rule selects every task's series
(``benchmarks/rules_engine.py``: Prometheus 2.42 spends an evaluation's time selecting series and
collecting garbage, not on samples), so the identity and the graph-only figures run once a window.

Series are joined to tasks on ``instance`` (the exporter's identity labels are on ``cmdare_task_info`` only,
as for the app's Prometheus source), the exporter's ``job`` label becoming ``cmdare_job`` whether or not the
scrape config honours labels. Host-level series (node_exporter, DCGM) join on ``host`` (``instance`` less
its port), as the app matches a task's node detail.

Where the engine and the app differ, it is said in the file and in ``docs/rules.md``: the engine's straggler
test compares a worker with the median of all the job's workers (itself included: a little more lenient
than the app's peers' median); ``ps-saturation`` is judged from measurements only (the app's test against
the speed model's compute-bound rate needs the model); ``wan-bound``, ``eta-slip`` and ``cost-overrun`` are
left to the app (:data:`LEFT_TO_APP` gives the reasons).
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from typing import Literal

from cmdare.collectors import metrics as M
from cmdare.collectors.observed import WORKER_ROLES
from cmdare.collectors.pricing.shapes import PS_SHAPE
from cmdare.collectors.prometheus.source import ENGINE_ORIGIN
from cmdare.planner.live.outlook import NO_GPU_NAMES
from cmdare.planner.rules.ps_rules import PS_NIC_GBPS
from cmdare.planner.rules.thresholds import DEFAULT_THRESHOLDS, Thresholds

Engine = Literal["prometheus", "vmalert"]

#: Alert name → the app's verdict kind (``snapshot --json`` ``alerts[].kind``).
ALERT_KINDS: dict[str, str] = {
    "CmdareNodeRevoked": "node-revoked",
    "CmdareNodeSilent": "node-silent",
    "CmdarePsSaturation": "ps-saturation",
    "CmdareStraggler": "straggler",
    "CmdareAllreduceBound": "allreduce-bound",
    "CmdareInputBound": "input-bound",
}

#: Verdicts the engine does not judge, with the reason (written into the file's header).
LEFT_TO_APP: dict[str, str] = {
    "wan-bound": "needs the geo model's per-boundary transfer time (bytes per micro-batch ÷ link capacity) "
    "against the slowest stage's compute, pairing stages across data centres: left to the app",
    "eta-slip": "needs the user's deadline (the app's goals), which the metrics do not carry: left to the app",
    "cost-overrun": "needs the user's budget and the price book ($/h per node): left to the app",
    "checkpoint-overdue": "needs the optimum checkpoint interval of the job's shape (the revocation model and "
    "the checkpoint cost: planner/risk_cost/checkpointing.py): left to the app",
    "ps-saturation (model)": "the test against the speed model's compute-bound rate needs the model's "
    "prediction: the engine judges from measurements only (workers' compute share and PS NIC / CPU)",
}

#: The rule groups: who each task is (every window), the figures the verdicts read with the verdicts (every
#: interval), the figures only graphs read (every window).
IDENTITY_GROUP = "cmdare-identity"
BOTTLENECK_GROUP = "cmdare-bottlenecks"
FIGURES_GROUP = "cmdare-figures"

_DURATION = re.compile(r"^([0-9]+)(ms|s|m|h)$")
_SCALE = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration_seconds(text: str) -> float:
    """``'15s'`` → 15.0 (a single Prometheus duration unit); ValueError otherwise."""
    m = _DURATION.match(text.strip())
    if not m or int(m.group(1)) <= 0:
        raise ValueError(f"not a duration (want e.g. 15s, 1m): {text!r}")
    return int(m.group(1)) * _SCALE[m.group(2)]


def _dur(seconds: float) -> str:
    """Seconds as a Prometheus duration: 30.0 → ``30s``, 0.5 → ``500ms``."""
    ms = round(seconds * 1000)
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


@dataclass(frozen=True, kw_only=True)
class RuleOptions:
    """What the generated file depends on: the task selector, the evaluation interval (≈ the app's refresh),
    the rate window (≥ 2 scrape intervals) and the thresholds."""

    selector: str = ""  # PromQL matchers on cmdare_task_info, e.g. 'exported_job="resnet"' (no braces)
    interval_s: float = 15.0
    window_s: float = 60.0
    silent_after: int = 3  # failed scrapes before a task is silent (the app's Lifecycle default)
    thresholds: Thresholds = field(default_factory=lambda: DEFAULT_THRESHOLDS)
    engine: Engine = "prometheus"


@dataclass(frozen=True, kw_only=True)
class Rule:
    """One recording (``record``) or alerting (``alert``) rule."""

    name: str
    expr: str
    alert: bool = False
    for_s: float = 0.0
    keep_firing_s: float = 0.0
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)


def _clear_ratio(th: Thresholds) -> float:
    """The straggler band's lower edge: a raised straggler is held down to it (never above the raise ratio)."""
    return min(th.straggler_clear_ratio, th.straggler_ratio)


def raise_after(th: Thresholds, kind: str) -> int:
    """Refreshes a condition must hold before the app raises ``kind`` (its hysteresis)."""
    return th.raise_after_by_kind.get(kind, th.raise_after)


def for_seconds(th: Thresholds, kind: str, interval_s: float) -> float:
    """``for:`` of ``kind``: the app raises on the K-th true refresh, K − 1 intervals after the first."""
    return max(raise_after(th, kind) - 1, 0) * interval_s


def keep_firing_seconds(th: Thresholds, kind: str, interval_s: float) -> float:
    """``keep_firing_for:`` of ``kind``: the app clears on the C-th false refresh (node states at once)."""
    return 0.0 if kind.startswith("node-") else max(th.clear_after - 1, 0) * interval_s


def _re(values: frozenset[str] | set[str]) -> str:
    """An alternation of ``values`` for a PromQL regex matcher (backslashes doubled inside its quotes)."""
    return "|".join(sorted(re.escape(v).replace("\\", "\\\\") for v in values))


_WORKERS = f'role=~"{_re(WORKER_ROLES)}"'
_GPU_OWNER = f'gpu!~"(?i){_re({n for n in NO_GPU_NAMES if n})}|"'


def slow_interval(o: RuleOptions) -> float:
    """The identity's and the graph-only figures' interval: a window, at least the interval, at most 2 min
    (two of their rules read their own last value, which the engine finds only within its 5 min look-back)."""
    return max(o.interval_s, min(o.window_s, 120.0))


def _renamed(expr: str) -> str:
    """``expr`` with the exporter's job as ``cmdare_job`` (``job`` with honor_labels, else ``exported_job``) and
    the task's ``host`` (``instance`` less its port)."""
    return (
        f'label_replace(label_replace(label_replace({expr}, "cmdare_job", "$1", "job", "(.*)"), '
        f'"cmdare_job", "$1", "exported_job", "(.+)"), "host", "$1", "instance", "(.*):[0-9]+")'
    )


def identity_rules(o: RuleOptions) -> list[Rule]:
    """Who each task is (its identity labels, joined to every per-task figure on ``instance``), who it was
    while its scrapes fail, and each job's facts. Evaluated in their own group every window (identity
    changes when a task starts, and a task's rates need a window before they are judged): at 10,000 tasks
    the renaming costs as much as a per-task figure, and it is paid once a window, not once an interval."""
    info = f"{M.TASK_INFO.name}{{{o.selector}}}" if o.selector else M.TASK_INFO.name
    ident = "instance, cmdare_job, task, role, gpu, region, host"
    return [
        Rule(name="cmdare:task_info", expr=f"max by ({ident}) ({_renamed(info)})"),
        Rule(  # a task's identity held while its scrapes fail (the rule reads its own last value)
            name="cmdare:task_info:last_seen",
            expr="cmdare:task_info or (cmdare:task_info:last_seen and on (instance) max by (instance) (up == 0))",
        ),
        Rule(name="cmdare:job_info", expr=f"max by (cmdare_job, sync) ({_renamed(M.JOB_INFO.name)})"),
        Rule(  # the regions a job's GPU workers run in (input-bound is judged in one region only)
            name="cmdare:job_gpu_regions:count",
            expr=f"count by (cmdare_job) (count by (cmdare_job, region) (cmdare:task_info{{{_WORKERS},{_GPU_OWNER}}}))",
        ),
    ]


def recording_rules(o: RuleOptions) -> list[Rule]:
    """The figures the verdicts rest on, evaluated every interval before the alerts: per task (labels
    ``instance``, ``cmdare_job``, ``task``, ``role``, ``gpu``, ``region``, ``host``, joined once from
    ``cmdare:task_info``) and per job (``cmdare_job``)."""
    w = _dur(o.window_s)
    ident = "instance, cmdare_job, task, role, gpu, region, host"
    join = f"* on (instance) group_left ({ident.removeprefix('instance, ')}) cmdare:task_info"
    ps_join = join.replace("cmdare:task_info", 'cmdare:task_info{role="ps"}')
    workers, gpu_owner = _WORKERS, _GPU_OWNER
    host_of = 'label_replace({m}, "host", "$1", "instance", "(.*):[0-9]+")'
    node_cpu = host_of.format(m=f'rate({M.NODE_CPU_SAMPLE}{{mode!="idle"}}[{w}])')
    return [
        Rule(name="cmdare:task_steps:rate", expr=f"sum by (instance) (rate({M.K_WORKER_STEPS}[{w}])) {join}"),
        Rule(
            name="cmdare:task_step_seconds:mean",
            expr=f"(sum by (instance) (rate({M.K_STEP_SECONDS_SUM}[{w}])) / sum by (instance) "
            f"(rate({M.K_STEP_SECONDS_COUNT}[{w}]) > 0)) {join}",
        ),
        Rule(
            name="cmdare:task_allreduce_seconds:mean",
            expr=f"(sum by (instance) (rate({M.K_ALLREDUCE_SECONDS_SUM}[{w}])) / sum by (instance) "
            f"(rate({M.K_ALLREDUCE_SECONDS_COUNT}[{w}]) > 0)) {join}",
        ),
        Rule(  # step seconds × own steps/s: the share of wall time a worker computes; only for a task that ran
            # a whole window before this one (a rate over a series' first window is extrapolated low)
            name="cmdare:task_compute_share:ratio",
            expr=f"cmdare:task_step_seconds:mean{{{workers}}} * on (instance) group_left () cmdare:task_steps:rate "
            f"and on (instance) count_over_time({M.K_WORKER_STEPS}[{w}] offset {w})",
        ),
        Rule(  # DCGM utilisation of the task's host, 0-1 (GPU-owning workers only)
            name="cmdare:task_gpu_busy:ratio",
            expr=f"cmdare:task_info{{{workers},{gpu_owner}}} * on (host) group_left () "
            f"(avg by (host) ({host_of.format(m=M.GPU_UTIL.name)}) / 100)",
        ),
        Rule(  # the busier direction, Gbit/s
            name="cmdare:ps_nic:gbps",
            expr=f"max by (instance) (rate({M.PS_BYTES_SAMPLE}[{w}])) * 8 / 1e9 {ps_join}",
        ),
        Rule(  # busy CPUs ÷ the PS node's vCPUs: node_exporter of the host, else the process's own CPU
            name="cmdare:ps_cpu:ratio",
            expr=f'(cmdare:task_info{{role="ps"}} * on (host) group_left () (sum by (host) '
            f"({node_cpu})) / {PS_SHAPE.vcpus:g}) "
            f"or ((sum by (instance) (rate({M.K_PROCESS_CPU}[{w}])) / {PS_SHAPE.vcpus:g}) {ps_join})",
        ),
        Rule(  # 1 while the cloud says the instance is being preempted (absent otherwise): the notices are
            # picked out before the join, so it costs a look at the series, not a join over every task
            name="cmdare:task_preempted",
            expr=f"max by (instance) ({M.PREEMPTED.name} == 1) {join}",
        ),
        Rule(
            name="cmdare:job_workers:count",
            expr=f"count by (cmdare_job) (cmdare:task_step_seconds:mean{{{workers}}})",
        ),
        Rule(
            name="cmdare:job_worker_step_seconds:median",
            expr=f"quantile by (cmdare_job) (0.5, cmdare:task_step_seconds:mean{{{workers}}})",
        ),
        Rule(  # the candidates only: workers at the straggler band's lower edge or above (the alert reads
            # them twice; a selection of every worker costs as much as the ratio itself at 10,000 tasks)
            name="cmdare:task_step_seconds:peer_ratio",
            expr=f"cmdare:task_step_seconds:mean{{{workers}}} / on (cmdare_job) group_left () "
            f"cmdare:job_worker_step_seconds:median >= {_clear_ratio(o.thresholds):g}",
        ),
        Rule(  # every worker (ps-saturation) and the GPU-owning ones (input-bound)
            name="cmdare:job_compute_share:median",
            expr="quantile by (cmdare_job) (0.5, cmdare:task_compute_share:ratio)",
        ),
        Rule(
            name="cmdare:job_gpu_compute_share:median",
            expr=f"quantile by (cmdare_job) (0.5, cmdare:task_compute_share:ratio{{{gpu_owner}}})",
        ),
        Rule(
            name="cmdare:job_gpu_busy:median",
            expr="quantile by (cmdare_job) (0.5, cmdare:task_gpu_busy:ratio)",
        ),
        Rule(  # exposed all-reduce ÷ (compute + exposed all-reduce), medians over the ranks
            name="cmdare:job_allreduce:share",
            expr="quantile by (cmdare_job) (0.5, cmdare:task_allreduce_seconds:mean) / (quantile by (cmdare_job) "
            f"(0.5, cmdare:task_step_seconds:mean{{{workers}}} and on (instance) cmdare:task_allreduce_seconds:mean)"
            " + quantile by (cmdare_job) (0.5, cmdare:task_allreduce_seconds:mean))",
        ),
        Rule(name="cmdare:job_ps_nic:gbps", expr="max by (cmdare_job) (cmdare:ps_nic:gbps)"),
        Rule(name="cmdare:job_ps_nic:utilization", expr=f"cmdare:job_ps_nic:gbps / {PS_NIC_GBPS:g}"),
        Rule(name="cmdare:job_ps_cpu:ratio", expr="max by (cmdare_job) (cmdare:ps_cpu:ratio)"),
    ]


def _q(metric: str, fmt: str = 'printf "%.2f"') -> str:
    """An annotation fragment reading one job-level figure through the engine's ``query`` template function
    (``not measured`` when the job has none)."""
    return (
        f"{{{{ with printf \"{metric}{{cmdare_job='%s'}}\" $labels.cmdare_job | query }}}}"
        f"{{{{ . | first | value | {fmt} }}}}{{{{ else }}}}not measured{{{{ end }}}}"
    )


def figure_rules(o: RuleOptions) -> list[Rule]:
    """Figures for graphs that no verdict reads (the job's step rate, the 90th percentile of its workers'
    step seconds, the time since a task's last step): their own group, evaluated once a window (a rate
    over a window changes little within it), so they cost no selection of every task each interval."""
    w = _dur(o.window_s)
    ident = "instance, cmdare_job, task, role, gpu, region, host"
    join = f"* on (instance) group_left ({ident.removeprefix('instance, ')}) cmdare:task_info"
    workers = _WORKERS
    return [
        Rule(  # async PS: the sum of the workers' rates; sync all-reduce: the global step's rate
            name="cmdare:job_steps:rate",
            expr=f"(sum by (cmdare_job) (cmdare:task_steps:rate{{{workers}}}) unless on (cmdare_job) "
            f'cmdare:job_info{{sync="sync-allreduce"}}) or (max by (cmdare_job) (deriv({M.GLOBAL_STEP.name}[{w}]) '
            f'{join}) and on (cmdare_job) cmdare:job_info{{sync="sync-allreduce"}})',
        ),
        Rule(
            name="cmdare:job_worker_step_seconds:p90",
            expr=f"quantile by (cmdare_job) (0.9, cmdare:task_step_seconds:mean{{{workers}}})",
        ),
        Rule(  # when the task's step counter last moved (to within an evaluation of this group): this
            # evaluation's time when it moved in the last 1.5 intervals, else the time recorded before (the rule
            # reads its own last value, and the identity from the task's rate: no join, no subquery)
            name="cmdare:task_last_step:time",
            expr=f"(timestamp(cmdare:task_steps:rate) and on (instance) "
            f"changes({M.K_WORKER_STEPS}[{_dur(1.5 * o.interval_s)}]) > 0) or cmdare:task_last_step:time",
        ),
        Rule(name="cmdare:task_seconds_since_step", expr="time() - cmdare:task_last_step:time"),
    ]


def alerting_rules(o: RuleOptions) -> list[Rule]:
    """One alert per verdict the engine judges; labels ``kind`` (the app's verdict) and ``origin``."""
    th, i = o.thresholds, o.interval_s
    ps_busy = (
        f"(cmdare:job_ps_nic:gbps >= {th.ps_traffic_high_gbps:g} or cmdare:job_ps_cpu:ratio >= "
        f"{th.ps_cpu_util_max:g})"
    )
    # workers a straggler is told among: the app's minimum, and one more than the peers an unexplained
    # straggler needs
    min_workers = max(th.straggler_min_workers, 2, th.straggler_min_peers + 1)
    clear_ratio = _clear_ratio(th)

    def alert(name: str, expr: str, severity: str | None, summary: str, fix: str, **ann: str) -> Rule:
        kind = ALERT_KINDS[name]
        # a task is silent after `silent_after` failed scrapes (the app's lifecycle), then flagged at once
        extra = (o.silent_after - 1) * i if kind == "node-silent" else 0.0
        labels = {"kind": kind, "origin": ENGINE_ORIGIN}
        if severity:
            labels["severity"] = severity
        return Rule(
            name=name,
            expr=expr,
            alert=True,
            for_s=for_seconds(th, kind, i) + extra,
            keep_firing_s=keep_firing_seconds(th, kind, i),
            labels=labels,
            annotations={"summary": summary, "fix": fix, **ann},
        )

    return [
        alert(
            "CmdareNodeRevoked",
            'label_replace(cmdare:task_preempted{role=~"ps|chief"} == 1, "severity", "critical", "", "") or '
            'label_replace(cmdare:task_preempted{role!~"ps|chief"} == 1, "severity", "warning", "", "")',
            None,
            "{{ $labels.task }} ({{ with $labels.gpu }}{{ . }}{{ else }}CPU{{ end }}) of {{ $labels.cmdare_job }} revoked: the cloud sent a "
            "preemption notice (cmdare_instance_preempted = 1)",
            "request a replacement node (or let the instance group do so); a PS or chief loss stalls the job",
            evidence="measured: lifecycle: preemption notice",
        ),
        alert(
            "CmdareNodeSilent",
            "(max by (instance) (up == 0) * on (instance) group_left (cmdare_job, task, role, gpu, region, host) "
            "cmdare:task_info:last_seen)",
            "warning",
            "{{ $labels.task }} of {{ $labels.cmdare_job }} does not answer: its scrapes fail "
            f"(up = 0 for ≥ {o.silent_after} scrapes)",
            "check the task's process and host; if the instance was preempted, replace it",
            evidence="measured: lifecycle: scrapes failing",
        ),
        alert(
            "CmdarePsSaturation",
            f"(cmdare:job_compute_share:median < {th.ps_efficiency_max:g} and on (cmdare_job) {ps_busy})"
            f" or (cmdare:job_ps_nic:utilization >= {th.ps_nic_util_max:g})"
            f" or (cmdare:job_ps_cpu:ratio >= {th.ps_cpu_util_max:g})",
            "warning",
            "parameter server saturated (judged from measurements; the app's test against the speed model's "
            "compute-bound rate rests on a model and is left to it): workers compute "
            + _q("cmdare:job_compute_share:median", "humanizePercentage")
            + " of the time (median); the busiest PS moves "
            + _q("cmdare:job_ps_nic:gbps")
            + f" Gbit/s each way (threshold {th.ps_traffic_high_gbps:g} Gbit/s, line rate {PS_NIC_GBPS:g} Gbit/s);"
            + f" PS CPU (share of its {PS_SHAPE.vcpus:g} vCPUs): "
            + _q("cmdare:job_ps_cpu:ratio", "humanizePercentage")
            + "; input starvation is not ruled out",
            "add a parameter server (gain not predictable without the speed model: `cmdare-tui` shows it)",
            evidence=f"thresholds: compute share < {th.ps_efficiency_max:g} with PS traffic ≥ "
            f"{th.ps_traffic_high_gbps:g} Gbit/s or CPU ≥ {th.ps_cpu_util_max:g}; or NIC ≥ "
            f"{th.ps_nic_util_max:g} of line rate; window {_dur(o.window_s)}",
        ),
        alert(
            "CmdareStraggler",
            # raised at the raise ratio, held down to the clear ratio (the app's band): the engine's own ALERTS
            f"(cmdare:task_step_seconds:peer_ratio >= {th.straggler_ratio:g} or (cmdare:task_step_seconds:peer_ratio"
            f' >= {clear_ratio:g} and on (cmdare_job, task) ALERTS{{alertname="CmdareStraggler",alertstate="firing"}}))'
            f" and on (cmdare_job) (cmdare:job_workers:count >= {min_workers})",
            "warning",
            '{{ $labels.task }} steps {{ $value | printf "%.2f" }}× slower than the median of '
            "{{ $labels.cmdare_job }}'s workers (step seconds "
            + _q("cmdare:job_worker_step_seconds:median")
            + f" s median; raised at {th.straggler_ratio:g}×, held until below {clear_ratio:g}×)",
            "replace {{ $labels.task }} (or the node it runs on) with a worker like its peers",
            evidence=f"measured: worker step time (histogram) over {_dur(o.window_s)}; the median includes "
            "the task itself (the app uses its peers' median)",
        ),
        alert(
            "CmdareAllreduceBound",
            f"cmdare:job_allreduce:share >= {th.allreduce_share_max:g} and on (cmdare_job) "
            'cmdare:job_info{sync="sync-allreduce"}',
            "warning",
            "all-reduce takes {{ $value | humanizePercentage }} of each step of {{ $labels.cmdare_job }} "
            f"(exposed, median of the ranks; threshold {th.allreduce_share_max:g}): communication, not compute, "
            "paces training",
            "fewer, larger nodes; gradient compression (fp16); larger buckets; a faster NIC tier "
            "(`cmdare-tui` predicts each from this job's measured split)",
            evidence="measured: compute time per step, exposed all-reduce time per step",
        ),
        alert(
            "CmdareInputBound",
            f"((cmdare:job_gpu_busy:median < {th.gpu_util_max / 100:g}) or (cmdare:job_gpu_compute_share:median < "
            f"{th.busy_share_max:g} unless on (cmdare_job) cmdare:job_gpu_busy:median))"
            f" and on (cmdare_job) (cmdare:job_gpu_regions:count == 1)"
            f" unless on (cmdare_job) {ps_busy}"
            ' unless on (cmdare_job) cmdare:job_info{sync="sync-allreduce"}',
            "warning",
            "{{ $labels.cmdare_job }}: workers busy {{ $value | humanizePercentage }} of the time (DCGM "
            f"utilisation when exported, else step compute share; threshold {th.gpu_util_max:g}% / "
            f"{th.busy_share_max:g}) while the PS was not measured busy",
            "feed the GPUs faster: more input threads, prefetch, cache decoded data",
            evidence="measured: GPU utilisation or step compute share, PS NIC traffic / CPU when exported; "
            "the input pipeline is inferred, not measured",
        ),
    ]


# ------------------------------------------------------------------------------- vmalert variant
_REF = re.compile(r"(?<![\w:])(cmdare:[a-z0-9_:]+)(?:\{([^{}]*)\})?")
_MATCHER = re.compile(r'\s*([A-Za-z_]\w*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*,?')


def inline_recordings(expr: str, rules: list[Rule]) -> str:
    """``expr`` with every recorded series it reads replaced by the recording's own expression, recursively
    (label matchers on a recorded series become MetricsQL's ``label_match`` / ``label_mismatch``).

    For vmalert: it reads a recorded series back through the datasource, so a chain of recordings lags an
    evaluation per link (Prometheus evaluates a group's rules in order at one instant), and VictoriaMetrics
    1.79 answers "no series" for up to ~10 s about a series first written after a query for it was cached.
    A recording that reads its own last value (a memory: the identity of a silent task, the last step's
    time) is read back as it is: it is not fresh by nature."""
    defs = {r.name: r.expr for r in rules if not r.alert}
    memory = {name for name, e in defs.items() if any(m.group(1) == name for m in _REF.finditer(e))}

    def sub(m: re.Match[str]) -> str:
        name, matchers = m.group(1), m.group(2) or ""
        if name not in defs or name in memory:
            return m.group(0)
        body = f"({inline_recordings(defs[name], rules)})"
        for label, op, value in _MATCHER.findall(matchers):
            pattern = value if op in ("=~", "!~") else _re({value})
            fn = "label_match" if op in ("=", "=~") else "label_mismatch"
            body = f'{fn}({body}, "{label}", "{pattern}")'
        return body

    return _REF.sub(sub, expr)


def _engine_alerts(o: RuleOptions) -> list[Rule]:
    """The alerting rules as the engine is to read them: for vmalert, each reads the scraped series itself."""
    alerts = alerting_rules(o)
    if o.engine != "vmalert":
        return alerts
    rules = [*identity_rules(o), *recording_rules(o), *figure_rules(o)]
    return [dataclasses.replace(a, expr=inline_recordings(a.expr, rules)) for a in alerts]


# ----------------------------------------------------------------------------------- rendering
def _s(text: str) -> str:
    """A YAML single-quoted scalar (only ``'`` is escaped, as ``''``: PromQL's double quotes stay readable)."""
    return "'" + text.replace("'", "''") + "'"


def _comment(text: str) -> str:
    """Text for one comment line: whitespace runs made one space, other control characters escaped."""
    text = " ".join(text.split())
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)


def render(o: RuleOptions) -> str:
    """The rule file as YAML text."""
    th = o.thresholds
    head = [
        "# cmdare-tui bottleneck rules (generated by `cmdare-tui rules`; regenerate rather than edit).",
        f"# Evaluation interval {_dur(o.interval_s)} (≈ the app's refresh), rate window {_dur(o.window_s)}"
        f"{', selector {' + _comment(o.selector) + '}' if o.selector else ''}.",
        "# Hysteresis as the app's: for: = (refreshes to raise − 1) × interval; "
        + (
            "keep_firing_for: = (refreshes to clear − 1) × interval."
            if o.engine == "prometheus"
            else "no clear hysteresis (this vmalert variant leaves keep_firing_for out): an alert clears on "
            "the first false evaluation."
        ),
        "# Left to the app (cmdare-tui), with the reason:",
        *(f"#   {kind}: {why}" for kind, why in LEFT_TO_APP.items()),
        f"# Thresholds: {json.dumps(_threshold_summary(th), sort_keys=True)}",
        "groups:",
    ]
    out = list(head)
    # the identity every window; the figures and the verdicts every interval, in one group: its rules run in
    # order at each evaluation, so a verdict reads the figures of the same instant; graph-only figures last
    groups = (
        (IDENTITY_GROUP, slow_interval(o), identity_rules(o)),
        (BOTTLENECK_GROUP, o.interval_s, [*recording_rules(o), *_engine_alerts(o)]),
        (FIGURES_GROUP, slow_interval(o), figure_rules(o)),
    )
    for name, interval, rules in groups:
        out += [f"  - name: {name}", f"    interval: {_dur(interval)}", "    rules:"]
        out += _render_rules(rules, o)
    return "\n".join(out) + "\n"


def _render_rules(rules: list[Rule], o: RuleOptions) -> list[str]:
    """One group's rules as YAML lines."""
    out: list[str] = []
    for r in rules:
        out.append(f"      - {'alert' if r.alert else 'record'}: {r.name}")
        out.append(f"        expr: {_s(r.expr)}")
        if r.alert:
            out.append(f"        for: {_dur(r.for_s)}")
            if r.keep_firing_s and o.engine == "prometheus":
                out.append(f"        keep_firing_for: {_dur(r.keep_firing_s)}")
        for key, mapping in (("labels", r.labels), ("annotations", r.annotations)):
            if mapping:
                out.append(f"        {key}:")
                out += [f"          {k}: {_s(v)}" for k, v in mapping.items()]
    return out


def _threshold_summary(th: Thresholds) -> dict[str, float | int]:
    """The thresholds the generated rules read (so a reader of the file sees them in one place)."""
    keys = ("ps_efficiency_max", "ps_traffic_high_gbps", "ps_nic_util_max", "ps_cpu_util_max", "straggler_ratio",
            "straggler_clear_ratio", "straggler_min_workers", "straggler_min_peers", "allreduce_share_max",
            "gpu_util_max", "busy_share_max", "raise_after", "clear_after")  # fmt: skip
    return {k: getattr(th, k) for k in keys}
