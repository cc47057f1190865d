"""Rules against the user's goals: ``eta-slip`` (past the deadline) and ``cost-overrun`` (past the
budget). Times in seconds, money in USD, rates in steps/s."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from cmdare.collectors.observed import JobView
from cmdare.planner.risk_cost.workload import ASSUMED_REGION
from cmdare.planner.rules.alerts import AlertContext, Finding
from cmdare.planner.rules.rule_support import (
    basis,
    columns_of,
    node_usd_per_hour,
    predict_shape,
    price_usd_per_hour,
    rate_window_s,
    signed_pct,
    thresholds_of,
    up_gpu_counts,
)

if TYPE_CHECKING:
    from cmdare.collectors.pricing.book import PriceBook


# ----------------------------------------------------------------------------------- eta-slip / cost-overrun
def _burn_usd_per_hour(book: PriceBook | None, job: JobView) -> float | None:
    prices = [node_usd_per_hour(book, n) for n in job.nodes if n.status == "up"]
    known = [p for p in prices if p is not None]
    return None if not prices or len(known) < len(prices) else float(sum(known))


def _faster_shape_fix(ctx: AlertContext, job: JobView, need: float) -> str | None:
    """The cheapest extra (workers of the main GPU, PS) predicted to reach ``need`` steps/s."""
    cols = columns_of(ctx, job)
    gpus, ps = up_gpu_counts(job, cols), int(np.count_nonzero(cols.up_ps))
    base = predict_shape(ctx, job, gpus, max(ps, 1))
    if not gpus or base is None or not job.steps_per_sec:
        return None
    main = max(gpus, key=lambda g: gpus[g])
    ref = cols.nodes[int(np.argmax(cols.up_worker & (cols.gpu == cols.code_of(main))))]
    book = ctx.inputs.price_book
    region = ref.region or ASSUMED_REGION  # where the cost meter and the planner price it too
    w_price = price_usd_per_hour(book, "node_price", main, 1, region, ref.provisioning or "standard")
    p_price = price_usd_per_hour(book, "ps_node_price", region)
    w_usd, p_usd = w_price or 1.0, p_price or 1.0  # unpriced: a node counts as one (ranks, never shown)
    best = None
    for add_w in range(0, 2 * sum(gpus.values()) + 1):
        for add_ps in range(0, thresholds_of(ctx).ps_max_suggested - max(ps, 1) + 1):
            p = predict_shape(ctx, job, {**gpus, main: gpus[main] + add_w}, max(ps, 1) + add_ps)
            if p is None or job.steps_per_sec * p.steps_per_sec / base.steps_per_sec < need:
                continue
            usd = add_w * w_usd + add_ps * p_usd
            if best is None or usd < best[0]:
                best = (usd, add_w, add_ps, p.steps_per_sec / base.steps_per_sec - 1)
    if best is None:
        return None
    usd, add_w, add_ps, gain = best
    parts = [f"{add_w} {main} worker(s)"] * bool(add_w) + [f"{add_ps} PS"] * bool(add_ps)
    priced = (w_price is not None or not add_w) and (p_price is not None or not add_ps)
    money = f", +${usd:.2f}/h" if book is not None and priced else ""
    err = thresholds_of(ctx).known_2ps_error
    band = "band: n/a until calibrated" + (f"; extra PS predicted with ~{err:.0%} error" if add_ps else "")
    return (
        f"add {' and '.join(parts)}: predicted {signed_pct(gain)} steps/s ({band}){money}" if parts else None
    )


def eta_slip_rule(ctx: AlertContext) -> list[Finding]:
    """The projected finish (now + ETA at the measured speed) passes the user's deadline."""
    th, out = thresholds_of(ctx), []
    for job in ctx.jobs:
        goal = ctx.inputs.goals.get(job.name)
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
            **basis(["cluster steps/s", "global step"], [], [] if goal.deadline_at else ["deadline"]),
            "eta_s": round(job.eta_seconds),
            "deadline_in_s": round(left),
            "late_s": round(late),
            "steps_per_sec": job.steps_per_sec and round(job.steps_per_sec, 2),
            "needed_steps_per_sec": round(need, 2) if math.isfinite(need) else None,
            "window_s": rate_window_s(ctx),
        }
        out.append(
            Finding(
                kind="eta-slip",
                subject=job.name,
                severity=sev,
                message=f"at {job.steps_per_sec or 0:.1f} steps/s the job finishes "
                f"{late / 3600:.1f} h after its deadline",
                evidence=evidence,
                fix=fix,
            )
        )
    return out


def cost_overrun_rule(ctx: AlertContext) -> list[Finding]:
    """Spent so far + the up nodes' $/h × ETA passes the user's budget."""
    th, out = thresholds_of(ctx), []
    book = ctx.inputs.price_book
    for job in ctx.jobs:
        goal = ctx.inputs.goals.get(job.name)
        if goal is None or goal.budget_usd is None or job.eta_seconds is None:
            continue
        burn = _burn_usd_per_hour(book, job)
        if burn is None:
            continue
        spent = goal.spent_usd
        if spent is None:  # lower bound: the current lifetimes of the nodes that are up
            spent = sum(
                (node_usd_per_hour(book, n) or 0.0) * (n.uptime_s(ctx.now) or 0.0) / 3600
                for n in job.nodes
                if n.status == "up"
            )
        projected = spent + burn * job.eta_seconds / 3600
        over = projected - goal.budget_usd
        if over <= th.cost_overrun_margin * goal.budget_usd:
            continue
        sev = "critical" if over > th.critical_overrun * goal.budget_usd else "warning"
        evidence = {
            **basis(
                ["node uptimes", "cluster steps/s (ETA)"]
                + ([] if goal.spent_usd is None else ["spent (reported)"]),
                ["price book ($/h)"],
            ),
            "projected_usd": round(projected, 2),
            "budget_usd": goal.budget_usd,
            "spent_usd": round(spent, 2),
            "burn_usd_per_hour": round(burn, 3),
            "eta_s": round(job.eta_seconds),
            "window_s": rate_window_s(ctx),
        }
        out.append(
            Finding(
                kind="cost-overrun",
                subject=job.name,
                severity=sev,
                message=f"projected ${projected:.2f} exceeds the budget "
                f"${goal.budget_usd:.2f} (burning ${burn:.2f}/h, {job.eta_seconds / 3600:.1f} h left)",
                evidence=evidence,
                fix=None,
            )
        )
    return out
