"""The planner's answer for one refresh, typed and immutable: what the panes, ``snapshot`` and the export render.

:class:`PlannerView` holds one :class:`JobPlannerView` per job — the current shape's predicted speed with its
P10–P90 band and model source, the speed-only outlook of nearby shapes, the calibrated ranking of alternative
shapes (:class:`~cmdare.planner.live.plan.LivePlan`), a pipeline job's WAN boundaries, the cost accrued and
its burn rate, the job's goal — and the cluster-wide parts: thresholds, overheads, measured replacement times,
and the price source with its date. Built by :meth:`cmdare.planner.analysis.Analysis.refresh`; a renamed field
fails at attribute access and type check, not as a silent "–" on screen.

Its one JSON rendering is :func:`cmdare.planner.view_json.planner_view_json`, documented by
``docs/planner_view.schema.json``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cmdare.collectors.pricing.book import PriceBook
    from cmdare.planner.geo.geo_live import LiveBoundary
    from cmdare.planner.live.outlook import GpuMix, ShapeOutlook
    from cmdare.planner.live.plan import LivePlan
    from cmdare.planner.risk_cost.checkpointing import WorkAtRisk
    from cmdare.planner.risk_cost.cost_meter import CostView
    from cmdare.planner.risk_cost.overheads import Overheads
    from cmdare.planner.risk_cost.shapes import ShapeTable
    from cmdare.planner.rules.inputs import JobGoal
    from cmdare.planner.rules.thresholds import Thresholds
    from cmdare.planner.speed.speed_band import SpeedBand
    from cmdare.planner.speed.speed_model import SpeedPrediction


def _empty_map() -> Mapping[Any, Any]:
    """An empty read-only mapping (the rules' ``frozen_map()``; their module loads with the planner, not at
    start-up: the first state's empty view needs none of it)."""
    return MappingProxyType({})


@dataclass(frozen=True)
class PriceSource:
    """Where prices come from: ``source`` (live, cache, offline, study-era), the book's ``as_of`` and the
    date of the prices themselves (``date``: "fetched …", "prices of …", or "price date unknown (derived …)")."""

    source: str
    as_of: str
    date: str

    @property
    def dated(self) -> bool:
        """False when the source rows carry no price date (a derived offline book)."""
        return not self.date.startswith("price date unknown")

    @classmethod
    def of(cls, book: PriceBook | None) -> PriceSource | None:
        """The price source of a price book (None without a book)."""
        if book is None:
            return None
        from cmdare.planner.risk_cost.ranking_notes import price_date_label  # numpy: not at start-up

        return cls(book.source, book.as_of or "?", price_date_label(book))


@dataclass(frozen=True)
class PipelineView:
    """A pipeline job's measured WAN boundaries (``wan_rules.pipelines``) and each stage's datacenter."""

    boundaries: tuple[LiveBoundary, ...]
    dc: Mapping[str, str] = field(default_factory=_empty_map)

    @property
    def wan_bound(self) -> int:
        """How many boundaries are WAN-bound."""
        return sum(1 for b in self.boundaries if b.wan_bound)


@dataclass(frozen=True, kw_only=True)
class JobPlannerView:
    """The planner's answer for one job. ``prediction`` is the speed model's for the current ``shape``
    (uncalibrated, steps/s) with its P10–P90 ``band``; ``outlook`` starts with the current shape;
    ``plan`` holds the ranking and its calibration (None until the first ranking ran)."""

    job: str
    shape: GpuMix | None = None
    prediction: SpeedPrediction | None = None
    band: SpeedBand | None = None
    outlook: tuple[ShapeOutlook, ...] = ()
    plan: LivePlan | None = None
    pipeline: PipelineView | None = None
    cost: CostView | None = None
    goal: JobGoal | None = None
    checkpoint: WorkAtRisk | None = None  # work at risk since the last checkpoint, and when to checkpoint

    @property
    def ranked(self) -> ShapeTable | None:
        """The ranked shapes (row 0: the current shape), or None before a ranking exists."""
        return self.plan.table if self.plan is not None else None


@dataclass(frozen=True, kw_only=True)
class PlannerView:
    """The planner's answer for one refresh (empty before the planner has loaded)."""

    jobs: tuple[JobPlannerView, ...] = ()
    thresholds: Thresholds | None = None
    overheads: Overheads | None = None
    replacement_seconds: Mapping[str, float] = field(default_factory=_empty_map)  # GPU → s, measured
    prices: PriceSource | None = None
    deadline_hours: float | None = None  # from the start of monitoring
    budget_usd: float | None = None

    def with_plans(self, plans: Mapping[str, LivePlan]) -> PlannerView:
        """This view with the rankings in ``plans`` (job → plan) in place of those it holds."""
        from cmdare.planner.risk_cost.checkpointing import ranking_row  # numpy: not at start-up

        def renewed(j: JobPlannerView) -> JobPlannerView:
            plan = plans.get(j.job, j.plan)
            risk = j.checkpoint
            if risk is not None and plan is not None:  # the optimum interval of the newer ranking
                risk = risk.with_ranking(ranking_row(plan.table.columns if plan.table is not None else None))
            return replace(j, plan=plan, checkpoint=risk)

        return replace(self, jobs=tuple(renewed(j) for j in self.jobs))

    def job(self, name: str | None) -> JobPlannerView | None:
        """The view of job ``name`` (None for an unknown job or None)."""
        return next((j for j in self.jobs if j.job == name), None) if name is not None else None
