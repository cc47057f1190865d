"""The ps-saturation rule: the parameter server, not the workers, paces the cluster.

:func:`ps_load` compares the measured rate with what the workers could do (steps/s) and adds the PS busy
share and NIC / CPU load; the fix names the predicted gain of more PS nodes (speed model × price book).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from cmdare.collectors.pricing.shapes import PS_SHAPE
from cmdare.planner.alerts import AlertContext, Finding
from cmdare.planner.overview import STEP_WINDOW_S, JobView
from cmdare.planner.rule_support import (
    canonical_gpu,
    current_prediction,
    predict_shape,
    price_usd_per_hour,
    rate_window_s,
    signed_pct,
    thresholds_of,
    up_gpu_counts,
    up_ps_nodes,
    up_workers,
)
from cmdare.planner.speed_model import SpeedPrediction

#: GCP maximum egress data rate: 2 Gbit/s per vCPU (GCP "Network bandwidth" documentation; the same
#: source as ``planner/data/gpus.csv``). The PS node is ``PS_SHAPE`` (n1-standard-8 → 16 Gbit/s).
GBPS_PER_VCPU = 2.0
PS_NIC_GBPS = GBPS_PER_VCPU * PS_SHAPE.vcpus


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
    x, workers = job.steps_per_sec, up_workers(job)
    if not x or x <= 0 or not workers:
        return None
    bound, ratios = 0.0, []
    for w in workers:
        own = pred.worker_steps_per_sec.get(canonical_gpu(w.gpu))
        if not own:
            return None
        cycle = 1.0 / own  # predicted single-worker step time (compute + latency + PS service)
        if w.step_seconds:
            ratios.append(w.step_seconds / cycle)
        bound += 1.0 / max(w.step_seconds or 0.0, cycle)
    ps = up_ps_nodes(job)
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
    gpus = up_gpu_counts(job)
    base = predict_shape(ctx, job, gpus, ps)
    if base is None:
        return None, {}
    gains: dict[int, float] = {}
    for k in range(ps + 1, max(thresholds_of(ctx).ps_max_suggested, ps + 1) + 1):
        p = predict_shape(ctx, job, gpus, k)
        if p is None:
            break
        gains[k] = p.steps_per_sec / base.steps_per_sec - 1
    if not gains or gains[ps + 1] <= 0.05:
        return None, {}
    region = next((n.region for n in up_ps_nodes(job)), "") or next((n.region for n in up_workers(job)), "")
    usd = price_usd_per_hour(ctx.extras.get("price_book"), "ps_node_price", region)
    money = (lambda add: f", +${usd * add:.2f}/h") if usd is not None else (lambda add: "")
    g1 = gains[ps + 1]
    fix = f"add a parameter server: predicted {signed_pct(g1)} steps/s (≈{load.steps_per_sec * (1 + g1):.0f}){money(1)}"
    best = max(gains, key=lambda k: gains[k])
    if best > ps + 1 and gains[best] > g1 * 1.1:
        fix += f"; {best - ps} more: {signed_pct(gains[best])}{money(best - ps)}"
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
    th, out = thresholds_of(ctx), []
    for job in ctx.jobs:
        pred, ps = current_prediction(ctx, job), up_ps_nodes(job)
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
        n = len(up_workers(job))
        why = [
            f"{load.steps_per_sec:.1f} steps/s = {load.efficiency:.0%} of the {load.compute_bound:.0f} "
            f"its {n} workers could do; PS ≈{min(load.ps_utilization, 1):.0%} busy"
        ]
        if nic:
            why.append(f"PS NIC {load.nic_gbps:.1f}/{PS_NIC_GBPS:.0f} Gbit/s")
        if cpu:
            why.append(f"PS CPU {load.cpu_util:.0%}")
        evidence = {
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
