"""A one-line progress report for long work (loading the model, fetching prices, reading a
recording): what is happening, and a bar when the amount of work is known."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Label, ProgressBar


class ProgressReport(Message):
    """Post from any thread with ``app.post_message``: ``done``/``total`` in steps (total None =
    unknown amount); ``label`` None marks the work finished."""

    def __init__(self, label: str | None, done: float = 0, total: float | None = None) -> None:
        super().__init__()
        self.label, self.done, self.total = label, done, total


class ProgressLine(Horizontal):
    """A one-line progress bar at the bottom, shown only while a long read is under way."""

    DEFAULT_CSS = """
    ProgressLine { height: 1; dock: bottom; display: none; background: $panel; padding: 0 1; }
    ProgressLine.-busy { display: block; }
    ProgressLine > Label { width: auto; margin: 0 1 0 0; }
    ProgressLine > ProgressBar { width: 1fr; }
    """

    def compose(self) -> ComposeResult:
        yield Label("", id="progress-label")
        yield ProgressBar(show_eta=False, id="progress-bar")

    def report(self, label: str | None, done: float = 0, total: float | None = None) -> None:
        """Show ``label`` with ``done`` of ``total`` (``total`` None: unknown); ``label`` None hides the line."""
        if label is None:
            self.remove_class("-busy")
            return
        labels, bars = self.query(Label), self.query(ProgressBar)
        if not (labels and bars):  # being taken down (the app quits while the planner loads): dropped
            return
        self.add_class("-busy")
        labels.first().update(Text(f"⧗ {label}"))
        bars.first().update(total=total, progress=done)
