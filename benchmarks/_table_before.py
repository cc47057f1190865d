"""The Cluster table as it was before issue 20's table work (main at 250100a), kept as the baseline of
benchmarks/table_cost.py (measured in the same run): ``FilterTable`` on Textual's DataTable, with one
placeholder row per row past 300 rows, and the pane's refresh making a ``Row`` per task every time
(:func:`rows_before`, :func:`role_summary`). The table's code below is that commit's ``tui/widgets/table.py`` unchanged
(without ``TableBox``); nothing in the app imports it.

Its own docstring then:

A keyboard-first table: rows are handed over whole (panes stay pure renderers); the table filters
(``/``), sorts (``s`` next column, ``S`` reverse) and moves with vim keys (``j/k/g/G``).

Past :attr:`FilterTable.virtual_from` rows the table is virtual: the DataTable holds one blank
placeholder row per shown row (so scrolling, the scroll bar and the cursor work as usual), and only
the rows on screen are written, changed cells only, when data arrives or the view scrolls. A row's
cells may be a function (made only when the row is painted or filtered on): a 10,000-row refresh
costs the sort keys and a screenful of cells, not 150,000 cells."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.geometry import Region
from textual.message import Message
from textual.widgets import DataTable

from cmdare.collectors.observed import JobView, NodeView
from cmdare.tui.format import rate
from cmdare.tui.panes.cluster_rows import gpu_name, node_cells
from cmdare.tui.session import MonitorState


@dataclass(frozen=True)
class Row:
    """One table row: a stable ``key``, its ``cells`` (str or rich Text) and optional raw ``sort``
    values (one per column; None sorts last). Without ``sort`` the cell text is compared."""

    key: str
    cells: tuple[Any, ...] | Callable[[], tuple[Any, ...]]  # str cells: plain text (never markup)
    sort: tuple[Any, ...] | Callable[[], tuple[Any, ...]] | None = None  # a function: made when sorting
    dim: bool = False

    def values(self) -> tuple[Any, ...]:
        """The cells (made now when they were given as a function)."""
        return self.cells() if callable(self.cells) else self.cells

    def sort_values(self) -> tuple[Any, ...] | None:
        """The raw sort values (made now when they were given as a function), or None."""
        return self.sort() if callable(self.sort) else self.sort


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
    raw = row.sort_values()
    value = raw[col] if raw is not None and col < len(raw) else _plain(row.values()[col])
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

    virtual_from = 300  # rows: past this many, only the rows on screen are written

    def __init__(self, columns: Sequence[tuple[str, int]], **kw: Any) -> None:
        kw.setdefault("cursor_type", "row")
        super().__init__(**kw)
        self._columns = list(columns)
        self.view = _View()
        self._virtual = False  # placeholders + painting on demand (see the module docstring)
        self._shown: list[Row] = []  # virtual mode: the rows as displayed
        self._painted: dict[int, tuple[str, tuple[Text, ...]]] = {}  # position -> (key, cells) written

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
            rows = [r for r in rows if any(needle in _plain(c).lower() for c in r.values())]
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
        if self._virtual:
            row = self.cursor_row
            return self._shown[row].key if 0 <= row < len(self._shown) else None
        key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        return str(key.value) if key.value is not None else None

    @staticmethod
    def _fresh(r: Row) -> tuple[Text, ...]:
        return tuple(Text(_plain(c), style="dim") if r.dim else _text(c) for c in r.values())

    def _redraw(self) -> None:
        """Show :meth:`shown`: changed cells only when the row keys are unchanged (no flicker, cheap at
        1,000 rows), else rebuild; scroll (both axes) and the cursor row (by key) survive either way.
        Past :attr:`virtual_from` rows, only the rows on screen (:meth:`_redraw_virtual`)."""
        keep = self.current_key()
        shown = self.shown()
        if len(shown) > self.virtual_from:
            self._redraw_virtual(shown, keep)
            self._label_columns()
            return
        if self._virtual:  # back under the threshold: real rows again
            self._virtual, self._shown, self._painted = False, [], {}
            self.clear()
        fresh = [(r.key, self._fresh(r)) for r in shown]
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

    # --- virtual mode ----------------------------------------------------------------------
    def _redraw_virtual(self, shown: list[Row], keep: str | None) -> None:
        """One placeholder row per shown row (added or removed only when the count changes), the
        cursor kept on its row's key, then the rows on screen painted."""
        self._shown = shown
        blank = tuple(Text() for _ in self._columns)
        if not self._virtual or self.row_count > len(shown):
            scroll = (self.scroll_x, self.scroll_y)
            self._virtual, self._painted = True, {}
            self.clear()
            if scroll != (0, 0):
                self.call_after_refresh(self._restore_scroll, *scroll)
        for i in range(self.row_count, len(shown)):
            self.add_row(*blank, key=f"#{i}")
        if keep is not None and self.current_key() != keep:
            target = next((i for i, r in enumerate(shown) if r.key == keep), None)
            if target is not None:
                self.move_cursor(row=target, animate=False, scroll=False)
        self._paint_visible()

    def visible_range(self) -> range:
        """Positions of the rows on screen (and two either side)."""
        top = int(self.scroll_y)
        height = max(self.size.height, 1)
        return range(max(0, top - 2), min(len(self._shown), self.row_count, top + height + 2))

    def _paint_visible(self) -> None:
        """Write the rows on screen into their placeholders: only the cells that differ from what
        that position shows already."""
        if not self._virtual:
            return
        cols = [label for label, _ in self._columns]
        for i in self.visible_range():
            row = self._shown[i]
            cells = self._fresh(row)
            old = self._painted.get(i)
            for j, (col, cell) in enumerate(zip(cols, cells, strict=False)):
                if old is None or not _same(old[1][j], cell):
                    self.update_cell(f"#{i}", col, cell)
            self._painted[i] = (row.key, cells)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self._paint_visible()

    def on_resize(self) -> None:
        self._paint_visible()

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


# --- the Cluster pane's rows before (its update_state, less the summary line) ------------------------
def node_sort(n: NodeView, marks: list[str], now: float) -> tuple[object, ...]:
    """The raw values a task's row sorted by, one per column (uptime at ``now``)."""
    step_ms = n.step_seconds * 1000 if n.step_seconds else None
    return (n.status, n.name, n.role, n.steps_per_sec, gpu_name(n), n.cpu_pct, n.mem_used_bytes, n.gpu_util,
            n.provisioning, ",".join(marks), n.gpu_mem_used_mib, n.uptime_s(now), n.region, step_ms, n.net_in_bps)  # fmt: skip


def node_row(job: JobView, n: NodeView, marks: list[str], now: float) -> Row:
    """One task's row as it was made: a new object every refresh."""
    marks = [*n.flags, *marks]
    return Row(f"{job.name}/{n.name}", partial(node_cells, n, marks, now), partial(node_sort, n, marks, now))


def rows_before(state: MonitorState) -> list[Row]:
    """Every task's row, made anew (the loop of the pane's update_state before)."""
    flags: dict[str, list[str]] = {}
    for a in state.alerts:
        flags.setdefault(a.subject, []).append(a.kind)
    rows = []
    for job in state.jobs:
        for n in job.nodes:
            marks = flags.get(f"{job.name}/{n.name}", [])
            if n.role == "ps":
                marks = marks + [k for k in flags.get(job.name, []) if k == "ps-saturation"]
            rows.append(node_row(job, n, marks, state.t))
    return rows


def role_summary(jobs: list[JobView]) -> Text:
    """The summary line as it was made: every task looked at, every refresh."""
    roles: dict[str, list[NodeView]] = {}
    for job in jobs:
        for n in job.nodes:
            roles.setdefault(n.role, []).append(n)
    line = Text()
    for role, nodes in sorted(roles.items(), key=lambda kv: -len(kv[1])):
        up = sum(n.status == "up" for n in nodes)
        rates = [n.steps_per_sec for n in nodes if n.steps_per_sec is not None]
        line.append(f"{role} ", "bold").append(f"{up:,}/{len(nodes):,} up")
        if len(nodes) > up:
            line.append(f" ({len(nodes) - up:,} not)", "yellow")
        if rates:
            line.append(f", median {rate(statistics.median(rates))} steps/s")
        line.append("  ")
    return line
