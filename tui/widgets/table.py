"""A keyboard-first table: rows are handed over whole (panes stay pure renderers); the table filters
(``/``), sorts (``s`` next column, ``S`` reverse) and moves with vim keys (``j/k/g/G``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.geometry import Region
from textual.message import Message
from textual.widgets import DataTable, Input


@dataclass(frozen=True)
class Row:
    """One table row: a stable ``key``, its ``cells`` (str or rich Text) and optional raw ``sort``
    values (one per column; None sorts last). Without ``sort`` the cell text is compared."""

    key: str
    cells: tuple[Any, ...]  # str cells are shown as plain text (never parsed as markup)
    sort: tuple[Any, ...] | None = None
    dim: bool = False


@dataclass
class _View:
    filter: str = ""
    sort_col: int | None = None
    reverse: bool = False
    rows: list[Row] = field(default_factory=list)


def _plain(cell: Any) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def _text(cell: Any) -> Text:
    """A cell as rich Text: data is never parsed as markup (DataTable would parse a str)."""
    return cell if isinstance(cell, Text) else Text(str(cell))


def _sort_key(row: Row, col: int) -> tuple[int, Any]:
    value = row.sort[col] if row.sort is not None and col < len(row.sort) else _plain(row.cells[col])
    if value is None or (isinstance(value, float) and not math.isfinite(value)) or value in ("–", ""):
        return (1, 0)
    return (0, value) if isinstance(value, int | float) else (0, str(value).lower())


def _same(old: Any, new: Text) -> bool:
    """Whether a shown cell already equals ``new`` (text, base style and spans)."""
    return (
        isinstance(old, Text) and old.plain == new.plain and old.style == new.style and old.spans == new.spans
    )


class FilterTable(DataTable):
    """A DataTable whose rows are set with :meth:`set_rows`; filter and sort survive refreshes."""

    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False, id="table.down"),
        Binding("k", "cursor_up", "Up", show=False, id="table.up"),
        Binding("g", "scroll_top", "Top", show=False, id="table.top"),
        Binding("G", "scroll_bottom", "Bottom", show=False, id="table.bottom"),
        Binding("slash", "filter", "Filter", id="table.filter"),
        Binding("s", "sort_next", "Sort", id="table.sort"),
        Binding("S", "sort_reverse", "Reverse sort", show=False, id="table.reverse"),
    ]

    class FilterRequested(Message):
        """Posted when ``/`` asks for the filter line of this table."""

        def __init__(self, table: FilterTable) -> None:
            super().__init__()
            self.table = table

    def __init__(self, columns: Sequence[tuple[str, int]], **kw: Any) -> None:
        kw.setdefault("cursor_type", "row")
        super().__init__(**kw)
        self._columns = list(columns)
        self.view = _View()

    def on_mount(self) -> None:
        for label, width in self._columns:
            self.add_column(label, width=width, key=label)

    # --- data --------------------------------------------------------------------------------
    def set_rows(self, rows: Sequence[Row]) -> None:
        """Replace every row; keeps the filter, the sort and the cursor (by row key)."""
        self.view.rows = list(rows)
        self._redraw()

    def shown(self) -> list[Row]:
        """The rows as displayed: filtered, then sorted."""
        rows = self.view.rows
        if self.view.filter:
            needle = self.view.filter.lower()
            rows = [r for r in rows if any(needle in _plain(c).lower() for c in r.cells)]
        if self.view.sort_col is not None:
            col = self.view.sort_col
            known = [r for r in rows if _sort_key(r, col)[0] == 0]
            unknown = [r for r in rows if _sort_key(r, col)[0] == 1]
            known.sort(key=lambda r: _sort_key(r, col), reverse=self.view.reverse)
            rows = known + unknown
        return rows

    def current_key(self) -> str | None:
        """The row key under the cursor, or None when the table is empty."""
        if not self.row_count:
            return None
        key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        return str(key.value) if key.value is not None else None

    def _redraw(self) -> None:
        """Show :meth:`shown`: changed cells only when the row keys are unchanged (no flicker, cheap at
        1,000 rows), else rebuild; scroll (both axes) and the cursor row (by key) survive either way."""
        keep = self.current_key()
        shown = self.shown()
        fresh = [
            (r.key, tuple(Text(_plain(c), style="dim") if r.dim else _text(c) for c in r.cells))
            for r in shown
        ]
        present = [str(row.key.value) for row in self.ordered_rows]
        if self.row_count and present == [k for k, _ in fresh]:
            self._update_cells(fresh)
        else:
            self._rebuild(fresh, keep)
        self._label_columns()

    def _update_cells(self, fresh: list[tuple[str, tuple[Text, ...]]]) -> None:
        """Write only the cells whose text or style changed; scroll and cursor are untouched."""
        keys = [label for label, _ in self._columns]
        for row_key, cells in fresh:
            for col_key, cell in zip(keys, cells, strict=False):
                old = self.get_cell(row_key, col_key)
                if not _same(old, cell):
                    self.update_cell(row_key, col_key, cell)

    def _rebuild(self, fresh: list[tuple[str, tuple[Text, ...]]], keep: str | None) -> None:
        """Clear and re-add every row, then restore the scroll offsets and the cursor row."""
        scroll = (self.scroll_x, self.scroll_y)
        self.clear()
        for row_key, cells in fresh:
            self.add_row(*cells, key=row_key)
        if self.row_count:
            target = next((i for i, (k, _) in enumerate(fresh) if k == keep), 0)
            self.move_cursor(row=target, animate=False, scroll=False)
        if scroll != (0, 0):
            self.call_after_refresh(self._restore_scroll, *scroll)

    def _restore_scroll(self, x: float, y: float) -> None:
        self.scroll_to(x, y, animate=False, immediate=True)

    def _label_columns(self) -> None:
        for i, (label, width) in enumerate(self._columns):
            shown = label
            if i == self.view.sort_col:  # a narrow column shortens its label, never loses the arrow
                arrow = "▼" if self.view.reverse else "▲"
                shown = label[: width - 2] + " " + arrow if width >= 3 else arrow
            col = self.columns.get(label)  # type: ignore[call-overload]
            if col is not None:
                col.label = Text(shown)
        self.refresh()

    # --- actions -----------------------------------------------------------------------------
    def set_filter(self, text: str) -> None:
        """Show only the rows with a cell containing ``text`` (case-insensitive; empty: all)."""
        self.view.filter = text.strip()
        self._redraw()

    def action_filter(self) -> None:
        """``/``: ask the surrounding :class:`TableBox` for its filter line."""
        self.post_message(self.FilterRequested(self))

    def action_sort_next(self) -> None:
        """``s``: sort by the next column (ascending; unknown values last)."""
        v = self.view
        v.sort_col = 0 if v.sort_col is None else (v.sort_col + 1) % len(self._columns)
        v.reverse = False
        self._redraw()
        self.call_after_refresh(self.show_sorted_column)

    def action_sort_reverse(self) -> None:
        """``S``: reverse the sort (by the first column when none is set)."""
        if self.view.sort_col is None:
            self.view.sort_col = 0
        self.view.reverse = not self.view.reverse
        self._redraw()
        self.call_after_refresh(self.show_sorted_column)

    def show_sorted_column(self) -> None:
        """Scroll sideways until the sorted column (and its arrow) is on screen, at any width."""
        if self.view.sort_col is not None:
            x, _, width, _ = self._get_column_region(self.view.sort_col)
            where = Region(x, int(self.scroll_y), width, 1)
            self.scroll_to_region(where, animate=False, force=True, immediate=True)


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
