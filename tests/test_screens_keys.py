"""Issue 18 (screens): the footer fits 80 columns (the least-used keys leave first, the replay's
space/+/- stay while a recording plays), help shows the focused pane's keys first, and a sorted column
shows its arrow at any width. The real app on the real demo cluster (Pilot), at 80x24 and 120x40."""

from __future__ import annotations

import pytest
from rich.console import Console
from textual.app import App, ComposeResult
from textual.widgets import Static

from cmdare.tui.help_screen import HelpOverlay, key_label
from cmdare.tui.widgets.footer import FitFooter, FooterKey, fit, key_width
from cmdare.tui.widgets.table import FilterTable, Row
from tests.pilot_app import fast_demo_app, wait_for

pytestmark = pytest.mark.slow

PANE_KEYS = {
    "1": ("Cluster", "enter"),
    "2": ("Job", "p"),
    "3": ("Planner", "enter"),
    "4": ("Alerts", "enter"),
}


def footer_keys(app: App) -> tuple[list[tuple[int, int, FooterKey]], tuple[int, int, FooterKey]]:
    """The footer's keys as drawn, (x, width, key) left to right, and the command palette's."""
    footer = app.query_one(FitFooter)
    placed = sorted(footer.placed, key=lambda p: p[0])
    palette = next(p for p in placed if p[2] == footer.palette)
    return [p for p in placed if p is not palette], palette


def assert_footer_readable(app: App) -> list[str]:
    """Every key is whole, on screen, left of the palette's key; returns the key names shown."""
    keys, (px, pw, _) = footer_keys(app)
    line = app.query_one(FitFooter).render_line(0).text
    assert px + pw <= app.size.width and "^p palette" in line[px:]
    for x, w, k in keys:
        assert w >= len(k.key_display) + len(k.description), k.description  # never cut
        assert f"{k.key_display} {k.description}".strip() in line[x : x + w]  # as drawn on the line
        assert x + w <= px, f"{k.key_display} {k.description} runs under the palette"
    return [k.key_display for _, _, k in keys]


def test_fit_drops_the_lowest_ranked_first():
    class K:  # what fit reads of a FooterKey
        def __init__(self, key: str, action: str) -> None:
            self.key_display, self.description, self.action = key, "Word", action

    keys = [K("a", "low"), K("b", "high"), K("c", "mid")]
    rank = {"low": 1, "mid": 2, "high": 3}.get
    assert [k.key_display for k in fit(keys, 100, rank, True)] == ["a", "b", "c"]
    room = key_width(keys[0], True) * 2
    assert [k.key_display for k in fit(keys, room, rank, True)] == ["b", "c"]  # order kept


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_footer_fits_in_every_pane(size):
    app = fast_demo_app(first_revocation_s=1000)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.state is not None and app.state.cycles >= 2)
        for key in ("1", "2", "3", "4"):
            await pilot.press(key)
            await pilot.pause(0.3)
            shown = assert_footer_readable(app)
            assert "q" in shown and "?" in shown
            if key in ("1", "3", "4"):
                assert "/" in shown and "s" in shown  # the table's own keys come first
            if key == "2":
                assert "p" in shown  # the plot key where plots are


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_replay_footer_shows_pause_and_speed(tmp_path, size):
    from tests.test_screens_replay_app import recorded_demo, replay_app

    app = replay_app(await recorded_demo(tmp_path, cycles=30), speed=0.125)  # 48 s: never ends mid-test
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.state is not None)
        for key in ("1", "2", "3", "4"):
            await pilot.press(key)
            await pilot.pause(0.3)
            shown = assert_footer_readable(app)
            assert {"space", "+", "-", "q", "?"} <= set(shown), shown
            assert "r" not in shown  # nothing to poll in a recording
        await pilot.press("question_mark")  # the longest help: a table pane's keys and the replay's
        await wait_for(pilot, lambda: app.help_shown)
        await pilot.pause(0.2)
        everywhere = [k for k, _ in app.query_one(HelpOverlay).sections[1][1]]
        assert {"space", ".", "+", "-"} <= set(everywhere) and "e" not in everywhere  # replays are read-only
        assert keys_fit(app) and "…" not in "\n".join(help_text(app))


def keys_fit(app: App) -> bool:
    """The focused pane's keys and those that work everywhere are on the help's first screen (the
    tables' keys, the mouse and the legend follow, scrolled to)."""
    scroll = app.query_one(HelpOverlay)
    lines = help_text(app)
    end = next(
        (i for i, line in enumerate(lines) if line.strip() in ("In tables", "Symbols and abbreviations"))
    )
    return end <= scroll.size.height


def help_text(app: App) -> list[str]:
    """The help screen's lines as rendered at its own width."""
    scroll = app.query_one(HelpOverlay)
    console = Console(width=scroll.content_region.width, color_system=None)
    lines = []
    for static in scroll.query(Static):
        with console.capture() as cap:
            console.print(static.content)
        lines += cap.get().splitlines()
    return lines


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_help_shows_the_focused_panes_keys_first(size):
    app = fast_demo_app(first_revocation_s=1000)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.state is not None and app.state.cycles >= 2)
        for key, (title, own_key) in PANE_KEYS.items():
            await pilot.press(key)
            await pilot.pause(0.2)
            await pilot.press("question_mark")
            await wait_for(pilot, lambda: app.help_shown)
            sections = app.query_one(HelpOverlay).sections
            tables = ["In tables", "Mouse"] if title != "Job" else []
            assert [h for h, _ in sections] == [
                f"{title} pane",
                "Everywhere",
                *tables,
                "Symbols and abbreviations",
            ]
            assert own_key in [k for k, _ in sections[0][1]]
            everywhere = [k for k, _ in sections[1][1]]
            assert {"q", "?", "tab", "ctrl+p", "1/2/3/4"} <= set(everywhere)
            assert "space" in everywhere and "+" not in everywhere  # pause always; speed only in a replay
            await pilot.pause(0.2)
            assert keys_fit(app)  # the keys fit the first screen; the rest scrolls
            text = "\n".join(help_text(app))
            assert "…" not in text and f"{title} pane" in text  # no description is cut
            await pilot.press("escape")
            await wait_for(pilot, lambda: not app.help_shown)


def test_key_labels_are_what_a_user_types():
    assert (
        key_label("question_mark") == "?" and key_label("plus") == "+" and key_label("escape,q") == "escape/q"
    )


class NarrowApp(App[None]):
    def compose(self) -> ComposeResult:
        cols = [("Status", 9), ("Task", 9), ("A", 1), ("Bc", 2)] + [(f"Column {i}", 12) for i in range(10)]
        yield FilterTable(cols, id="t")


def header(table: FilterTable) -> list[str]:
    return [str(c.label) for c in table.ordered_columns]


async def test_the_sorted_columns_arrow_is_always_on_screen():
    app = NarrowApp()
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.query_one(FilterTable)
        table.set_rows([Row(f"r{i}", tuple(f"{i}{j}" for j in range(14))) for i in range(30)])
        table.focus()
        await pilot.pause()
        for i in range(14):
            await pilot.press("s")
            await pilot.pause(0.1)
            label = header(table)[i]
            assert label.endswith("▲"), label  # even a column one cell wide keeps its arrow
            x, _, w, _ = table.column_region(i)
            assert table.scroll_x <= x and x + w <= table.scroll_x + table.scrollable_content_region.width
        await pilot.press("S")
        await pilot.pause(0.1)
        assert header(table)[13].endswith("▼")
        await pilot.press("s")  # back to the first column: the table scrolls back
        await pilot.pause(0.1)
        assert table.scroll_x == 0 and header(table)[0] == "Status ▲"


async def test_remapped_keys_show_in_footer_and_help():
    from cmdare.tui.app import CmdareApp
    from cmdare.tui.options import SessionOptions

    app = CmdareApp(SessionOptions(), poll=False, keys={"app.quit": "ctrl+q", "table.filter": "f"})
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.3)
        shown = assert_footer_readable(app)
        assert "^q" in shown and "f" in shown and "q" not in shown
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: app.help_shown)
        everywhere, tables = (
            dict(app.query_one(HelpOverlay).sections[1][1]),
            dict(app.query_one(HelpOverlay).sections[2][1]),
        )
        assert tables.get("f", "").startswith("Filter") and everywhere.get("ctrl+q") == "Quit"
        assert "q" not in everywhere
