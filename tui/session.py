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
from cmdare.collectors.poller import Cycle, Poller, Source
from cmdare.collectors.scrape import ScrapeSource, ScrapeTarget
from cmdare.collectors.store import Store
from cmdare.planner.alerts import Alert, AlertContext, AlertEngine
from cmdare.planner.job_plan import outlook
from cmdare.planner.overview import JobView, build_jobs
from cmdare.planner.speed_model import SpeedModel

log = logging.getLogger(__name__)


@dataclass
class SessionOptions:
    targets: list[str] = field(default_factory=list)
    demo: bool = False
    refresh: float = 2.0
    timeout: float = 2.0
    read_only: bool = False
    silent_after: int = 3


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
        self.alerts = AlertEngine()
        self.demo: DemoCluster | None = None
        self._extra_sources = extra_sources or []
        self._demo_factory = demo_factory or (lambda: DemoCluster(geo=True))
        self.poller: Poller | None = None
        self._model: SpeedModel | None = None
        self.state: MonitorState | None = None
        self.started_at = time.monotonic()

    @property
    def is_demo(self) -> bool:
        return self.demo is not None

    def start(self) -> None:
        """Start the demo cluster (when asked, or when no source was given) and build the poller."""
        sources: list[Source] = list(self._extra_sources)
        if self.opts.targets:
            sources.append(ScrapeSource([ScrapeTarget(u) for u in self.opts.targets], timeout=self.opts.timeout))
        if self.opts.demo or not sources:
            self.demo = self._demo_factory()
            self.demo.start()
            sources.append(ScrapeSource(self.demo.targets, timeout=self.opts.timeout))
        self.poller = Poller(sources, self.store, lifecycle=self.lifecycle, clock=self.clock,
                             interval=self.opts.refresh)

    async def refresh(self) -> MonitorState:
        assert self.poller is not None, "start() first"
        cycle = await self.poller.poll_once()
        return self.analyse(cycle)

    def analyse(self, cycle: Cycle) -> MonitorState:
        now = self.clock.now()
        jobs = build_jobs(self.store, self.lifecycle, now)
        extras = self._plan(jobs)
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
        return {"outlook": outlooks, "predicted": predicted}

    def _source_status(self, cycle: Cycle) -> list[SourceStatus]:
        out = [SourceStatus(name, False, msg) for name, msg in cycle.source_errors.items()]
        answered, total = cycle.answered, len(cycle.polls)
        out.append(SourceStatus("targets", answered == total, f"{answered}/{total} targets answered"))
        return out

    async def run(self, stop: asyncio.Event, on_state: Callable[[MonitorState], None]) -> None:
        assert self.poller is not None, "start() first"
        await self.poller.run(stop, lambda c: on_state(self.analyse(c)))

    async def aclose(self) -> None:
        if self.poller is not None:
            await self.poller.aclose()
        if self.demo is not None:
            self.demo.stop()
