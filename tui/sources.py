"""Which sources a session polls: built from :class:`SessionOptions` (the command line).

Live sources (scrape targets, TF_CONFIG discovery, a Prometheus server, TensorBoard logs, JSON-lines
logs) can be combined; a replay stands alone and brings its own simulated clock. The embedded demo
cluster starts when asked, or when nothing else was given.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from cmdare.tui.commands import UsageError

if TYPE_CHECKING:  # the collectors are imported when sources are built: keeps `--help` fast
    from cmdare.collectors.clock import Clock
    from cmdare.collectors.demo_cluster import DemoCluster
    from cmdare.collectors.lifecycle import Lifecycle
    from cmdare.collectors.poller import Sink, Source
    from cmdare.collectors.recorder import Recorder
    from cmdare.collectors.replay import ReplaySource
    from cmdare.tui.session import SessionOptions

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
        if self.recorder is not None:
            self.recorder.close()
        if self.replay is not None:
            self.replay.close()


def _host_port(url: str) -> str:
    p = urlsplit(url)
    return f"{p.hostname}:{p.port}" if p.port else (p.hostname or url)


def live_sources(opts: SessionOptions, extra: Sequence[Source] = ()) -> list[Source]:
    """Every live source the options ask for (the demo excluded)."""
    from cmdare.collectors import tf_config
    from cmdare.collectors.jsonl import JsonlSource
    from cmdare.collectors.prometheus_api import PrometheusAPISource, read_token
    from cmdare.collectors.samples import TaskInfo
    from cmdare.collectors.scrape import ScrapeSource, ScrapeTarget
    from cmdare.collectors.tensorboard import TensorBoardSource

    sources: list[Source] = list(extra)
    # The identity a target falls back on when its page names none: a node_exporter / DCGM page joins
    # the tasks on its host instead (collectors/scrape.py); a target not answering yet is "pending"
    # under its URL (collectors/lifecycle.py), so its status and error still show in the Cluster pane.
    targets = [ScrapeTarget(u, TaskInfo(job=opts.job or "job", task=_host_port(u), role="node"))
               for u in opts.targets]
    if opts.tf_config:
        spec = tf_config.load(opts.tf_config)
        port = tf_config.MetricsPort.parse(opts.metrics_port)
        targets += tf_config.targets(spec, job=opts.job or "training", metrics_port=port)
        targets = list({t.url: t for t in targets}.values())  # one scrape per URL
    if targets:
        sources.append(ScrapeSource(targets, timeout=opts.timeout))
    if opts.prometheus:
        token = read_token(opts.prometheus_token_file, os.environ)
        sources.append(PrometheusAPISource(opts.prometheus, opts.selector, token=token, timeout=opts.timeout))
    sources += [TensorBoardSource(d, job=opts.job) for d in opts.tensorboard]
    sources += [JsonlSource(f, job=opts.job) for f in opts.jsonl]
    return sources


def build_sources(
    opts: SessionOptions,
    *,
    lifecycle: Lifecycle | None = None,
    extra_sources: Sequence[Source] = (),
    demo_factory: Callable[[], DemoCluster] | None = None,
) -> SourcePlan:
    """The sources, clock, interval and sinks for a session (starts the demo cluster if chosen)."""
    from cmdare.collectors.clock import ManualClock
    from cmdare.collectors.recorder import Recorder
    from cmdare.collectors.replay import ReplaySource
    from cmdare.collectors.scrape import ScrapeSource

    if opts.replay:
        clock = ManualClock()
        replay = ReplaySource(opts.replay, clock, speed=opts.replay_speed)
        interval = replay.interval or replay.median_gap()
        return SourcePlan([*extra_sources, replay], clock=clock, interval=interval, replay=replay)
    plan = SourcePlan(live_sources(opts, extra_sources), notes=tf_config_notes(opts))
    if opts.demo or not plan.sources:
        if demo_factory is None:
            from cmdare.collectors.demo_cluster import DemoCluster as demo_factory
        plan.demo = demo_factory()
        plan.demo.start()
        plan.sources.append(ScrapeSource(plan.demo.targets, timeout=opts.timeout))
    if opts.record:
        plan.recorder = Recorder(opts.record, lifecycle=lifecycle, interval=opts.refresh)
        plan.sinks.append(plan.recorder)
    return plan


def tf_config_notes(opts: SessionOptions) -> list[str]:
    """Status-line remarks on TF_CONFIG: where it came from, tasks sharing one metrics URL, no tasks."""
    from cmdare.collectors import tf_config

    if not opts.tf_config:
        return [f"$TF_CONFIG ignored: {opts.tf_config_env_error}"] if opts.tf_config_env_error else []
    spec = tf_config.load(opts.tf_config)
    port = tf_config.MetricsPort.parse(opts.metrics_port)
    notes = ["tasks from $TF_CONFIG (no other source given)"] if opts.tf_config_from_env else []
    notes += tf_config.shared_urls(spec, metrics_port=port)
    if not tf_config.targets(spec, metrics_port=port):
        notes.append("TF_CONFIG names no chief/worker/ps task (evaluator or single-worker): nothing to scrape")
    return notes


def env_tf_config(args: argparse.Namespace, live: object) -> tuple[str | None, str]:
    """``$TF_CONFIG`` when no source at all was given (explicit flags win), and why it is unusable."""
    from cmdare.collectors import tf_config

    value = os.environ.get("TF_CONFIG", "").strip()
    if live or getattr(args, "replay", None) or not value:
        return None, ""
    try:
        tf_config.targets(tf_config.load(value), metrics_port=tf_config.MetricsPort.parse(args.metrics_port))
    except tf_config.TFConfigError as exc:
        return None, str(exc)
    return value, ""


# --- command line ------------------------------------------------------------------------------
_MATCHER = r'\s*[A-Za-z_][A-Za-z0-9_]*\s*(=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"\s*'
_SELECTOR = re.compile(rf"^\{{?(?:{_MATCHER}(?:,{_MATCHER})*)?,?\s*\}}?$")


def selector(value: str) -> str:
    """A PromQL label selector such as ``job="resnet",env!="dev"`` (braces optional)."""
    v = value.strip()
    if not _SELECTOR.match(v) or (v.startswith("{") != v.endswith("}")):
        raise argparse.ArgumentTypeError(f'not a label selector (want e.g. job="resnet"): {value!r}')
    return v


def readable_file(value: str) -> str:
    if not Path(value).is_file() or not os.access(value, os.R_OK):
        raise argparse.ArgumentTypeError(f"not a readable file: {value!r}")
    return value


def directory(value: str) -> str:
    if not Path(value).is_dir():
        raise argparse.ArgumentTypeError(f"not a directory: {value!r}")
    return value


def tf_config_value(value: str) -> str:
    from cmdare.collectors.tf_config import TFConfigError, load

    try:
        load(value)
    except TFConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


def metrics_port(value: str) -> str:
    from cmdare.collectors.tf_config import MetricsPort, TFConfigError

    try:
        MetricsPort.parse(value)
    except TFConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value.strip()


def add_collector_args(g: argparse._ArgumentGroup, env: dict[str, str] | None = None) -> None:
    """The live-collector flags (issue 3), added to the ``sources`` group of the app and ``snapshot``."""
    from cmdare.tui.cli import positive_float, url

    env = dict(os.environ) if env is None else env
    g.add_argument(
        "--prometheus",
        type=url,
        default=env.get("PROMETHEUS_URL") or None,
        metavar="URL",
        help="a Prometheus server to query (also PROMETHEUS_URL)",
    )
    g.add_argument(
        "--selector",
        type=selector,
        default="",
        metavar="LABELS",
        help='label selector choosing the job in Prometheus, e.g. job="resnet"',
    )
    g.add_argument(
        "--prometheus-token-file",
        type=readable_file,
        default=None,
        metavar="FILE",
        help="file holding a bearer token for Prometheus (else PROMETHEUS_TOKEN)",
    )
    g.add_argument(
        "--tensorboard",
        action="append",
        type=directory,
        default=[],
        metavar="DIR",
        help="tail TensorBoard event files in DIR (repeatable)",
    )
    g.add_argument(
        "--jsonl",
        action="append",
        type=readable_file,
        default=[],
        metavar="FILE",
        help="tail a JSON-lines metric log (repeatable)",
    )
    g.add_argument(
        "--tf-config",
        type=tf_config_value,
        default=None,
        metavar="JSON|FILE",
        help="TF_CONFIG cluster spec to discover tasks from (default: $TF_CONFIG, when no other source is given)",
    )
    g.add_argument(
        "--metrics-port",
        type=metrics_port,
        default="9400",
        metavar="PORT|+N",
        help="metrics port of TF_CONFIG tasks: a port, or +N = training port + N (default 9400)",
    )
    g.add_argument("--job", default=None, metavar="NAME", help="job name for sources that carry none")
    g.add_argument("--record", default=None, metavar="FILE", help="append every poll to an SQLite recording")
    g.add_argument("--replay", type=readable_file, default=None, metavar="FILE", help="play a recording back")
    g.add_argument(
        "--replay-speed",
        type=positive_float,
        default=1.0,
        metavar="X",
        help="replay speed factor (default 1 = as recorded)",
    )


def collector_options(args: argparse.Namespace) -> dict[str, Any]:
    """SessionOptions fields from the collector flags; conflicting or unusable ones raise UsageError."""
    from cmdare.collectors.recorder import RecordingError
    from cmdare.collectors.replay import open_recording

    live = args.target or args.prometheus or args.tensorboard or args.jsonl or args.tf_config or args.demo
    from_env, env_error = (None, "") if args.tf_config else env_tf_config(args, live)
    if args.replay:
        if live or args.record:
            raise UsageError("--replay plays a recording alone: drop the live sources and --record")
        try:
            open_recording(args.replay).close()
        except RecordingError as exc:
            raise UsageError(str(exc)) from None
    if args.tf_config:
        from cmdare.collectors import tf_config

        try:
            tf_config.targets(
                tf_config.load(args.tf_config), metrics_port=tf_config.MetricsPort.parse(args.metrics_port)
            )
        except tf_config.TFConfigError as exc:
            raise UsageError(str(exc)) from None
    if args.record:
        if getattr(args, "read_only", False):
            raise UsageError("--record writes a file: it cannot be combined with --read-only")
        from cmdare.collectors import writes

        try:
            writes.probe_writable(args.record)
        except OSError as exc:
            raise UsageError(f"--record {args.record}: cannot write there ({exc.strerror})" if exc.strerror
                             else f"--record: {exc}") from None  # fmt: skip
        if Path(args.record).exists():
            try:
                open_recording(args.record).close()
            except RecordingError as exc:
                raise UsageError(f"--record: {exc}") from None
    names = (
        "job",
        "prometheus",
        "selector",
        "prometheus_token_file",
        "tensorboard",
        "jsonl",
        "tf_config",
        "metrics_port",
        "record",
        "replay",
        "replay_speed",
    )
    out = {n: getattr(args, n) for n in names}
    if from_env:
        out.update(tf_config=from_env, tf_config_from_env=True)
    out["tf_config_env_error"] = env_error
    return out
