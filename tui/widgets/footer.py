"""The key line at the bottom: Textual's Footer, made to fit. When the keys of the focused pane and
the app do not fit the width, the least important are left out (every key stays in the help screen,
``?``) instead of running under the command palette's key, cut mid-word."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.app import ComposeResult
from textual.events import Resize
from textual.widget import Widget
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

# FooterKey (the keys Footer yields) is not re-exported by textual.widgets in Textual 8.
PALETTE_CLASS = "-command-palette"
# What the footer keeps when the keys do not fit, by action (highest first; every key stays in the help)
FOOTER_RANK = {"quit": 100, "help": 95, "pause": 90, "replay_speed": 85, "filter": 70, "sort_next": 65,
               "next_plot": 55, "next_pane": 50, "export": 45, "next_job": 40, "replay_step": 35,
               "refresh_now": 20}  # fmt: skip


def key_width(key: FooterKey, compact: bool) -> int:
    """Cells one key takes in the footer (its text and its margin or padding; see Footer's CSS)."""
    text = len(key.key_display) + len(key.description) + (1 if key.description else 0)
    return text + (1 if compact else 2)


def fit(keys: list[FooterKey], room: int, rank: Callable[[str], int], compact: bool) -> list[FooterKey]:
    """``keys`` (in their order) without the lowest-ranked ones, until they fit ``room`` cells."""
    kept = list(keys)
    by_rank = sorted(range(len(keys)), key=lambda i: (rank(keys[i].action), -i))
    for i in by_rank:
        if sum(key_width(k, compact) for k in kept) <= room:
            break
        kept.remove(keys[i])
    return kept


class FitFooter(Footer):
    """A Footer that drops keys by ``rank(action)`` (lowest first) until the line fits."""

    def __init__(
        self, rank: Callable[[str], int], label: Callable[[str, str], str] | None = None, **kw: Any
    ) -> None:
        """``rank(action)`` orders the keys to keep; ``label(action, description)`` may reword a key
        for the moment (e.g. "Pause" while a replay is paused reads "Resume")."""
        super().__init__(**kw)  # Footer's own keyword arguments
        self._rank = rank
        self._label = label or (lambda _action, description: description)
        self._composed: tuple | None = None  # what the keys on show were composed from

    def _composition(self) -> tuple:
        """Everything the composed keys depend on: the screen's active bindings (with their key
        display and label), the width, compact, and whether the bindings are ready."""
        bindings = tuple(
            (key, binding, enabled, tooltip, self.app.get_key_display(binding),
             self._label(binding.action, binding.description))
            for key, (_node, binding, enabled, tooltip) in self.screen.active_bindings.items()
        )  # fmt: skip
        return (self._bindings_ready, self._room_width(), self.compact, self.show_command_palette, bindings)

    def _room_width(self) -> int:
        """The footer's width: its own once laid out, before that the screen's (it spans the screen),
        so the keys composed before the first layout already fit."""
        return self.size.width or self.screen.size.width

    def show_keys(self) -> None:
        """Compose the keys now, from the screen's bindings as they stand (the app calls this once its
        panes and focus are set up): Textual's Footer waits for the first bindings update after a
        refresh, so the keys came in a frame of their own after the first one."""
        self._bindings_ready = True
        self.call_later(self.recompose)

    async def recompose(self) -> None:
        """Recompose when the keys would change: Textual asks on every bindings update, resize and
        compact switch, often several times a frame with nothing changed (at start-up: four times,
        ~40 ms before the first data frame, where one recompose shows the same)."""
        if self.is_attached and self._composed == self._composition():
            return
        await super().recompose()

    def compose(self) -> ComposeResult:
        if self.is_attached:
            self._composed = self._composition()
        widgets: list[Widget] = list(super().compose())
        palette = [w for w in widgets if isinstance(w, FooterKey) and w.has_class(PALETTE_CLASS)]
        keys = [w for w in widgets if isinstance(w, FooterKey) and w not in palette]
        for k in keys:
            k.description = self._label(k.action, k.description)
        room = self._room_width() - sum(key_width(p, self.compact) + 1 for p in palette)  # + its border
        kept = fit(keys, room, self._rank, self.compact) if room > 0 else keys
        yield from (w for w in widgets if w in palette or w in kept or not isinstance(w, FooterKey))

    def on_resize(self, event: Resize) -> None:
        self.call_after_refresh(self.recompose)  # a no-op unless the width changed (recompose)

    def _watch_compact(self, compact: bool) -> None:
        self.call_after_refresh(self.recompose)
