"""Every command-line flag that chooses what a session monitors, in one place: their value checkers,
their definitions (``add_source_args``) and their translation into :class:`SessionOptions` fields
(``collector_options``). :mod:`cmdare.tui.sources` builds the sources from those typed options and knows
nothing of argparse. The collectors are imported only when a value is checked: keeps ``--help`` fast."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import Any

from cmdare.collectors.redaction import redact_cut
from cmdare.tui.cli_args import add_read_only_arg, positive_float, url
from cmdare.tui.commands import UsageError
from cmdare.tui.options import SessionOptions

_MATCHER = r'\s*[A-Za-z_][A-Za-z0-9_]*\s*(=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"\s*'
_SELECTOR = re.compile(rf"^\{{?(?:{_MATCHER}(?:,{_MATCHER})*)?,?\s*\}}?$")


def selector(value: str) -> str:
    """A PromQL label selector such as ``job="resnet",env!="dev"`` (braces optional)."""
    v = value.strip()
    if not _SELECTOR.match(v) or (v.startswith("{") != v.endswith("}")):
        raise argparse.ArgumentTypeError(f'not a label selector (want e.g. job="resnet"): {value!r}')
    return v


def readable_file(value: str) -> str:
    """A path to a readable regular file (argparse type): a FIFO or a device is refused at once."""
    from cmdare.collectors.textfile import file_problem
    from cmdare.collectors.untrusted import clean_text

    problem = file_problem(value)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{clean_text(redact_cut(value, 200))}: {problem}")
    return value


def directory(value: str) -> str:
    """A path to an existing directory (argparse type)."""
    try:
        ok = Path(value).is_dir()
    except (OSError, ValueError):  # e.g. a name too long for the file system, an embedded NUL
        ok = False
    if not ok:
        raise argparse.ArgumentTypeError(f"not a directory: {redact_cut(value, 200)!r}")
    return value


def tf_config_value(value: str) -> str:
    """A TF_CONFIG JSON text or file that parses (argparse type)."""
    from cmdare.collectors.scrape.tf_config import TFConfigError, load

    try:
        load(value)
    except TFConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


METRICS_PORT = "9400"  # the default of --metrics-port (tf_config.DEFAULT_METRICS_PORT)


def metrics_port(value: str) -> str:
    """A metrics port (``9400``) or an offset from the training port (``+1``) (argparse type)."""
    if value == METRICS_PORT:  # argparse checks the default too: no need to load tf_config for it
        return value
    from cmdare.collectors.scrape.tf_config import MetricsPort, TFConfigError

    try:
        MetricsPort.parse(value)
    except TFConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value.strip()


def add_collector_args(g: argparse._ArgumentGroup, env: dict[str, str] | None = None) -> None:
    """The live-collector flags (issue 3), added to the ``sources`` group of the app and ``snapshot``."""
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
        help="tail a JSON-lines metric log (MMEngine, detectron2, plain), a Lightning metrics.csv or an HF "
        "trainer_state.json (repeatable)",
    )
    g.add_argument(
        "--mlflow",
        action="append",
        type=url,
        default=[],
        metavar="URL",
        help="an MLflow tracking server to read runs from (repeatable; credentials: user:password in the URL "
        "or MLFLOW_TRACKING_USERNAME/PASSWORD/TOKEN)",
    )
    g.add_argument(
        "--mlruns",
        action="append",
        type=directory,
        default=[],
        metavar="DIR",
        help="read an MLflow file store (an mlruns folder, or the folder holding it) (repeatable)",
    )
    g.add_argument(
        "--mlflow-experiment",
        action="append",
        default=[],
        metavar="NAME",
        help="show only this MLflow experiment's runs (repeatable; default: every active experiment)",
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
        default=METRICS_PORT,
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
    live = (
        args.target or args.prometheus or args.tensorboard or args.jsonl or args.mlflow or args.mlruns
        or args.tf_config or args.demo
    )  # fmt: skip
    from_env, env_error = (None, "") if args.tf_config else env_tf_config(args, live)
    if args.replay or args.record:  # the recording's modules (and sqlite3) only when one is named
        from cmdare.collectors.recording.recorder import RecordingError
        from cmdare.collectors.recording.replay import open_recording
    if args.replay:
        if live or args.record:
            raise UsageError("--replay plays a recording alone: drop the live sources and --record")
        try:
            open_recording(args.replay).close()
        except RecordingError as exc:
            raise UsageError(str(exc)) from None
    if args.tf_config:
        from cmdare.collectors.scrape import tf_config

        try:
            tf_config.targets(
                tf_config.load(args.tf_config), metrics_port=tf_config.MetricsPort.parse(args.metrics_port)
            )
        except tf_config.TFConfigError as exc:
            raise UsageError(str(exc)) from None
    for path in args.jsonl:  # from the config too (argparse checks a list default with no type)
        try:
            readable_file(path)
        except argparse.ArgumentTypeError as exc:
            raise UsageError(f"--jsonl {exc}") from None
    for path in args.mlruns:  # from the config too (a list default is not checked by argparse)
        try:
            directory(path)
        except argparse.ArgumentTypeError as exc:
            raise UsageError(f"--mlruns {exc}") from None
    if args.prometheus_token_file:
        from cmdare.collectors.prometheus.auth import read_token
        from cmdare.collectors.textfile import TextFileError

        try:
            read_token(args.prometheus_token_file, {})
        except TextFileError as exc:
            raise UsageError(f"--prometheus-token-file: {exc}") from None
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
                open_recording(args.record, replay=False).close()
            except RecordingError as exc:
                raise UsageError(f"--record: {exc}") from None
    names = (
        "job",
        "prometheus",
        "selector",
        "prometheus_token_file",
        "tensorboard",
        "jsonl",
        "mlflow",
        "mlruns",
        "mlflow_experiment",
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


def env_tf_config(args: argparse.Namespace, live: object) -> tuple[str | None, str]:
    """``$TF_CONFIG`` when no source at all was given (explicit flags win), and why it is unusable."""
    value = os.environ.get("TF_CONFIG", "").strip()
    if live or getattr(args, "replay", None) or not value:
        return None, ""
    from cmdare.collectors.scrape import tf_config

    try:
        tf_config.targets(tf_config.load(value), metrics_port=tf_config.MetricsPort.parse(args.metrics_port))
    except tf_config.TFConfigError as exc:
        return None, str(exc)
    return value, ""


def add_source_args(p: argparse.ArgumentParser) -> None:
    """Flags that choose what to monitor; shared by the app and ``snapshot``."""
    g = p.add_argument_group("sources")
    g.add_argument(
        "--target",
        action="append",
        type=url,
        default=[],
        metavar="URL",
        help="a Prometheus /metrics endpoint to scrape (repeatable)",
    )
    g.add_argument(
        "--demo",
        action="store_true",
        help="monitor the embedded demo cluster (the default when no source is given)",
    )
    g.add_argument(
        "--refresh", type=positive_float, default=2.0, metavar="SECONDS", help="poll interval (default 2)"
    )
    g.add_argument(
        "--timeout",
        type=positive_float,
        default=2.0,
        metavar="SECONDS",
        help="per-target timeout (default 2)",
    )
    add_read_only_arg(g)
    add_collector_args(g)


def session_options(args: argparse.Namespace) -> SessionOptions:
    """The typed options of a session: the flags, then the config keys that have no flag."""
    opts = SessionOptions(
        targets=args.target,
        demo=args.demo,
        refresh=args.refresh,
        timeout=args.timeout,
        read_only=args.read_only,
        **collector_options(args),
    )
    cfg = getattr(args, "app_config", None)
    if cfg is not None:  # config keys that have no flag: map onto whatever SessionOptions fields exist
        dests = set(vars(args))  # keys with a flag were applied as parser defaults (flags win)
        extra = {k: v for k, v in cfg.sources.items() if k not in ("targets", "demo") and k not in dests}
        extra.update(cfg.thresholds)
        extra.update({"budget_usd": cfg.budget_usd, "deadline_hours": cfg.deadline_hours})
        extra["link_capacity_gbps"] = dict(cfg.links) or None
        extra["caps"] = dict(cfg.caps) or None
        if cfg.jobs:
            extra["job_facts"] = [j.facts for j in cfg.jobs]
            job = cfg.jobs[0]
            extra["budget_usd"] = extra["budget_usd"] or job.budget_usd
            extra["deadline_hours"] = extra["deadline_hours"] or job.deadline_hours
        for k, v in extra.items():
            if hasattr(opts, k) and v is not None:
                setattr(opts, k, v)
    if getattr(args, "replay", None):
        opts.read_only = True  # a replay only reads its recording
    check_some_source(args)
    return opts


def check_some_source(args: argparse.Namespace) -> None:
    """With ``demo = false`` in the config and no source, there is nothing to monitor: say so
    (exit 2) rather than fall back to the demo cluster the config turned off."""
    cfg = getattr(args, "app_config", None)
    if cfg is None or cfg.sources.get("demo") is not False or args.demo:
        return
    if not (
        args.target or args.prometheus or args.tensorboard or args.jsonl or args.mlflow or args.mlruns
        or args.tf_config or args.replay
    ):  # fmt: skip
        raise UsageError(
            f"nothing to monitor: {cfg.path} sets demo = false and no source is given "
            "(--target, --prometheus, --tensorboard, --jsonl, --mlflow, --mlruns, --tf-config, --replay or --demo)"
        )
