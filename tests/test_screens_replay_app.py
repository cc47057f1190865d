"""Issue 18 (screens): a replay in the app. The demo is recorded for real (SQLite, through the session's
recorder), then replayed by the real app (Pilot): at the end the poll counter stops and the header says the
recording ended (no class name, no "0/0 targets"); space pauses at once; + and - change the pace at once."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cmdare.tui.app import CmdareApp
from cmdare.tui.options import SessionOptions
from cmdare.tui.session import MonitorSession
from cmdare.tui.widgets.footer import FitFooter
from tests.pilot_app import wait_for

pytestmark = pytest.mark.slow

RECORDED_GAP = 0.2  # seconds between recorded polls
STRETCH = 2000.0  # recorded gaps made 400 s where a test needs a replay that cannot end by itself


async def recorded_demo(tmp_path: Path, cycles: int = 8) -> Path:
    """A real recording of the demo cluster: ``cycles`` polls, ``RECORDED_GAP`` apart."""
    from cmdare.demo.cluster import DemoCluster

    rec = tmp_path / "demo.sqlite"
    live = MonitorSession(
        SessionOptions.of(demo=True, refresh=RECORDED_GAP, record=str(rec)),
        demo_factory=lambda: DemoCluster(first_revocation_s=1000),
    )
    live.start()
    for _ in range(cycles):
        await live.refresh()
        await asyncio.sleep(RECORDED_GAP)
    await live.aclose()
    return rec


def replay_app(rec: Path, speed: float) -> CmdareApp:
    opts = SessionOptions.of(replay=str(rec), replay_speed=speed, read_only=True)
    return CmdareApp(opts, MonitorSession(opts))


def badges(app: CmdareApp) -> str:
    return str(app.query_one("#badges").render())


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_replay_end_stops_the_counter_and_says_so(tmp_path, size):
    app = replay_app(await recorded_demo(tmp_path, cycles=6), speed=4.0)
    async with app.run_test(size=size) as pilot:
        replay = app.session.plan.replay
        await wait_for(pilot, lambda: replay.ended)
        await pilot.pause(0.3)
        cycles, polls = app.state.cycles, app.session.poller.cycles
        assert cycles == 6 and replay.position == (6, 6)
        await pilot.pause(3 * RECORDED_GAP + 1.0)  # several recorded intervals: nothing more is polled
        assert app.state.cycles == cycles and app.session.poller.cycles == polls
        line = badges(app)
        assert "6/6 polls, recording ended" in line
        assert "ReplayFinished" not in line and "0/0" not in line and "polled" not in line
        assert "17/17 targets answered" in line or "targets answered" in line  # the last recorded status
        for action in ("pause", "replay_step", "replay_speed"):
            assert app.check_action(action, ()) is False  # nothing left to pause or speed up
        assert app.state.jobs and app.state.jobs[0].nodes  # the last recorded state stays on screen


async def test_space_pauses_at_once_and_resumes(tmp_path):
    app = replay_app(await recorded_demo(tmp_path, cycles=30), speed=1.0)
    async with app.run_test(size=(80, 24)) as pilot:
        replay = app.session.plan.replay
        await wait_for(pilot, lambda: replay.position[0] >= 2)
        await pilot.press("space")
        held = replay.position[0]
        assert replay.paused and "paused" in badges(app)
        await pilot.pause(0.3)
        assert any(
            k.description == "Resume" for k in app.query_one(FitFooter).keys
        )  # the footer says what space does
        await pilot.pause(10 * RECORDED_GAP)  # ten recorded intervals: not one more poll
        assert replay.position[0] == held and app.state.cycles == held
        await pilot.press("space")
        assert not replay.paused
        await pilot.pause(0.3)
        assert any(k.description == "Pause" for k in app.query_one(FitFooter).keys)
        await wait_for(pilot, lambda: replay.position[0] >= held + 2, timeout=20)


async def test_plus_speeds_up_a_slow_replay_at_once(tmp_path, monkeypatch):
    """The recorded gaps are stretched to 400 s (a poll every 3,200 s at the slowest pace, the pace cap
    raised for the test): the rest of the recording ends only if + re-plans the wait already running."""
    import sqlite3

    from cmdare.collectors.recording import replay as replay_mod

    monkeypatch.setattr(replay_mod, "MAX_PACE_S", 3600.0)
    rec = await recorded_demo(tmp_path, cycles=8)
    with sqlite3.connect(rec) as db:
        (t0,) = db.execute("SELECT min(t) FROM cycles").fetchone()
        db.execute("UPDATE cycles SET t = ? + (t - ?) * ?", (t0, t0, STRETCH))
    app = replay_app(rec, speed=0.125)  # the slowest
    async with app.run_test(size=(80, 24)) as pilot:
        replay = app.session.plan.replay
        await wait_for(pilot, lambda: replay.position[0] >= 1)
        start = replay.position[0]
        await pilot.press("plus")
        assert replay.speed == 0.25 and "×0.25" in badges(app)
        await pilot.press(*["plus"] * 12)  # up to ×1024: 0.4 s a poll (the recording may end on the way)
        assert replay.speed >= 512.0
        await wait_for(pilot, lambda: replay.ended, timeout=120)  # a watchdog: at the first pace, 6 hours
        assert replay.position[0] == 8 > start
        await pilot.pause(0.3)
        assert app.state.cycles == 8
        speed = replay.speed
        await pilot.press("minus")
        assert replay.speed == speed  # the keys are gone with the recording


async def test_a_pause_or_step_cuts_a_long_wait_short(tmp_path, monkeypatch):
    """The source itself: a cycle being waited for (an hour: the pace cap raised for the test) is held by
    a pause and played at once by a step."""
    import httpx

    from cmdare.collectors.clock import ManualClock
    from cmdare.collectors.recording import replay as replay_mod
    from cmdare.collectors.recording.replay import ReplaySource

    monkeypatch.setattr(replay_mod, "MAX_PACE_S", 3600.0)
    rec = await recorded_demo(tmp_path, cycles=3)
    clock = ManualClock()
    src = ReplaySource(rec, clock, speed=1e-6)  # every gap waits the cap: an hour
    async with httpx.AsyncClient() as client:
        await src.poll(client, clock)  # the first cycle plays at once
        second = asyncio.ensure_future(src.poll(client, clock))
        await asyncio.sleep(0.2)
        src.pause()
        await asyncio.sleep(0.3)
        assert not second.done() and src.position == (1, 3)  # held, not played when the wait ends
        src.step()
        await asyncio.wait_for(second, 60.0)  # a watchdog: without the step, an hour
        assert src.position == (2, 3) and src.paused
    src.close()
