"""The app under its Pilot: the demo app the Pilot tests share and the one way they wait for a condition."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from textual.pilot import Pilot

    from cmdare.tui.app import CmdareApp


def fast_demo_app(**demo_kw: float) -> CmdareApp:
    """The app on the demo cluster, sped up: a poll every 0.5 s, demo time 30× real, a first
    revocation after 1 s (each overridable by keyword)."""
    from cmdare.demo.cluster import DemoCluster
    from cmdare.tui.app import CmdareApp
    from cmdare.tui.options import SessionOptions
    from cmdare.tui.session import MonitorSession

    opts = SessionOptions(demo=True, refresh=0.5)
    kw = {"first_revocation_s": 1.0, "time_factor": 30.0, **demo_kw}
    session = MonitorSession(opts, demo_factory=lambda: DemoCluster(**kw))
    return CmdareApp(opts, session)


async def wait_for(
    pilot: Pilot[object], predicate: Callable[[], object], timeout: float = 60.0, step: float = 0.1
) -> None:
    """Let the app run (``pilot.pause(step)``) until ``predicate()`` is true. The timeout only bounds a
    hung test; it is not a speed target (15 s failed once on a loaded 2-core machine)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not predicate():
        assert loop.time() < end, f"condition not met in {timeout:.0f} s"
        await pilot.pause(step)
