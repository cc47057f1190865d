"""The app's screen: Textual's ``Screen`` with three changes that keep a key's answer to the cells it changes.

- A move of the focus repaints only the widgets whose look changes (the widget losing the focus, the one
  taking it, their panes' borders). Textual's screen repainted every cell at each move of the focus (its
  ``focused`` is a reactive that repaints the screen): a pane switch or a click wrote the whole terminal.
- A widget may take the keys in place of the focused one (:attr:`PaneScreen.keys_to`): the help box, while
  it is open, answers the keys (close, scroll) and shows its own in the key line, while the focus stays on
  the table below it. Moving the focus to the help and back restyled and repainted that table twice in its
  blurred colours, in frames of their own (issue 28: most of what opening and closing the help cost).
- A widget that leaves the layout may ask for the cells it covered to be painted in the first frame drawn
  without it (:meth:`PaneScreen.paint_when_gone`): the help box, when it closes."""

from __future__ import annotations

from textual.binding import BindingsMap
from textual.dom import DOMNode
from textual.geometry import Region
from textual.reactive import Reactive
from textual.screen import Screen
from textual.widget import Widget


class PaneScreen(Screen[None]):
    """A screen whose focus moves repaint what they change, and whose keys may go to :attr:`keys_to`."""

    focused: Reactive[Widget | None] = Reactive(None, repaint=False)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
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
