"""Where the log goes: ``cmdare-tui.log`` in the user state dir (at WARNING, or ``--log-level``),
never in read-only mode; a command given ``--log-level`` logs to stderr instead. The app (a
full-screen terminal UI) never logs to stderr. Every handler redacts credentials."""

from __future__ import annotations

import logging
from pathlib import Path

from cmdare.collectors import writes

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def log_path() -> Path:
    """``$XDG_STATE_HOME/cmdare-tui/cmdare-tui.log`` on Linux (platformdirs elsewhere)."""
    from platformdirs import user_state_dir

    return Path(user_state_dir("cmdare-tui")) / "cmdare-tui.log"


def setup_logging(level: str | None, *, to_stderr: bool) -> Path | None:
    """Configure the root logger at ``level`` (default WARNING); returns the log file, if any."""
    from cmdare.collectors.redaction import RedactFilter

    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    root.setLevel(getattr(logging, level or "WARNING"))
    path: Path | None = None
    if to_stderr:
        handler: logging.Handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    elif writes.is_read_only():
        handler = logging.NullHandler()
    else:
        try:
            path = log_path()
            handler = writes.log_handler(path)
        except OSError:  # no usable state dir: the app still runs, without a log file
            path, handler = None, logging.NullHandler()
        handler.setFormatter(logging.Formatter(FORMAT))
    handler.addFilter(RedactFilter())
    root.addHandler(handler)
    return path


def log_crash(exc: BaseException) -> Path | None:
    """Append the traceback of an unexpected error to the log file (never in read-only mode)."""
    if writes.is_read_only():
        return None
    try:
        path = log_path()
        handler = writes.log_handler(path)
    except OSError:
        return None
    from cmdare.collectors.redaction import RedactFilter

    handler.addFilter(RedactFilter())
    handler.setFormatter(logging.Formatter(FORMAT))
    crash = logging.getLogger("cmdare.crash")
    crash.propagate = False
    crash.addHandler(handler)
    crash.error("unexpected error", exc_info=exc)
    crash.removeHandler(handler)
    handler.close()
    return path
