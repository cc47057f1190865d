"""A refresh whose data did not change paints nothing (issue 34), the status line included (its clock reads
minutes): the real app, driven by its Pilot, watching two real HTTP targets whose /metrics pages never change.
Every widget repaint asked for during such a refresh is recorded (``Widget.refresh``, wrapped for the test);
the figures (CPU, bytes to the terminal) are benchmarks/idle.py's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import generate_latest
from textual.widget import Widget

from cmdare.collectors.exporter import TrainingExporter
from cmdare.tui.app import CmdareApp
from cmdare.tui.format import clock
from cmdare.tui.options import SessionOptions
from tests.page_server import close_server, serve_pages


def static_page(task: str) -> bytes:
    """A worker's page at 1,200 steps; no GPU label, so no price accrues a cent between two refreshes."""
    exp = TrainingExporter("idle", "worker", task, region="us-central1")
    for _ in range(1200):
        exp.step(0.25, examples=32)
    exp.set_global_step(2400)
    return generate_latest(exp.registry)


@pytest.fixture(scope="module")
def static_targets() -> Iterator[list[str]]:
    pages = {"/a/metrics": static_page("w0"), "/b/metrics": static_page("w1")}
    srv = serve_pages(pages.get)
    base = f"http://127.0.0.1:{srv.server_address[1]}"
    yield [f"{base}/a/metrics", f"{base}/b/metrics"]
    close_server(srv)


async def test_unchanged_refresh_repaints_nothing(static_targets, monkeypatch):
    app = CmdareApp(SessionOptions.of(targets=static_targets, read_only=True), poll=False)
    asked: list[tuple[str, bool]] = []
    refresh = Widget.refresh

    def recorded(self: Widget, *regions: Any, **kw: Any) -> Widget:
        asked.append((self.id or type(self).__name__, bool(kw.get("layout"))))
        return refresh(self, *regions, **kw)

    async with app.run_test(size=(120, 40)) as pilot:
        session = app.session
        for _ in range(4):  # the first polls: rows, summaries and the planner's first answers appear
            app.apply_state(await session.refresh())
            await pilot.pause()
        assert app.state is not None and app.state.job() is not None
        badges = str(app.query_one("#badges").render())
        assert "polled " in badges and "2/2 targets answered" in badges
        for _ in range(3):  # (a refresh across a minute's turn moves the clock: the next one cannot)
            before = app.state
            asked.clear()
            monkeypatch.setattr(Widget, "refresh", recorded)
            app.apply_state(await session.refresh())  # the same pages again
            await pilot.pause()
            monkeypatch.undo()
            if clock(before.t) == clock(app.state.t):
                break
        assert app.state.cycles > before.cycles  # the refresh happened
        assert str(app.query_one("#badges").render()) == badges
        assert asked == []  # nothing repainted, nothing laid out again


async def test_an_unchanged_job_is_not_ranked_again(monkeypatch):
    """The planner, asked again and again about a job whose pages do not change, ranks it once (its inputs
    are the same); the job's step moving on ranks it again. The app's own session under its Pilot, the
    live planner's throttles set to zero so that only the unchanged-inputs check can hold a ranking back;
    the ranking calls counted."""
    from cmdare.planner.live import plan as live_plan

    def gpu_page(task: str, step: int) -> bytes:  # with its GPU: the planner can price and rank it
        exp = TrainingExporter("idle", "worker", task, gpu="v100", region="us-central1", provisioning="spot",
                               model="ResNet-32", model_flops=1658696889.0, params=1857722.0, batch_size=128,
                               target_steps=640_000, sync="sync-allreduce")  # fmt: skip
        for _ in range(1200):
            exp.step(0.25, examples=32)
        exp.set_global_step(step)
        return generate_latest(exp.registry)

    pages = {"/a/metrics": gpu_page("w0", 2400), "/b/metrics": gpu_page("w1", 2400)}
    srv = serve_pages(lambda path: pages.get(path))
    base = f"http://127.0.0.1:{srv.server_address[1]}"
    ranked: list[str] = []
    for name in ("rank_shapes", "rank_live_sync"):
        real = getattr(live_plan, name)

        def counted(*a: Any, _real: Any = real, _name: str = name, **kw: Any) -> Any:
            ranked.append(_name)
            return _real(*a, **kw)

        monkeypatch.setattr(live_plan, name, counted)
    app = CmdareApp(
        SessionOptions.of(targets=[f"{base}/a/metrics", f"{base}/b/metrics"], read_only=True), poll=False
    )
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            session = app.session
            for _ in range(3):
                app.apply_state(await session.refresh())
                await session.update_plans()
                await pilot.pause()
            live = session._analysis().live
            live.rank_every = live.min_interval = 0.0  # any change at all would rank again
            assert ranked, "the job was ranked once it was seen"
            first = len(ranked)
            for _ in range(6):  # the same pages: the same job, later
                app.apply_state(await session.refresh())
                await session.update_plans()
                await pilot.pause()
            assert len(ranked) == first  # not ranked again
            pages["/a/metrics"] = gpu_page("w0", 240_000)  # the job moved on
            session.poller.poke()  # as the refresh key does
            for _ in range(2):
                app.apply_state(await session.refresh())
                await session.update_plans()
                await pilot.pause()
            assert len(ranked) > first
    finally:
        close_server(srv)
