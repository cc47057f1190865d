"""A table drawn line by line (Textual's Line API on a ScrollView): a header of fixed-width columns and
one line per :class:`~cmdare.tui.widgets.table_rows.Row`, with a row cursor.

It holds nothing per row but the sequence it is given: only the lines on screen are drawn, each from
its row's cells (made then), and a new sequence of rows repaints only the lines on screen whose cells
changed. It looks like Textual's DataTable with a row cursor (the same theme variables, cell padding,
header, cursor and hover styles, segment for segment), moves with the same keys, and posts DataTable's
own ``RowSelected`` on ``enter`` or a click on the cursor row, so handlers written for one serve both."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar, NamedTuple

from rich.cells import cell_len
from rich.console import Console
from rich.padding import Padding
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.geometry import Region, Size, clamp
from textual.renderables.styled import Styled
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import DataTable
from textual.widgets.data_table import RowKey

from cmdare.tui.widgets.column_fit import Span, cut_text, distinct_spans, fit_widths, fitting_floor
from cmdare.tui.widgets.table_rows import Row, plain, same_value, same_values, shown_cells

EMPTY_CELL = Text(no_wrap=True, end="")  # what DataTable draws for an empty cell
HEADER = -1  # the header's row index (as in DataTable's segment metadata)
NULL = Style()
FIT_ALL = 500  # up to this many rows, columns fit every row's cells; beyond, the rows on screen


class _Drawn(NamedTuple):
    """What a line on screen was drawn from: the row, its cell values, their Text."""

    row: Row
    values: tuple[Any, ...]
    cells: tuple[Text, ...]


@dataclass
class TableColumn:
    """A column: its ``key`` (the label as given), the ``label`` shown, its ``width`` in cells now
    (sized to its cells: :meth:`LineTable.fit_columns`; 0: not drawn) and its ``floor``, the fewest
    cells it keeps when the columns together are wider than the table."""

    key: str
    label: Text
    width: int
    floor: int = 0

    def get_render_width(self, table: LineTable) -> int:
        """The width drawn, padding included (DataTable's name for it); 0 for a column not drawn."""
        return self.width + 2 * table.cell_padding if self.width else 0


class LineTable(ScrollView, can_focus=True):
    """Rows given whole with :meth:`show_rows`, drawn only while on screen; a row cursor."""

    ALLOW_SELECT = False
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "Select", show=False),
        Binding("up", "cursor_up", "Cursor up", show=False),
        Binding("down", "cursor_down", "Cursor down", show=False),
        Binding("right", "cursor_right", "Cursor right", show=False),
        Binding("left", "cursor_left", "Cursor left", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("ctrl+home", "scroll_top", "Top", show=False),
        Binding("ctrl+end", "scroll_bottom", "Bottom", show=False),
        Binding("home", "scroll_home", "Home", show=False),
        Binding("end", "scroll_end", "End", show=False),
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "table--cursor",
        "table--hover",
        "table--header",
        "table--header-hover",
    }
    # DataTable's own rules for these parts, so both look alike under every theme
    DEFAULT_CSS = """
    LineTable {
        background: $surface;
        color: $foreground;
        height: auto;
        max-height: 100%;
        &:focus {
            background-tint: $foreground 5%;
            & > .table--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
            & > .table--header { background-tint: $foreground 5%; }
        }
        & > .table--header { text-style: bold; background: $panel; color: $foreground; }
        &:ansi > .table--header { background: ansi_bright_blue; color: ansi_default; }
        & > .table--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        & > .table--header-hover { background: $accent 30%; }
        & > .table--hover { background: $block-hover-background; }
    }
    """
    cell_padding = 1  # cells either side of each column's text

    def __init__(
        self,
        columns: Sequence[tuple[str, int]],
        *,
        collapse: Iterable[str] = (),
        cut_end: Iterable[str] = (),
        fit_through: str | None = None,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
        disabled: bool = False,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes, disabled=disabled)
        self.columns = {label: TableColumn(label, Text(label), width, width) for label, width in columns}
        self.collapse = frozenset(collapse)  # columns that take no room while every cell is empty
        self.cut_end = frozenset(cut_end)  # columns of prose: a cell too wide loses its end
        # the columns up to this one are fitted into the table's width (the rest scroll); None: all
        self.fit_through = list(self.columns).index(fit_through) if fit_through is not None else None
        self.hidden: set[str] = set()  # columns the user chose not to see
        self.absent: set[str] = set()  # columns the pane does not show now (they would say nothing)
        self._measured: dict[
            str, tuple[tuple[Any, ...], tuple[int, ...]]
        ] = {}  # row key -> (values, cell widths)
        self._keep: dict[int, dict[str, Span]] = {}  # cut column -> value -> what tells it apart
        self._rows: Sequence[Row] = ()
        self._cursor = 0
        self._hover_row = 0
        self._hover_on = False  # the mouse's row is highlighted only until a key moves the cursor
        self._drawn: dict[int, _Drawn] = {}  # position on screen -> what was drawn there
        self._strips: LRUCache[tuple[Any, ...], tuple[object, Strip]] = LRUCache(512)
        self._pseudo: object = None  # focus and the like: part of what a drawn line depends on
        self._base: Style | None = None  # the widget's style, as of the paint under way
        self._sized: tuple[Size, Size, Size] | None = (
            None  # (size, container size, virtual size) laid out last
        )

    # --- what is shown ------------------------------------------------------------------------
    @property
    def ordered_columns(self) -> list[TableColumn]:
        """The columns, left to right."""
        return list(self.columns.values())

    @property
    def row_count(self) -> int:
        """How many rows are shown."""
        return len(self._rows)

    @property
    def cursor_row(self) -> int:
        """The position of the row under the cursor."""
        return self._cursor

    def current_key(self) -> str | None:
        """The row key under the cursor, or None when the table is empty."""
        return self._rows[self._cursor].key if 0 <= self._cursor < len(self._rows) else None

    def get_row_at(self, index: int) -> list[Text]:
        """The cells of the row at ``index``, as drawn."""
        return list(shown_cells(self._rows[index]))

    def get_cell(self, row_key: str, column: str) -> Text:
        """The cell of row ``row_key`` in ``column``, as drawn."""
        row = next(r for r in self._rows if r.key == row_key)
        return shown_cells(row)[list(self.columns).index(column)]

    def get_column(self, column: str) -> Iterator[Text]:
        """The cells of ``column``, top to bottom, as drawn."""
        at = list(self.columns).index(column)
        return (shown_cells(r)[at] for r in self._rows)

    def visible_range(self) -> range:
        """Positions of the rows on screen."""
        top = int(self.scroll_y)
        return range(top, min(len(self._rows), top + max(self.scrollable_content_region.height - 1, 0)))

    def column_region(self, index: int) -> Region:
        """Where column ``index`` is drawn, in the table's own (scrollable) coordinates."""
        widths = [c.get_render_width(self) for c in self.columns.values()]
        return Region(sum(widths[:index]), 0, widths[index], len(self._rows) + 1)

    # --- data ---------------------------------------------------------------------------------
    def show_rows(self, rows: Sequence[Row], cursor: int | None = None, recheck: bool = False) -> None:
        """Show ``rows`` (held as given, not copied), the cursor on position ``cursor`` when given (not
        scrolled to); only the lines on screen whose cells changed are repainted. ``recheck``: the
        cells of rows on screen are made again even for the same row objects (they read a clock)."""
        self._rows = rows
        was = self._cursor
        self._cursor = clamp(was if cursor is None else cursor, 0, max(len(rows) - 1, 0))
        for i in self._stale_lines(recheck):
            self._refresh_row(i)
        self.fit_columns()  # after the lines on screen: their cells are made already
        if self._cursor != was:
            self._refresh_row(was)
            self._refresh_row(self._cursor)

    def fit_columns(self) -> None:
        """Size the columns to their cells (every row's up to :data:`FIT_ALL` rows, else those on
        screen), within the table's width: see :mod:`~cmdare.tui.widgets.column_fit`. Everything is
        repainted when a width changed."""
        columns = list(self.columns.values())
        at = range(len(self._rows)) if len(self._rows) <= FIT_ALL else self.visible_range()
        rows = [self._rows[i] for i in at]
        widths = [self._cell_widths(i, r) for i, r in zip(at, rows, strict=True)]
        if len(self._measured) > 2 * len(rows) + 64:
            self._measured = {r.key: self._measured[r.key] for r in rows if r.key in self._measured}
        n = len(columns)
        widest = [max(col, default=0) for col in zip(*widths, strict=False)][:n] if widths else []
        widest += [0] * (n - len(widest))
        natural = [
            0
            if c.key in self.hidden or c.key in self.absent or (c.key in self.collapse and w == 0)
            else max(w, cell_len(c.label.plain))
            for c, w in zip(columns, widest, strict=True)
        ]
        floors = [fitting_floor(c.floor, c.label.plain) for c in columns]
        room = self.scrollable_content_region.width or self.size.width or sum(natural) + 2 * n
        fitted = fit_widths(natural, floors, room, self.cell_padding, self.fit_through)
        self._keep = {
            j: distinct_spans(plain(self._measured[r.key][0][j]) for r in rows)
            for j in range(n)
            if fitted[j] and fitted[j] < widest[j] and columns[j].key not in self.cut_end
        }
        self._set_widths(fitted)

    def set_absent(self, names: set[str]) -> None:
        """The columns the pane leaves out now (refitted with the next rows)."""
        self.absent = names

    def set_hidden(self, names: set[str]) -> None:
        """The columns the user chose not to see; the others refitted at once."""
        self.hidden = set(names)
        self.fit_columns()

    def _set_widths(self, fitted: list[int]) -> None:
        """Take new column widths: the virtual size, and a repaint of everything when one changed."""
        columns = list(self.columns.values())
        changed = any(c.width != w for c, w in zip(columns, fitted, strict=True))
        for c, w in zip(columns, fitted, strict=True):
            c.width = w
        size = Size(sum(c.get_render_width(self) for c in columns), len(self._rows) + 1)
        if size != self.virtual_size:
            self.virtual_size = size
        if changed:
            self._strips.clear()
            self.refresh()

    def _cell_widths(self, index: int, row: Row) -> tuple[int, ...]:
        """The cells' widths of ``row`` at ``index`` (an empty or "–" cell counts 0), kept while its
        values stay (those drawn on its line when it is on screen)."""
        drawn = self._drawn.get(index)
        values = drawn.values if drawn is not None and drawn.row is row else row.values()
        hit = self._measured.get(row.key)
        if hit is not None and hit[0] is values:
            return hit[1]
        widths = tuple(0 if (t := plain(v)) in ("", "–") else cell_len(t) for v in values)
        self._measured[row.key] = (values, widths)
        return widths

    def on_resize(self, _: events.Resize) -> None:
        self.fit_columns()

    def _size_updated(
        self, size: Size, virtual_size: Size, container_size: Size, layout: bool = True
    ) -> bool:
        """Textual's, skipped when the table's size, room and rows are those of the last layout. Textual's
        ScrollView takes the screen's content size for a change of its own at every layout of the screen,
        and repainted both scroll bars of every table then, in a frame of their own (opening or closing the
        help drew a second frame ~30 ms after the first: issue 28)."""
        sized = (size, container_size, self.virtual_size)
        if sized == self._sized:
            return False
        self._sized = sized
        return super()._size_updated(size, virtual_size, container_size, layout)

    def _stale_lines(self, recheck: bool) -> list[int]:
        """The positions on screen whose cells differ from those drawn there (made now)."""
        stale = [i for i in self._drawn if i >= len(self._rows)]
        shown: list[int] | None = None  # the columns in the horizontal view (made once, when needed)
        for i in self.visible_range():
            before = self._drawn.get(i)
            cells = self._cells_at(i, again=recheck)
            if before is None or before.row.dim != self._rows[i].dim:
                stale.append(i)
            elif before.cells is not cells:
                shown = self._columns_in_view() if shown is None else shown
                alike = len(cells) == len(before.cells) and all(
                    same_value(before.cells[j], cells[j]) for j in shown
                )
                if not alike:
                    stale.append(i)  # (a cell out of view, an uptime counting on, repaints nothing)
        self._forget_hidden()
        return stale

    def _columns_in_view(self) -> list[int]:
        """The columns at least partly inside the horizontal view."""
        x0 = int(self.scroll_x)
        x1 = x0 + self.scrollable_content_region.width
        out, x = [], 0
        for j, column in enumerate(self.columns.values()):
            w = column.get_render_width(self)
            if x < x1 and x + w > x0:
                out.append(j)
            x += w
        return out

    def _cells_at(self, index: int, again: bool = False) -> tuple[Text, ...]:
        """The cells of the row at ``index`` (its values made ``again`` even for the row drawn there):
        those drawn there when they draw alike, so that its line stays cached."""
        row = self._rows[index]
        before = self._drawn.get(index)
        if before is not None and before.row is row and not again:
            return before.cells
        values = row.values()
        if before is not None and before.row.key == row.key and before.row.dim == row.dim:
            if values is before.values or same_values(before.values, values):
                self._drawn[index] = _Drawn(row, before.values, before.cells)
                return before.cells
        drawn = self._drawn[index] = _Drawn(row, values, shown_cells(row, values))
        return drawn.cells

    def _forget_hidden(self) -> None:
        """Drop what was drawn on lines no longer on screen."""
        shown = self.visible_range()
        for i in [i for i in self._drawn if i not in shown]:
            del self._drawn[i]

    def refresh_header(self) -> None:
        """Repaint the header line (after a label changed)."""
        self.refresh(Region(0, 0, self.size.width, 1))

    def _refresh_row(self, index: int) -> None:
        """Repaint the line of the row at ``index`` when it is on screen."""
        y = index + 1 - int(self.scroll_y)
        if 1 <= y < self.size.height:
            self.refresh(Region(0, y, self.size.width, 1))

    # --- cursor -------------------------------------------------------------------------------
    def move_cursor(self, *, row: int | None = None, animate: bool = False, scroll: bool = True) -> None:
        """Put the cursor on position ``row`` and (``scroll``) scroll it into view."""
        was = self._cursor
        if row is not None:
            self._cursor = clamp(row, 0, max(len(self._rows) - 1, 0))
        self._refresh_row(was)
        self._refresh_row(self._cursor)
        if scroll:
            self.scroll_to_cursor(animate=animate)

    def scroll_to_cursor(self, animate: bool = False) -> None:
        """Scroll vertically (the least) until the cursor's row is on screen below the header."""
        top = int(self.scroll_y)
        room = max(self.scrollable_content_region.height - 1, 1)
        if self._cursor < top:
            self.scroll_to(y=self._cursor, animate=animate, force=True)
        elif self._cursor >= top + room:
            self.scroll_to(y=self._cursor - room + 1, animate=animate, force=True)

    def select_cursor_row(self) -> None:
        """Post DataTable's ``RowSelected`` for the row under the cursor (what ``enter`` does)."""
        key = self.current_key()
        if key is not None:  # DataTable's own message (its handlers serve both); the table is this one
            self.post_message(DataTable.RowSelected(self, self._cursor, RowKey(key)))  # type: ignore[arg-type]  # not a DataTable: its handlers read the row only

    # --- drawing ------------------------------------------------------------------------------
    def render_lines(self, crop: Region) -> list[Strip]:
        self._pseudo = self.get_pseudo_class_state()
        self._base = self.rich_style  # once a paint: Textual blends it up the tree (~0.1 ms)
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        """Line ``y`` on screen: the header (fixed above the rows), a row, or blank past the last."""
        width = self.size.width
        x, top = self.scroll_offset
        base = self._base or self.rich_style
        if y == 0:
            line = self._header_strip(width)
        elif y - 1 + top < len(self._rows):
            line = self._row_strip(y - 1 + top, width)
        else:
            return Strip.blank(width, base)
        return line.crop(x, x + width).adjust_cell_length(width, base).simplify()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()
        self.refresh()

    def _header_strip(self, width: int) -> Strip:
        """The header line, whole width (cached while labels, hover, width and focus stay)."""
        hover = self._hover_on and self._hover_row == HEADER
        labels = tuple(c.label for c in self.columns.values())
        key = (HEADER, tuple(t.plain for t in labels), hover, width, self._pseudo)
        hit = self._strips.get(key)
        if hit is None:
            style = self.get_component_styles("table--header").rich_style
            hit = (None, self._line(HEADER, labels, style, hover, False, width))
            self._strips[key] = hit
        return hit[1]

    def _row_strip(self, index: int, width: int) -> Strip:
        """The line of the row at ``index``, whole width (cached while its cells and state stay)."""
        cells = self._cells_at(index)
        cursor = index == self._cursor
        hover = self._hover_on and index == self._hover_row
        key = (self._rows[index].key, index, cursor, hover, width, self._pseudo)
        hit = self._strips.get(key)
        if hit is None or hit[0] is not cells:
            hit = (cells, self._line(index, cells, self._base or self.rich_style, hover, cursor, width))
            self._strips[key] = hit
        return hit[1]

    def _line(
        self, index: int, cells: Sequence[Text], style: Style, hover: bool, cursor: bool, width: int
    ) -> Strip:
        """One row's line as DataTable draws it: each cell padded in its column, then the rest of the
        width in the row's style (every segment tagged with its row and column, for the mouse)."""
        component, post = self._cell_styles(index == HEADER, hover, cursor)
        pre = style + component
        base = pre + post
        segments: list[Segment] = []
        for j, column in enumerate(self.columns.values()):
            if not column.width:
                continue
            cell = (cells[j] if j < len(cells) else None) or EMPTY_CELL
            if index != HEADER and cell_len(cell.plain) > column.width:
                keep = (0, 0) if column.key in self.cut_end else self._keep.get(j, {}).get(cell.plain)
                cell = cut_text(cell, column.width, keep)
            meta = cell_meta(index, j)
            drawn = self._cell(cell, pre, post, base, column.get_render_width(self))
            segments += [Segment(text, (cell_style or NULL) + meta) for text, cell_style, _ in drawn]
        table_width = sum(c.get_render_width(self) for c in self.columns.values())
        rest = pre + cell_meta(index, 0, out_of_bounds=True)
        segments.append(Segment(" " * max(0, width - table_width), rest))
        return Strip(segments)

    def _cell(self, cell: Text, pre: Style, post: Style, base: Style, width: int) -> list[Segment]:
        """One cell padded to ``width``, one line, never wrapped (``base``: ``pre + post``)."""
        console = self.app.console
        drawn = plain_cell(cell, (pre, post, base), width, self.cell_padding, console)
        if drawn is not None:
            return drawn
        options = self.app.console_options.update_dimensions(width, 1).update(no_wrap=True)
        shown = Styled(Padding(cell, (0, self.cell_padding)), pre_style=pre, post_style=post)
        return console.render_lines(shown, options)[0]

    def _cell_styles(self, header: bool, hover: bool, cursor: bool) -> tuple[Style, Style]:
        """The cursor's and the hover's styles over a cell, and the cursor's colour laid on top of the
        cell's own (DataTable's default: the CSS colour wins, the cell's background stays)."""
        style = Style()
        if hover:
            style += self.get_component_rich_style("table--hover")
            if header:
                style += self.get_component_rich_style("table--header-hover")
        if cursor:
            style += self.get_component_rich_style("table--cursor")
        return style, Style.from_color(color=style.color)

    # --- mouse --------------------------------------------------------------------------------
    def on_mouse_move(self, event: events.MouseMove) -> None:
        meta = event.style.meta
        row = meta.get("row") if meta else None
        self._set_hover(row is not None, self._hover_row if row is None else row)

    def on_leave(self, _: events.Leave) -> None:
        self._set_hover(False, self._hover_row)

    def on_click(self, event: events.Click) -> None:
        meta = event.style.meta
        self._set_hover(True, meta.get("row", self._hover_row))
        row = meta.get("row")
        if row == HEADER and not meta.get("out_of_bounds") and meta.get("column") is not None:
            self.header_clicked(meta["column"])
            event.stop()
            return
        if row is None or row == HEADER:
            return
        again = row == self._cursor
        self.move_cursor(row=row, animate=True)
        if again:
            self.select_cursor_row()
        event.stop()

    def header_clicked(self, column: int) -> None:
        """A click on the label of ``column`` (a table that sorts answers it)."""

    def _set_hover(self, on: bool, row: int) -> None:
        """Highlight (or not) the mouse's row; repaint the lines that change."""
        was = (self._hover_on, self._hover_row)
        self._hover_on, self._hover_row = on, row
        if was != (on, row):
            for index in {was[1], row}:
                self.refresh_header() if index == HEADER else self._refresh_row(index)

    # --- keys ---------------------------------------------------------------------------------
    def _key_moves(self, row: int) -> None:
        """A key moves the cursor to ``row``: the mouse's highlight goes, the row scrolls into view."""
        self._set_hover(False, self._hover_row)
        self.move_cursor(row=row)

    def action_cursor_up(self) -> None:
        self._key_moves(self._cursor - 1)

    def action_cursor_down(self) -> None:
        self._key_moves(self._cursor + 1)

    def action_cursor_left(self) -> None:
        self._set_hover(False, self._hover_row)
        self.action_scroll_left()

    def action_cursor_right(self) -> None:
        self._set_hover(False, self._hover_row)
        self.action_scroll_right()

    def action_page_down(self) -> None:
        """One page down: the view and the cursor move by a screenful."""
        room = self.scrollable_content_region.height - 1
        self.scroll_relative(y=room, animate=False, force=True)
        self._key_moves(self._cursor + max(room, 0))

    def action_page_up(self) -> None:
        """One page up: the view and the cursor move by a screenful."""
        room = self.scrollable_content_region.height - 1
        self.scroll_relative(y=-room, animate=False, force=True)
        self._key_moves(self._cursor - max(room, 0))

    def action_scroll_top(self) -> None:
        self._key_moves(0)

    def action_scroll_bottom(self) -> None:
        self._key_moves(len(self._rows) - 1)

    def action_scroll_home(self) -> None:
        self._set_hover(False, self._hover_row)
        self.scroll_x = 0

    def action_scroll_end(self) -> None:
        self._set_hover(False, self._hover_row)
        self.scroll_x = self.max_scroll_x

    def action_select_cursor(self) -> None:
        self._set_hover(False, self._hover_row)
        self.select_cursor_row()

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self._forget_hidden()
        if len(self._rows) > FIT_ALL and int(old_value) != int(new_value):
            self.fit_columns()  # a large table fits the rows on screen


@lru_cache(maxsize=4096)
def cell_meta(row: int, column: int, out_of_bounds: bool = False) -> Style:
    """The metadata a drawn cell carries (which row and column the mouse is over), as DataTable's."""
    meta: dict[str, Any] = {"row": row, "column": column}
    return Style.from_meta({**meta, "out_of_bounds": True} if out_of_bounds else meta)


def plain_cell(
    cell: Text, styles: tuple[Style, Style, Style], width: int, pad: int, console: Console
) -> list[Segment] | None:
    """A one-line cell without spans drawn padded in a column of ``width`` (``pad`` either side), the
    cell's own style between ``pre`` and ``post`` of ``styles`` (``pre, post, pre + post``): the
    segments ``console.render_lines`` makes of it (the same once simplified; tests/test_table_render.py
    compares them), at a fraction of the cost. None for what only Rich's full path draws right:
    spans, tabs, newlines, a justify or an ellipsis, a wide character or a wrapping cell to cut."""
    text, pre = cell.plain, styles[0]
    if (
        not pre
        or cell.spans
        or cell.justify not in (None, "default")
        or cell.overflow not in (None, "fold", "crop")
    ):
        return None  # (a null ``pre`` leaves Rich's segments unstyled: not what this makes)
    if "\n" in text or "\t" in text:
        return None
    room, length = width - 2 * pad, cell_len(text)
    if length > room:
        if len(text) != length or cell.no_wrap is False:
            return None
        text, length = text[:room], room
    post, base = styles[1:]
    fill = " " * (room - length + pad)
    if not cell.style or not text:
        return [Segment(" " * pad + text + fill, base)]
    own = pre + console.get_style(cell.style, default=Style.null()) + post
    return [Segment(" " * pad, base), Segment(text, own), Segment(fill, base)]
