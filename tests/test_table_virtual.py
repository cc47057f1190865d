"""Issue 20: a table costs what changes. At 10,000 rows the FilterTable holds nothing per row but the
rows given: only the lines on screen are drawn (cells made for those rows only), the right rows after
scrolling, sorting and filtering, the cursor and the scroll kept across refreshes, ``enter`` selects the
row under the cursor, cells never parse markup, and a refresh that changes no row on screen repaints
nothing. A real FilterTable in a real Textual app (Pilot); and the Cluster pane's summary line."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.widgets import DataTable

from cmdare.tui.widgets.table import FilterTable, Row

COLUMNS = [("Task", 12), ("Rate", 8), ("Role", 8)] + [(f"Col {i}", 10) for i in range(8)]
N = 10_000
made: list[int] = []  # rows whose cells were made


def cells(i: int, tick: int) -> tuple[str, ...]:
    made.append(i)
    return (f"task-{i:05d}", f"{(i * 7 + tick) % 100}", "worker", *(f"column-{j}-cell" for j in range(8)))


def rows(tick: int = 0, n: int = N, changed: range | None = None, old: list[Row] | None = None) -> list[Row]:
    """``n`` rows at ``tick``; with ``old``, only the rows ``changed`` are new objects."""
    if old is not None and changed is not None:
        out = list(old)
        for i in changed:
            out[i] = make(i, tick)
        return out
    return [make(i, tick) for i in range(n)]


def make(i: int, tick: int) -> Row:
    return Row(f"j/task-{i:05d}", lambda: cells(i, tick), (f"task-{i:05d}", (i * 7 + tick) % 100, "worker"))


class TableApp(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.selected: list[tuple[str, int]] = []

    def compose(self) -> ComposeResult:
        yield FilterTable(COLUMNS, id="t")

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.selected.append((str(event.row_key.value), event.cursor_row))


def on_screen(table: FilterTable) -> list[str]:
    """The first word of each row line drawn (the Task column at the left edge)."""
    return [
        table.render_line(y).text.split()[0]
        for y in range(1, table.size.height)
        if table.render_line(y).text.strip()
    ]


def count_paints(table: FilterTable) -> list[int]:
    """The lines the table draws from now on (Textual asks for the dirty lines only)."""
    painted: list[int] = []
    original = table.render_line
    table.render_line = lambda y: (painted.append(y), original(y))[1]  # type: ignore[method-assign]
    return painted


async def started(pilot: Pilot[None]) -> FilterTable:
    table = pilot.app.query_one(FilterTable)
    table.set_rows(rows())
    table.focus()
    await pilot.pause()
    return table


async def test_scrolling_shows_the_right_rows_and_only_those_are_made():
    app = TableApp()
    async with app.run_test(size=(80, 24)) as pilot:
        made.clear()
        table = await started(pilot)
        assert table.row_count == N and len(made) < 40  # a screenful, not 10,000 rows of cells
        assert on_screen(table)[:3] == ["task-00000", "task-00001", "task-00002"]
        table.move_cursor(row=5000)
        await pilot.pause()
        shown = on_screen(table)
        top = int(table.scroll_y)
        assert "task-05000" in shown and shown == [f"task-{i:05d}" for i in range(top, top + len(shown))]
        assert table.current_key() == "j/task-05000"
        await pilot.press("G")
        assert on_screen(table)[-1] == f"task-{N - 1:05d}" and table.cursor_row == N - 1
        await pilot.press("g", "j", "j", "pagedown")
        assert table.cursor_row == 2 + table.scrollable_content_region.height - 1
        assert f"task-{table.cursor_row:05d}" in on_screen(table)
        assert len(made) < 300  # still only what was on screen


async def test_the_cursor_and_the_scroll_survive_a_refresh():
    app = TableApp()
    async with app.run_test(size=(80, 24)) as pilot:
        table = await started(pilot)
        table.move_cursor(row=1200)
        table.scroll_to(x=30, animate=False)
        await pilot.pause()
        before = (table.scroll_x, table.scroll_y)
        assert before[0] == 30 and before[1] > 1000
        table.set_rows(rows(1))  # every rate changes
        await pilot.pause()
        assert (table.scroll_x, table.scroll_y) == before and table.current_key() == "j/task-01200"
        table.action_sort_next()  # by Task: the same order
        table.action_sort_reverse()  # reversed: the cursor follows its row
        await pilot.pause()
        assert table.current_key() == "j/task-01200" and table.cursor_row == N - 1 - 1200
        assert str(table.get_row_at(table.cursor_row)[0]) == "task-01200"


async def test_sort_and_filter_at_10000_rows_and_the_arrow_stays_on_screen():
    app = TableApp()
    async with app.run_test(size=(80, 24)) as pilot:
        table = await started(pilot)
        await pilot.press("s", "s")  # by Rate, ascending (ties by position)
        assert [r.key for r in table.shown()[:2]] == ["j/task-00000", "j/task-00100"]
        assert on_screen(table)[:2] == ["task-00000", "task-00100"]
        for _ in range(len(COLUMNS) - 2):
            await pilot.press("s")
        await pilot.pause()
        header = table.render_line(0).text
        assert "Col 7 ▲" in header and table.scroll_x > 0  # the last column came on screen, arrow and all
        await pilot.press("S")
        assert "Col 7 ▼" in table.render_line(0).text
        table.set_filter("task-0999")
        await pilot.press("home")  # back to the left edge
        assert table.row_count == 10 and on_screen(table)[0] == "task-09990"
        table.set_filter("")
        await pilot.pause()
        assert table.row_count == N


async def test_enter_selects_the_row_under_the_cursor():
    app = TableApp()
    async with app.run_test(size=(80, 24)) as pilot:
        table = await started(pilot)
        table.move_cursor(row=7777)
        await pilot.press("enter")
        table.action_sort_reverse()  # by Task, descending: the cursor stays on its row
        await pilot.press("k", "enter")
        assert app.selected == [("j/task-07777", 7777), ("j/task-07778", N - 1 - 7778)]


async def test_a_click_moves_the_cursor_and_a_second_click_selects():
    app = TableApp()
    async with app.run_test(size=(80, 24)) as pilot:
        table = await started(pilot)
        table.move_cursor(row=3000)
        await pilot.pause()
        top = int(table.scroll_y)
        await pilot.click(FilterTable, offset=(5, 4))  # the fourth row on screen
        assert table.cursor_row == top + 3 and app.selected == []
        await pilot.click(FilterTable, offset=(30, 4))
        assert app.selected == [(f"j/task-{top + 3:05d}", top + 3)]
        plain = list(table.render_line(6))
        await pilot.hover(FilterTable, offset=(5, 6))
        assert list(table.render_line(6)) != plain  # the mouse's row is highlighted
        await pilot.press("j")
        assert list(table.render_line(6)) == plain  # until a key moves the cursor


async def test_cells_are_text_never_markup():
    app = TableApp()
    async with app.run_test(size=(80, 24)) as pilot:
        table = pilot.app.query_one(FilterTable)
        table.set_rows([Row("a", ("[red]x[/]", Text("[b]y[/b]"), "[i]z[/i]"))] + rows(n=20)[1:])
        await pilot.pause()
        line = table.render_line(1)
        assert all(f" {markup} " in line.text for markup in ("[red]x[/]", "[b]y[/b]", "[i]z[/i]"))
        assert not any(s.style and s.style.italic for s in line)


async def test_a_refresh_that_changes_no_row_on_screen_repaints_nothing():
    app = TableApp()
    async with app.run_test(size=(80, 24)) as pilot:
        table = await started(pilot)
        first = table.view.rows
        painted = count_paints(table)
        table.set_rows(list(first))  # the very same rows
        await pilot.pause()
        assert painted == []
        table.set_rows(rows(1, changed=range(5000, 6500), old=first))  # 15% changed, none on screen
        await pilot.pause()
        assert painted == []
        table.set_rows(rows(2, changed=range(3, 4), old=table.view.rows))  # one row on screen
        await pilot.pause()
        assert painted == [4]  # its line (below the header), once


async def test_cluster_summary_line_counts_roles_and_states():
    from cmdare.tui.panes.cluster import role_summary

    class N_:
        def __init__(self, role: str, status: str, rate: float | None) -> None:
            self.role, self.status, self.steps_per_sec = role, status, rate

    class J:
        nodes = [
            N_("worker", "up", 2.0),
            N_("worker", "up", 4.0),
            N_("worker", "revoked", None),
            N_("ps", "up", None),
        ]

    line = role_summary([J()]).plain  # type: ignore[list-item]
    assert line.startswith("worker 2/3 up (1 not), median 3") and "ps 1/1 up" in line
