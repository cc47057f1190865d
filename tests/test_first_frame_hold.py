"""Issue 34 (start-up): the first frame the terminal gets has the first poll's data. The real app on the
demo cluster (Pilot, 120x40) composes no frame while its first poll is out; the poll's state, a failed
refresh or the end of the hold (``FIRST_FRAME_HOLD_S``) lets the screen be drawn, whole. The session's
polling is held back by a gate here (a subclass of the real session: the demo cluster, its exporters and
the poller are the real ones), so no test depends on how fast the machine is."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

import cmdare.tui.app as app_module
from cmdare.demo.cluster import DemoCluster
from cmdare.tui.app import CmdareApp, HeldScreen
from cmdare.tui.options import SessionOptions
from cmdare.tui.session import MonitorSession, MonitorState
from tests.pilot_app import wait_for


class GatedSession(MonitorSession):
    """The real session whose polling starts when :attr:`gate` opens (after ``first_error``, if given)."""

    def __init__(self, first_error: str | None = None) -> None:
        opts = SessionOptions(demo=True, refresh=0.5, read_only=True)
        super().__init__(opts, demo_factory=lambda: DemoCluster(first_revocation_s=1000.0))
        self.gate = asyncio.Event()
        self.first_error = first_error

    async def run(
        self,
        stop: asyncio.Event,
        on_state: Callable[[MonitorState], None],
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        if self.first_error is not None and on_error is not None:
            on_error(self.first_error)
        await self.gate.wait()
        await super().run(stop, on_state, on_error)


def _count_frames(app: CmdareApp, frames: list[bool]) -> None:
    """Record each frame the screen composes (True: the first state was in the panes by then)."""
    compositor = app.screen._compositor
    render = compositor.render_update

    def counted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        frames.append(app.state is not None)
        return render(*args, **kwargs)

    compositor.render_update = counted  # type: ignore[method-assign]


async def test_no_frame_is_composed_before_the_first_state(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(app_module, "FIRST_FRAME_HOLD_S", 600.0)  # only the state ends the hold here
    session = GatedSession()
    app = CmdareApp(session.opts, session)
    frames: list[bool] = []
    async with app.run_test(size=(120, 40)) as pilot:
        assert isinstance(app.screen, HeldScreen)
        _count_frames(app, frames)
        await wait_for(pilot, lambda: app.query_one("#pane-cluster").size.width > 0)  # laid out
        await pilot.pause(0.3)
        assert app.holding_first_frame and frames == []
        session.gate.set()
        await wait_for(pilot, lambda: bool(frames))
        assert frames[0], "the first frame was composed before the first state"
        assert not app.holding_first_frame
        await wait_for(pilot, lambda: "worker-0" in _screen_text(app))
    session.demo.stop()


async def test_the_hold_ends_after_its_time_without_data(monkeypatch: pytest.MonkeyPatch):
    """No answer within ``FIRST_FRAME_HOLD_S``: the panes are drawn as they are (waiting for the poll)."""
    monkeypatch.setattr(app_module, "FIRST_FRAME_HOLD_S", 0.2)
    session = GatedSession()
    app = CmdareApp(session.opts, session)
    frames: list[bool] = []
    async with app.run_test(size=(120, 40)) as pilot:
        _count_frames(app, frames)
        await wait_for(pilot, lambda: bool(frames))
        assert frames[0] is False and not app.holding_first_frame
        assert "waiting for the first poll" in _screen_text(app)
        session.gate.set()
        await wait_for(pilot, lambda: "worker-0" in _screen_text(app))
    session.demo.stop()


async def test_a_failed_first_refresh_is_drawn_at_once(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(app_module, "FIRST_FRAME_HOLD_S", 600.0)
    session = GatedSession(first_error="demo source unreachable")
    app = CmdareApp(session.opts, session)
    frames: list[bool] = []
    async with app.run_test(size=(120, 40)) as pilot:
        _count_frames(app, frames)
        await wait_for(pilot, lambda: bool(frames))
        assert not app.holding_first_frame
        assert "demo source unreachable" in _screen_text(app)
        session.gate.set()
    session.demo.stop()


async def test_without_polling_nothing_is_held():
    """``poll=False`` (tests, snapshots): no first poll to wait for, the screen is drawn at once."""
    app = CmdareApp(SessionOptions(demo=True, read_only=True), poll=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.1)
        assert not app.holding_first_frame and app._batch_count == 0
    if app.session.demo is not None:
        app.session.demo.stop()


def _screen_text(app: CmdareApp) -> str:
    """The text of the screen as last composed (an SVG export's text is the cells' characters)."""
    return app.export_screenshot().replace("&#160;", " ")
