"""A monitoring session: the sources chosen on the command line, the poller, the store, and what the
planner makes of them after each poll. Shared by the Textual app and the headless ``snapshot``."""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cmdare.collectors.capabilities import Focusable
from cmdare.collectors.caps import Caps
from cmdare.collectors.caps import configure as configure_caps
from cmdare.collectors.clock import Clock, SystemClock
from cmdare.collectors.lifecycle import Lifecycle
from cmdare.collectors.observed import JobView, OverviewCache, build_jobs
from cmdare.collectors.poller import RATE_WINDOW_POLLS, Cycle, Poller, Source
from cmdare.collectors.redaction import redact_cut
from cmdare.collectors.store import Store
from cmdare.collectors.untrusted import MESSAGE_LIMIT, clean_text, install_log_cleaning
from cmdare.planner.view import PlannerView
from cmdare.planner.view_json import planner_view_json
from cmdare.tui.allocator import settle_allocator
from cmdare.tui.options import SessionOptions
from cmdare.tui.sources import SourcePlan, build_sources

if TYPE_CHECKING:
    from pathlib import Path

    from cmdare.collectors.pricing.book import PriceBook
    from cmdare.collectors.recording.replay import ReplaySource
    from cmdare.demo.cluster import DemoCluster
    from cmdare.planner.analysis import Analysis
    from cmdare.planner.rules.alerts import Alert

log = logging.getLogger(__name__)

# state seconds: the live ranking starts at most this often (it throttles itself more: 10-60 s)
RANK_EVERY_S = 5.0
MAX_FAILURES_SHOWN = 3  # failing targets named in the status line (all of them are in the log)


@dataclass(frozen=True)
class SourceStatus:
    name: str
    ok: bool
    message: str

    def __post_init__(self) -> None:  # messages quote exceptions, whose text may come from outside
        object.__setattr__(self, "name", clean_text(self.name, MESSAGE_LIMIT))
        object.__setattr__(self, "message", clean_text(self.message, MESSAGE_LIMIT))


@dataclass(frozen=True, kw_only=True)
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
    planner: PlannerView = field(default_factory=PlannerView)  # the planner's answer (empty until it loads)
    selected: str | None = None  # the job the Job and Planner panes follow (the app's choice)

    def job(self, name: str | None = None) -> JobView | None:
        """The job called ``name`` (default: the selected one, else the first); None if there is none."""
        if not self.jobs:
            return None
        name = name or self.selected
        if name is None:
            return self.jobs[0]
        return next((j for j in self.jobs if j.name == name), self.jobs[0] if name == self.selected else None)

    def to_json(self) -> dict[str, Any]:
        """The state as a JSON-ready dict (``snapshot --json`` and the app's export;
        ``docs/planner_view.schema.json``): the planner's part is :func:`planner_view_json`."""
        return {
            "time": self.t,
            "demo": self.demo,
            "read_only": self.read_only,
            "jobs": [j.to_json(self.t) for j in self.jobs],
            "alerts": [a.to_json() for a in self.alerts],
            "sources": [s.__dict__ for s in self.sources],
            "planner": planner_view_json(self.planner),
        }


def refresh_error(exc: BaseException) -> str:
    """One line about a refresh that raised (shown in the status line)."""
    return clean_text(f"refresh failed: {type(exc).__name__}: {exc}", MESSAGE_LIMIT)


def _default_demo() -> DemoCluster:
    """The demo cluster with its geo pipeline; imported only when a demo runs (keeps start-up fast)."""
    from cmdare.demo.cluster import DemoCluster

    return DemoCluster(geo=True)


class MonitorSession:
    def __init__(
        self,
        opts: SessionOptions,
        *,
        clock: Clock | None = None,
        extra_sources: list[Source] | None = None,
        demo_factory: Callable[[], DemoCluster] | None = None,
    ) -> None:
        self.opts = opts
        self.clock = clock or SystemClock()
        configure_caps(Caps(**opts.caps))  # process-wide, like the read-only switch; before the store
        self.store = Store()
        for facts in opts.job_facts:  # the config's [[jobs]]; cmdare_job_info from an exporter replaces them
            self.store.job(facts.job).facts = facts
        self.lifecycle = Lifecycle(silent_after=opts.silent_after, vanished_after=2 * opts.silent_after)
        self.demo: DemoCluster | None = None
        self._extra_sources = extra_sources or []
        self._demo_factory = demo_factory or _default_demo
        self.poller: Poller | None = None
        self._engine_rows: list[dict[str, str]] = []  # firing alerts of the generated rules (--prometheus)
        self.plan: SourcePlan | None = None
        self.price_book: PriceBook | None = None  # set by the app after loading; else the offline book
        self.analysis: Analysis | None = None  # the planner's pipeline, loaded after the first frame
        self._ranking: asyncio.Future | None = None
        self._ranked_at: float | None = None  # when the last ranking started (the state's time)
        self.state: MonitorState | None = None
        self.started_at = time.monotonic()
        self._screen_focus: frozenset[str] = frozenset()  # task keys on screen (the app says which)
        self._overview = OverviewCache()  # the overview's views between refreshes (rebuilt as tasks change)
        self._playing = asyncio.Event()  # cleared while live polling is paused (the space key)
        self._playing.set()

    @property
    def polling_paused(self) -> bool:
        """Whether live polling is paused (a replay pauses itself: ``plan.replay.paused``)."""
        return not self._playing.is_set()

    def pause_polling(self) -> None:
        """Poll no more, and draw no poll that was under way, until :meth:`resume_polling`."""
        self._playing.clear()

    def resume_polling(self) -> None:
        self._playing.set()

    async def _until_playing(self, stop: asyncio.Event) -> None:
        """Wait while live polling is paused (or until ``stop``)."""
        if self._playing.is_set():
            return
        waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self._playing.wait())]
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        for w in waiters:
            w.cancel()

    async def _held(self, replay: ReplaySource | None, stop: asyncio.Event) -> None:
        """A pause that came while a poll (or a recorded cycle) was being read holds it off the screen
        until play resumes: the screen stays as it was when the key was pressed."""
        if replay is not None:
            await replay.hold_while_paused()
        else:
            await self._until_playing(stop)

    @property
    def is_demo(self) -> bool:
        return self.demo is not None

    def start(self) -> None:
        """Start the demo cluster (when asked, or when no source was given) and build the poller."""
        install_log_cleaning()  # sources log what they read: no control character reaches a log
        settle_allocator()  # a large fleet's freed answers go back to the system (tui/allocator.py)
        self.plan = build_sources(
            self.opts,
            lifecycle=self.lifecycle,
            extra_sources=self._extra_sources,
            demo_factory=self._demo_factory,
        )
        self.demo = self.plan.demo
        if self.plan.clock is not None:  # a replay runs on the recording's clock
            self.clock = self.plan.clock
        self.poller = Poller(
            self.plan.sources,
            self.store,
            lifecycle=self.lifecycle,
            clock=self.clock,
            interval=self.plan.interval or self.opts.refresh,
            sinks=self.plan.sinks,
        )

    async def refresh(self) -> MonitorState:
        """Poll once, update the store and the planner, and return the new state."""
        assert self.poller is not None, "start() first"
        cycle = await self.poller.poll_once()
        self._engine_rows = await self._engine_alerts()
        return self.analyse(cycle)

    async def _engine_alerts(self) -> list[dict[str, str]]:
        """The firing alerts of the generated rules (``cmdare-tui rules``) on each Prometheus-API source,
        their labels cleaned (none when no source is one, or the server does not answer: logged)."""
        if "cmdare.collectors.prometheus.source" not in sys.modules:  # no such source without its module
            return []
        from cmdare.collectors.prometheus.answers import PrometheusAPIError
        from cmdare.collectors.prometheus.source import PrometheusAPISource

        rows: list[dict[str, str]] = []
        assert self.poller is not None
        for src in self.poller.sources:
            if isinstance(src, PrometheusAPISource):
                try:
                    async with asyncio.timeout(src.timeout):
                        rows += await src.engine_alerts(self.poller.client())
                except (PrometheusAPIError, TimeoutError) as exc:
                    log.info("engine alerts from %s: %s", src.display, redact_cut(str(exc), 200))
        return rows

    def analyse(self, cycle: Cycle) -> MonitorState:
        """The state after a poll. The first poll shows what was measured at once; the planner
        (models, rules, prices: ~0.3 s to load) joins from the second, when rates exist anyway."""
        now = self.clock.now()
        jobs = build_jobs(self.store, self.lifecycle, now, cache=self._overview)
        planner = PlannerView()
        alerts: list[Alert] = []
        history: list[Alert] = []
        sources = self._source_status(cycle)
        if self.poller is not None and self.poller.cycles > 1 or self.analysis is not None:
            try:
                engine = self._analysis()
                planner, alerts = engine.refresh(self.store, jobs, now, self.opts.refresh * RATE_WINDOW_POLLS)
                history = list(engine.alerts.history)
                if self._engine_rows:  # the rule engine's alerts beside the app's, marked by origin
                    from cmdare.planner.rules.engine_alerts import merge_engine_alerts

                    alerts = merge_engine_alerts(alerts, self._engine_rows, {j.name for j in jobs}, now)
            except Exception as exc:  # the measurements still show; the planner's failure is a status
                log.exception("planner failed")
                sources.append(
                    SourceStatus(
                        "planner", False, redact_cut(f"planner unavailable: {type(exc).__name__}: {exc}", 200)
                    )
                )
        self.state = MonitorState(
            t=now,
            cycles=self.poller.cycles if self.poller else 0,
            jobs=jobs,
            alerts=alerts,
            alert_history=history,
            sources=sources,
            demo=self.is_demo,
            read_only=self.opts.read_only,
            planner=planner,
        )
        self._send_focus()  # the tasks the alerts name are read in detail next refresh
        return self.state

    def set_focus(self, keys: Iterable[str]) -> None:
        """The tasks on screen (keys ``job/task``): a large fleet reads them in detail on every refresh,
        with the tasks the alerts name."""
        keys = frozenset(keys)
        if keys != self._screen_focus:  # the refresh itself has just sent the same (analyse)
            self._screen_focus = keys
            self._send_focus()

    def _send_focus(self) -> None:
        alerted = {a.subject for a in self.state.alerts} if self.state is not None else set()
        keys = self._screen_focus | alerted
        for source in self.plan.sources if self.plan is not None else []:
            if isinstance(source, Focusable):
                source.set_focus(keys)

    def _analysis(self) -> Analysis:
        if self.analysis is None:
            from cmdare.planner.analysis import Analysis, Goals  # heavy: loaded after the first frame

            if self.price_book is None:
                from cmdare.collectors.pricing import load_offline_book

                self.price_book = load_offline_book()
            links = self.opts.link_capacity_gbps
            geo = getattr(self.demo, "geo", None)
            if links is None and geo is not None:  # the demo's scenario plays the user's [links] config
                links = {frozenset((k["a"], k["b"])): float(k["gbps"]) for k in geo.sc["links"]}
            self.analysis = Analysis(
                self.price_book,
                raise_after=self.opts.raise_after,
                clear_after=self.opts.clear_after,
                goals=Goals(self.opts.budget_usd, self.opts.deadline_hours),
                link_capacity_gbps=links,
            )
        return self.analysis

    def set_price_book(self, book: PriceBook) -> None:
        """Use ``book`` from now on (the app loads live prices in a thread): costs accrue at its
        rates and the next ranking uses it."""
        self.price_book = book
        if self.analysis is not None:
            self.analysis.set_price_book(book)

    def _source_status(self, cycle: Cycle) -> list[SourceStatus]:
        out = [SourceStatus(name, False, msg) for name, msg in cycle.source_errors.items()]
        out += [SourceStatus(name, False, f"{name}: {msg}") for name, msg in cycle.truncations.items()]
        out += [
            SourceStatus(name, True, msg) for name, msg in cycle.notes.items()
        ]  # how a large fleet was read
        answered, total = cycle.answered, len(cycle.polls)
        behind = [p for p in cycle.polls if p.ok and p.catching_up]  # answered, but not up to date yet
        answered -= len(behind)
        note = f", {len(behind)} catching up" if behind else ""
        # log runs whose writers are done: no failure, said with when they ended (below)
        done = [p for p in cycle.polls if not p.ok and p.finished]
        if done:
            total -= len(done)
            note += f", {len(done):,} finished"
        # targets waiting their turn (a back-off on an unchanged page) answer as they last did; their source's
        # note says how often they are asked, so the line reads the same whether or not they were asked this time
        answered, total = answered + cycle.waiting, total + cycle.waiting
        if cycle.unchanged:  # up, not scraped since the last refresh: nothing new to read
            answered, total = answered + cycle.unchanged, total + cycle.unchanged
            note += f", {cycle.unchanged:,} unchanged since the last refresh"
        out.append(
            SourceStatus("targets", answered == total, f"{answered:,}/{total:,} targets answered{note}")
        )
        for p in behind[:MAX_FAILURES_SHOWN]:  # by task name: the status line is short, a log path long
            out.append(
                SourceStatus(
                    p.source, False, f"{p.info.task if p.info else p.source}: {p.error or 'catching up'}"
                )
            )
        for remark in self.plan.notes if self.plan else []:  # the specs' remarks (tui/sources.py)
            out.append(SourceStatus(remark.source, remark.ok, remark.text))
        failed = [p for p in cycle.polls if not p.ok and not p.finished]
        for p in failed[:MAX_FAILURES_SHOWN]:
            out.append(SourceStatus(p.source, False, f"{p.source}: {p.error or 'no answer'}"))
        if len(failed) > MAX_FAILURES_SHOWN:
            out.append(SourceStatus("targets", False, f"… {len(failed) - MAX_FAILURES_SHOWN} more failing"))
        remarks = [p for p in cycle.polls if p.ok and p.error and not p.catching_up]  # answered, with a note
        remarks += done
        for p in remarks[: max(0, MAX_FAILURES_SHOWN - len(failed))]:
            out.append(SourceStatus(p.source, True, f"{p.source}: {p.error}"))
        if (ranks := self.lifecycle.rank_note) is not None:  # launchers given the same RANK
            out.append(SourceStatus("ranks", False, ranks))
        return out

    async def update_plans(self) -> None:
        """Re-rank shapes for the latest state now (awaits the thread)."""
        if self.state is not None:
            engine = self._analysis()
            jobs = self.state.jobs
            engine.live_plans = await asyncio.to_thread(
                engine.rank, jobs, self.state.t, self.lifecycle.all_lifetimes(), engine.ranking_columns(jobs)
            )

    def _start_ranking(self) -> None:
        """Start re-ranking in a thread unless one is running or one started less than
        :data:`RANK_EVERY_S` ago on the state's clock, the one the live planner throttles itself by
        (it calibrates every 10 s and re-ranks every 10-60 s anyway; asking it each refresh cost a list
        of every task's lifetime; a replay played faster ranks as often per recorded second); the next
        refresh shows the result."""
        engine = self.analysis
        if self.state is None or engine is None or (self._ranking is not None and not self._ranking.done()):
            return
        now = self.state.t
        if self._ranked_at is not None and 0 <= now - self._ranked_at < RANK_EVERY_S:  # < 0: replay rewound
            return
        self._ranked_at = now

        def done(fut: asyncio.Future) -> None:
            if not fut.cancelled() and fut.exception() is None:
                engine.live_plans = fut.result()

        jobs = self.state.jobs  # with copies of their columns, taken here: the next refresh updates its own
        self._ranking = asyncio.ensure_future(
            asyncio.to_thread(
                engine.rank, jobs, self.state.t, self.lifecycle.all_lifetimes(), engine.ranking_columns(jobs)
            )
        )
        self._ranking.add_done_callback(done)

    async def run(
        self,
        stop: asyncio.Event,
        on_state: Callable[[MonitorState], None],
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        """Poll until ``stop`` is set. Whatever one refresh raises (a source, the planner, a pane
        in ``on_state``) is logged and handed to ``on_error`` as one line; the next poll still runs.
        A replay paces itself (its speed, pause and step act at once) and the loop returns when the
        recording has ended: the last recorded state stays on screen."""
        assert self.poller is not None, "start() first"
        replay = self.plan.replay if self.plan is not None else None
        while not stop.is_set():
            await self._until_playing(stop)
            if stop.is_set():
                return
            started = self.poller.clock.monotonic()
            try:
                cycle = await self.poller.poll_once()
                if replay is not None and replay.ended:
                    return
                await self._held(replay, stop)
                if stop.is_set():
                    return
                on_state(self.analyse(cycle))
                self._start_ranking()
            except Exception as exc:
                log.exception("refresh failed; polling goes on")
                if on_error is not None:
                    on_error(refresh_error(exc))
            if replay is None:
                await self.poller.wait_next(started, stop)
            else:
                await asyncio.sleep(0)  # the replay waits for its own gaps; let the screen draw

    @property
    def recording(self) -> Path | None:
        """The file this session records to (``--record``), while it does."""
        recorder = self.plan.recorder if self.plan is not None else None
        return recorder.path if recorder is not None and not recorder.closed else None

    def close_sources(self) -> None:
        """Close the recorder (its WAL moved into the file: the ``.sqlite`` alone is the whole recording) and the
        replay. Every way out calls it; the second call does nothing."""
        if self.plan is not None:
            self.plan.close()

    def emergency_close(self) -> None:
        """For a process about to exit at once, from any thread: the recording's committed cycles checkpointed
        into its main file through a connection of their own (the recorder may be mid-write)."""
        recorder = self.plan.recorder if self.plan is not None else None
        if recorder is not None and not recorder.closed:
            from cmdare.collectors.recording.recorder import checkpoint_file

            checkpoint_file(recorder.path)

    async def aclose(self) -> None:
        """Wait for a running ranking (5 s at most), close the poller and the sources (recorder, replay), stop the demo."""
        if self._ranking is not None and not self._ranking.done():
            await asyncio.wait([self._ranking], timeout=5)
        if self.poller is not None:
            await self.poller.aclose()
        self.close_sources()
        if self.demo is not None:
            self.demo.stop()
