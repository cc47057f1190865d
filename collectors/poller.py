"""Runs every source concurrently on an asyncio loop and writes what they return into the store.

Polls never overlap: the next cycle is armed when the last one ends. A source that raises is
turned into a status line, never a crash.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from itertools import islice
from operator import attrgetter
from typing import Protocol

import httpx

from cmdare.collectors import metrics as M
from cmdare.collectors.capabilities import (
    CapNoting,
    Closable,
    Displayed,
    FleetReading,
    PacedPolling,
    StatusNoting,
    UnchangedCounting,
)
from cmdare.collectors.caps import CapGate
from cmdare.collectors.clock import Clock, SystemClock
from cmdare.collectors.http_client import new_client
from cmdare.collectors.jobrate import fleet_rate, job_rate
from cmdare.collectors.lifecycle import Lifecycle, Transition
from cmdare.collectors.plausibility import checked
from cmdare.collectors.redaction import redact_cut
from cmdare.collectors.samples import TaskPoll, TaskState
from cmdare.collectors.store import Store, TaskSeries
from cmdare.collectors.untrusted import MESSAGE_LIMIT, clean_text

log = logging.getLogger(__name__)

# A large fleet's job: how it trains and its global step are read from this many of its freshest tasks
# (the focus and the sweep read them at most a refresh ago); its rates come from the server.
FLEET_SAMPLE = 64

RATE_WINDOW_POLLS = 5  # rates are taken over the last ~5 polls (measured time, not nominal)


class Source(Protocol):
    name: str

    async def poll(self, client: httpx.AsyncClient, clock: Clock) -> list[TaskPoll]: ...


@dataclass(frozen=True, kw_only=True)
class Cycle:
    """What one poll cycle produced."""

    t: float
    elapsed: float
    polls: list[TaskPoll]
    transitions: list[Transition]
    source_errors: dict[str, str] = field(default_factory=dict)
    truncations: dict[str, str] = field(default_factory=dict)  # per source: what its caps dropped
    unchanged: int = 0  # tasks up but not scraped since the last cycle (no poll: nothing new)
    waiting: int = (
        0  # targets not asked this cycle, their page the same for a while (their source's note says)
    )
    notes: dict[str, str] = field(default_factory=dict)  # per source: how it read this cycle (large fleets)

    def __post_init__(self) -> None:
        """A source's exception text may quote what it read: cleaned in place (sinks add theirs later)."""
        for name, message in list(self.source_errors.items()):
            self.source_errors[name] = clean_text(message, MESSAGE_LIMIT)

    @property
    def answered(self) -> int:
        return sum(1 for p in self.polls if p.ok)


Sink = Callable[[Cycle], None]


def _shown_name(source: Source) -> str:
    """The name a source is shown and recorded under (its display name when it has one)."""
    return (source.display if isinstance(source, Displayed) else None) or source.name


class Poller:
    def __init__(
        self,
        sources: Sequence[Source],
        store: Store,
        *,
        lifecycle: Lifecycle | None = None,
        clock: Clock | None = None,
        interval: float = 2.0,
        sinks: Sequence[Sink] = (),
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.sources = list(sources)
        self.store = store
        self.lifecycle = lifecycle or Lifecycle()
        self.clock = clock or SystemClock()
        self.interval = interval
        self.sinks = list(sinks)
        self._client = client
        self.cycles = 0
        self.last_cycle: Cycle | None = None
        self._wake = asyncio.Event()
        self._gates = [CapGate() for _ in self.sources]  # tasks and series caps, one gate per source

    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            limits = httpx.Limits(max_connections=256, max_keepalive_connections=256)
            self._client = new_client(
                limits
            )  # no bound of its own: each source's request runs under its timeout
        return self._client

    async def _poll_source(self, source: Source) -> tuple[list[TaskPoll], str | None]:
        try:
            return await source.poll(self.client(), self.clock), None
        except Exception as exc:  # a broken source is a status, not a crash
            name = "" if getattr(exc, "clean_end", False) else f"{type(exc).__name__}: "
            msg = redact_cut(f"{name}{exc}")  # redacted before it is cut, never after
            log.warning("source %s failed: %s", source.name, msg)
            if log.isEnabledFor(logging.DEBUG):  # the frames only: the raw message may hold a secret
                log.debug(
                    "where %s failed:\n%s", source.name, "".join(traceback.format_tb(exc.__traceback__))
                )
            return [], msg

    async def poll_once(self) -> Cycle:
        t0 = self.clock.monotonic()
        self.store.release_figures()  # a large store's figures of the last cycle (store.FIGURES_KEPT_UNDER)
        results = await asyncio.gather(*(self._poll_source(s) for s in self.sources))
        admitted = [g.admit(ps) for g, (ps, _) in zip(self._gates, results, strict=True)]
        truncations = self._truncations()
        unpolled = [u for s in self.sources if isinstance(s, PacedPolling) for u in s.unpolled]  # unchanged
        polls = self.lifecycle.resolve([p for ps in admitted for p in ps], unpolled)
        errors = {s.name: e for s, (_, e) in zip(self.sources, results, strict=True) if e}
        for i, p in enumerate(polls):
            polls[i] = p = checked(p, self.store)  # implausible values refused, with a note
            self.store.add(p)
            if not p.ok:
                log.info("poll %s: %s", p.source, p.error)
        transitions = self.lifecycle.observe(polls)
        t = self.clock.now()
        for source in self.sources:  # a large fleet's figures from the server (prometheus/fleet.py)
            fleet = source.fleet if isinstance(source, FleetReading) else None
            if fleet is not None:
                self.store.take_fleet(fleet.roles)
        # a source that reads each task only every so often (a large fleet's sweep) says how far back
        # a rate must reach for a task's last two points
        self.store.set_sparse_window(
            max((s.sparse_window_s for s in self.sources if isinstance(s, FleetReading)), default=0.0)
        )
        self._update_jobs(t, polls)
        unchanged = sum(s.unchanged for s in self.sources if isinstance(s, UnchangedCounting))
        cycle = Cycle(
            t=t,
            elapsed=self.clock.monotonic() - t0,
            polls=polls,
            transitions=transitions,
            source_errors=errors,
            truncations=truncations,
            unchanged=unchanged,
            waiting=len(unpolled),
            notes=self._notes(),
        )
        self.cycles += 1
        self.last_cycle = cycle
        for sink in self.sinks:
            try:
                sink(cycle)
            except Exception as exc:
                log.error("sink %r failed: %s", sink, exc)
                errors[getattr(sink, "__name__", "sink")] = redact_cut(str(exc))
        return cycle

    def _truncations(self) -> dict[str, str]:
        """What each source's caps dropped this cycle (by source name; logged once a cycle)."""
        out: dict[str, str] = {}
        for source, gate in zip(self.sources, self._gates, strict=True):
            own = (
                source.cap_note if isinstance(source, CapNoting) else None
            )  # its own caps (rows, tags, cycle)
            note = "; ".join(n for n in (gate.note, own) if n) or None
            if note:
                name = _shown_name(source)
                out[name] = clean_text(note, MESSAGE_LIMIT)
                log.info("source %s truncated: %s", name, note)
        return out

    def _notes(self) -> dict[str, str]:
        """How each source read this cycle, when it says (a large fleet's focus and sweep; node detail
        refused or cut, tasks followed to a new address), by name."""
        notes = {}
        for source in self.sources:
            mode = source.mode_note if isinstance(source, FleetReading) and source.fleet is not None else None
            status = source.status_note if isinstance(source, StatusNoting) else None  # e.g. tasks replaced
            note = "; ".join(n for n in (mode, status) if n)
            if note:
                notes[_shown_name(source)] = clean_text(note, MESSAGE_LIMIT)
        return notes

    def _update_jobs(self, t: float, polls: list[TaskPoll]) -> None:
        """Append each job's cluster-wide figures (for plots): steps/s (by how the job trains, see
        :mod:`jobrate`), examples/s, global step. A large fleet's rates come from the server; how it
        trains and its global step from the tasks read in detail this cycle (the freshest)."""
        window = max(self.interval * RATE_WINDOW_POLLS, 1e-9)
        nodes = self.lifecycle.nodes
        for job, members in self.store.members.items():
            js = self.store.job(job)
            if js.fleet:
                jr = fleet_rate(job_rate(self._fresh(members, polls), js.facts, window), js.fleet)
            else:
                tasks = [
                    ts for k, ts in members.items() if (n := nodes.get(k)) is None or n.state is TaskState.UP
                ]
                done = [
                    ts for k, ts in members.items() if (n := nodes.get(k)) and n.state is TaskState.FINISHED
                ]
                if not tasks and not done:
                    continue
                jr = job_rate(tasks, js.facts, window)
                if done:  # finished runs: no rate, but the step they reached stays the job's
                    steps = [g for ts in done if (g := ts.latest(M.K_GLOBAL_STEP)) is not None]
                    known = [g for g in (jr.global_step, *steps) if g == g]  # not NaN
                    jr = replace(jr, global_step=max(known) if known else jr.global_step)
            js.sync, js.sync_how, js.rate_basis = jr.sync, jr.how, jr.basis
            js.steps_coverage, js.examples_coverage = jr.steps_coverage, jr.examples_coverage
            js.append(
                t,
                {
                    "steps_per_sec": jr.steps_per_sec,
                    "examples_per_sec": jr.examples_per_sec,
                    "global_step": jr.global_step,
                },
            )

    @staticmethod
    def _fresh(members: dict[str, TaskSeries], polls: list[TaskPoll]) -> list[TaskSeries]:
        """Up to :data:`FLEET_SAMPLE` of a large job's tasks read this cycle (the first met), else its
        most recently seen."""
        read = list(
            islice(
                (members[k] for p in polls if p.ok and p.info and (k := p.info.key) in members), FLEET_SAMPLE
            )
        )
        if len(read) >= 2:
            return read
        return heapq.nlargest(FLEET_SAMPLE, members.values(), key=attrgetter("last_seen"))

    def poke(self) -> None:
        """Ask for the next poll now (the `r` key): every source reads everything, targets that were
        polled less often while unchanged included."""
        for source in self.sources:
            if isinstance(source, PacedPolling):
                source.wake()
        self._wake.set()

    async def run(self, stop: asyncio.Event, on_cycle: Callable[[Cycle], None] | None = None) -> None:
        """Poll until ``stop`` is set; the next poll starts ``interval`` after the last one *began*,
        or right after it ended if it took longer."""
        while not stop.is_set():
            started = self.clock.monotonic()
            cycle = await self.poll_once()
            if on_cycle is not None:
                on_cycle(cycle)
            await self.wait_next(started, stop)

    async def wait_next(self, started: float, stop: asyncio.Event) -> None:
        """Sleep until ``interval`` after ``started`` (monotonic), or until stopped or poked."""
        delay = max(0.0, self.interval - (self.clock.monotonic() - started))
        self._wake.clear()
        waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self._wake.wait())]
        await asyncio.wait(waiters, timeout=delay, return_when=asyncio.FIRST_COMPLETED)
        for w in waiters:
            w.cancel()

    async def aclose(self) -> None:
        for source in self.sources:  # sources that hold connections of their own (e.g. many-host scrapes)
            if isinstance(source, Closable):
                try:
                    await source.aclose()
                except Exception as exc:
                    log.warning("closing source %s: %s", source.name, exc)
        if self._client is not None:
            await self._client.aclose()
            self._client = None
