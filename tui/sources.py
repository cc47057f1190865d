"""Which sources a session polls: built from :class:`SessionOptions` (the command line).

Live sources (scrape targets, TF_CONFIG discovery, a Prometheus server, TensorBoard logs, JSON-lines
logs, MLflow tracking servers and file stores) can be combined; a replay stands alone and brings its own simulated clock. The embedded demo
cluster starts when asked, or when nothing else was given.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from cmdare.tui.options import SessionOptions

if TYPE_CHECKING:  # the collectors are imported when sources are built: keeps `--help` fast
    from cmdare.collectors.clock import Clock
    from cmdare.collectors.lifecycle import Lifecycle
    from cmdare.collectors.poller import Sink, Source
    from cmdare.collectors.recording.recorder import Recorder
    from cmdare.collectors.recording.replay import ReplaySource
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
    notes: list[str] = field(default_factory=list)  # for the status line (e.g. TF_CONFIG remarks)

    def close(self) -> None:
        """Close the recorder and the replay, if any."""
        if self.recorder is not None:
            self.recorder.close()
        if self.replay is not None:
            self.replay.close()


def _host_port(url: str) -> str:
    p = urlsplit(url)
    return f"{p.hostname}:{p.port}" if p.port else (p.hostname or url)


def live_sources(opts: SessionOptions, extra: Sequence[Source] = ()) -> list[Source]:
    """Every live source the options ask for (the demo excluded)."""
    from cmdare.collectors.samples import TaskInfo
    from cmdare.collectors.scrape.source import ScrapeSource, ScrapeTarget

    sources: list[Source] = list(extra)
    # The identity a target falls back on when its page names none: a node_exporter / DCGM page joins
    # the tasks on its host instead (collectors/scrape/source.py); a target not answering yet is "pending"
    # under its URL (collectors/lifecycle.py), so its status and error still show in the Cluster pane.
    targets = [
        ScrapeTarget(u, TaskInfo(job=opts.job or "job", task=_host_port(u), role="node"))
        for u in opts.targets
    ]
    if opts.tf_config:
        from cmdare.collectors.scrape import tf_config

        spec = tf_config.load(opts.tf_config)
        port = tf_config.MetricsPort.parse(opts.metrics_port)
        targets += tf_config.targets(spec, job=opts.job or "training", metrics_port=port)
        targets = list({t.url: t for t in targets}.values())  # one scrape per URL
    if targets:
        sources.append(ScrapeSource(targets, timeout=opts.timeout))
    if opts.prometheus:  # each kind of source is imported only when asked for (start-up, issue 20)
        from cmdare.collectors.prometheus.auth import read_token
        from cmdare.collectors.prometheus.source import PrometheusAPISource

        token = read_token(opts.prometheus_token_file, os.environ)
        sources.append(PrometheusAPISource(opts.prometheus, opts.selector, token=token, timeout=opts.timeout))
    if opts.tensorboard:
        from cmdare.collectors.tensorboard.source import TensorBoardSource

        sources += [TensorBoardSource(d, job=opts.job) for d in opts.tensorboard]
    if opts.jsonl:
        from cmdare.collectors.logs.source import JsonlSource

        sources += [JsonlSource(f, job=opts.job) for f in opts.jsonl]
    if opts.mlflow:
        from cmdare.collectors.mlflow.server import MlflowServerSource

        sources += [
            MlflowServerSource(u, timeout=opts.timeout, experiments=opts.mlflow_experiment, env=os.environ)
            for u in opts.mlflow
        ]
    if opts.mlruns:
        from cmdare.collectors.mlflow.store import MlrunsSource

        sources += [MlrunsSource(d, experiments=opts.mlflow_experiment) for d in opts.mlruns]
    return sources


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
    plan = SourcePlan(live_sources(opts, extra_sources), notes=tf_config_notes(opts))
    if opts.demo or not plan.sources:
        if demo_factory is None:
            from cmdare.demo.cluster import DemoCluster

            demo_factory = DemoCluster
        plan.demo = demo_factory()
        plan.demo.start()
        plan.sources.append(ScrapeSource(plan.demo.targets, timeout=opts.timeout))
    if opts.record:
        from cmdare.collectors.recording.recorder import Recorder

        plan.recorder = Recorder(opts.record, lifecycle=lifecycle, interval=opts.refresh)
        plan.sinks.append(plan.recorder)
    return plan


def tf_config_notes(opts: SessionOptions) -> list[str]:
    """Status-line remarks on TF_CONFIG: where it came from, tasks sharing one metrics URL, no tasks."""
    if not opts.tf_config:
        return [f"$TF_CONFIG ignored: {opts.tf_config_env_error}"] if opts.tf_config_env_error else []
    from cmdare.collectors.scrape import tf_config

    spec = tf_config.load(opts.tf_config)
    port = tf_config.MetricsPort.parse(opts.metrics_port)
    notes = ["tasks from $TF_CONFIG (no other source given)"] if opts.tf_config_from_env else []
    notes += tf_config.shared_urls(spec, metrics_port=port)
    if not tf_config.targets(spec, metrics_port=port):
        notes.append(
            "TF_CONFIG names no chief/worker/ps task (evaluator or single-worker): nothing to scrape"
        )
    return notes
