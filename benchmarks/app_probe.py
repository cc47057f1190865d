"""The real ``cmdare-tui`` (its own ``main``, the real Textual app on the real terminal) with two timing
hooks for benchmarks/app_scale.py: when each poll begins (``Poller.poll_once``) and when the state it
produced has been painted (``CmdareApp.apply_state``, then the next screen refresh). One line per
refresh is appended to ``$CMDARE_PROBE``: ``<poll began> <painted>`` (monotonic seconds); with
``$CMDARE_GC_LOG`` set, one line per full garbage collection is appended there. Nothing else differs
from ``cmdare-tui ARGS``.

    CMDARE_PROBE=/tmp/probe.txt python benchmarks/app_probe.py --prometheus URL --read-only
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any


def install(path: str) -> None:
    from cmdare.collectors.poller import Poller
    from cmdare.tui.app import CmdareApp

    began: list[float] = []
    poll_once, apply_state = Poller.poll_once, CmdareApp.apply_state
    out = open(path, "a", buffering=1)  # noqa: SIM115 (open for the process' life)

    async def timed_poll(self: Poller) -> Any:
        began.append(time.monotonic())
        return await poll_once(self)

    def timed_apply(self: CmdareApp, state: Any) -> None:
        apply_state(self, state)
        if began:
            t0 = began.pop()
            began.clear()
            self.call_after_refresh(lambda: out.write(f"{t0:.4f} {time.monotonic():.4f}\n"))

    Poller.poll_once = timed_poll  # type: ignore[method-assign]
    CmdareApp.apply_state = timed_apply  # type: ignore[method-assign]


def log_full_collections(path: str) -> None:
    """Append one line per generation-2 (full) garbage collection to ``path``:
    ``<monotonic start> <seconds> <collected> <frozen count after>`` (``gc.callbacks``)."""
    import gc

    out = open(path, "a", buffering=1)  # noqa: SIM115 (open for the process' life)
    began = [0.0]

    def hook(phase: str, info: dict[str, int]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            began[0] = time.monotonic()
        else:
            t = time.monotonic()
            out.write(
                f"{began[0]:.4f} {t - began[0]:.4f} {info.get('collected', 0)} {gc.get_freeze_count()}\n"
            )

    gc.callbacks.append(hook)


def profile(path: str) -> None:
    """cProfile the main thread (the event loop: polls, planner, panes, painting) to ``path`` at exit."""
    import atexit
    import cProfile

    prof = cProfile.Profile()
    prof.enable()
    atexit.register(lambda: (prof.disable(), prof.dump_stats(path)))


if __name__ == "__main__":
    install(os.environ["CMDARE_PROBE"])
    if os.environ.get("CMDARE_GC_LOG"):
        log_full_collections(os.environ["CMDARE_GC_LOG"])
    if os.environ.get("CMDARE_PROFILE"):
        profile(os.environ["CMDARE_PROFILE"])
    from cmdare.tui.cli import main

    sys.exit(main(sys.argv[1:]))
