"""The bottleneck rules: small functions ``(AlertContext) -> list[Finding]`` with evidence and fixes.

Kinds (stable, they appear in ``snapshot --json``): ``ps-saturation``, ``wan-bound``, ``straggler``,
``input-bound``, ``node-silent`` / ``node-revoked`` (:func:`cmdare.planner.alerts.node_state_rule`),
``eta-slip`` and ``cost-overrun``. Rules read ``ctx.extras`` (built by :func:`rule_extras` and the
session's ``_plan``):

* ``predicted``: job → :class:`SpeedPrediction` of its current shape; ``model``: the :class:`SpeedModel`;
* ``price_book`` (``node_price`` / ``ps_node_price``), ``overheads`` (:class:`Overheads`);
* ``thresholds`` (:class:`Thresholds`), ``goals``: job → :class:`JobGoal`, ``rate_window_s``;
* ``stages``: job → stage counters per task, ``ps_cpu``: ``job/task`` → busy CPUs (from the store);
* ``link_capacity_gbps``: ``(job, from_stage, to_stage)`` → B_eff when known.

Every finding carries the numbers it used and their window (``window_s``, seconds); a fix names its
predicted effect from the speed model and the price book. Rates are steps/s, prices USD/h.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cmdare.collectors import metrics as M
from cmdare.collectors.pricing.shapes import PS_SHAPE
from cmdare.collectors.store import Store
from cmdare.planner.alerts import AlertContext, Finding, Rule, node_state_rule
from cmdare.planner.geo_model import wan_bound_from_live
from cmdare.planner.gpu_catalog import UnknownGpuError, get_gpu
from cmdare.planner.job_plan import network_of
from cmdare.planner.overheads import Overheads
from cmdare.planner.overview import RATE_WINDOW_S, JobView, NodeView
from cmdare.planner.speed_model import SpeedModel, SpeedPrediction
from cmdare.planner.thresholds import DEFAULT_THRESHOLDS, Thresholds

#: GCP maximum egress data rate: 2 Gbit/s per vCPU (GCP "Network bandwidth" documentation; the same
#: source as ``planner/data/gpus.csv``). The PS node is ``PS_SHAPE`` (n1-standard-8 → 16 Gbit/s).
GBPS_PER_VCPU = 2.0
PS_NIC_GBPS = GBPS_PER_VCPU * PS_SHAPE.vcpus
#: Many parallel TCP connections reach ≈5 Gbit/s on a WAN regardless of distance (Atlas, background.md §2).
ATLAS_MULTI_CONN_GBPS = 5.0
STEP_WINDOW_S = RATE_WINDOW_S * 3  # NodeView.step_seconds is a mean over 3 rate windows (overview.py)


@dataclass(frozen=True)
class JobGoal:
    """What the user asked of a job: a deadline (epoch seconds), a budget (USD), money spent so far."""

    deadline_at: float | None = None
    budget_usd: float | None = None
    spent_usd: float | None = None


@functools.cache
def shipped_overheads() -> Overheads:
    """The shipped CM-DARE overheads (``planner/data/overheads.json``), loaded once."""
    return Overheads.load()


# ----------------------------------------------------------------------------------- shared helpers
def _th(ctx: AlertContext) -> Thresholds:
    return ctx.extras.get("thresholds") or DEFAULT_THRESHOLDS


def _model(ctx: AlertContext) -> SpeedModel:
    return ctx.extras.get("model") or SpeedModel.load()


def _canon(gpu: str) -> str:
    try:
        return get_gpu(gpu).name
    except UnknownGpuError:
        return gpu


def _up_workers(job: JobView) -> list[NodeView]:
    return [n for n in job.workers() if n.status == "up"]


def _window(ctx: AlertContext) -> float:
    return float(ctx.extras.get("rate_window_s", RATE_WINDOW_S))


def _prediction(ctx: AlertContext, job: JobView) -> SpeedPrediction | None:
    return ctx.extras.get("predicted", {}).get(job.name)


def _predict(ctx: AlertContext, job: JobView, gpus: dict[str, int], ps: int) -> SpeedPrediction | None:
    net = network_of(job)
    if net is None or not gpus or ps < 1:
        return None
    try:
        return _model(ctx).predict(net, gpus, ps=ps)
    except (ValueError, KeyError):
        return None


def _up_gpus(job: JobView) -> dict[str, int]:
    return dict(Counter(n.gpu for n in _up_workers(job) if n.gpu))


def _pct(x: float) -> str:
    return f"{x:+.0%}"


def _usd(book: Any, fn: str, *args: str | int) -> float | None:
    """A price from the book, or None when the book is missing or has no price."""
    if book is None:
        return None
    try:
        return float(getattr(book, fn)(*args).usd_per_hour)
    except (KeyError, ValueError):
        return None


def _node_usd(book: Any, n: NodeView) -> float | None:
    if n.role == "ps":
        return _usd(book, "ps_node_price", n.region, n.provisioning or "standard")
    return _usd(book, "node_price", n.gpu, 1, n.region, n.provisioning or "standard")


def _ps_nodes(job: JobView) -> list[NodeView]:
    return [n for n in job.nodes if n.role == "ps" and n.status == "up"]


# ----------------------------------------------------------------------------------- ps-saturation
@dataclass(frozen=True)
class PsLoad:
    """The numbers behind a ps-saturation verdict (rates steps/s, times s, shares 0–1)."""

    steps_per_sec: float
    compute_bound: float
    efficiency: float
    ps_utilization: float
    compute_ratio: float | None
    nic_util: float | None
    nic_gbps: float | None
    cpu_util: float | None


def ps_load(ctx: AlertContext, job: JobView, pred: SpeedPrediction) -> PsLoad | None:
    """Measured vs compute-bound rate (per-worker, with measured step time when slower than predicted),
    the PS busy share implied by the model's PS seconds per step, and PS NIC / CPU load."""
    x, workers = job.steps_per_sec, _up_workers(job)
    if not x or x <= 0 or not workers:
        return None
    bound, ratios = 0.0, []
    for w in workers:
        own = pred.worker_steps_per_sec.get(_canon(w.gpu))
        if not own:
            return None
        cycle = 1.0 / own  # predicted single-worker step time (compute + latency + PS service)
        if w.step_seconds:
            ratios.append(w.step_seconds / cycle)
        bound += 1.0 / max(w.step_seconds or 0.0, cycle)
    ps = _ps_nodes(job)
    nic = [max(n.net_in_bps or 0.0, n.net_out_bps or 0.0) * 8 / 1e9 for n in ps]
    cpus = [ctx.extras.get("ps_cpu", {}).get(f"{job.name}/{n.name}") for n in ps]
    cpus = [c / PS_SHAPE.vcpus for c in cpus if c is not None]
    return PsLoad(
        x,
        bound,
        x / bound,
        x * pred.terms["ps"],
        statistics.median(ratios) if ratios else None,
        max(nic) / PS_NIC_GBPS if nic else None,
        max(nic) if nic else None,
        max(cpus) if cpus else None,
    )


def _more_ps_fix(ctx: AlertContext, job: JobView, load: PsLoad, ps: int) -> tuple[str | None, dict[str, Any]]:
    """'add a parameter server: predicted +70% steps/s, +$0.38/h' (speed model × price book), and the
    best larger PS count when it adds ≥ 10% more per server."""
    gpus = _up_gpus(job)
    base = _predict(ctx, job, gpus, ps)
    if base is None:
        return None, {}
    gains: dict[int, float] = {}
    for k in range(ps + 1, max(_th(ctx).ps_max_suggested, ps + 1) + 1):
        p = _predict(ctx, job, gpus, k)
        if p is None:
            break
        gains[k] = p.steps_per_sec / base.steps_per_sec - 1
    if not gains or gains[ps + 1] <= 0.05:
        return None, {}
    region = next((n.region for n in _ps_nodes(job)), "") or next((n.region for n in _up_workers(job)), "")
    usd = _usd(ctx.extras.get("price_book"), "ps_node_price", region)
    money = (lambda add: f", +${usd * add:.2f}/h") if usd is not None else (lambda add: "")
    g1 = gains[ps + 1]
    fix = f"add a parameter server: predicted {_pct(g1)} steps/s (≈{load.steps_per_sec * (1 + g1):.0f}){money(1)}"
    best = max(gains, key=lambda k: gains[k])
    if best > ps + 1 and gains[best] > g1 * 1.1:
        fix += f"; {best - ps} more: {_pct(gains[best])}{money(best - ps)}"
    evidence = {
        "fix_ps": ps + 1,
        "fix_predicted_gain": round(g1, 3),
        "fix_usd_per_hour": usd and round(usd, 3),
        "fix_best_ps": best,
        "fix_best_gain": round(gains[best], 3),
    }
    return fix, evidence


def ps_saturation_rule(ctx: AlertContext) -> list[Finding]:
    """Cluster well below its compute-bound rate while workers compute at normal speed and the PS is
    busy, and/or the PS NIC near line rate or its CPU pegged."""
    th, out = _th(ctx), []
    for job in ctx.jobs:
        pred, ps = _prediction(ctx, job), _ps_nodes(job)
        if pred is None or not ps:
            continue
        load = ps_load(ctx, job, pred)
        if load is None:
            continue
        normal = load.compute_ratio is None or load.compute_ratio <= th.compute_normal_max
        slow = (
            load.efficiency < th.ps_efficiency_max and load.ps_utilization >= th.ps_utilization_min and normal
        )
        nic = load.nic_util is not None and load.nic_util >= th.ps_nic_util_max
        cpu = load.cpu_util is not None and load.cpu_util >= th.ps_cpu_util_max
        if not (slow or nic or cpu):
            continue
        n = len(_up_workers(job))
        why = [
            f"{load.steps_per_sec:.1f} steps/s = {load.efficiency:.0%} of the {load.compute_bound:.0f} "
            f"its {n} workers could do; PS ≈{min(load.ps_utilization, 1):.0%} busy"
        ]
        if nic:
            why.append(f"PS NIC {load.nic_gbps:.1f}/{PS_NIC_GBPS:.0f} Gbit/s")
        if cpu:
            why.append(f"PS CPU {load.cpu_util:.0%}")
        evidence = {
            "window_s": _window(ctx),
            "steps_per_sec": round(load.steps_per_sec, 2),
            "compute_bound_steps_per_sec": round(load.compute_bound, 2),
            "efficiency": round(load.efficiency, 3),
            "ps_utilization": round(load.ps_utilization, 3),
            "ps_seconds_per_step": round(pred.terms["ps"], 5),
            "worker_step_time_ratio": load.compute_ratio and round(load.compute_ratio, 3),
            "step_window_s": STEP_WINDOW_S,
            "ps_nic_gbps": load.nic_gbps and round(load.nic_gbps, 3),
            "ps_nic_capacity_gbps": PS_NIC_GBPS,
            "ps_cpu_util": load.cpu_util,
            "ps": len(ps),
            "workers_up": n,
            "predicted_steps_per_sec": round(pred.steps_per_sec, 2),
        }
        fix, fx = _more_ps_fix(ctx, job, load, len(ps))
        evidence.update(fx)
        subject = f"{job.name}/{ps[0].name}" if len(ps) == 1 else job.name
        out.append(
            Finding(
                "ps-saturation",
                subject,
                "warning",
                "parameter server saturated: " + "; ".join(why),
                evidence,
                fix,
            )
        )
    return out


# ----------------------------------------------------------------------------------- straggler
def _majority(values: Sequence[str]) -> str:
    return Counter(values).most_common(1)[0][0] if values else ""


def _straggler_cause(ctx: AlertContext, job: JobView, w: NodeView, peers: list[NodeView]) -> tuple[str, str]:
    """(cause, words): slower-gpu | other-region | unexplained."""
    gpu, region = _majority([p.gpu for p in peers]), _majority([p.region for p in peers])
    if w.gpu and gpu and _canon(w.gpu) != _canon(gpu):
        pred = _prediction(ctx, job)
        rates = pred.worker_steps_per_sec if pred else {}
        mine, theirs = rates.get(_canon(w.gpu)), rates.get(_canon(gpu))
        if mine and theirs and mine < theirs:
            return (
                "slower-gpu",
                f"a slower GPU type ({w.gpu} vs {gpu}: predicted {theirs / mine:.1f}× slower)",
            )
        return "slower-gpu", f"a different GPU type ({w.gpu} vs {gpu})"
    if w.region and region and w.region != region:
        return (
            "other-region",
            f"in another region ({w.region} vs {region}: every PS round trip crosses regions)",
        )
    return "unexplained", "unexplained (same GPU type and region as its peers)"


def straggler_rule(ctx: AlertContext) -> list[Finding]:
    """A worker whose step time is ≥ ratio × the median of its peers'."""
    th, out = _th(ctx), []
    book = ctx.extras.get("price_book")
    for job in ctx.jobs:
        workers = [w for w in _up_workers(job) if w.step_seconds]
        if len(workers) < max(th.straggler_min_workers, 2):
            continue
        for w in workers:
            peers = [p for p in workers if p is not w]
            med = statistics.median(p.step_seconds for p in peers)  # type: ignore[misc]
            ratio = w.step_seconds / med  # type: ignore[operator]
            if ratio < th.straggler_ratio:
                continue
            cause, words = _straggler_cause(ctx, job, w, peers)
            own = w.steps_per_sec or 1.0 / w.step_seconds  # type: ignore[operator]
            gain = own * (ratio - 1) / job.steps_per_sec if job.steps_per_sec else None
            gpu, region = _majority([p.gpu for p in peers]), _majority([p.region for p in peers])
            fix = f"replace {w.name} with a {gpu} worker in {region}"
            if gain is not None:
                fix += f": predicted up to {_pct(gain)} steps/s"
            a = _node_usd(book, w)
            b = _usd(book, "node_price", gpu, 1, region, w.provisioning or "standard")
            if a is not None and b is not None and abs(b - a) > 0.005:
                fix += f", {b - a:+.2f} $/h"
            evidence = {
                "step_seconds": round(w.step_seconds, 4),
                "peer_median_step_seconds": round(med, 4),  # type: ignore[arg-type]
                "ratio": round(ratio, 3),
                "window_s": STEP_WINDOW_S,
                "cause": cause,
                "gpu": w.gpu,
                "region": w.region,
                "peer_gpu": gpu,
                "peer_region": region,
                "peers": len(peers),
            }
            out.append(
                Finding(
                    "straggler",
                    f"{job.name}/{w.name}",
                    "warning",
                    f"{w.name} steps {ratio:.2f}× slower than its peers' median: {words}",
                    evidence,
                    fix,
                )
            )
    return out


# ----------------------------------------------------------------------------------- input-bound
def _busy_share(ctx: AlertContext, w: NodeView, pred: SpeedPrediction | None) -> float | None:
    """Share of wall time the GPU computes: DCGM util, else step seconds × own steps/s."""
    if w.gpu_util is not None:
        return w.gpu_util / 100.0
    if w.step_seconds and w.steps_per_sec:
        return w.step_seconds * w.steps_per_sec
    own = pred.worker_steps_per_sec.get(_canon(w.gpu)) if pred else None
    return w.steps_per_sec / own if own and w.steps_per_sec else None


def input_bound_rule(ctx: AlertContext) -> list[Finding]:
    """GPUs busy well below capacity while neither the PS nor the network is the cause."""
    th, out = _th(ctx), []
    for job in ctx.jobs:
        pred, workers = _prediction(ctx, job), _up_workers(job)
        shares = [s for w in workers if (s := _busy_share(ctx, w, pred)) is not None]
        if not shares or len({w.region for w in workers}) > 1:  # cross-region: the network may be the cause
            continue
        share = statistics.median(shares)
        dcgm = any(w.gpu_util is not None for w in workers)
        if share >= (th.gpu_util_max / 100.0 if dcgm else th.busy_share_max):
            continue
        load = ps_load(ctx, job, pred) if pred else None
        if load is not None and (
            load.ps_utilization >= th.ps_utilization_min
            or (load.nic_util or 0) >= th.ps_nic_util_max
            or (load.cpu_util or 0) >= th.ps_cpu_util_max
        ):
            continue  # the PS is busy: that is ps-saturation's call
        what = "GPU utilisation (DCGM)" if dcgm else "step compute share"
        evidence = {
            "busy_share": round(share, 3),
            "signal": what,
            "workers": len(shares),
            "window_s": STEP_WINDOW_S,
            "ps_utilization": load and round(load.ps_utilization, 3),
            "steps_per_sec": job.steps_per_sec,
        }
        fix = None
        if pred and job.steps_per_sec:
            gain = pred.steps_per_sec / job.steps_per_sec - 1
            if gain > 0.05:
                fix = (
                    f"feed the GPUs faster (more input threads, prefetch, cache decoded data): predicted "
                    f"{_pct(gain)} steps/s (≈{pred.steps_per_sec:.0f}) when the input keeps up"
                )
                evidence["predicted_steps_per_sec"] = round(pred.steps_per_sec, 2)
        out.append(
            Finding(
                "input-bound",
                job.name,
                "warning",
                f"GPUs busy {share:.0%} of the time ({what}) while the PS and network are not the cause",
                evidence,
                fix,
            )
        )
    return out


# ----------------------------------------------------------------------------------- wan-bound
@dataclass(frozen=True)
class StageRates:
    """Per-second rates of one pipeline-stage task over the rate window."""

    task: str
    stage: str
    dc: str
    compute: float  # seconds computing per second
    wait: float  # seconds waiting for peers per second
    microbatches: float  # micro-batches per second
    sent: dict[str, float]  # peer → bytes per second


def stage_rates(store: Store, window_s: float = RATE_WINDOW_S) -> dict[str, list[StageRates]]:
    """Stage counters of every job in the store (tasks without stage counters are left out)."""
    out: dict[str, list[StageRates]] = {}
    for ts in store.tasks.values():
        mb = ts.rate(M.K_STAGE_MICROBATCHES, window_s)
        if mb is None:
            continue
        sent = {
            k[len(M.K_STAGE_BYTES_PREFIX) : -1]: r
            for k in ts.values
            if k.startswith(M.K_STAGE_BYTES_PREFIX) and (r := ts.rate(k, window_s)) is not None
        }
        i = ts.info
        out.setdefault(i.job, []).append(
            StageRates(
                i.task,
                i.stage or i.task,
                i.dc,
                ts.rate(M.K_STAGE_COMPUTE, window_s) or 0.0,
                ts.rate(M.K_STAGE_WAIT, window_s) or 0.0,
                mb,
                sent,
            )
        )
    return out


def _order(stage: str) -> tuple[int, str]:
    return (int(stage), "") if stage.isdigit() else (1 << 30, stage)


def _pipeline(
    stages: list[StageRates],
) -> tuple[dict[str, float], dict[str, float], dict[tuple[str, str], float]]:
    """(compute s per micro-batch by stage, wait share by stage, forward WAN bytes/s by boundary)."""
    by_stage: dict[str, list[StageRates]] = {}
    for s in stages:
        by_stage.setdefault(s.stage, []).append(s)
    compute = {
        k: sum(s.compute for s in v) / mb
        for k, v in by_stage.items()
        if (mb := sum(s.microbatches for s in v)) > 0
    }
    wait = {
        k: sum(s.wait for s in v) / max(sum(s.wait + s.compute for s in v), 1e-12)
        for k, v in by_stage.items()
    }
    task_stage = {s.task: s.stage for s in stages}
    dc = {s.stage: s.dc for s in stages}
    sent: dict[tuple[str, str], float] = {}
    for s in stages:
        for peer, r in s.sent.items():
            dst = task_stage.get(peer, peer)
            # A WAN boundary joins two DCs; gradients flow back on the other direction of the same
            # full-duplex link, so the forward direction (lower stage -> higher) decides.
            if dc.get(dst, s.dc) != s.dc and _order(s.stage) < _order(dst):
                sent[(s.stage, dst)] = sent.get((s.stage, dst), 0.0) + r
    return compute, wait, sent


def wan_bound_rule(ctx: AlertContext) -> list[Finding]:
    """A WAN stage boundary whose transfer time per micro-batch exceeds the slowest stage's compute.

    With the link's capacity known (``link_capacity_gbps``: DC pair → Gbit/s) the transfer time is
    bytes ÷ capacity; unknown, it is bounded by the measured period and the receiver's wait share
    decides, and a single such WAN link is named by elimination (several: the job is flagged)."""
    th, out = _th(ctx), []
    caps_by_dc = ctx.extras.get("link_capacity_gbps", {})
    for job, stages in ctx.extras.get("stages", {}).items():
        compute, wait, sent = _pipeline(stages)
        per_pipe = statistics.median(s.microbatches for s in stages) if stages else 0.0
        dc = {s.stage: s.dc for s in stages}
        caps = {k: c for k in sent if (c := caps_by_dc.get(frozenset((dc[k[0]], dc[k[1]])))) is not None}
        verdicts = [
            v
            for v in wan_bound_from_live(compute, sent, per_pipe, wait, caps, th.wan_wait_share_min)
            if v.wan_bound
        ]
        known = [v for v in verdicts if (v.from_stage, v.to_stage) in caps]
        unknown = [v for v in verdicts if (v.from_stage, v.to_stage) not in caps]
        if known or len(unknown) == 1:
            out += [
                _wan_finding(ctx, job, v, dc, (v.from_stage, v.to_stage) in caps) for v in known or unknown
            ]
        elif unknown:
            links = ", ".join(f"{v.from_stage}->{v.to_stage}" for v in unknown)
            out.append(
                Finding(
                    "wan-bound",
                    job,
                    "warning",
                    f"pipeline paced by a WAN link, capacity unknown: one of {links}",
                    {"window_s": _window(ctx), "links": links},
                    None,
                )
            )
    return out


def _wan_finding(ctx: AlertContext, job: str, v: Any, dc: dict[str, str], known: bool) -> Finding:
    cmax = v.max_stage_compute_seconds
    evidence = {
        "window_s": ctx.extras.get("stage_window_s", STEP_WINDOW_S), "transfer_seconds_per_microbatch": round(v.transfer_seconds, 4),
        "max_stage_compute_seconds": round(cmax, 4), "measured_gbps": round(v.measured_gbps, 3),
        "bytes_per_microbatch": round(v.bytes_per_microbatch), "receiver_wait_share": v.wait_share
        and round(v.wait_share, 3), "from_dc": dc.get(v.from_stage, ""), "to_dc": dc.get(v.to_stage, ""),
        "capacity_known": known,
    }  # fmt: skip
    link_gbps = v.bytes_per_microbatch * 8 / v.transfer_seconds / 1e9 if v.transfer_seconds > 0 else 0.0
    fix = None
    if link_gbps < ATLAS_MULTI_CONN_GBPS:
        t_new = v.transfer_seconds * link_gbps / ATLAS_MULTI_CONN_GBPS
        gain = v.transfer_seconds / max(cmax, t_new) - 1
        fix = (
            f"open parallel TCP connections on this link (Atlas: ≈{ATLAS_MULTI_CONN_GBPS:.0f} Gbit/s) or share "
            f"it in turn: predicted {_pct(gain)} micro-batches/s"
        )
        evidence["fix_predicted_gain"] = round(gain, 3)
    where = f"{dc.get(v.from_stage, '?')}→{dc.get(v.to_stage, '?')}"
    return Finding(
        "wan-bound",
        f"{job}/{v.from_stage}->{v.to_stage}",
        "warning",
        f"stage {v.from_stage}→{v.to_stage} ({where}) needs {v.transfer_seconds * 1e3:.0f} ms per "
        f"micro-batch on the wire > slowest stage compute {cmax * 1e3:.0f} ms",
        evidence,
        fix,
    )


# ----------------------------------------------------------------------------------- eta-slip / cost-overrun
def _burn_usd_per_hour(book: Any, job: JobView) -> float | None:
    prices = [_node_usd(book, n) for n in job.nodes if n.status == "up"]
    return None if not prices or any(p is None for p in prices) else float(sum(prices))  # type: ignore[arg-type]


def _faster_shape_fix(ctx: AlertContext, job: JobView, need: float) -> str | None:
    """The cheapest extra (workers of the main GPU, PS) predicted to reach ``need`` steps/s."""
    gpus, ps = _up_gpus(job), len(_ps_nodes(job))
    base = _predict(ctx, job, gpus, max(ps, 1))
    if not gpus or base is None or not job.steps_per_sec:
        return None
    main = max(gpus, key=lambda g: gpus[g])
    ref = next(n for n in _up_workers(job) if n.gpu == main)
    book = ctx.extras.get("price_book")
    w_usd = _usd(book, "node_price", main, 1, ref.region, ref.provisioning or "standard") or 1.0
    p_usd = _usd(book, "ps_node_price", ref.region) or 1.0
    best = None
    for add_w in range(0, 2 * sum(gpus.values()) + 1):
        for add_ps in range(0, _th(ctx).ps_max_suggested - max(ps, 1) + 1):
            p = _predict(ctx, job, {**gpus, main: gpus[main] + add_w}, max(ps, 1) + add_ps)
            if p is None or job.steps_per_sec * p.steps_per_sec / base.steps_per_sec < need:
                continue
            usd = add_w * w_usd + add_ps * p_usd
            if best is None or usd < best[0]:
                best = (usd, add_w, add_ps, p.steps_per_sec / base.steps_per_sec - 1)
    if best is None:
        return None
    usd, add_w, add_ps, gain = best
    parts = [f"{add_w} {main} worker(s)"] * bool(add_w) + [f"{add_ps} PS"] * bool(add_ps)
    money = f", +${usd:.2f}/h" if book is not None else ""
    return f"add {' and '.join(parts)}: predicted {_pct(gain)} steps/s{money}" if parts else None


def eta_slip_rule(ctx: AlertContext) -> list[Finding]:
    """The projected finish (now + ETA at the measured speed) passes the user's deadline."""
    th, out = _th(ctx), []
    for job in ctx.jobs:
        goal = ctx.extras.get("goals", {}).get(job.name)
        if goal is None or goal.deadline_at is None or job.eta_seconds is None:
            continue
        left = goal.deadline_at - ctx.now
        late = ctx.now + job.eta_seconds - goal.deadline_at
        if late <= th.eta_slip_margin * max(left, 0.0):
            continue
        sev = "critical" if left <= 0 or late > th.critical_overrun * max(left, 1.0) else "warning"
        remaining = job.eta_seconds * (job.steps_per_sec or 0.0)
        need = remaining / left if left > 0 else math.inf
        fix = _faster_shape_fix(ctx, job, need) if math.isfinite(need) else None
        evidence = {
            "eta_s": round(job.eta_seconds),
            "deadline_in_s": round(left),
            "late_s": round(late),
            "steps_per_sec": job.steps_per_sec,
            "needed_steps_per_sec": round(need, 2) if math.isfinite(need) else None,
            "window_s": _window(ctx),
        }
        out.append(
            Finding(
                "eta-slip",
                job.name,
                sev,
                f"at {job.steps_per_sec or 0:.1f} steps/s the job finishes "
                f"{late / 3600:.1f} h after its deadline",
                evidence,
                fix,
            )
        )
    return out


def cost_overrun_rule(ctx: AlertContext) -> list[Finding]:
    """Spent so far + the up nodes' $/h × ETA passes the user's budget."""
    th, out = _th(ctx), []
    book = ctx.extras.get("price_book")
    for job in ctx.jobs:
        goal = ctx.extras.get("goals", {}).get(job.name)
        if goal is None or goal.budget_usd is None or job.eta_seconds is None:
            continue
        burn = _burn_usd_per_hour(book, job)
        if burn is None:
            continue
        spent = goal.spent_usd
        if spent is None:  # lower bound: the current lifetimes of the nodes that are up
            spent = sum(
                (_node_usd(book, n) or 0.0) * (n.uptime_s or 0.0) / 3600
                for n in job.nodes
                if n.status == "up"
            )
        projected = spent + burn * job.eta_seconds / 3600
        over = projected - goal.budget_usd
        if over <= th.cost_overrun_margin * goal.budget_usd:
            continue
        sev = "critical" if over > th.critical_overrun * goal.budget_usd else "warning"
        evidence = {
            "projected_usd": round(projected, 2),
            "budget_usd": goal.budget_usd,
            "spent_usd": round(spent, 2),
            "burn_usd_per_hour": round(burn, 3),
            "eta_s": round(job.eta_seconds),
            "window_s": _window(ctx),
        }
        out.append(
            Finding(
                "cost-overrun",
                job.name,
                sev,
                f"projected ${projected:.2f} exceeds the budget "
                f"${goal.budget_usd:.2f} (burning ${burn:.2f}/h, {job.eta_seconds / 3600:.1f} h left)",
                evidence,
                None,
            )
        )
    return out


# ----------------------------------------------------------------------------------- wiring
DEFAULT_RULES: tuple[Rule, ...] = (
    node_state_rule,
    ps_saturation_rule,
    straggler_rule,
    input_bound_rule,
    wan_bound_rule,
    eta_slip_rule,
    cost_overrun_rule,
)


def rule_extras(store: Store, jobs: Sequence[JobView], window_s: float = RATE_WINDOW_S) -> dict[str, Any]:
    """What the rules need from the store beyond the job views: stage counters and PS CPU load."""
    ps_cpu: dict[str, float] = {}
    for key, ts in store.tasks.items():
        if ts.info.role != "ps":
            continue
        busy = ts.rate(M.K_CPU_BUSY, window_s)
        if busy is None:
            busy = ts.rate(M.K_PROCESS_CPU, window_s)
        if busy is not None:
            ps_cpu[key] = busy
    # Pipelines tick once per micro-batch (seconds each): their counters use the longer step window.
    stage_window = max(window_s, STEP_WINDOW_S)
    return {
        "stages": stage_rates(store, stage_window),
        "stage_window_s": stage_window,
        "ps_cpu": ps_cpu,
        "rate_window_s": window_s,
    }
