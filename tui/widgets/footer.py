"""The key line at the bottom: the keys that work now, made to fit. When the keys of the focused pane
and the app do not fit the width, the least important are left out (every key stays in the help, ``?``)
instead of running under the command palette's key, cut mid-word.

One widget drawing one line, not Textual's Footer (a widget per key): that Footer unmounted and mounted
its keys at every change of the focused pane's bindings, and styled each new key twice (~25 ms of CPU of
a ~55 ms pane switch, issue 28). This line is only repainted, and only when what it shows changed. A click
on a key presses it, as on Textual's Footer; a key under the mouse is highlighted and shows its tooltip."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from rich.style import Style
from rich.text import Text
from textual import events
from textual.reactive import reactive
from textual.screen import Screen
from textual.widget import Widget

# What the footer keeps when the keys do not fit, by action (highest first; every key stays in the help)
FOOTER_RANK = {"quit": 100, "help": 95, "pause": 90, "replay_speed": 85, "filter": 70, "sort_next": 65,
               "next_plot": 55, "next_pane": 50, "export": 45, "next_job": 40, "replay_step": 35,
               "refresh_now": 20}  # fmt: skip
PALETTE_BORDER = "▏"  # left of the command palette's key, which keeps the right end of the line


class KeyLike(Protocol):
    """What :func:`fit` reads of a key."""

    @property
    def key_display(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def action(self) -> str: ...


@dataclass(frozen=True, kw_only=True)
class FooterKey:
    """One key on the line: the key a click presses, as shown, its word, its action and tooltip."""

    key: str
    key_display: str
    description: str
    action: str
    enabled: bool = True
    tooltip: str = ""


def key_width(key: KeyLike, compact: bool) -> int:
    """Cells one key takes on the line (its text and the space around it; see :meth:`FitFooter.line`)."""
    text = len(key.key_display) + len(key.description) + (1 if key.description else 0)
    return text + (1 if compact else 2)


K = TypeVar("K", bound=KeyLike)


def fit(keys: Sequence[K], room: int, rank: Callable[[str], int], compact: bool) -> list[K]:
    """``keys`` (in their order) without the lowest-ranked ones, until they fit ``room`` cells."""
    kept = list(keys)
    by_rank = sorted(range(len(keys)), key=lambda i: (rank(keys[i].action), -i))
    for i in by_rank:
        if sum(key_width(k, compact) for k in kept) <= room:
            break
        kept.remove(keys[i])
    return kept


class FitFooter(Widget, can_focus=False):
    """The key line: drops keys by ``rank(action)`` (lowest first) until the line fits."""

    DEFAULT_CSS = """
    FitFooter { dock: bottom; height: 1; background: $footer-background; color: $footer-foreground; }
    FitFooter > .footer-key--key { color: $footer-key-foreground; background: $footer-key-background;
        text-style: bold; }
    FitFooter > .footer-key--description { color: $footer-description-foreground;
        background: $footer-description-background; }
    FitFooter > .footer-key--hover { background: $block-hover-background; }
    FitFooter > .footer-key--palette-border { color: $foreground 20%; }
    """
    COMPONENT_CLASSES = {"footer-key--key", "footer-key--description", "footer-key--hover",
                         "footer-key--palette-border"}  # fmt: skip
    ALLOW_SELECT = False

    compact = reactive(False, layout=False, repaint=False)
    """Less space around each key (the app sets it at 80x24)."""

    def __init__(self, rank: Callable[[str], int], label: Callable[[str, str], str] | None = None,
                 *, id: str | None = None) -> None:  # fmt: skip
        """``rank(action)`` orders the keys to keep; ``label(action, description)`` may reword a key
        for the moment (e.g. "Pause" while a replay is paused reads "Resume")."""
        super().__init__(id=id)
        self._rank = rank
        self._label = label or (lambda _action, description: description)
        self._ready = False  # the app's panes and focus are set up (show_keys)
        self.keys: list[FooterKey] = []  # the keys shown, left to right
        self.palette: FooterKey | None = None  # the command palette's key, at the right end
        self.placed: list[
            tuple[int, int, FooterKey]
        ] = []  # (x, width, key) of each key on the line, as drawn
        self._hover: FooterKey | None = None
        self._shown: tuple[object, ...] | None = None  # what the line was drawn from

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def show_keys(self) -> None:
        """Show the keys now, from the screen's bindings as they stand (the app calls this once its
        panes and focus are set up): in the first frame, not in one after it."""
        self._ready = True
        self.update_keys()

    def _bindings_changed(self, _screen: Screen) -> None:
        if self._ready:
            self.update_keys()

    def on_resize(self, _event: events.Resize) -> None:
        self.update_keys()

    def _watch_compact(self, _compact: bool) -> None:
        self.update_keys()

    def update_keys(self) -> None:
        """Work out the keys to show; repaint the line only when they changed."""
        if not self._ready or not self.is_attached:
            return
        keys, palette = self._active_keys()
        width = self.size.width or self.screen.size.width  # before the first layout: the screen's
        room = width - (self._palette_width(palette) if palette else 0)
        kept = fit(keys, room, self._rank, self.compact) if room > 0 else keys
        shown = (tuple(kept), palette, width, self.compact)
        if shown == self._shown:
            return
        self._shown = shown
        self.keys, self.palette = kept, palette
        self.refresh()

    def _active_keys(self) -> tuple[list[FooterKey], FooterKey | None]:
        """The screen's shown bindings, one key per action (the first bound), and the palette's key."""
        active = self.screen.active_bindings
        keys: dict[str, FooterKey] = {}
        for _node, binding, enabled, tooltip in active.values():
            if binding.show and binding.action not in keys:
                word = self._label(binding.action, binding.description)
                keys[binding.action] = FooterKey(
                    key=binding.key,
                    key_display=self.app.get_key_display(binding),
                    description=word,
                    action=binding.action,
                    enabled=enabled,
                    tooltip=tooltip or binding.tooltip,
                )
        palette = None
        if self.app.ENABLE_COMMAND_PALETTE and self.app.COMMAND_PALETTE_BINDING in active:
            _node, binding, enabled, tooltip = active[self.app.COMMAND_PALETTE_BINDING]
            keys.pop(binding.action, None)
            palette = FooterKey(
                key=binding.key,
                key_display=self.app.get_key_display(binding),
                description=binding.description,
                action=binding.action,
                enabled=enabled,
                tooltip=binding.tooltip or binding.description,
            )
        return list(keys.values()), palette

    def render(self) -> Text:
        return self.line()

    def line(self) -> Text:
        """The line: each key (``key word``, dim when it cannot be used now) from the left, the palette's
        key at the right end; records where each key is, for clicks."""
        key_style = self.get_component_rich_style("footer-key--key")
        word_style = self.get_component_rich_style("footer-key--description")
        hover = self.get_component_rich_style("footer-key--hover")
        out = Text(no_wrap=True, overflow="crop", end="")
        spans: list[tuple[int, int, FooterKey]] = []
        compact = self.compact
        for k in self.keys:
            x = out.cell_len
            self._append_key(out, k, key_style, word_style, hover, compact)
            spans.append((x, out.cell_len - x, k))
            if compact:
                out.append(" ")
        if self.palette is not None:  # "▏^p palette", at the right end (one space after it unless compact)
            out.append(" " * max(self.size.width - out.cell_len - self._palette_width(self.palette), 0))
            out.append(PALETTE_BORDER, self.get_component_rich_style("footer-key--palette-border"))
            x = out.cell_len
            self._append_key(out, self.palette, key_style, word_style, hover, True)
            spans.append((x, out.cell_len - x, self.palette))
            out.append("" if compact else " ")
        self.placed = spans
        return out

    def _append_key(self, out: Text, k: FooterKey, key_style: Style, word_style: Style, hover: Style,
                    compact: bool) -> None:  # fmt: skip
        """``k`` as ``" key word "`` (compact: ``"key word"``), dimmed when disabled, lit under the mouse."""
        start = out.cell_len
        out.append(k.key_display if compact else f" {k.key_display} ", key_style)
        if k.description:
            out.append(f" {k.description}" if compact else f"{k.description} ", word_style)
        if not k.enabled:
            out.stylize("dim", start)
        if k == self._hover:
            out.stylize(hover, start)

    def _palette_width(self, palette: FooterKey) -> int:
        """Cells the palette's key takes at the right end: its border, its text, a space unless compact."""
        return len(PALETTE_BORDER) + key_width(palette, True) - 1 + (0 if self.compact else 1)

    def key_at(self, x: int) -> FooterKey | None:
        """The key drawn at column ``x`` of the line, if any."""
        return next((k for kx, w, k in self.placed if kx <= x < kx + w), None)

    def on_mouse_move(self, event: events.MouseMove) -> None:
        self._set_hover(self.key_at(event.x))

    def on_leave(self, _event: events.Leave) -> None:
        self._set_hover(None)

    def _set_hover(self, key: FooterKey | None) -> None:
        if key != self._hover:
            self._hover = key
            self.tooltip = (key.tooltip or key.description) if key is not None else None
            self.refresh()

    def on_mouse_down(self, event: events.MouseDown) -> None:
        """A click on a key presses it (a key that cannot be used now rings the bell)."""
        key = self.key_at(event.x)
        if key is None:
            return
        if key.enabled:
            self.app.simulate_key(key.key)
        else:
            self.app.bell()
