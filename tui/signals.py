"""SIGTERM, SIGHUP and SIGINT end the app the way ``q`` does, so the terminal is handed back as it
was found: alternate screen left, mouse tracking off, cursor shown, line discipline restored.

An SSH disconnect (SIGHUP) quits like ``q`` (exit 0); so does SIGTERM; SIGINT exits 130 like a
``KeyboardInterrupt`` at the prompt. Should the orderly quit not finish within
:data:`FORCE_AFTER_S` (a lost terminal can block Textual's writes), or a second signal arrive, the
terminal modes are reset by hand and the process exits at once."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
from typing import Any

log = logging.getLogger(__name__)

# SIGHUP exists on Unix only (the app runs elsewhere without it)
QUIT_SIGNALS = tuple(
    s for s in (signal.SIGTERM, getattr(signal, "SIGHUP", None), signal.SIGINT) if s is not None
)
EXIT_CODES = {signal.SIGTERM: 0, signal.SIGINT: 130} | {s: 0 for s in QUIT_SIGNALS if s.name == "SIGHUP"}
FORCE_AFTER_S = 3.0
# leave the alternate screen; mouse tracking, focus events, bracketed paste off; cursor shown
RESET_TERMINAL = (
    "\x1b[?1049l\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?1015l\x1b[?1004l\x1b[?2004l\x1b[?25h"
)


def install_quit_signals(app: Any) -> None:
    """Make the quit signals call ``app.action_quit`` on its event loop (main thread only)."""
    loop = asyncio.get_running_loop()
    state = {"signalled": False}

    def on_signal(signum: int) -> None:
        code = EXIT_CODES.get(signum, 0)
        if state["signalled"]:  # a second signal: do not wait any longer
            force_exit(app, code)
        state["signalled"] = True
        log.warning("%s received: quitting", signal.Signals(signum).name)
        app.signal_exit_code = code
        # A watchdog thread, not a loop timer: when the terminal is gone (SIGHUP) Textual's writes
        # can block the event loop itself, and the process must end all the same.
        watchdog = threading.Timer(FORCE_AFTER_S, force_exit, (app, code))
        watchdog.daemon = True  # an orderly exit does not wait for it
        watchdog.start()
        asyncio.ensure_future(app.action_quit())

    try:
        for sig in QUIT_SIGNALS:
            loop.add_signal_handler(sig, on_signal, sig)
    except (RuntimeError, ValueError, NotImplementedError) as exc:  # not the main thread, or no Unix
        log.info("quit signals not handled: %s", exc)


def force_exit(app: Any, code: int) -> None:
    """Reset the terminal's modes by hand (never blocking: it may be gone), let the app save what it records
    (``app.emergency_close``) and exit now."""
    last_words = getattr(app, "emergency_close", None)
    if last_words is not None:
        try:
            last_words()
        except Exception as exc:  # noqa: BLE001 - exiting regardless
            log.error("forced exit: %s", exc)
    fd = sys.__stdout__.fileno() if sys.__stdout__ is not None else 1
    try:
        os.set_blocking(fd, False)
        os.write(fd, RESET_TERMINAL.encode())
    except OSError:
        pass
    attrs = getattr(getattr(app, "_driver", None), "attrs_before", None)
    if attrs is not None:
        try:
            import termios

            stdin = sys.__stdin__  # None when Python started without one
            if stdin is not None:
                termios.tcsetattr(stdin.fileno(), termios.TCSANOW, attrs)  # echo, line editing back
        except Exception as exc:  # noqa: BLE001 - no termios (not Unix), or the terminal is gone
            log.debug("terminal modes not restored: %s", exc)
    os._exit(code)
