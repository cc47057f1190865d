"""The scrape source's contract: Prometheus ``/metrics`` pages read directly — named with ``--target``
(the exporter of each task, node_exporter, DCGM) or found in a TensorFlow cluster spec (``--tf-config``,
or ``$TF_CONFIG`` when no other source is given), all read by one :class:`~cmdare.collectors.scrape.source.ScrapeSource`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from cmdare.collectors.source_contract import (
    BuildContext,
    Option,
    OptionError,
    SourceNote,
    SourceSpec,
    SourceValues,
    http_url,
)

if TYPE_CHECKING:
    from cmdare.collectors.poller import Source
    from cmdare.collectors.scrape.source import ScrapeTarget

METRICS_PORT = "9400"  # the default of --metrics-port (tf_config.DEFAULT_METRICS_PORT; a test checks)
TF_CONFIG_ENV = "TF_CONFIG"
NOTES_AS = "tf_config"  # the name the status line (and snapshot's JSON) shows TF_CONFIG remarks under


def tf_config_value(value: str) -> str:
    """A TF_CONFIG JSON text or file that parses."""
    from cmdare.collectors.scrape.tf_config import TFConfigError, load

    try:
        load(value)
    except TFConfigError as exc:
        raise OptionError(str(exc)) from None
    return value


def metrics_port(value: str) -> str:
    """A metrics port (``9400``) or an offset from the training port (``+1``)."""
    if value == METRICS_PORT:  # the default: no need to load tf_config for it
        return value
    from cmdare.collectors.scrape.tf_config import MetricsPort, TFConfigError

    try:
        MetricsPort.parse(value)
    except TFConfigError as exc:
        raise OptionError(str(exc)) from None
    return value.strip()


TARGETS: Option[list[str]] = Option(
    name="targets", flag="--target", default=[], noun="http(s) URL", repeatable=True, source=True,
    check=http_url, metavar="URL", help="a Prometheus /metrics endpoint to scrape (repeatable)",
)  # fmt: skip
TF_CONFIG: Option[str | None] = Option(
    name="tf_config", flag="--tf-config", default=None, noun="TF_CONFIG JSON or file path", source=True,
    probe=tf_config_value, metavar="JSON|FILE",
    help="TF_CONFIG cluster spec to discover tasks from (default: $TF_CONFIG, when no other source is given)",
)  # fmt: skip
METRICS: Option[str] = Option(
    name="metrics_port", flag="--metrics-port", default=METRICS_PORT, noun='port ("9400") or "+N"',
    check=metrics_port, metavar="PORT|+N",
    help="metrics port of TF_CONFIG tasks: a port, or +N = training port + N (default 9400)",
)  # fmt: skip


def _host_port(url: str) -> str:
    p = urlsplit(url)
    return f"{p.hostname}:{p.port}" if p.port else (p.hostname or url)


def scrape_targets(values: SourceValues, job: str | None) -> list[ScrapeTarget]:
    """The pages to read: each ``--target``, then the TF_CONFIG tasks' (one scrape per URL)."""
    from cmdare.collectors.samples import TaskInfo
    from cmdare.collectors.scrape.source import ScrapeTarget

    # The identity a target falls back on when its page names none: a node_exporter / DCGM page joins
    # the tasks on its host instead (collectors/scrape.py); a target not answering yet is "pending"
    # under its URL (collectors/lifecycle.py), so its status and error still show in the Cluster pane.
    targets = [
        ScrapeTarget(u, TaskInfo(job=job or "job", task=_host_port(u), role="node")) for u in values[TARGETS]
    ]
    text = values[TF_CONFIG]
    if text:
        from cmdare.collectors.scrape import tf_config

        spec = tf_config.load(text)
        port = tf_config.MetricsPort.parse(values[METRICS])
        targets += tf_config.targets(spec, job=job or "training", metrics_port=port)
        targets = list({t.url: t for t in targets}.values())  # one scrape per URL
    return targets


def build(values: SourceValues, ctx: BuildContext) -> list[Source]:
    """One scrape source for every page, or none."""
    from cmdare.collectors.scrape.source import ScrapeSource

    targets = scrape_targets(values, ctx.job)
    return [ScrapeSource(targets, timeout=ctx.timeout, interval_s=ctx.refresh)] if targets else []


def check(values: SourceValues) -> None:
    """The TF_CONFIG's tasks resolve with the metrics port."""
    text = values[TF_CONFIG]
    if not text:
        return
    from cmdare.collectors.scrape import tf_config

    try:
        tf_config.targets(tf_config.load(text), metrics_port=tf_config.MetricsPort.parse(values[METRICS]))
    except tf_config.TFConfigError as exc:
        raise OptionError(str(exc)) from None


def notes(values: SourceValues) -> list[SourceNote]:
    """Status-line remarks on a TF_CONFIG: tasks sharing one metrics URL, no task to scrape."""
    text = values[TF_CONFIG]
    if not text:
        return []
    from cmdare.collectors.scrape import tf_config

    spec = tf_config.load(text)
    port = tf_config.MetricsPort.parse(values[METRICS])
    out = [
        SourceNote(source=NOTES_AS, text=n, ok=False) for n in tf_config.shared_urls(spec, metrics_port=port)
    ]
    if not tf_config.targets(spec, metrics_port=port):
        text = "TF_CONFIG names no chief/worker/ps task (evaluator or single-worker): nothing to scrape"
        out.append(SourceNote(source=NOTES_AS, text=text))
    return out


def when_alone(values: SourceValues, environ: Mapping[str, str]) -> tuple[SourceValues, list[SourceNote]]:
    """``$TF_CONFIG`` when no source at all was given (explicit flags win), or why it is unusable."""
    value = environ.get(TF_CONFIG_ENV, "").strip()
    if not value:
        return values, []
    given = values.replace(tf_config=value)
    try:
        check(given)
    except OptionError as exc:
        return values, [SourceNote(source=NOTES_AS, text=f"$TF_CONFIG ignored: {exc}", ok=False)]
    return given, [SourceNote(source=NOTES_AS, text="tasks from $TF_CONFIG (no other source given)")]


SPEC = SourceSpec(
    name="scrape",
    summary="Prometheus /metrics pages read directly: the exporter's, node_exporter, DCGM; TF_CONFIG's tasks",
    order=10,
    options=(TARGETS, TF_CONFIG, METRICS),
    build=build,
    check=check,
    notes=notes,
    when_alone=when_alone,
)
