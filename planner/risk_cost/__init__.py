"""Risk and cost: revocation, recovery overheads, time and cost of a run, shape ranking, the live cost meter.

Public names load lazily (PEP 562): importing the package costs nothing until a name is used,
and no module of the package imports another through this file."""

from __future__ import annotations

from cmdare.planner.lazy_exports import lazy_getattr

_HOME: dict[str, str] = {
    "RevocationModel": "revocation",
    "Bathtub": "revocation",
    "Overheads": "overheads",
    "TimeCost": "time_cost",
    "RunSettings": "time_cost",
    "PriceTable": "time_cost",
    "estimate": "time_cost",
    "CostMeter": "cost_meter",
    "CostView": "cost_meter",
    "ShapeTable": "shapes",
    "UnpricedShapeError": "shapes",
    "rank_shapes": "shapes",
    "enumerate_shapes": "shapes",
    "pareto_mask": "shapes",
    "Workload": "workload",
    "WorkloadError": "workload",
    "Target": "workload",
    "Shape": "workload",
    "Allowed": "workload",
    "Options": "workload",
    "load_workload": "workload",
    "parse_workload": "workload",
    "price_date_label": "ranking_notes",
    "region_notes": "ranking_notes",
}

__all__ = sorted(_HOME)
__getattr__ = lazy_getattr(__name__, _HOME)
