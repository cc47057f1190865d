"""The column chooser (``c`` in a table): every column of the table in a list; ``enter`` sorts by the
highlighted one (again: the other way), ``space`` shows or hides it. A click on a column's label in
the table sorts too (see :meth:`FilterTable.header_clicked`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

if TYPE_CHECKING:
    from cmdare.tui.widgets.table import FilterTable


class ColumnChooser(ModalScreen[None]):
    """Sort by, show and hide the columns of one table."""

    DEFAULT_CSS = """
    ColumnChooser { align: center middle; background: $background; }
    /* opaque: a see-through modal re-tints every cell of the screen below it at each paint (issue 28) */
    ColumnChooser > Vertical { width: 44; max-width: 100%; height: auto; max-height: 100%;
        border: round $accent; background: $surface; padding: 0 1; }
    ColumnChooser OptionList { height: auto; max-height: 20; border: none; padding: 0; }
    ColumnChooser .hint { color: $text-muted; }
    """
    BINDINGS = [
        Binding("escape,c,q", "close", "Close", id="columns.close"),
        Binding("space", "toggle_column", "Show/hide", id="columns.toggle"),
    ]

    def __init__(self, table: FilterTable) -> None:
        super().__init__()
        self.table = table

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text("Columns", style="bold"))
            yield OptionList(*self._options(), id="columns")
            yield Static(Text("enter sorts by it (again: reversed) · space shows/hides · esc closes"),
                         classes="hint")  # fmt: skip

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        options.highlighted = self.table.view.sort_col or 0
        options.focus()

    def _options(self) -> list[Option]:
        """One line a column: shown or not, its name, its sort arrow."""
        out = []
        for i, column in enumerate(self.table.ordered_columns):
            mark = "☐" if column.key in self.table.hidden else "☑"
            arrow = ""
            if self.table.view.sort_col == i:
                arrow = " ▼" if self.table.view.reverse else " ▲"
            out.append(Option(Text(f"{mark} {column.key}{arrow}"), id=str(i)))
        return out

    def _redraw(self) -> None:
        options = self.query_one(OptionList)
        at = options.highlighted
        options.clear_options()
        options.add_options(self._options())
        options.highlighted = at

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        """``enter``: sort by the highlighted column (the same one again: the other way)."""
        self.table.header_clicked(event.option_index)
        self._redraw()
        event.stop()

    def action_toggle_column(self) -> None:
        """``space``: show or hide the highlighted column (one column always stays)."""
        at = self.query_one(OptionList).highlighted
        if at is None:
            return
        key = self.table.ordered_columns[at].key
        hidden = set(self.table.hidden) ^ {key}
        if len(hidden) < len(self.table.columns):
            self.table.set_hidden(hidden)
        self._redraw()

    def action_close(self) -> None:
        self.dismiss(None)
