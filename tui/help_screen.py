"""The help screen (``?``): every key the app and the focused pane declare, from their BINDINGS."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 76; max-width: 100%; height: auto; max-height: 90%;
        border: round $accent; background: $surface; padding: 0 1; }
    """
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close help", id="help.close")]

    def __init__(self, bindings: list[tuple[str, str]], notes: list[str]) -> None:
        super().__init__()
        self._keys = bindings
        self._notes = notes

    def compose(self) -> ComposeResult:
        table = Table.grid(padding=(0, 1))
        half = (len(self._keys) + 1) // 2  # two columns of keys: the whole list fits 80×24
        for _ in range(2):
            table.add_column(style="bold cyan", no_wrap=True)
            table.add_column(no_wrap=True, overflow="ellipsis", min_width=22)
        for i in range(half):
            right = self._keys[half + i] if half + i < len(self._keys) else ("", "")
            table.add_row(*map(Text, (*self._keys[i], *right)))
        with VerticalScroll():
            yield Static("[b]cmdare-tui — keys[/b]\n")
            yield Static(table)
            yield Static(Text("\n" + "\n".join(self._notes)))

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)
