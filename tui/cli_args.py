"""The command line's shared vocabulary: value checkers, the global flags every command accepts
(before or after the command name), and the one ``--prices`` vocabulary.

Every checker raises :class:`argparse.ArgumentTypeError` with a one-line message; argparse turns it
into ``cmdare-tui: error: …`` and exit status 2.
"""

from __future__ import annotations

import argparse
import math
import os
from urllib.parse import urlparse

# --prices everywhere: the shipped book, the Cloud Billing Catalog API (cached unless read-only,
# falling back to the cache, then the shipped book) or the 2019 prices of the CM-DARE study.
PRICE_MODES = ("offline", "live", "study-era")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
# Global flags and how many values each takes; accepted before the command name too.
GLOBAL_FLAGS = {"--read-only": 0, "--prices": 1, "--log-level": 1, "--config": 1}


def url(value: str) -> str:
    """An http(s) URL with a host and, if given, a port in 1-65535."""
    try:
        p = urlparse(value)
        p.hostname  # noqa: B018 - an unclosed IPv6 bracket is found here, not by urlparse
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an http(s) URL (bad host): {value!r}") from None
    if p.scheme not in ("http", "https") or not p.hostname:
        raise argparse.ArgumentTypeError(f"not an http(s) URL: {value!r}")
    try:
        port = p.port
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad port in URL (want 1-65535): {value!r}") from None
    if port == 0:
        raise argparse.ArgumentTypeError(f"bad port in URL (want 1-65535): {value!r}")
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in value):
        raise argparse.ArgumentTypeError(f"URL holds spaces or control characters: {value!r}")
    return value


def positive_float(value: str) -> float:
    """A finite number > 0."""
    try:
        x = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if not (math.isfinite(x) and x > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0: {value!r}")
    return x


def env_read_only(env: dict[str, str] | None = None) -> bool:
    """``CMDARE_READ_ONLY`` set to anything but empty or ``0``."""
    return (os.environ if env is None else env).get("CMDARE_READ_ONLY", "").strip() not in ("", "0")


def add_read_only_arg(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--read-only`` (its one definition: the app and ``snapshot`` list it among their sources)."""
    p.add_argument("--read-only", action="store_true", default=env_read_only(),
                   help="write nothing anywhere (also CMDARE_READ_ONLY=1 or read_only = true)")  # fmt: skip


def add_global_args(p: argparse.ArgumentParser) -> None:
    """``--read-only``, ``--prices``, ``--log-level`` and ``--config``, unless ``p`` has them already."""
    have = {s for a in p._actions for s in a.option_strings}
    if "--read-only" not in have:
        add_read_only_arg(p)
    if "--prices" not in have:
        p.add_argument("--prices", choices=PRICE_MODES, default="offline",
                       help="price book: offline (shipped, default), live (Cloud Billing Catalog API; "
                            "cached unless read-only) or study-era (the 2019 CM-DARE prices)")  # fmt: skip
    if "--log-level" not in have:
        p.add_argument("--log-level", default=None, type=str.upper, choices=LOG_LEVELS,
                       help="log level (default WARNING) of the log file in the state dir (none in "
                            "read-only mode); a command given --log-level logs to stderr instead")  # fmt: skip
    if "--config" not in have:
        p.add_argument("--config", metavar="FILE", default=None,
                       help="TOML config (default: the user config dir's cmdare-tui/config.toml; "
                            "see docs/config.md)")  # fmt: skip


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
