"""Which sources a session polls: built from :class:`SessionOptions` (the command line).

Live sources (each kind declared by its spec, ``collectors/<room>/spec.py``: scrape targets and TF_CONFIG
discovery, a Prometheus server, TensorBoard logs, JSON-lines logs) can be combined; a replay stands
alone and brings its own simulated clock. The embedded demo cluster starts when asked, or when nothing
else was given.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cmdare.tui.options import SessionOptions

if TYPE_CHECKING:  # the collectors are imported when sources are built: keeps `--help` fast
    from cmdare.collectors.clock import Clock
    from cmdare.collectors.lifecycle import Lifecycle
    from cmdare.collectors.poller import Sink, Source
    from cmdare.collectors.recording.recorder import Recorder
    from cmdare.collectors.recording.replay import ReplaySource
    from cmdare.collectors.source_contract import SourceNote
    from cmdare.demo.cluster import DemoCluster

log = logging.getLogger(__name__)


@dataclass
class SourcePlan:
    sources: list[Source]
    demo: DemoCluster | None = None
    clock: Clock | None = None  # set for a replay: the session must run on this clock
    interval: float | None = None  # the recorded poll interval of a replay
    replay: ReplaySource | None = None
    recorder: Recorder | None = None
    sinks: list[Sink] = field(default_factory=list)
    notes: list[SourceNote] = field(default_factory=list)  # for the status line (e.g. TF_CONFIG remarks)

    def close(self) -> None:
        """Close the recorder and the replay, if any."""
        if self.recorder is not None:
            self.recorder.close()
        if self.replay is not None:
            self.replay.close()


def live_sources(opts: SessionOptions, extra: Sequence[Source] = ()) -> list[Source]:
    """Every live source the options ask for (the demo excluded), built by each spec that is asked
    for; each kind of source is imported only then (start-up, issue 20)."""
    from cmdare.collectors.source_contract import BuildContext, asked_for

    ctx = BuildContext(job=opts.job, timeout=opts.timeout, refresh=opts.refresh)
    return [*extra, *(src for spec in asked_for(opts.sources) for src in spec.build(opts.sources, ctx))]


def build_sources(
    opts: SessionOptions,
    *,
    lifecycle: Lifecycle | None = None,
    extra_sources: Sequence[Source] = (),
    demo_factory: Callable[[], DemoCluster] | None = None,
) -> SourcePlan:
    """The sources, clock, interval and sinks for a session (starts the demo cluster if chosen)."""
    from cmdare.collectors.scrape.source import ScrapeSource

    if opts.replay:  # the replay and the recorder are imported only when asked for
        from cmdare.collectors.clock import ManualClock
        from cmdare.collectors.recording.replay import ReplaySource

        clock = ManualClock()
        replay = ReplaySource(opts.replay, clock, speed=opts.replay_speed)
        interval = replay.interval or replay.median_gap()
        return SourcePlan([*extra_sources, replay], clock=clock, interval=interval, replay=replay)
    plan = SourcePlan(live_sources(opts, extra_sources), notes=source_notes(opts))
    if opts.demo or not plan.sources:
        if demo_factory is None:
            from cmdare.demo.cluster import DemoCluster

            demo_factory = DemoCluster
        plan.demo = demo_factory()
        plan.demo.start()
        plan.sources.append(ScrapeSource(plan.demo.targets, timeout=opts.timeout, interval_s=opts.refresh))
    if opts.record:
        from cmdare.collectors.recording.recorder import Recorder

        plan.recorder = Recorder(opts.record, lifecycle=lifecycle, interval=opts.refresh)
        plan.sinks.append(plan.recorder)
    return plan


def source_notes(opts: SessionOptions) -> list[SourceNote]:
    """Status-line remarks on the sources: how they were chosen (e.g. from ``$TF_CONFIG``), then each
    spec's on what it was given (e.g. TF_CONFIG tasks sharing one metrics URL)."""
    from cmdare.collectors.source_contract import asked_for

    return [*opts.notes, *(n for spec in asked_for(opts.sources) for n in spec.notes(opts.sources))]
