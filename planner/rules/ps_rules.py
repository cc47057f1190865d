"""The ps-saturation rule: the parameter server, not the workers, paces the cluster.

With model facts (``cmdare_job_info``), :func:`ps_load` compares the measured rate with what the workers
could do (steps/s) and adds the PS busy share and NIC / CPU load. Without them, the verdict rests on
measurements only: the workers' compute share (step seconds × own steps/s, or DCGM) against the busiest
PS's traffic and CPU (:func:`measured_only_finding`). Every finding names what it measured
(``evidence["measured"]``), the model terms it used and what it could not measure; the fix names the
predicted gain of more PS nodes with its band, or says the gain is uncertain.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from cmdare.collectors.observed import STEP_WINDOW_S, JobView, NodeView
from cmdare.collectors.pricing.shapes import PS_SHAPE
from cmdare.planner.live.outlook import network_of
from cmdare.planner.rules.alerts import AlertContext, Finding
from cmdare.planner.rules.rule_support import (
    PredictedGain,
    basis,
    columns_of,
    current_prediction,
    predict_shape,
    price_usd_per_hour,
    ps_traffic_gbps,
    rate_window_s,
    signed_pct,
    speed_model_of,
    thresholds_of,
    up_gpu_counts,
)
from cmdare.planner.rules.worker_columns import compute_shares_of, given, median_of
from cmdare.planner.speed.speed_model import SpeedModel, SpeedPrediction

#: GCP maximum egress data rate: 2 Gbit/s per vCPU (GCP "Network bandwidth" documentation; the same
#: source as ``planner/data/gpus.csv``). The PS node is ``PS_SHAPE`` (n1-standard-8 → 16 Gbit/s).
GBPS_PER_VCPU = 2.0
PS_NIC_GBPS = GBPS_PER_VCPU * PS_SHAPE.vcpus


@dataclass(frozen=True, kw_only=True)
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
    x, cols = job.steps_per_sec, columns_of(ctx, job)
    at = np.flatnonzero(cols.up_worker)  # the up workers, in the nodes' order
    if not x or x <= 0 or not len(at):
        return None
    own = cols.own_rates(pred)[cols.gpu[at]]
    if not given(own).all():  # a worker whose GPU the model does not rate
        return None
    cycle = 1.0 / own  # predicted single-worker step time (compute + latency + PS service)
    step = cols.step[at]
    timed = given(step)
    ratios = step[timed] / cycle[timed]
    # summed in the workers' order, one after another (cumsum: as a loop adds, not pairwise)
    bound = float(np.cumsum(1.0 / np.maximum(np.where(timed, step, 0.0), cycle))[-1])
    ps = cols.up_ps_nodes()
    nic = [max(n.net_in_bps or 0.0, n.net_out_bps or 0.0) * 8 / 1e9 for n in ps]
    busy = [ctx.inputs.ps_cpu.get(f"{job.name}/{n.name}") for n in ps]
    cpus = [c / PS_SHAPE.vcpus for c in busy if c is not None]
    return PsLoad(
        steps_per_sec=x,
        compute_bound=bound,
        efficiency=x / bound,
        ps_utilization=x * pred.terms["ps"],
        compute_ratio=median_of(ratios) if len(ratios) else None,
        nic_util=max(nic) / PS_NIC_GBPS if nic else None,
        nic_gbps=max(nic) if nic else None,
        cpu_util=max(cpus) if cpus else None,
    )


def _ps_gains(ctx: AlertContext, job: JobView, ps: int) -> dict[int, PredictedGain]:
    """PS count → predicted relative gain over ``ps`` (speed model), for ps+1 .. ps_max_suggested. When
    the model's prediction carries a P10–P90 band (``steps_per_sec_p10`` / ``_p90``), the gain does too;
    without one, the model's known 2-PS error is attached instead."""
    th = thresholds_of(ctx)
    gpus = up_gpu_counts(job, columns_of(ctx, job))
    base = predict_shape(ctx, job, gpus, ps)
    gains: dict[int, PredictedGain] = {}
    if base is None:
        return gains
    caveat = (f"2-PS predictions were off by ~{th.known_2ps_error:.0%} on held-out data, up to 2× too high "
              "on large networks")  # fmt: skip
    for k in range(ps + 1, max(th.ps_max_suggested, ps + 1) + 1):
        p = predict_shape(ctx, job, gpus, k)
        if p is None:
            break
        band = _gain_band(ctx, job, gpus, ps, k) or _prediction_band(p, base.steps_per_sec)
        gains[k] = PredictedGain(p.steps_per_sec / base.steps_per_sec - 1, *band, th.known_2ps_error, caveat)
    return gains


def _gain_band(
    ctx: AlertContext, job: JobView, gpus: dict[str, int], ps: int, k: int
) -> tuple[float, float] | None:
    """(P10, P90) relative gain of ``ps`` → ``k`` servers from the speed model's band API
    (:func:`cmdare.planner.speed.speed_band.ps_gain_band`), or None without a speed model or a network."""
    from cmdare.planner.speed.speed_band import ps_gain_band  # loaded when a rule first asks

    model, net = speed_model_of(ctx), network_of(job)
    if net is None or not isinstance(model, SpeedModel):
        return None
    try:
        g = ps_gain_band(model, net, gpus, ps, k)
    except (ValueError, KeyError):
        return None
    return g.p10, g.p90


def _prediction_band(p: Any, base: float) -> tuple[float | None, float | None]:
    """(P10, P90) relative to ``base`` from a prediction carrying ``steps_per_sec_p10/_p90``, else none."""
    lo, hi = getattr(p, "steps_per_sec_p10", None), getattr(p, "steps_per_sec_p90", None)
    return (lo / base - 1, hi / base - 1) if lo and hi else (None, None)


def _more_ps_fix(ctx: AlertContext, job: JobView, load: PsLoad, ps: int) -> tuple[str | None, dict[str, Any]]:
    """'add a parameter server: predicted +70% steps/s (band: n/a until calibrated; ...), +$0.38/h'
    (speed model × price book). With no band yet, a gain within the model's known 2-PS error is said to
    be uncertain; PS counts beyond the measured ones are marked as extrapolated."""
    th = thresholds_of(ctx)
    gains = _ps_gains(ctx, job, ps)
    if not gains or gains[ps + 1].point <= 0.05:
        return None, {}
    cols = columns_of(ctx, job)
    region = next((n.region for n in cols.up_ps_nodes()), "") or next(
        (cols.labels[cols.region[i]] for i in np.flatnonzero(cols.up_worker)[:1]), ""
    )
    usd = price_usd_per_hour(ctx.inputs.price_book, "ps_node_price", region)

    def money(add: int) -> str:
        return f", +${usd * add:.2f}/h" if usd is not None else ""

    gain = gains[ps + 1]
    extrapolated = ps + 1 > th.ps_measured_max
    fix = f"add a parameter server: {gain.words()}{money(1)}"
    if extrapolated:
        fix += f" (beyond the {th.ps_measured_max} PS ever measured: extrapolated)"
    best = max(gains, key=lambda k: gains[k].point)
    if best > ps + 1 and gains[best].point > gain.point * 1.1:
        fix += f"; {best - ps} more: {signed_pct(gains[best].point)}{money(best - ps)}"
        if best > th.ps_measured_max:
            fix += f" (extrapolated beyond {th.ps_measured_max} PS)"
    evidence = {
        "fix_ps": ps + 1,
        **gain.to_evidence(),
        "fix_usd_per_hour": usd and round(usd, 3),
        "fix_best_ps": best,
        "fix_best_gain": round(gains[best].point, 3),
        "fix_extrapolated": extrapolated or best > th.ps_measured_max,
    }
    return fix, evidence


def _measured_names(load: PsLoad, nic: float | None, cpu: float | None) -> tuple[list[str], list[str]]:
    """(measured, not measured) names of the ps-saturation inputs."""
    measured: list[str] = ["cluster steps/s"]
    missing: list[str] = []
    (measured if load.compute_ratio is not None else missing).append("worker step time")
    (measured if nic is not None else missing).append("PS NIC traffic")
    (measured if cpu is not None else missing).append("PS CPU")
    return measured, missing


def _model_finding(ctx: AlertContext, job: JobView, pred: SpeedPrediction, load: PsLoad) -> Finding | None:
    """The verdict against the speed model's compute-bound rate (model facts known)."""
    th, cols = thresholds_of(ctx), columns_of(ctx, job)
    ps = cols.up_ps_nodes()
    normal = load.compute_ratio is None or load.compute_ratio <= th.compute_normal_max
    slow = load.efficiency < th.ps_efficiency_max and load.ps_utilization >= th.ps_utilization_min and normal
    nic = load.nic_util is not None and load.nic_util >= th.ps_nic_util_max
    cpu = load.cpu_util is not None and load.cpu_util >= th.ps_cpu_util_max
    if not (slow or nic or cpu):
        return None
    n = int(np.count_nonzero(cols.up_worker))
    why = [
        f"{load.steps_per_sec:.1f} steps/s = {load.efficiency:.0%} of the {load.compute_bound:.0f} "
        f"its {n} workers could do (speed model); PS ≈{min(load.ps_utilization, 1):.0%} busy"
    ]
    if load.nic_gbps is not None:
        why.append(f"PS NIC {load.nic_gbps:.1f}/{PS_NIC_GBPS:.0f} Gbit/s")
    if cpu:
        why.append(f"PS CPU {load.cpu_util:.0%}")
    measured, missing = _measured_names(load, load.nic_gbps, load.cpu_util)
    evidence = {
        **basis(measured, ["compute-bound rate", "PS seconds per step"], missing),
        "window_s": rate_window_s(ctx),
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
    return Finding(
        kind="ps-saturation",
        subject=_subject(job, ps),
        severity="warning",
        message="parameter server saturated: " + "; ".join(why),
        evidence=evidence,
        fix=fix,
    )


def _subject(job: JobView, ps: list[NodeView]) -> str:
    return f"{job.name}/{ps[0].name}" if len(ps) == 1 else job.name


def median_compute_share(
    ctx: AlertContext, job: JobView, pred: SpeedPrediction | None = None
) -> tuple[float | None, str, int]:
    """(median compute share of the up workers, its signal, how many workers gave one)."""
    cols = columns_of(ctx, job)
    shares, signal, _ = compute_shares_of(cols, cols.up_worker, pred)
    return (median_of(shares) if len(shares) else None), signal, len(shares)


def _no_model_reason(job: JobView) -> str:
    """Why the verdict has no speed model: no model facts, or a shape the model cannot predict."""
    if network_of(job) is None:
        return "no model facts: the job exports no cmdare_job_info"
    return "the speed model cannot predict this shape: a GPU type unknown to it"


def measured_only_finding(ctx: AlertContext, job: JobView) -> Finding | None:
    """No model facts: workers waiting (compute share < ``ps_efficiency_max``) while the busiest PS moves
    ≥ ``ps_traffic_high_gbps`` each way or its CPU is pegged. Input starvation is not ruled out then:
    both causes are named."""
    th = thresholds_of(ctx)
    share, signal, count = median_compute_share(ctx, job)
    ps = columns_of(ctx, job).up_ps_nodes()
    traffic = ps_traffic_gbps(job, ps)
    cpus = [ctx.inputs.ps_cpu.get(f"{job.name}/{n.name}") for n in ps]
    cpu = max((c / PS_SHAPE.vcpus for c in cpus if c is not None), default=None)
    if share is None or share >= th.ps_efficiency_max:
        return None
    busy_net = traffic is not None and traffic >= th.ps_traffic_high_gbps
    busy_cpu = cpu is not None and cpu >= th.ps_cpu_util_max
    if not (busy_net or busy_cpu):
        return None
    why = [f"workers compute {share:.0%} of the time ({signal})"]
    if traffic is not None:
        why.append(f"the PS moves {traffic:.1f} Gbit/s each way (≥ {th.ps_traffic_high_gbps:.1f}, where one "
                   "CM-DARE PS plateaued)")  # fmt: skip
    if cpu is not None:
        why.append(f"PS CPU {cpu:.0%}")
    measured = [
        signal,
        *(["PS NIC traffic"] if traffic is not None else []),
        *(["PS CPU"] if cpu is not None else []),
    ]
    reason = _no_model_reason(job)
    missing = [f"compute-bound rate: {reason}", "input pipeline",
               *([] if cpu is not None else ["PS CPU"])]  # fmt: skip
    evidence = {
        **basis(measured, [], missing),
        "window_s": rate_window_s(ctx),
        "compute_share": round(share, 3),
        "workers_measured": count,
        "ps_nic_gbps": traffic and round(traffic, 3),
        "ps_traffic_high_gbps": th.ps_traffic_high_gbps,
        "ps_cpu_util": cpu and round(cpu, 3),
        "ps": len(ps),
        "also_possible": ["input-bound"],
    }
    msg = (f"parameter server saturated (judged from measurements; {reason}): " + "; ".join(why)
           + "; input starvation is not ruled out (no model to compare with)")  # fmt: skip
    fix = f"add a parameter server (gain not predictable: {reason})"
    return Finding(
        kind="ps-saturation",
        subject=_subject(job, ps),
        severity="warning",
        message=msg,
        evidence=evidence,
        fix=fix,
    )


def ps_saturation_rule(ctx: AlertContext) -> list[Finding]:
    """Cluster well below its compute-bound rate while workers compute at normal speed and the PS is
    busy, and/or the PS NIC near line rate or its CPU pegged; without model facts, judged from the
    workers' compute share and the measured PS traffic / CPU."""
    out = []
    for job in ctx.jobs:
        if not columns_of(ctx, job).up_ps.any():
            continue
        pred = current_prediction(ctx, job)
        load = ps_load(ctx, job, pred) if pred is not None else None
        if pred is not None and load is not None:
            f = _model_finding(ctx, job, pred, load)
        else:
            f = measured_only_finding(ctx, job)
        if f is not None:
            out.append(f)
    return out
