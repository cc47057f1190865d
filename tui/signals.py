"""SIGTERM, SIGHUP and SIGINT end the app the way ``q`` does, so the terminal is handed back as it
was found: alternate screen left, mouse tracking off, cursor shown, line discipline restored.

An SSH disconnect (SIGHUP) quits like ``q`` (exit 0); so does SIGTERM; SIGINT exits 130 like a
``KeyboardInterrupt`` at the prompt. Should the orderly quit not finish within
:data:`FORCE_AFTER_S` (or a second signal arrive), the terminal modes are reset by hand and the
process exits at once."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from typing import Any

log = logging.getLogger(__name__)

QUIT_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
EXIT_CODES = {signal.SIGTERM: 0, signal.SIGHUP: 0, signal.SIGINT: 130}
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
        asyncio.ensure_future(app.action_quit())
        loop.call_later(FORCE_AFTER_S, force_exit, app, code)

    try:
        for sig in QUIT_SIGNALS:
            loop.add_signal_handler(sig, on_signal, sig)
    except (RuntimeError, ValueError, NotImplementedError) as exc:  # not the main thread, or no Unix
        log.info("quit signals not handled: %s", exc)


def force_exit(app: Any, code: int) -> None:
    """Restore the terminal through the driver (else by raw escape codes) and exit now."""
    try:
        driver = getattr(app, "_driver", None)
        if driver is not None:
            driver.stop_application_mode()
        else:
            sys.__stdout__.write(RESET_TERMINAL)
            sys.__stdout__.flush()
    except Exception:  # noqa: BLE001 - the terminal may be gone (SIGHUP): exit regardless
        pass
    os._exit(code)
