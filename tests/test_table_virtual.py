"""Issue 20: past ``virtual_from`` rows the FilterTable is virtual: a placeholder per row, only the rows
on screen written (changed cells only), the right rows after scrolling, sorting and filtering. A real
FilterTable in a real Textual app (Pilot); and the Cluster pane's per-role summary line."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult

from cmdare.tui.widgets.table import FilterTable, Row

COLUMNS = [("Task", 12), ("Rate", 8), ("Role", 8)]
N = 5000
made: list[int] = []  # rows whose cells were made


def cells(i: int, tick: int) -> tuple[str, ...]:
    made.append(i)
    return (f"task-{i:05d}", f"{(i * 7 + tick) % 100}", "worker")


def rows(tick: int = 0, n: int = N) -> list[Row]:
    return [Row(f"j/task-{i:05d}", lambda i=i: cells(i, tick), (f"task-{i:05d}", (i * 7 + tick) % 100, "worker"))
            for i in range(n)]  # fmt: skip


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield FilterTable(COLUMNS, id="t")


def on_screen(table: FilterTable) -> list[str]:
    """The Task cell of each row on screen, as the DataTable holds it."""
    top = int(table.scroll_y)
    return [str(table.get_row_at(i)[0]) for i in range(top, top + table.size.height - 1)]


async def test_scrolling_shows_the_right_rows_and_only_those_are_made():
    app = TableApp()
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.query_one(FilterTable)
        made.clear()
        table.set_rows(rows())
        await pilot.pause()
        assert table.row_count == N and table._virtual
        assert len(made) < 40  # a screenful, not 5,000 rows of cells
        assert on_screen(table)[:3] == ["task-00000", "task-00001", "task-00002"]
        table.focus()
        table.move_cursor(row=2500, animate=False)
        await pilot.pause()
        await pilot.pause()
        shown = on_screen(table)
        assert "task-02500" in shown and shown == [
            f"task-{i:05d}" for i in range(int(table.scroll_y), int(table.scroll_y) + len(shown))
        ]
        assert table.current_key() == "j/task-02500"
        await pilot.press("G")
        await pilot.pause()
        assert on_screen(table)[-1] == f"task-{N - 1:05d}"


async def test_a_refresh_writes_changed_cells_of_visible_rows_only_and_keeps_the_cursor():
    app = TableApp()
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.query_one(FilterTable)
        table.set_rows(rows(0))
        await pilot.pause()
        table.move_cursor(row=1200, animate=False)
        await pilot.pause()
        writes = []
        original = table.update_cell
        table.update_cell = lambda *a, **kw: (writes.append(a), original(*a, **kw))
        table.set_rows(rows(1))  # every rate changes, nothing else
        await pilot.pause()
        assert 0 < len(writes) <= 30 and {w[1] for w in writes} == {"Rate"}
        assert table.current_key() == "j/task-01200"
        table.action_sort_next()  # by Task: same order
        table.action_sort_reverse()  # reversed: the cursor follows its row
        await pilot.pause()
        await pilot.pause()
        assert table.current_key() == "j/task-01200"
        assert str(table.get_row_at(table.cursor_row)[0]) == "task-01200"


async def test_filter_and_shrink_leave_virtual_mode_with_real_rows():
    app = TableApp()
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.query_one(FilterTable)
        table.set_rows(rows())
        await pilot.pause()
        table.set_filter("task-0499")  # 10 rows match
        await pilot.pause()
        assert not table._virtual and table.row_count == 10
        assert str(table.get_row_at(0)[0]) == "task-04990" and isinstance(table.get_row_at(0)[0], Text)
        table.set_filter("")
        await pilot.pause()
        assert table._virtual and table.row_count == N
        table.set_rows(rows(0, n=4000))  # fewer rows: placeholders rebuilt, the scroll kept (clamped)
        await pilot.pause()
        await pilot.pause()
        top = int(table.scroll_y)
        assert table.row_count == 4000 and on_screen(table)[:2] == [f"task-{top:05d}", f"task-{top + 1:05d}"]


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
