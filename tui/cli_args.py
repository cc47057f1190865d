"""The command line's shared vocabulary: value checkers, the global flags every command accepts
(before or after the command name), and the one ``--prices`` vocabulary.

Every checker raises :class:`argparse.ArgumentTypeError` with a one-line message; argparse turns it
into ``cmdare-tui: error: …`` and exit status 2.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

from cmdare.collectors.source_contract import OptionError, http_url, positive_number

# --prices everywhere: the shipped book, the Cloud Billing Catalog API (cached unless read-only,
# falling back to the cache, then the shipped book) or the 2019 prices of the CM-DARE study.
PRICE_MODES = ("offline", "live", "study-era")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
# Global flags and how many values each takes; accepted before the command name too.
GLOBAL_FLAGS = {"--read-only": 0, "--prices": 1, "--log-level": 1, "--config": 1}


def url(value: str) -> str:
    """An http(s) URL with a host and, if given, a port in 1-65535 (argparse type)."""
    try:
        return http_url(value)
    except OptionError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def positive_float(value: str) -> float:
    """A finite number > 0 (argparse type)."""
    try:
        return positive_number(value)
    except OptionError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def env_read_only(env: dict[str, str] | None = None) -> bool:
    """``CMDARE_READ_ONLY`` set to anything but empty or ``0``."""
    return (os.environ if env is None else env).get("CMDARE_READ_ONLY", "").strip() not in ("", "0")


def add_read_only_arg(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--read-only`` (its one definition: the app and ``snapshot`` list it among their sources)."""
    p.add_argument("--read-only", action="store_true", default=env_read_only(),
                   help="write nothing anywhere (also CMDARE_READ_ONLY=1 or read_only = true)")  # fmt: skip


def add_global_args(p: argparse.ArgumentParser) -> None:
    """``--read-only``, ``--prices``, ``--log-level`` and ``--config``, unless ``p`` has them already
    (``--read-only`` among the sources, a command's own ``--prices``)."""
    _add_unless_defined(p, add_read_only_arg)
    _add_unless_defined(p, lambda q: q.add_argument(
        "--prices", choices=PRICE_MODES, default="offline",
        help="price book: offline (shipped, default), live (Cloud Billing Catalog API; "
             "cached unless read-only) or study-era (the 2019 CM-DARE prices)"))  # fmt: skip
    _add_unless_defined(p, lambda q: q.add_argument(
        "--log-level", default=None, type=str.upper, choices=LOG_LEVELS,
        help="log level (default WARNING) of the log file in the state dir (none in "
             "read-only mode); a command given --log-level logs to stderr instead"))  # fmt: skip
    _add_unless_defined(p, lambda q: q.add_argument(
        "--config", metavar="FILE", default=None,
        help="TOML config (default: the user config dir's cmdare-tui/config.toml; see docs/config.md)"))  # fmt: skip


def _add_unless_defined(p: argparse.ArgumentParser, add: Callable[[argparse.ArgumentParser], object]) -> None:
    """``add(p)``, unless ``p`` defines that flag already (argparse refuses a second definition)."""
    try:
        add(p)
    except argparse.ArgumentError:  # "conflicting option string": the command's own definition stays
        pass


def hoist_command(argv: list[str], commands: tuple[str, ...] | list[str]) -> tuple[str | None, list[str]]:
    """The sub-command named after any leading global flags, and the arguments for it (the global
    flags moved behind the command name): ``--read-only snapshot --json`` → ``snapshot``,
    ``[--read-only, --json]``. ``(None, argv)`` when no command is named."""
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok in commands:
            return tok, [*argv[:i], *argv[i + 1 :]]
        name, eq, _ = tok.partition("=")
        if name not in GLOBAL_FLAGS:
            return None, argv
        i += 1 + (0 if eq else GLOBAL_FLAGS[name])
    return None, argv
