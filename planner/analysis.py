"""Everything the planner makes of one refresh — a typed :class:`~cmdare.planner.view.PlannerView`
(predictions for each job's shape with their band, cost accrued, goals, the latest ranking) built from the
same inputs the bottleneck rules read (:class:`~cmdare.planner.rules.inputs.RuleInputs`), and the flags
(with hysteresis); plus the calibrated ranking of alternative shapes, which is CPU work meant for a
worker thread.

Pure computation over the store and the jobs (no I/O beyond loading shipped parameters)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from cmdare.collectors.observed import JobView
from cmdare.collectors.samples import Lifetime
from cmdare.collectors.store import Store
from cmdare.planner.live.outlook import ShapeOutlook, network_of, outlook
from cmdare.planner.live.plan import LivePlan, LivePlanner
from cmdare.planner.risk_cost.checkpointing import CheckpointFacts, WorkAtRisk, ranking_row, work_at_risk
from cmdare.planner.risk_cost.cost_meter import CostMeter, CostView
from cmdare.planner.rules.alerts import Alert, AlertContext, AlertEngine
from cmdare.planner.rules.bottlenecks import DEFAULT_RULES, JobGoal, rule_inputs, shipped_overheads
from cmdare.planner.rules.inputs import LinkCapacities, frozen_map
from cmdare.planner.rules.thresholds import Thresholds
from cmdare.planner.rules.wan_rules import pipelines
from cmdare.planner.rules.worker_columns import JobColumns, kept_columns
from cmdare.planner.speed.speed_band import SpeedBand, speed_band
from cmdare.planner.speed.speed_model import SpeedModel
from cmdare.planner.view import JobPlannerView, PipelineView, PlannerView, PriceSource

if TYPE_CHECKING:
    from cmdare.collectors.pricing.book import PriceBook

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Goals:
    budget_usd: float | None = None
    deadline_hours: float | None = None  # from now


class Analysis:
    def __init__(
        self,
        price_book: PriceBook,
        *,
        raise_after: int = 3,
        clear_after: int = 3,
        goals: Goals = Goals(),
        link_capacity_gbps: LinkCapacities | None = None,
    ) -> None:
        self.model = SpeedModel.load()
        self.thresholds = Thresholds(raise_after=raise_after, clear_after=clear_after)
        self.alerts = AlertEngine(
            DEFAULT_RULES,
            raise_after=raise_after,
            clear_after=clear_after,
            raise_after_by_kind=self.thresholds.raise_after_by_kind,
        )
        self.cost = CostMeter(price_book, goals.budget_usd)
        self.goals = goals
        self.link_capacity_gbps = link_capacity_gbps
        self.live = LivePlanner(self.model, price_book)
        self.live_plans: dict[str, LivePlan] = {}
        self.columns: dict[str, JobColumns] = {}  # job -> its tasks as columns, kept from refresh to refresh

    def set_price_book(self, book: PriceBook) -> None:
        self.cost.book = book
        self.live.set_price_book(book)

    def refresh(
        self, store: Store, jobs: list[JobView], now: float, rate_window_s: float
    ) -> tuple[PlannerView, list[Alert]]:
        """The planner's answer the panes render, and the active alerts, for one refresh."""
        self.columns = {j.name: self._columns(j) for j in jobs}  # the views that changed read again
        with kept_columns(self.columns):  # what is asked once per view (a sync job's split) read from them
            return self._refresh(store, jobs, now, rate_window_s)

    def _refresh(
        self, store: Store, jobs: list[JobView], now: float, rate_window_s: float
    ) -> tuple[PlannerView, list[Alert]]:
        outlooks = self._predictions(jobs)
        cost = self.cost.update(jobs, now)
        hours = self.goals.deadline_hours
        goals = {
            j.name: JobGoal(
                now + hours * 3600 if hours is not None else None,
                self.goals.budget_usd,
                cost[j.name].accrued_usd if j.name in cost else None,
            )
            for j in jobs
        }
        inputs = replace(
            rule_inputs(store, jobs, rate_window_s),
            predicted=frozen_map({name: rows[0].prediction for name, rows in outlooks.items()}),
            model=self.model,
            price_book=self.cost.book,
            thresholds=self.thresholds,
            overheads=shipped_overheads(),
            replacement_seconds=frozen_map(self.alerts.measured_replacement_seconds()),
            goals=frozen_map(goals),
            link_capacity_gbps=frozen_map(self.link_capacity_gbps),
            columns=frozen_map(self.columns),
        )
        risks = {j.name: r for j in jobs if (r := self._work_at_risk(j, now, cost.get(j.name))) is not None}
        inputs = replace(inputs, work_at_risk=frozen_map(risks))
        ctx = AlertContext(now, jobs, inputs)
        pipes = pipelines(ctx)
        views = tuple(
            JobPlannerView(
                job=j.name,
                shape=outlooks[j.name][0].shape if j.name in outlooks else None,
                prediction=inputs.predicted.get(j.name),
                band=self._band(j, outlooks.get(j.name)),
                outlook=tuple(outlooks.get(j.name, ())),
                plan=self.live.stalled_plan(j) if j.stalled else self.live_plans.get(j.name),
                pipeline=PipelineView(tuple(pipes[j.name][0]), frozen_map(pipes[j.name][1]))
                if j.name in pipes
                else None,
                cost=cost.get(j.name),
                goal=goals.get(j.name),
                checkpoint=risks.get(j.name),
            )
            for j in jobs
        )
        view = PlannerView(
            jobs=views,
            thresholds=self.thresholds,
            overheads=inputs.overheads,
            replacement_seconds=inputs.replacement_seconds,
            prices=PriceSource.of(self.cost.book),
            deadline_hours=hours,
            budget_usd=self.goals.budget_usd,
        )
        return view, self.alerts.evaluate(ctx)

    def _work_at_risk(self, job: JobView, now: float, cost: CostView | None) -> WorkAtRisk | None:
        """The job's work at risk and when to checkpoint (its ranking's current-shape row), or None for a job
        with no GPU worker to plan for."""
        plan = self.live_plans.get(job.name)
        table = plan.table if plan is not None else None
        cols = self.columns.get(job.name)
        if cols is None or cols.nodes is not job.nodes:
            cols = job.memo(JobColumns.of)
        gpu = np.array([bool(x) for x in cols.labels], bool)[cols.gpu]
        workers = cols.worker & gpu  # the workers (and chief) that name a GPU
        if not workers.any():
            return None
        chief = workers & cols.chief
        ref = cols.nodes[int(np.argmax(chief if chief.any() else workers))]
        row = ranking_row(table.columns if table is not None else None)
        mb = job.facts.model.checkpoint_mb or shipped_overheads().checkpoint_mb(job.facts.model.params or 0.0)
        return work_at_risk(CheckpointFacts.of_columns(cols), now, shipped_overheads(), ref.gpu,
                            ref.provisioning or "standard", cost.usd_per_hour if cost else None, row, mb)  # fmt: skip

    def _columns(self, job: JobView) -> JobColumns:
        """The job's columns: the last refresh's, updated where its views changed."""
        kept = self.columns.get(job.name)
        return JobColumns.of(job) if kept is None else kept.update(job.nodes, job.change)

    def _predictions(self, jobs: list[JobView]) -> dict[str, list[ShapeOutlook]]:
        """The current shape's prediction (first) and nearby shapes, per job with a known network and shape."""
        outlooks: dict[str, list[ShapeOutlook]] = {}
        for job in jobs:
            try:
                rows = outlook(job, self.model)
            except (ValueError, KeyError) as exc:  # e.g. a GPU type the catalog does not know
                log.warning("planner: job %s: %s", job.name, exc)
                continue
            if rows:
                outlooks[job.name] = rows
        return outlooks

    def _band(self, job: JobView, rows: list[ShapeOutlook] | None) -> SpeedBand | None:
        """The P10–P90 band of the current shape's prediction (None when it cannot be computed)."""
        net = network_of(job)
        if not rows or net is None:
            return None
        try:
            return speed_band(self.model, net, dict(rows[0].shape.gpus), ps=rows[0].shape.ps,
                              prediction=rows[0].prediction)  # fmt: skip
        except (ValueError, KeyError, ZeroDivisionError) as exc:
            log.warning("planner: band of job %s: %s", job.name, exc)
            return None

    def ranking_columns(self, jobs: list[JobView]) -> dict[str, JobColumns]:
        """Copies of the jobs' columns for :meth:`rank` (taken where the refreshes run: a ranking's thread
        then reads columns no refresh changes)."""
        return {
            j.name: c.copy()
            for j in jobs
            if (c := self.columns.get(j.name)) is not None and c.nodes is j.nodes
        }

    def rank(
        self,
        jobs: list[JobView],
        now: float,
        lifetimes: Sequence[Lifetime] = (),
        columns: Mapping[str, JobColumns] | None = None,
    ) -> dict[str, LivePlan]:
        """Calibrate and rank alternative shapes for every job (CPU work: run it in a thread); the
        revocation model first learns the server lifetimes seen so far. ``columns``: the jobs' columns
        (:meth:`ranking_columns`), read instead of the views where they were read from them."""
        self.live.learn(lifetimes, now)
        out: dict[str, LivePlan] = {}
        for job in jobs:
            cols = (columns or {}).get(job.name)
            try:
                out[job.name] = self.live.update(
                    job, now, cols if cols is not None and cols.nodes is job.nodes else None
                )
            except Exception as exc:  # a planner failure is a status on screen, not a crash
                log.warning("live planner: job %s: %s", job.name, exc)
        return out
