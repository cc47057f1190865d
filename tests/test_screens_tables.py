"""Issue 18 (screens): tables keep horizontal/vertical scroll and the cursor across refreshes, and a refresh
with the same rows repaints only the lines on screen whose cells changed. A real FilterTable in a real
Textual app (Pilot), and the real app on the demo cluster at 80x24 and 120x40."""

from __future__ import annotations

import pytest
from rich.text import Text
from textual.app import App, ComposeResult

from cmdare.tui.widgets.table import FilterTable, Row
from tests.pilot_app import fast_demo_app, wait_for

pytestmark = pytest.mark.slow

COLUMNS = [(f"C{i}", 12) for i in range(12)]


def rows(n: int, tick: int, extra: str = "", col: int = 6) -> list[Row]:
    """``n`` rows of 12 cells; column ``col`` reads ``tick``."""
    return [
        Row(f"r{i}{extra}", tuple(f"cell-{i}-{j}-{tick if j == col else 0}" for j in range(12)))
        for i in range(n)
    ]


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield FilterTable(COLUMNS, id="t")


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_scroll_and_cursor_survive_refreshes(size):
    app = TableApp()
    async with app.run_test(size=size) as pilot:
        table = app.query_one(FilterTable)
        table.set_rows(rows(200, 0))
        await pilot.pause()
        table.move_cursor(row=120, animate=False)
        table.scroll_to(60, 100, animate=False, immediate=True)
        await pilot.pause()
        before = (table.scroll_x, table.scroll_y)
        assert before[0] > 0 and before[1] > 0
        painted: list[int] = []
        original = table.render_line
        table.render_line = lambda y: (painted.append(y), original(y))[1]  # count the lines drawn
        table.set_rows(rows(200, 1, col=0))  # only column C0 changed, scrolled out of view: nothing drawn
        await pilot.pause()
        assert painted == []
        table.set_rows(rows(200, 1))  # same keys: only column C6 (in view) changed, on every row
        await pilot.pause()
        assert sorted(painted) == [y + 1 for y in range(len(table.visible_range()))]  # rows on screen, once
        last = table.visible_range()[-1]  # the last row counted as on screen is above the scrollbar
        assert last + 1 - int(table.scroll_y) < table.scrollable_content_region.height
        painted.clear()
        table.set_rows(rows(200, 1))  # new row objects, the same cells: nothing is drawn again
        await pilot.pause()
        assert painted == []
        assert (table.scroll_x, table.scroll_y) == before
        assert table.current_key() == "r120"
        assert str(table.get_cell("r5", "C6")) == "cell-5-6-1"
        table.set_rows(rows(200, 2)[::-1])  # new order: rebuilt
        await pilot.pause()
        await pilot.pause()
        assert (table.scroll_x, table.scroll_y) == before
        assert table.current_key() == "r120"


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_cluster_pane_keeps_horizontal_scroll_across_polls(size):
    app = fast_demo_app(first_revocation_s=1000)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.state is not None and app.state.cycles >= 2)
        table = app.query_one("#cluster-table", FilterTable)
        table.focus()
        table.scroll_to(x=table.max_scroll_x, animate=False, immediate=True)
        await pilot.pause()
        x = table.scroll_x
        assert x > 0
        cycles = app.state.cycles
        await wait_for(pilot, lambda: app.state.cycles >= cycles + 2)
        assert table.scroll_x == x
        assert isinstance(table.get_row_at(0)[0], Text)
