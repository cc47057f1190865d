"""Issue 18 (screens): the explanation popup is not clipped at 80x24 — title and close hint stay on screen,
the body scrolls. The real app on the demo cluster (Pilot), at 80x24 and 120x40."""

from __future__ import annotations

import pytest
from textual.containers import VerticalScroll

from cmdare.tui.widgets.explain import ExplainScreen
from tests.pilot_app import fast_demo_app, wait_for

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_explanation_title_and_hint_stay_visible(size):
    app = fast_demo_app(first_revocation_s=1000)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.state is not None and getattr(app.state.planner.job("resnet32-p100"), "ranked", None) is not None,
                       timeout=30)  # fmt: skip
        await pilot.press("3")
        await pilot.pause(0.3)
        app.query_one("#ranked-table").focus()
        await pilot.press("j", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ExplainScreen), timeout=10)
        await pilot.pause(0.3)
        screen = app.screen
        width, height = size
        for cls in (".explain-title", ".explain-hint"):
            region = screen.query_one(cls).region
            assert (
                region.height >= 1 and 0 <= region.y and region.bottom <= height and region.right <= width
            ), cls
        body = screen.query_one(VerticalScroll)
        assert body.region.bottom <= screen.query_one(".explain-hint").region.y
        if body.max_scroll_y:  # a long body scrolls instead of pushing the hint off screen
            body.scroll_end(animate=False, immediate=True)
            await pilot.pause()
            assert body.scroll_y == body.max_scroll_y
        await pilot.press("escape")


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_alert_evidence_popup_is_whole_and_formatted(size):
    import re

    from rich.console import Console

    app = fast_demo_app(first_revocation_s=1000)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.state is not None and app.state.alerts, timeout=60)
        await pilot.press("4")
        await pilot.pause(0.3)
        app.query_one("#alerts-table").focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ExplainScreen), timeout=10)
        await pilot.pause(0.3)
        screen, (width, height) = app.screen, size
        for cls in (".explain-title", ".explain-hint"):
            region = screen.query_one(cls).region
            assert region.height >= 1 and 0 <= region.y and region.bottom <= height and region.right <= width
        body = screen.query_one(VerticalScroll)
        assert body.region.right <= width and body.region.bottom <= screen.query_one(".explain-hint").region.y
        console = Console(width=body.content_region.width, color_system=None)
        with console.capture() as cap:
            console.print(screen._body)
        text = cap.get()
        assert "Rests on" in text and "None" not in text
        assert not re.search(r"\d\.\d{5,}", text), text  # no raw float repr (4 significant digits)
        assert re.search(r"ps_seconds_per_step +[\d.]+ ms", text), text  # seconds carry their unit
        body.scroll_end(animate=False, immediate=True)
        await pilot.pause()
        assert body.scroll_y == body.max_scroll_y  # the last evidence row is reachable
        await pilot.press("escape")
