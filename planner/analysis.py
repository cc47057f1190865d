"""Everything the planner makes of one refresh: predictions for each job's shape, the bottleneck
rules' inputs, cost accrued, and the flags (with hysteresis); plus the calibrated ranking of
alternative shapes, which is CPU work meant for a worker thread.

Pure computation over the store and the jobs (no I/O beyond loading shipped parameters)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cmdare.collectors.samples import Lifetime
from cmdare.collectors.store import Store
from cmdare.planner.job_plan import outlook
from cmdare.planner.live_plan import LivePlan, LivePlanner
from cmdare.planner.overview import JobView
from cmdare.planner.risk_cost.cost_meter import CostMeter
from cmdare.planner.rules.alerts import Alert, AlertContext, AlertEngine
from cmdare.planner.rules.bottlenecks import DEFAULT_RULES, JobGoal, rule_extras, shipped_overheads
from cmdare.planner.rules.thresholds import Thresholds
from cmdare.planner.rules.wan_rules import pipelines
from cmdare.planner.speed.speed_model import SpeedModel

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Goals:
    budget_usd: float | None = None
    deadline_hours: float | None = None  # from now


class Analysis:
    def __init__(
        self,
        price_book: object,
        *,
        raise_after: int = 3,
        clear_after: int = 3,
        goals: Goals = Goals(),
        link_capacity_gbps: dict | None = None,
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

    def set_price_book(self, book: object) -> None:
        self.cost.book = book
        self.live.set_price_book(book)

    def refresh(
        self, store: Store, jobs: list[JobView], now: float, rate_window_s: float
    ) -> tuple[dict[str, Any], list[Alert]]:
        """The extras the panes and rules read, and the active alerts, for one refresh."""
        extras = self._predictions(jobs)
        extras.update(rule_extras(store, jobs, rate_window_s))
        extras.update(
            thresholds=self.thresholds,
            overheads=shipped_overheads(),
            replacement_seconds=self.alerts.measured_replacement_seconds(),
            price_book=self.cost.book,
        )
        extras["live_plan"] = dict(self.live_plans)
        extras["ranked"] = {name: p.table for name, p in self.live_plans.items() if p.table is not None}
        if self.link_capacity_gbps:
            extras["link_capacity_gbps"] = self.link_capacity_gbps
        cost = extras["cost"] = self.cost.update(jobs, now)
        hours = extras["deadline_hours"] = self.goals.deadline_hours
        extras["goals"] = {
            j.name: JobGoal(
                now + hours * 3600 if hours is not None else None,
                self.goals.budget_usd,
                cost[j.name].accrued_usd if j.name in cost else None,
            )
            for j in jobs
        }
        ctx = AlertContext(now, jobs, extras)
        extras["pipelines"] = pipelines(ctx)
        return extras, self.alerts.evaluate(ctx)

    def _predictions(self, jobs: list[JobView]) -> dict[str, Any]:
        """The current shape's prediction and nearby shapes, per job."""
        outlooks: dict[str, list] = {}
        predicted: dict[str, Any] = {}
        for job in jobs:
            try:
                rows = outlook(job, self.model)
            except (ValueError, KeyError) as exc:  # e.g. a GPU type the catalog does not know
                log.warning("planner: job %s: %s", job.name, exc)
                continue
            if rows:
                outlooks[job.name] = rows
                predicted[job.name] = rows[0].prediction
        return {"outlook": outlooks, "predicted": predicted, "model": self.model}

    def rank(
        self, jobs: list[JobView], now: float, lifetimes: Sequence[Lifetime] = ()
    ) -> dict[str, LivePlan]:
        """Calibrate and rank alternative shapes for every job (CPU work: run it in a thread); the
        revocation model first learns the server lifetimes seen so far."""
        self.live.learn(lifetimes, now)
        out: dict[str, LivePlan] = {}
        for job in jobs:
            try:
                out[job.name] = self.live.update(job, now)
            except Exception as exc:  # a planner failure is a status on screen, not a crash
                log.warning("live planner: job %s: %s", job.name, exc)
        return out
