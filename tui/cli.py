"""``cmdare-tui`` command line: the app (default), and sub-commands listed in COMMANDS.

Bad input prints one line, ``cmdare-tui: error: …``, and exits with status 2 — never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from importlib.metadata import PackageNotFoundError, version
from urllib.parse import urlparse

from cmdare.tui.commands import UsageError

# Sub-command modules (each exposes register(subparsers)); imported only when named on the command line.
COMMANDS = {
    "snapshot": "cmdare.tui.commands.snapshot",
    "predict": "cmdare.tui.commands.predict",
    "prices": "cmdare.tui.commands.prices",
    "plan": "cmdare.tui.commands.plan",
    "serve": "cmdare.tui.commands.serve",
}


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def _version() -> str:
    try:
        return version("cmdare-tui")
    except PackageNotFoundError:
        return "unknown"


def url(value: str) -> str:
    p = urlparse(value)
    if p.scheme not in ("http", "https") or not p.netloc:
        raise argparse.ArgumentTypeError(f"not an http(s) URL: {value!r}")
    return value


def positive_float(value: str) -> float:
    try:
        x = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if not x > 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {value!r}")
    return x


def add_source_args(p: argparse.ArgumentParser) -> None:
    """Flags that choose what to monitor; shared by the app and ``snapshot``."""
    g = p.add_argument_group("sources")
    g.add_argument("--target", action="append", type=url, default=[], metavar="URL",
                   help="a Prometheus /metrics endpoint to scrape (repeatable)")
    g.add_argument("--demo", action="store_true", help="monitor the embedded demo cluster (the default when no source is given)")
    g.add_argument("--refresh", type=positive_float, default=2.0, metavar="SECONDS", help="poll interval (default 2)")
    g.add_argument("--timeout", type=positive_float, default=2.0, metavar="SECONDS", help="per-target timeout (default 2)")
    g.add_argument("--read-only", action="store_true", default=os.environ.get("CMDARE_READ_ONLY", "") not in ("", "0"),
                   help="write nothing anywhere (also CMDARE_READ_ONLY=1)")
    from cmdare.tui.sources import add_collector_args

    add_collector_args(g)


def build_parser() -> OneLineParser:
    p = OneLineParser(prog="cmdare-tui", description="Terminal dashboard and planner for training on transient cloud GPUs.")
    p.add_argument("--version", action="version", version=f"cmdare-tui {_version()}")
    p.add_argument("--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    p.add_argument("--prices", choices=["offline", "live"], default="offline",
                   help="price book: the shipped offline book (default) or the Cloud Billing Catalog API "
                        "(Google credentials; falls back to the cache, then the offline book)")
    add_config_arg(p)
    add_source_args(p)
    return p


def add_config_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE", default=None,
                   help="TOML config (default: the user config dir's cmdare-tui/config.toml; see docs/config.md)")


def load_config_defaults(argv: list[str], parser: argparse.ArgumentParser) -> None:
    """Read the config (``--config`` or the default file) and make it the parser's defaults, so
    flags on the command line still win. Raises UsageError with file, line and key on a bad file."""
    from cmdare.tui.config import ConfigError, load_config

    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--config", default=None)
    known, _ = pre.parse_known_args(argv)
    try:
        cfg = load_config(known.config)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    defaults: dict = {"app_config": cfg}
    if cfg.refresh is not None:
        defaults["refresh"] = cfg.refresh
    if cfg.timeout is not None:
        defaults["timeout"] = cfg.timeout
    if cfg.read_only:
        defaults["read_only"] = True
    if cfg.prices != "offline":
        defaults["prices"] = cfg.prices
    if "targets" in cfg.sources:
        defaults["target"] = list(cfg.sources["targets"])
    if "demo" in cfg.sources:
        defaults["demo"] = cfg.sources["demo"]
    dests = {a.dest for a in parser._actions}
    for key, value in cfg.sources.items():  # other source keys that have a flag: defaults, flags win
        if key not in ("targets", "demo") and key in dests:
            defaults[key] = value
    parser.set_defaults(**defaults)


def session_options(args: argparse.Namespace):  # -> SessionOptions (imported lazily: keeps --help fast)
    from cmdare.tui.session import SessionOptions
    from cmdare.tui.sources import collector_options

    opts = SessionOptions(targets=args.target, demo=args.demo, refresh=args.refresh, timeout=args.timeout,
                          read_only=args.read_only, **collector_options(args))
    cfg = getattr(args, "app_config", None)
    if cfg is not None:  # config keys that have no flag: map onto whatever SessionOptions fields exist
        dests = set(vars(args))  # keys with a flag were applied as parser defaults (flags win)
        extra = {k: v for k, v in cfg.sources.items() if k not in ("targets", "demo") and k not in dests}
        extra.update(cfg.thresholds)
        extra.update({"budget_usd": cfg.budget_usd, "deadline_hours": cfg.deadline_hours})
        extra["link_capacity_gbps"] = dict(cfg.links) or None
        if cfg.jobs:
            extra["jobs"] = list(cfg.jobs)
            job = cfg.jobs[0]
            extra["budget_usd"] = extra["budget_usd"] or job.budget_usd
            extra["deadline_hours"] = extra["deadline_hours"] or job.deadline_hours
        for k, v in extra.items():
            if hasattr(opts, k) and v is not None:
                setattr(opts, k, v)
    if getattr(args, "replay", None):
        opts.read_only = True  # a replay only reads its recording
    return opts


def run_app(args: argparse.Namespace) -> int:
    from cmdare.collectors import writes
    from cmdare.tui.app import CmdareApp

    opts = session_options(args)
    writes.set_read_only(opts.read_only)
    cfg = getattr(args, "app_config", None)
    app = CmdareApp(opts, theme=cfg.theme if cfg else None, animations=bool(cfg and cfg.animations),
                    keys=cfg.keys if cfg else None, live_prices=args.prices == "live")
    code = app.run()
    return int(code or 0)


def _redact_log_output() -> None:
    """Every handler on the root logger redacts credentials (records of any module propagate there)."""
    from cmdare.collectors.redaction import RedactFilter

    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, RedactFilter) for f in handler.filters):
            handler.addFilter(RedactFilter())


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] in COMMANDS:
            parser = OneLineParser(prog="cmdare-tui")
            sub = parser.add_subparsers(dest="command", required=True)
            importlib.import_module(COMMANDS[argv[0]]).register(sub)
            sub_parser = sub.choices[argv[0]]
            if not any(a.dest == "config" for a in sub_parser._actions):
                add_config_arg(sub_parser)
            load_config_defaults(argv[1:], sub_parser)
            args = parser.parse_args(argv)
            logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
            _redact_log_output()
            return int(args.func(args) or 0)
        parser = build_parser()
        parser.epilog = "sub-commands: " + ", ".join(COMMANDS) + " (cmdare-tui COMMAND --help)"
        load_config_defaults(argv, parser)
        args = parser.parse_args(argv)
        logging.basicConfig(level=getattr(logging, args.log_level), handlers=[logging.NullHandler()])
        return run_app(args)
    except UsageError as exc:
        print(f"cmdare-tui: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
