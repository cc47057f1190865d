"""``cmdare-tui`` command line: the app (default), and sub-commands listed in COMMANDS.

Bad input prints one line, ``cmdare-tui: error: …``, and exits with status 2 — never a traceback.
Exit status: 0 ok; 1 the command ran but found nothing healthy (``snapshot``) or an unexpected
error (one line; its traceback goes to the log file unless read-only); 2 bad input; 130 Ctrl+C;
141 stdout closed early (``| head``).
The global flags (``--read-only``, ``--prices``, ``--log-level``, ``--config``) go before or after
the command name.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from typing import TYPE_CHECKING, Any, NoReturn

from cmdare.tui.cli_args import add_global_args, hoist_command
from cmdare.tui.commands import UsageError
from cmdare.tui.logsetup import log_crash, setup_logging
from cmdare.tui.source_flags import add_source_args, session_options, takes_sources

if TYPE_CHECKING:
    from cmdare.tui.config import Config

__all__ = ["main", "build_parser", "add_source_args", "load_config_defaults", "session_options"]  # fmt: skip

# Sub-command modules (each exposes register(subparsers)); imported only when named on the command line.
COMMANDS = {
    "snapshot": "cmdare.tui.commands.snapshot",
    "predict": "cmdare.tui.commands.predict",
    "prices": "cmdare.tui.commands.prices",
    "plan": "cmdare.tui.commands.plan",
    "serve": "cmdare.tui.commands.serve",
    "rules": "cmdare.tui.commands.rules",
}


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


# How long a lone ESC waits for the rest of an escape sequence (Textual's default: 100 ms, so `esc` took
# 100+ ms to answer); alt+key (ESC then the key) also comes this long after it is pressed. Terminals, tmux and
# sshd pass a key's sequence in one write. 10 ms is tmux's own escape-time since tmux 3.5 (500 ms before):
# https://github.com/tmux/tmux/issues/3844, commit 2e9d7ebf15615b51b014a12de03b0e5483aadf99. The user's own
# ESCDELAY wins (a link that splits a key's bytes further apart than this: set it higher).
ESCAPE_DELAY_MS = 10

# What `cmdare-tui --help` says after the flags: the app's keys (tui/app.py BINDINGS and the tables';
# tests/test_screens_habits.py holds every app key to a line here) and three ways to start.
APP_EPILOG = """keys (? in the app lists every key, the mouse and a legend of the symbols):
  tab, 1-4    switch pane               enter      open the row (task detail, alert, plan)
  j k ↑ ↓     move the cursor           ← → Home   scroll sideways
  / s S c     filter, sort, reverse,    space      pause / resume polling
              choose columns            r          poll every source now
  n           follow the next job       p          next plot (Job pane)
  e           export the state as JSON  ctrl+p     command palette
  ?           help                      q, ctrl+c  quit
  replay:     space pause, . one poll, + faster, - slower

examples:
  cmdare-tui --demo
      a simulated cluster on this machine, to look around
  cmdare-tui --target http://127.0.0.1:9400/metrics --target http://127.0.0.1:9401/metrics
      scrape the exporter of each task of a job
  cmdare-tui --prometheus http://127.0.0.1:9090 --selector 'job="resnet"'
      ask a Prometheus server (or VictoriaMetrics) for a job's tasks

sub-commands: {commands} (cmdare-tui COMMAND --help)"""


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # ~25 ms: only for --version

    try:
        return version("cmdare-tui")
    except PackageNotFoundError:
        return "unknown"


class _VersionAction(argparse.Action):
    """``--version``: the installed version, looked up only when asked for."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(f"cmdare-tui {_version()}")  # on stdout, like argparse's own version action
        parser.exit()


def build_parser() -> OneLineParser:
    """The ``cmdare-tui`` parser: source flags, global flags and the sub-commands."""
    p = OneLineParser(
        prog="cmdare-tui",
        description="Terminal dashboard and planner for training on transient cloud GPUs.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action=_VersionAction, nargs=0, help="show the version and exit")
    add_source_args(p)
    add_global_args(p)
    return p


def load_config_defaults(argv: list[str], parser: argparse.ArgumentParser) -> Config:
    """Read the config (``--config`` or the default file) and make its settings that have a flag the
    parser's defaults, so flags on the command line still win; the config itself is returned (its other
    settings go to :func:`session_options`). Raises UsageError with file, line and key on a bad file."""
    from cmdare.tui.config import ConfigError, load_config, probe_sources

    pre = OneLineParser(add_help=False)
    pre.add_argument("--config", default=None)
    try:
        config = pre.parse_known_args(argv)[0].config
    except UsageError:  # e.g. `--config` without a value: the full parser says so
        config = None
    try:
        cfg = load_config(config)
        if takes_sources(parser):  # a command that monitors: its paths must be there
            probe_sources(cfg)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    defaults: dict[str, Any] = dict(cfg.sources)  # each [sources] key is an option's name: its flag's dest
    if cfg.refresh is not None:
        defaults["refresh"] = cfg.refresh
    if cfg.timeout is not None:
        defaults["timeout"] = cfg.timeout
    if cfg.read_only:
        defaults["read_only"] = True
    if cfg.prices is not None:  # every command's --prices, `prices` included
        defaults["prices"] = cfg.prices
    parser.set_defaults(**defaults)
    return cfg


def run_app(args: argparse.Namespace, config: Config | None = None) -> int:
    """Run the Textual app on the options the command line gives; the exit status."""
    from cmdare.collectors import writes

    gc.disable()  # start-up allocates much and frees little: the app collects again after its first frame
    os.environ.setdefault("ESCDELAY", str(ESCAPE_DELAY_MS))  # read when Textual is first imported
    from cmdare.tui.app import CmdareApp

    writes.set_read_only(bool(getattr(args, "read_only", False)))  # already while the flags are checked
    opts = session_options(args, config)
    writes.set_read_only(opts.read_only)
    setup_logging(args.log_level, to_stderr=False)  # never stderr under a full-screen UI
    app = CmdareApp(
        opts,
        theme=config.theme if config else None,
        animations=bool(config and config.animations),
        keys=config.keys if config else None,
        prices=args.prices,
    )
    try:
        app.run()
    finally:  # however the app ended (a crash included): the recording closed, complete in its file
        app.session.close_sources()
    return int(app.return_code or 0)


def _command_parser(name: str) -> tuple[OneLineParser, argparse.ArgumentParser]:
    parser = OneLineParser(prog="cmdare-tui")
    sub = parser.add_subparsers(dest="command", required=True)
    importlib.import_module(COMMANDS[name]).register(sub)
    sub_parser = sub.choices[name]
    add_global_args(sub_parser)
    return parser, sub_parser


def _run(argv: list[str]) -> int:
    from cmdare.collectors import writes

    command, rest = hoist_command(argv, tuple(COMMANDS))
    if command is not None:
        parser, sub_parser = _command_parser(command)
        config = load_config_defaults(rest, sub_parser)
        args = parser.parse_args([command, *rest])
        writes.set_read_only(bool(getattr(args, "read_only", False)))
        setup_logging(args.log_level, to_stderr=args.log_level is not None)  # else the log file
        return int(args.func(args, config) or 0)
    parser = build_parser()
    parser.epilog = APP_EPILOG.format(commands=", ".join(COMMANDS))
    config = load_config_defaults(argv, parser)
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        named = next((tok for tok in argv if tok in COMMANDS), None)
        if named is None:
            raise
        raise UsageError(
            f"{exc} (only --read-only, --prices, --log-level and --config may come before "
            f"the command: cmdare-tui {named} [its flags])"
        ) from None
    return run_app(args, config)


def main(argv: list[str] | None = None) -> int:
    """Run the app or a command; returns the exit status (see the module docstring)."""
    from cmdare.collectors.writes import ReadOnlyError, UnsafeTargetError

    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] == "--session-args-from-env":  # a session started by `serve`
            from cmdare.tui.commands.serve import session_argv

            argv = session_argv(argv)
        return _run(argv)
    except (UsageError, ReadOnlyError, UnsafeTargetError) as exc:
        _say(str(exc))
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `cmdare-tui … | head`: the reader left; say nothing
        _silence_stdout()
        return 141
    except Exception as exc:  # noqa: BLE001 - last resort: one line here, the traceback in the log
        where = log_crash(exc)
        _say(f"unexpected {type(exc).__name__}: {exc}" + (f" (traceback in {where})" if where else ""))
        return 1


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _say(message: str) -> None:
    """One line on stderr: the message redacted, then through the one sanitiser (control characters,
    newlines and bidi controls made visible) and cut to a message's length."""
    from cmdare.collectors.redaction import redact
    from cmdare.collectors.untrusted import MESSAGE_LIMIT, clean_text

    print(f"cmdare-tui: error: {clean_text(redact(message), MESSAGE_LIMIT)}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
