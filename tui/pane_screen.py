"""The app's screen: Textual's ``Screen`` with four changes that keep a key's answer to the cells it changes.

- A move of the focus repaints only the widgets whose look changes (the widget losing the focus, the one
  taking it, their panes' borders). Textual's screen repainted every cell at each move of the focus (its
  ``focused`` is a reactive that repaints the screen): a pane switch or a click wrote the whole terminal.
- A widget may take the keys in place of the focused one (:attr:`PaneScreen.keys_to`): the help box, while
  it is open, answers the keys (close, scroll) and shows its own in the key line, while the focus stays on
  the table below it. Moving the focus to the help and back restyled and repainted that table twice in its
  blurred colours, in frames of their own (issue 28: most of what opening and closing the help cost).
- A widget that leaves the layout may ask for the cells it covered to be painted in the first frame drawn
  without it (:meth:`PaneScreen.paint_when_gone`): the help box, when it closes.
- A frame writes the cells asked for (:class:`CellCompositor`), not whole runs of text around them."""

from __future__ import annotations

from collections.abc import Mapping

from textual._compositor import ChopsUpdate, Compositor
from textual.binding import BindingsMap
from textual.dom import DOMNode
from textual.geometry import Region
from textual.reactive import Reactive
from textual.screen import Screen
from textual.strip import Strip
from textual.widget import Widget


class CellCompositor(Compositor):
    """Textual's compositor, whose partial frames write the cells asked for. Textual writes each run of
    text (a segment) that a changed region touches whole: the cells under the closed help were written with
    the rest of every table row they cut (a row is one run, 68 cells wide in the Cluster pane at 120×40),
    ~118 columns a line for a 78-column box. Here each run is cut to the changed columns of its line."""

    def render_partial_update(self) -> ChopsUpdate | None:
        """Textual's partial frame, each line's runs cut to the spans asked for on that line."""
        update = super().render_partial_update()
        return None if update is None else cut_to_spans(update)


def cut_to_spans(update: ChopsUpdate) -> ChopsUpdate:
    """``update`` with each run of text on a line cut to the columns of that line's spans it meets (a run
    with a wide or zero-width character stays whole: a cut there could split a character in two)."""
    spans: dict[int, list[tuple[int, int]]] = {}
    for y, x1, x2 in update.spans:
        spans.setdefault(y, []).append((x1, x2))
    chops: list[Mapping[int, Strip | None]] = list(update.chops)
    ends = list(update.chop_ends)
    for y, wanted in spans.items():
        line: dict[int, Strip | None] = {}
        line_ends: list[int] = []
        for end, (x, strip) in zip(
            update.chop_ends[y], update.chops[y].items(), strict=False
        ):  # (as Textual)
            met = [(max(x, x1), min(end, x2)) for x1, x2 in wanted if x1 < end and x2 > x]
            if strip is not None and met:
                start, stop = min(a for a, _ in met), max(b for _, b in met)
                if (start, stop) != (x, end) and strip.cell_length == sum(len(seg.text) for seg in strip):
                    strip, x, end = strip.crop(start - x, stop - x), start, stop
            line[x] = strip
            line_ends.append(end)
        chops[y], ends[y] = line, line_ends
    return ChopsUpdate(chops, update.spans, ends)


class PaneScreen(Screen[None]):
    """A screen whose focus moves repaint what they change, and whose keys may go to :attr:`keys_to`."""

    focused: Reactive[Widget | None] = Reactive(None, repaint=False)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._compositor = CellCompositor()
        self.keys_to: Widget | None = None  # the widget answering the keys instead of the focused one
        self._uncovered: dict[Widget, Region] = {}  # (paint_when_gone) what each widget leaving covered

    def paint_when_gone(self, widget: Widget, region: Region) -> None:
        """Paint ``region`` (screen cells) in the first frame drawn once ``widget`` has left the layout
        (hidden): the cells it covered, in the same frame as the layout that hides it.

        Textual's layout repaints a hidden widget's region only when the widget was in the compositor's map
        before it: when something had rebuilt that map in between (any widget's region looked up after a
        refresh of a widget outside the view), the layout saw no change and the box stayed on the terminal
        (the help, about one close in ten in the demo, in tmux). Asking the screen to repaint the region
        (``Screen.refresh(region)``) painted it a second time, in a frame of its own after the layout's
        (2 × ~22 kB for the help at 120×40, issue 28); this adds it to the layout's frame."""
        self._uncovered[widget] = region

    def _compositor_refresh(self) -> None:
        """Textual's frame, with the regions :meth:`paint_when_gone` holds for widgets now out of the
        layout added to what it paints (a widget still in it, its layout not yet done, waits)."""
        if self._uncovered:
            compositor = self._compositor
            shown = compositor.visible_widgets
            for widget in [w for w in self._uncovered if w not in shown]:
                if cells := self._uncovered.pop(widget).intersection(compositor.size.region):
                    compositor._dirty_regions.add(cells)
        super()._compositor_refresh()

    def take_keys(self, widget: Widget | None) -> None:
        """Send the keys to ``widget`` (its bindings, then the screen's and the app's) instead of the
        focused widget; None: back to the focused widget. The key line follows."""
        self.keys_to = widget
        self.refresh_bindings()

    @property
    def _binding_chain(self) -> list[tuple[DOMNode, BindingsMap]]:
        """Textual's chain of bindings (the focused widget's, its ancestors', the app's), or the chain from
        :attr:`keys_to` while it is set: key presses, the key line and the command palette read it."""
        owner = self.keys_to
        if owner is None or not owner.is_attached:
            return super()._binding_chain
        chain: list[tuple[DOMNode, BindingsMap]] = [
            (n, n._bindings.copy()) for n in owner.ancestors_with_self
        ]
        keymap = self.app._keymap
        if keymap:  # the user's remapped keys, as Textual applies them to its own chain
            for namespace, bindings in chain:
                result = bindings.apply_keymap(keymap)
                if result.clashed_bindings:
                    self.app.handle_bindings_clash(result.clashed_bindings, namespace)
        return chain
