"""A monitoring session: the sources chosen on the command line, the poller, the store, and what the
planner makes of them after each poll. Shared by the Textual app and the headless ``snapshot``."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cmdare.collectors.clock import Clock, SystemClock
from cmdare.collectors.demo_cluster import DemoCluster
from cmdare.collectors.lifecycle import Lifecycle
from cmdare.collectors.poller import RATE_WINDOW_POLLS, Cycle, Poller, Source
from cmdare.collectors.store import Store
from cmdare.planner.alerts import Alert, AlertContext, AlertEngine
from cmdare.planner.bottlenecks import DEFAULT_RULES, JobGoal, rule_extras, shipped_overheads
from cmdare.planner.cost_meter import CostMeter
from cmdare.planner.job_plan import outlook
from cmdare.planner.live_plan import LivePlan, LivePlanner
from cmdare.planner.overview import JobView, build_jobs
from cmdare.planner.speed_model import SpeedModel
from cmdare.planner.thresholds import Thresholds
from cmdare.tui.sources import SourcePlan, build_sources

log = logging.getLogger(__name__)


@dataclass
class SessionOptions:
    targets: list[str] = field(default_factory=list)
    demo: bool = False
    refresh: float = 2.0
    timeout: float = 2.0
    read_only: bool = False
    silent_after: int = 3
    raise_after: int = 3  # refreshes a condition must hold before a flag is raised
    clear_after: int = 3  # refreshes a condition must be false before a flag clears
    budget_usd: float | None = None  # the job's budget (Job pane: cost accrued vs budget)
    deadline_hours: float | None = None
    # live collectors (issue 3); tui/sources.py turns these into sources
    job: str | None = None  # job name for sources that carry none (TF_CONFIG, TensorBoard, JSONL)
    prometheus: str | None = None
    selector: str = ""
    prometheus_token_file: str | None = None  # the token itself is never held in options
    tensorboard: list[str] = field(default_factory=list)
    jsonl: list[str] = field(default_factory=list)
    tf_config: str | None = None  # TF_CONFIG JSON text or a file path
    metrics_port: str = "9400"  # fixed port, or "+N" = training port + N
    record: str | None = None
    replay: str | None = None
    replay_speed: float = 1.0


@dataclass(frozen=True)
class SourceStatus:
    name: str
    ok: bool
    message: str


@dataclass(frozen=True)
class MonitorState:
    """An immutable picture of everything after one refresh; panes render it."""

    t: float
    cycles: int
    jobs: list[JobView]
    alerts: list[Alert]
    alert_history: list[Alert]
    sources: list[SourceStatus]
    demo: bool
    read_only: bool
    extras: dict[str, Any] = field(default_factory=dict)

    def job(self, name: str | None = None) -> JobView | None:
        if not self.jobs:
            return None
        if name is None:
            return self.jobs[0]
        return next((j for j in self.jobs if j.name == name), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "time": self.t,
            "demo": self.demo,
            "read_only": self.read_only,
            "jobs": [j.to_json() for j in self.jobs],
            "alerts": [a.to_json() for a in self.alerts],
            "sources": [s.__dict__ for s in self.sources],
        }


class MonitorSession:
    def __init__(self, opts: SessionOptions, *, clock: Clock | None = None,
                 extra_sources: list[Source] | None = None,
                 demo_factory: Callable[[], DemoCluster] | None = None) -> None:
        self.opts = opts
        self.clock = clock or SystemClock()
        self.store = Store()
        self.lifecycle = Lifecycle(silent_after=opts.silent_after, vanished_after=2 * opts.silent_after)
        self.thresholds = Thresholds(raise_after=opts.raise_after, clear_after=opts.clear_after)
        self.alerts = AlertEngine(DEFAULT_RULES, raise_after=opts.raise_after, clear_after=opts.clear_after,
                                  raise_after_by_kind=self.thresholds.raise_after_by_kind)
        self.demo: DemoCluster | None = None
        self._extra_sources = extra_sources or []
        self._demo_factory = demo_factory or (lambda: DemoCluster(geo=True))
        self.poller: Poller | None = None
        self.plan: SourcePlan | None = None
        self._model: SpeedModel | None = None
        self.price_book: object | None = None  # set by the app after loading; else the offline book
        self._cost: CostMeter | None = None
        self._live: LivePlanner | None = None
        self._live_plans: dict[str, LivePlan] = {}
        self._ranking: asyncio.Future | None = None
        self.state: MonitorState | None = None
        self.started_at = time.monotonic()

    @property
    def is_demo(self) -> bool:
        return self.demo is not None

    def start(self) -> None:
        """Start the demo cluster (when asked, or when no source was given) and build the poller."""
        self.plan = build_sources(self.opts, lifecycle=self.lifecycle, extra_sources=self._extra_sources,
                                  demo_factory=self._demo_factory)
        self.demo = self.plan.demo
        if self.plan.clock is not None:  # a replay runs on the recording's clock
            self.clock = self.plan.clock
        self.poller = Poller(self.plan.sources, self.store, lifecycle=self.lifecycle, clock=self.clock,
                             interval=self.plan.interval or self.opts.refresh, sinks=self.plan.sinks)

    async def refresh(self) -> MonitorState:
        assert self.poller is not None, "start() first"
        cycle = await self.poller.poll_once()
        return self.analyse(cycle)

    def analyse(self, cycle: Cycle) -> MonitorState:
        now = self.clock.now()
        jobs = build_jobs(self.store, self.lifecycle, now)
        extras = self._plan(jobs)
        extras["cost"] = self._cost_meter().update(jobs, now)
        extras["deadline_hours"] = self.opts.deadline_hours
        hours, cost = self.opts.deadline_hours, extras["cost"]
        extras["goals"] = {j.name: JobGoal(now + hours * 3600 if hours is not None else None, self.opts.budget_usd,
                                           cost[j.name].accrued_usd if j.name in cost else None) for j in jobs}
        ctx = AlertContext(now, jobs, extras)
        active = self.alerts.evaluate(ctx)
        self.state = MonitorState(
            t=now,
            cycles=self.poller.cycles if self.poller else 0,
            jobs=jobs,
            alerts=active,
            alert_history=list(self.alerts.history),
            sources=self._source_status(cycle),
            demo=self.is_demo,
            read_only=self.opts.read_only,
            extras=extras,
        )
        return self.state

    def _plan(self, jobs: list[JobView]) -> dict[str, Any]:
        """The planner's view of each job: the current shape's prediction and nearby shapes."""
        outlooks: dict[str, list] = {}
        predicted: dict[str, Any] = {}
        if self._model is None:
            self._model = SpeedModel.load()
        for job in jobs:
            try:
                rows = outlook(job, self._model)
            except (ValueError, KeyError) as exc:  # e.g. a GPU type the catalog does not know
                log.warning("planner: job %s: %s", job.name, exc)
                continue
            if rows:
                outlooks[job.name] = rows
                predicted[job.name] = rows[0].prediction
        extras: dict[str, Any] = {"outlook": outlooks, "predicted": predicted, "model": self._model}
        # What the bottleneck rules need besides predictions (planner/bottlenecks.py documents the keys).
        extras.update(rule_extras(self.store, jobs, self.opts.refresh * RATE_WINDOW_POLLS))
        extras.update(thresholds=self.thresholds, overheads=shipped_overheads(),
                      replacement_seconds=self.alerts.measured_replacement_seconds())
        extras["price_book"] = self._cost_meter().book
        extras["live_plan"] = dict(self._live_plans)
        extras["ranked"] = {name: p.table for name, p in self._live_plans.items() if p.table is not None}
        geo = getattr(self.demo, "geo", None)  # the demo's WAN links stand in for a user's link config
        if geo is not None:
            extras["link_capacity_gbps"] = {frozenset((k["a"], k["b"])): float(k["gbps"]) for k in geo.sc["links"]}
        return extras

    def set_price_book(self, book: object) -> None:
        """Use ``book`` from now on (the app loads live prices in a thread): costs accrue at its
        rates and the next ranking uses it."""
        self.price_book = book
        if self._cost is not None:
            self._cost.book = book

    def _cost_meter(self) -> CostMeter:
        if self._cost is None:
            if self.price_book is None:
                from cmdare.collectors.pricing import load_offline_book

                self.price_book = load_offline_book()
            self._cost = CostMeter(self.price_book, self.opts.budget_usd)
        return self._cost

    def _source_status(self, cycle: Cycle) -> list[SourceStatus]:
        out = [SourceStatus(name, False, msg) for name, msg in cycle.source_errors.items()]
        answered, total = cycle.answered, len(cycle.polls)
        out.append(SourceStatus("targets", answered == total, f"{answered}/{total} targets answered"))
        return out

    def _rank_jobs(self, jobs: list[JobView], now: float) -> dict[str, LivePlan]:
        """Calibrate and rank alternative shapes for every job (CPU work: runs in a thread)."""
        book = self._cost_meter().book
        if self._live is None:
            self._live = LivePlanner(self._model or SpeedModel.load(), book)
        elif self._live.price_book is not book:
            self._live.set_price_book(book)
        out: dict[str, LivePlan] = {}
        for job in jobs:
            try:
                out[job.name] = self._live.update(job, now)
            except Exception as exc:  # a planner failure is a status on screen, not a crash
                log.warning("live planner: job %s: %s", job.name, exc)
        return out

    async def update_plans(self) -> None:
        """Re-rank shapes for the latest state now (awaits the thread)."""
        if self.state is not None:
            self._live_plans = await asyncio.to_thread(self._rank_jobs, self.state.jobs, self.state.t)

    def _start_ranking(self) -> None:
        """Start re-ranking in a thread unless one is running; the next refresh shows the result."""
        if self.state is None or (self._ranking is not None and not self._ranking.done()):
            return

        def done(fut: asyncio.Future) -> None:
            if not fut.cancelled() and fut.exception() is None:
                self._live_plans = fut.result()

        self._ranking = asyncio.ensure_future(asyncio.to_thread(self._rank_jobs, self.state.jobs, self.state.t))
        self._ranking.add_done_callback(done)

    async def run(self, stop: asyncio.Event, on_state: Callable[[MonitorState], None]) -> None:
        assert self.poller is not None, "start() first"
        while not stop.is_set():
            started = self.poller.clock.monotonic()
            cycle = await self.poller.poll_once()
            on_state(self.analyse(cycle))
            self._start_ranking()
            await self.poller.wait_next(started, stop)

    async def aclose(self) -> None:
        if self._ranking is not None and not self._ranking.done():
            await asyncio.wait([self._ranking], timeout=5)
        if self.poller is not None:
            await self.poller.aclose()
        if self.plan is not None:
            self.plan.close()
        if self.demo is not None:
            self.demo.stop()
