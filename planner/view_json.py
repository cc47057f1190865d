"""The one JSON rendering of a :class:`~cmdare.planner.view.PlannerView` (``snapshot --json``, the app's export).

The document is described by ``docs/planner_view.schema.json`` (the ``planner`` member of a snapshot). Units:
rates in steps/s, money in USD (rates USD/h), times in hours (``hours_p50``) or seconds (``*_s``,
``*_seconds``); Δ are relative changes against the current shape (−0.38 = 38% less), except ``delta_risk``,
the change of P(≥1 revocation). A figure that is not finite or not known is ``null``, never invented."""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cmdare.planner.live.plan import LivePlan
    from cmdare.planner.risk_cost.checkpointing import WorkAtRisk
    from cmdare.planner.risk_cost.cost_meter import CostView
    from cmdare.planner.risk_cost.overheads import Overheads
    from cmdare.planner.risk_cost.shapes import RankedRow, ShapeTable
    from cmdare.planner.view import JobPlannerView, PipelineView, PlannerView, PriceSource

RANKING_ROWS = 10  # rows of each job's ranking in the JSON (the current shape first, then the best)


def num(x: Any, digits: int = 6) -> float | None:
    """A finite number rounded to ``digits``, else None (NaN and inf are not JSON)."""
    if x is None:
        return None
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return round(f, digits) if math.isfinite(f) else None


def planner_view_json(view: PlannerView, ranking_rows: int = RANKING_ROWS) -> dict[str, Any]:
    """The planner's answer as a JSON-ready dict: cluster-wide parts and one entry per job."""
    return {
        "prices": prices_json(view.prices),
        "deadline_hours": num(view.deadline_hours),
        "budget_usd": num(view.budget_usd),
        "replacement_seconds": {str(k): num(v, 1) for k, v in view.replacement_seconds.items()},
        "thresholds": dataclasses.asdict(view.thresholds) if view.thresholds is not None else None,
        "overheads": overheads_json(view.overheads),
        "jobs": [job_json(j, ranking_rows) for j in view.jobs],
    }


def prices_json(p: PriceSource | None) -> dict[str, Any] | None:
    """The price source and the date of its prices."""
    if p is None:
        return None
    return {"source": p.source, "as_of": p.as_of, "date": p.date, "dated": p.dated}


def overheads_json(o: Overheads | None) -> dict[str, Any] | None:
    """The CM-DARE overheads (seconds), without their provenance."""
    if o is None:
        return None
    return {
        "server_start_s": o.server_start_s,
        "replacement_join_s": o.replacement_join_s,
        "framework_restart_s": o.framework_restart_s,
        "chief_lost_s_per_step": o.chief_lost_s_per_step,
        "checkpoint_fixed_s": o.checkpoint_fixed_s,
        "checkpoint_s_per_mb": o.checkpoint_s_per_mb,
        "checkpoint_mb_per_param": o.checkpoint_mb_per_param,
    }


def job_json(j: JobPlannerView, ranking_rows: int = RANKING_ROWS) -> dict[str, Any]:
    """One job's part: prediction with band, cost, goal, outlook, ranking, pipeline."""
    goal = j.goal
    return {
        "job": j.job,
        "shape": j.shape.label if j.shape is not None else None,
        "prediction": prediction_json(j),
        "cost": cost_json(j.cost),
        "goal": None
        if goal is None
        else {
            "deadline_at": num(goal.deadline_at, 3),
            "budget_usd": num(goal.budget_usd),
            "spent_usd": num(goal.spent_usd),
        },
        "outlook": [
            {
                "shape": r.shape.label,
                "steps_per_sec": num(r.prediction.steps_per_sec, 4),
                "bottleneck": r.prediction.bottleneck,
                "ps_utilization": num(r.prediction.ps_utilization, 4),
                "current": r.current,
            }
            for r in j.outlook
        ],
        "ranking": ranking_json(j.plan, ranking_rows),
        "pipeline": pipeline_json(j.pipeline),
        "checkpoint": checkpoint_json(j.checkpoint),
    }


def checkpoint_json(r: WorkAtRisk | None) -> dict[str, Any] | None:
    """The job's work at risk since its last checkpoint and the optimum interval (seconds, USD)."""
    if r is None:
        return None
    return {
        "since_s": num(r.since_s, 1),
        "revocation_now_s": num(r.revocation_now_s, 1),
        "revocation_now_usd": num(r.revocation_now_usd, 4),
        "interval_s": num(r.interval_s, 1),
        "interval_basis": r.interval_basis,
        "write_s": num(r.write_s, 2),
        "write_basis": r.write_basis,
        "optimal_s": num(r.optimal_s, 1),
        "saves_s": num(r.saves_s, 1),
        "saves_usd": num(r.saves_usd, 4),
        "mtbf_s": num(r.mtbf_s, 1),
        "overdue": bool(r.overdue),
        "overdue_factor": r.overdue_factor,
        "method": r.method,
    }


def prediction_json(j: JobPlannerView) -> dict[str, Any] | None:
    """The current shape's predicted speed, its P10–P90 band and the model it comes from."""
    p, b = j.prediction, j.band
    if p is None:
        return None
    return {
        "steps_per_sec": num(p.steps_per_sec, 4),
        "p10": num(b.p10, 4) if b is not None else None,
        "p90": num(b.p90, 4) if b is not None else None,
        "extrapolation": b.extrapolation if b is not None else None,
        "bottleneck": p.bottleneck,
        "ps_utilization": num(p.ps_utilization, 4),
        "source": p.source,
    }


def cost_json(c: CostView | None) -> dict[str, Any] | None:
    """Cost accrued while monitored (USD), the burn rate (USD/h) and the budget."""
    if c is None:
        return None
    return {
        "accrued_usd": num(c.accrued_usd, 4),
        "usd_per_hour": num(c.usd_per_hour, 4),
        "budget_usd": num(c.budget_usd),
        "budget_left_hours": num(c.budget_left_hours, 3),
        "complete": c.complete,
        "unpriced": list(c.unpriced),
        "unpriced_tasks": c.unpriced_tasks,
        "price_source": c.price_source,
        "assumed": list(c.assumed),
    }


def shape_deltas(table: ShapeTable, i: int) -> tuple[float, float | None, float]:
    """Row ``i`` against the current shape: relative time, relative cost (None when either price is
    unknown) and the change of P(≥1 revocation)."""
    c = table.columns
    dt = float(c["hours_p50"][i]) / max(float(c["hours_p50"][0]), 1e-12) - 1
    c0, c1 = c["cost_usd_p50"][0], c["cost_usd_p50"][i]
    dc = None
    if table.current_priced and c1 is not None and math.isfinite(float(c1)):
        dc = float(c1) / max(float(c0), 1e-12) - 1
    return dt, dc, float(c["p_revocation"][i]) - float(c["p_revocation"][0])


def ranked_indices(table: ShapeTable, n: int) -> list[int]:
    """The current shape (row 0) first, then the ranking's best rows, ``n`` in all at most."""
    return ([0] + [int(x) for x in table.view if int(x) != 0])[: max(n, 1)]


def ranking_json(plan: LivePlan | None, n: int = RANKING_ROWS) -> dict[str, Any] | None:
    """The ranked shapes with their Δ against the current shape, and the calibration they rest on."""
    if plan is None:
        return None
    table = plan.table
    out: dict[str, Any] = {
        "objective": table.objective if table is not None else None,
        "calibration_samples": plan.calibration_samples,
        "calibration_residual": num(plan.calibration_residual, 4),
        "calibration_comm_scale": num(plan.comm_scale) if plan.calibration_samples else None,
        "price_source": plan.price_source,
        "price_date": plan.price_date or plan.price_as_of,
        "current_priced": table.current_priced if table is not None else None,
        "risk_period_weights": {k: num(v, 4) for k, v in table.risk_weights.items()}
        if table is not None
        else {},
        "note": plan.note,
        "search_note": (table.search_note or None) if table is not None else None,
        "rows": [],
    }
    if table is None:
        return out
    pos = {int(x): k + 1 for k, x in enumerate(table.view)}
    for i in ranked_indices(table, n):
        out["rows"].append(ranked_row_json(table, i, pos.get(i)))
    return out


def ranked_row_json(table: ShapeTable, i: int, rank: int | None) -> dict[str, Any]:
    """One ranked shape: time, cost, risk, speed with its band, and Δ against the current shape."""
    r = table.ranked_row(i)
    dt, dc, dr = shape_deltas(table, i)
    band = table.band(i)
    return {
        "rank": rank,
        "current": i == 0,
        "shape": r.shape,
        "gpu": r.gpu,
        "workers": r.workers,
        "ps": r.ps,
        "region": r.region,
        "region_note": r.region_note or "",
        "provisioning": r.provisioning,
        "hours_p50": num(r.hours_p50, 4),
        "cost_usd_p50": num(r.cost_usd_p50, 4),
        "p_revocation": num(r.p_revocation, 4),
        **risk_band_json(table, i),
        "steps_per_sec": num(r.steps_per_sec, 4),
        "steps_per_sec_p10": num(band.p10, 4) if band is not None else None,
        "steps_per_sec_p90": num(band.p90, 4) if band is not None else None,
        "extrapolation": band.extrapolation if band is not None else None,
        "bottleneck": r.bottleneck,
        "pareto": bool(r.pareto),
        "delta_time": num(dt, 4),
        "delta_cost": num(dc, 4),
        "delta_risk": num(dr, 4),
        "regions": list(table.columns["regions"][i]) if "regions" in table.columns else [r.region],
        "switch": switch_json(table, i),
        **sync_fields_json(r),
    }


def risk_band_json(table: ShapeTable, i: int) -> dict[str, Any]:
    """Row ``i``'s P(≥1 revocation) band across the lifetime periods, each period's figure, and the period the
    headline figure comes from (nulls for a table without periods)."""
    c = table.columns
    if "p_revocation_low" not in c:
        return {
            "p_revocation_low": None,
            "p_revocation_high": None,
            "p_revocation_periods": {},
            "risk_period": None,
        }
    return {
        "p_revocation_low": num(c["p_revocation_low"][i], 4),
        "p_revocation_high": num(c["p_revocation_high"][i], 4),
        "p_revocation_periods": {str(k): num(v, 4) for k, v in c["p_revocation_periods"][i].items()},
        "risk_period": table.risk_period_name or None,
    }


def switch_json(table: ShapeTable, i: int) -> dict[str, Any] | None:
    """What moving the job to row ``i`` costs (seconds, USD; its terms with their sources), whether the move
    pays (``worth``: false when the row, the switch included, does not beat staying) and the words on
    screen; null for a table without switching terms."""
    c = table.columns
    if "switch_s" not in c:
        return None
    return {
        "kind": str(c["switch_kind"][i]),
        "seconds": num(c["switch_s"][i], 1),
        "usd": num(c["switch_usd"][i], 4),
        "worth": bool(c["worth_switching"][i]),
        "egress": table.egress_words(i) or None,
        "words": table.switch_words(i),
        "terms": [{"term": k, "seconds": num(v, 1), "source": src} for k, v, src in table.switch_terms(i)],
    }


def sync_fields_json(r: RankedRow) -> dict[str, Any]:
    """A ranked row's parallel mode and, for a synchronous (all-reduce) shape, its nodes × GPUs per node,
    the exposed all-reduce's predicted share of a step and the revocation policy chosen (null for PS)."""
    return {
        "mode": "sync" if r.sync else "async-ps",
        "nodes": r.nodes,
        "gpus_per_node": r.gpus_per_node,
        "comm_share": num(r.comm_share, 4) if r.sync else None,
        "policy": r.policy,
    }


def pipeline_json(p: PipelineView | None) -> dict[str, Any] | None:
    """A pipeline job's measured WAN boundaries and their verdicts."""
    if p is None:
        return None
    return {
        "wan_bound": p.wan_bound,
        "boundaries": [
            {
                "from_stage": b.from_stage,
                "to_stage": b.to_stage,
                "from_dc": p.dc.get(b.from_stage),
                "to_dc": p.dc.get(b.to_stage),
                "measured_gbps": num(b.measured_gbps, 4),
                "bytes_per_microbatch": num(b.bytes_per_microbatch, 1),
                "link_gbps": num(b.link_gbps, 4),
                "transfer_seconds": num(b.transfer_seconds, 4),
                "max_stage_compute_seconds": num(b.max_stage_compute_seconds, 4),
                "wait_share": num(b.wait_share, 4),
                "wan_bound": bool(b.wan_bound),
            }
            for b in p.boundaries
        ],
    }
