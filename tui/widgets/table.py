"""A keyboard-first table: rows are handed over whole (panes stay pure renderers); the table filters
(``/``), sorts (``s`` next column, ``S`` reverse) and moves with vim keys (``j/k/g/G``).

At any size it costs what changes: :class:`~cmdare.tui.widgets.table_rows.RowOrder` keeps the order
while the rows do not move, and :class:`~cmdare.tui.widgets.line_table.LineTable` draws only the lines
on screen, repainting those whose cells changed. A row's cells may be a function (made only when the
row is on screen, or filtered on): a 10,000-row refresh costs an identity check per row, the sort
values of the rows that changed and a screenful of cells, not 150,000 cells."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input

from cmdare.tui.widgets.line_table import LineTable
from cmdare.tui.widgets.table_rows import Row, RowOrder

__all__ = ["FilterTable", "Row", "TableBox"]


class FilterTable(LineTable):
    """A table whose rows are set with :meth:`set_rows`; filter, sort, scroll and the cursor (by row
    key) survive refreshes."""

    BINDINGS = [
        Binding("j", "cursor_down", "Down", tooltip="Row down", show=False, id="table.down"),
        Binding("k", "cursor_up", "Up", tooltip="Row up", show=False, id="table.up"),
        Binding("g", "scroll_top", "Top", tooltip="First row", show=False, id="table.top"),
        Binding("G", "scroll_bottom", "Bottom", tooltip="Last row", show=False, id="table.bottom"),
        Binding("slash", "filter", "Filter", tooltip="Filter rows (esc clears)", id="table.filter"),
        Binding("s", "sort_next", "Sort", tooltip="Sort by the next column", id="table.sort"),
        Binding("S", "sort_reverse", "Reverse sort", show=False, id="table.reverse"),
        Binding(
            "c", "columns", "Columns", tooltip="Columns: sort, show, hide", show=False, id="table.columns"
        ),
    ]

    class FilterRequested(Message):
        """Posted when ``/`` asks for the filter line of this table."""

        def __init__(self, table: FilterTable) -> None:
            super().__init__()
            self.table = table

    class ColumnsRequested(Message):
        """Posted when ``c`` asks for the column chooser of this table."""

        def __init__(self, table: FilterTable) -> None:
            super().__init__()
            self.table = table

    class Scrolled(Message):
        """Posted when the rows on screen may have changed (the table scrolled)."""

        def __init__(self, table: FilterTable) -> None:
            super().__init__()
            self.table = table

    def __init__(self, columns: Sequence[tuple[str, int]], **kw: Any) -> None:
        super().__init__(columns, **kw)
        self.view = RowOrder()

    def visible_keys(self) -> list[str]:
        """The keys of the rows on screen, top to bottom."""
        shown = self.view.shown
        return [shown[i].key for i in self.visible_range() if i < len(shown)]

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if int(old_value) != int(new_value):
            self.post_message(self.Scrolled(self))

    # --- data --------------------------------------------------------------------------------
    def set_rows(self, rows: Sequence[Row], recheck: bool = False) -> None:
        """Replace every row; keeps the filter, the sort, the scroll and the cursor (by row key).
        Nothing happens when every row is the very object shown already, unless ``recheck``: the rows'
        cells may read differently (they read a clock), so the lines on screen are made again (and
        repainted where they changed) and the filter looks at the cells again."""
        keep = self.current_key()
        if self.view.set_rows(rows, cells_moved=recheck) or recheck:
            self._show(keep, recheck)

    def move_to_prefix(self, prefix: str) -> None:
        """Put the cursor on the first row shown whose key starts with ``prefix`` (none: stays)."""
        at = next((i for i, r in enumerate(self.view.shown) if r.key.startswith(prefix)), None)
        if at is not None:
            self.move_cursor(row=at)

    def shown(self) -> list[Row]:
        """The rows as displayed: filtered, then sorted."""
        return self.view.shown

    def _show(self, keep: str | None, recheck: bool = False) -> None:
        """Show the view's rows with the cursor on the row ``keep`` (where it is when it is gone)."""
        rows = self.view.shown
        at = self.cursor_row
        moved = keep is not None and not (at < len(rows) and rows[at].key == keep)
        self.show_rows(rows, self.view.index_of(keep) if moved and keep is not None else None, recheck)

    def _reorder(self) -> None:
        """Filter and sort again (the filter or the sort changed), the cursor kept on its row."""
        keep = self.current_key()
        self.view.reorder()
        self._show(keep)

    def _label_columns(self) -> None:
        """The sorted column's label ends in its arrow (the column widens to hold it)."""
        for i, column in enumerate(self.columns.values()):
            shown = column.key
            if i == self.view.sort_col:
                shown += " ▼" if self.view.reverse else " ▲"
            column.label = Text(shown)
        self.fit_columns()
        self.refresh_header()

    # --- actions -----------------------------------------------------------------------------
    def set_filter(self, text: str) -> None:
        """Show only the rows with a cell containing ``text`` (case-insensitive; empty: all)."""
        self.view.filter = text.strip()
        self._reorder()

    def action_filter(self) -> None:
        """``/``: ask the surrounding :class:`TableBox` for its filter line."""
        self.post_message(self.FilterRequested(self))

    def action_sort_next(self) -> None:
        """``s``: sort by the next column shown (ascending; unknown values last)."""
        v, n = self.view, len(self.columns)
        shown = [i for i, c in enumerate(self.columns.values()) if c.width] or list(range(n))
        after = [i for i in shown if v.sort_col is None or i > v.sort_col]
        v.sort_col = after[0] if after else shown[0]
        v.reverse = False
        self._sorted()

    def action_columns(self) -> None:
        """``c``: ask for the column chooser (the app opens it: tui/widgets/column_chooser.py)."""
        self.post_message(self.ColumnsRequested(self))

    def header_clicked(self, column: int) -> None:
        """A click on a column's label sorts by it; a second click reverses the order."""
        v = self.view
        v.reverse = not v.reverse if v.sort_col == column else False
        v.sort_col = column
        self._sorted()

    def action_sort_reverse(self) -> None:
        """``S``: reverse the sort (by the first column when none is set)."""
        if self.view.sort_col is None:
            self.view.sort_col = 0
        self.view.reverse = not self.view.reverse
        self._sorted()

    def _sorted(self) -> None:
        """After a new sort: order again, label the column, bring it on screen."""
        self._reorder()
        self._label_columns()
        self.call_after_refresh(self.show_sorted_column)

    def show_sorted_column(self) -> None:
        """Scroll sideways until the sorted column (and its arrow) is on screen, at any width."""
        if self.view.sort_col is None:
            return
        x, _, width, _ = self.column_region(self.view.sort_col)
        room = self.scrollable_content_region.width
        if x < self.scroll_x:
            self.scroll_to(x=x, animate=False, force=True)
        elif x + width > self.scroll_x + room:
            self.scroll_to(x=min(x, x + width - room), animate=False, force=True)  # a wide one: its start


class TableBox(Vertical):
    """A :class:`FilterTable` with its filter line (shown while typing or while a filter is set)."""

    DEFAULT_CSS = """
    TableBox { height: 1fr; }
    TableBox > FilterTable { height: 1fr; }
    TableBox > Input.filter, TableBox > Input.filter:focus { display: none; height: 1; border: none; padding: 0 1; }
    TableBox > Input.filter.-active { display: block; }
    """

    def __init__(self, table: FilterTable, **kw: Any) -> None:
        super().__init__(**kw)
        self.table = table

    def compose(self) -> ComposeResult:
        yield self.table
        yield Input(placeholder="filter rows (enter keeps it, esc clears)", classes="filter")

    def on_filter_table_filter_requested(self, event: FilterTable.FilterRequested) -> None:
        box = self.query_one(Input)
        box.add_class("-active")
        box.focus()
        event.stop()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.table.set_filter(event.value)
        event.stop()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        box = self.query_one(Input)
        box.set_class(bool(event.value.strip()), "-active")
        self.table.focus()
        event.stop()

    def key_escape(self) -> None:
        """``esc`` in the filter line: clear the filter and return to the table."""
        box = self.query_one(Input)
        if box.has_focus:
            box.value = ""
            box.remove_class("-active")
            self.table.set_filter("")
            self.table.focus()
