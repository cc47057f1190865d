"""The flags that choose what a session monitors, derived from the declared options: the session's own
(:mod:`cmdare.tui.options`) and each source's spec (``collectors/<room>/spec.py``). ``add_source_args``
turns them into argparse flags, ``session_options`` turns the parsed flags (and the config's settings)
into :class:`SessionOptions` and runs the specs' start-up checks. :mod:`cmdare.tui.sources` builds the
sources and knows nothing of argparse. The collectors are imported only when a value is checked:
keeps ``--help`` fast."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmdare.collectors.source_contract import Option, OptionError, SourceValues, all_options, all_specs
from cmdare.tui.cli_args import add_read_only_arg, positive_float
from cmdare.tui.commands import UsageError
from cmdare.tui.options import DEMO, SessionOptions, source_options

if TYPE_CHECKING:
    from cmdare.tui.config import Config


def argparse_type(check: Callable[[str], Any], name: str) -> Callable[[str], Any]:
    """A value check as an argparse ``type``: an OptionError becomes argparse's one-line error."""

    def convert(text: str) -> Any:
        try:
            return check(text)
        except OptionError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = name  # argparse names the type on a ValueError ("invalid <name> value")
    return convert


def add_option(g: argparse._ArgumentGroup, option: Option[Any], env: Mapping[str, str]) -> None:
    """One flag from its declaration (``dest`` = the option's name = its ``[sources]`` key)."""
    if option.kind == "bool":
        g.add_argument(option.flag, dest=option.name, action="store_true", help=option.help)
        return
    default = (env.get(option.env) or None) if option.env else None
    g.add_argument(
        option.flag,
        dest=option.name,
        action="append" if option.repeatable else "store",
        type=argparse_type(option.parse, option.noun),
        default=default if default is not None else option.default,
        metavar=option.metavar,
        help=option.help,
    )


def add_source_args(p: argparse.ArgumentParser, env: Mapping[str, str] | None = None) -> None:
    """Flags that choose what to monitor; shared by the app, ``snapshot`` and ``serve``."""
    env = os.environ if env is None else env
    g = p.add_argument_group("sources")
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
    for option in source_options():
        add_option(g, option, env)


def takes_sources(parser: argparse.ArgumentParser) -> bool:
    """Whether ``parser`` has the source flags (the app, ``snapshot``, ``serve``)."""
    return parser.get_default(DEMO.name) is not None


def session_options(args: argparse.Namespace, config: Config | None = None) -> SessionOptions:
    """The typed options of a session: the flags (the config's ``[sources]`` are their defaults), the
    config's settings that have no flag, and the specs' start-up checks (a failed one: UsageError)."""
    values = SourceValues({o.name: getattr(args, o.name) for o in all_options()})
    opts = SessionOptions(
        demo=args.demo,
        refresh=args.refresh,
        timeout=args.timeout,
        read_only=args.read_only,
        job=args.job,
        record=args.record,
        replay=args.replay,
        replay_speed=args.replay_speed,
        sources=values,
    )
    live = args.demo or any(spec.asked_for(values) for spec in all_specs())
    _check_recording(opts, live)
    for spec in all_specs():
        if spec.asked_for(values):
            try:
                spec.check(values)
            except OptionError as exc:
                raise UsageError(str(exc)) from None
    if not live and not opts.replay:  # no source at all: a spec may find one in the environment
        for spec in all_specs():
            if spec.when_alone is not None:
                values, notes = spec.when_alone(values, os.environ)
                opts.notes += notes
        opts.sources = values
    if config is not None:
        opts = with_config(opts, config)
    if opts.replay:
        opts.read_only = True  # a replay only reads its recording
    check_some_source(args, config)
    return opts


def with_config(opts: SessionOptions, config: Config) -> SessionOptions:
    """``opts`` with the config's settings that have no flag: thresholds, budget, links, caps, jobs."""
    budget, deadline = config.budget_usd, config.deadline_hours
    if config.jobs:  # the first job's goals when [budget] does not set them
        budget = budget or config.jobs[0].budget_usd
        deadline = deadline or config.jobs[0].deadline_hours
    return replace(
        opts,
        silent_after=config.thresholds.get("silent_after", opts.silent_after),
        raise_after=config.thresholds.get("raise_after", opts.raise_after),
        clear_after=config.thresholds.get("clear_after", opts.clear_after),
        budget_usd=budget,
        deadline_hours=deadline,
        link_capacity_gbps=dict(config.links) or None,
        caps=dict(config.caps),
        job_facts=[j.facts for j in config.jobs],
    )


def _check_recording(opts: SessionOptions, live: bool) -> None:
    """``--replay`` alone and a real recording; ``--record`` somewhere writable, not read-only, and an
    existing file a recording to append to."""
    if not (opts.replay or opts.record):
        return
    from cmdare.collectors.recording.recorder import (
        RecordingError,  # (and sqlite3) only when a recording is named
    )
    from cmdare.collectors.recording.replay import open_recording

    if opts.replay:
        if live or opts.record:
            raise UsageError("--replay plays a recording alone: drop the live sources and --record")
        try:
            open_recording(opts.replay).close()
        except RecordingError as exc:
            raise UsageError(str(exc)) from None
    if opts.record:
        if opts.read_only:
            raise UsageError("--record writes a file: it cannot be combined with --read-only")
        from cmdare.collectors import writes

        try:
            writes.probe_writable(opts.record)
        except OSError as exc:
            raise UsageError(f"--record {opts.record}: cannot write there ({exc.strerror})" if exc.strerror
                             else f"--record: {exc}") from None  # fmt: skip
        if Path(opts.record).exists():
            try:
                open_recording(opts.record, replay=False).close()
            except RecordingError as exc:
                raise UsageError(f"--record: {exc}") from None


def check_some_source(args: argparse.Namespace, config: Config | None) -> None:
    """With ``demo = false`` in the config and no source, there is nothing to monitor: say so
    (exit 2) rather than fall back to the demo cluster the config turned off."""
    if config is None or config.sources.get(DEMO.name) is not False or args.demo:
        return
    if any(getattr(args, o.name) for o in source_options() if o.source):
        return
    flags = [o.flag for o in source_options() if o.source and o is not DEMO]
    raise UsageError(
        f"nothing to monitor: {config.path} sets demo = false and no source is given "
        f"({', '.join(flags[:-1])}, {flags[-1]} or {DEMO.flag})"
    )
