"""A Static that says when what it shows is on the terminal: work that can wait for a frame (start-up:
the garbage collector's pass, the planner's imports, the plot) runs after it, not before it.

Textual runs a callback "after refresh" once the screen has nothing pending when the callback is
queued; right after a poll the panes' repaints have not reached the screen yet, so such a callback
ran before the frame it was meant to follow (measured: the first data frame ~0.1 s later, behind
the planner's warm-up and the plot). A widget's lines are rendered in the same pass that hands the
frame to the terminal's writer, so a callback posted from there runs after that frame; a short
pause then lets the writer (a thread) send it before work that holds the interpreter."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from textual.geometry import Region
from textual.strip import Strip
from textual.widgets import Static

FLUSH_S = 0.02  # after a frame is handed over: the writer thread sends it (well under 1 ms a frame)


class PaintedStatic(Static):
    """:class:`~textual.widgets.Static` with :meth:`after_paint`."""

    def __init__(self, content: Any = "", **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self._after_paint: list[Callable[[], object]] = []

    def after_paint(self, callback: Callable[[], object]) -> None:
        """Run ``callback`` once the next frame that draws this widget is on its way to the terminal
        (:data:`FLUSH_S` after it was handed over)."""
        self._after_paint.append(callback)
        self.refresh()

    def render_lines(self, crop: Region) -> list[Strip]:
        """The widget's lines (Textual's), and the callbacks waiting for them posted to run next."""
        if self._after_paint:
            callbacks, self._after_paint = self._after_paint, []
            self.call_later(self._painted, callbacks)
        return super().render_lines(crop)

    def _painted(self, callbacks: list[Callable[[], object]]) -> None:
        """The frame is handed over: the callbacks run once the writer has had time to send it."""
        self.set_timer(FLUSH_S, partial(_run, callbacks))


def _run(callbacks: list[Callable[[], object]]) -> None:
    for callback in callbacks:
        callback()
