"""The app's screen: Textual's ``Screen`` with two changes that keep a key's answer to the cells it changes.

- A move of the focus repaints only the widgets whose look changes (the widget losing the focus, the one
  taking it, their panes' borders). Textual's screen repainted every cell at each move of the focus (its
  ``focused`` is a reactive that repaints the screen): a pane switch or a click wrote the whole terminal.
- A widget may take the keys in place of the focused one (:attr:`PaneScreen.keys_to`): the help box, while
  it is open, answers the keys (close, scroll) and shows its own in the key line, while the focus stays on
  the table below it. Moving the focus to the help and back restyled and repainted that table twice in its
  blurred colours, in frames of their own (issue 28: most of what opening and closing the help cost)."""

from __future__ import annotations

from textual.binding import BindingsMap
from textual.dom import DOMNode
from textual.reactive import Reactive
from textual.screen import Screen
from textual.widget import Widget


class PaneScreen(Screen[None]):
    """A screen whose focus moves repaint what they change, and whose keys may go to :attr:`keys_to`."""

    focused: Reactive[Widget | None] = Reactive(None, repaint=False)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.keys_to: Widget | None = None  # the widget answering the keys instead of the focused one

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
