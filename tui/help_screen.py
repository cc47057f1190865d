"""The help screen (``?``): the focused pane's keys first, then the keys that work everywhere; each
from the BINDINGS that declare them (the binding's tooltip is its long form) or the pane's ``KEYS_HELP``.
Drawn by :class:`HelpOverlay`, a box over the panes in the app's own screen."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from rich.text import Text
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Static

from cmdare.tui.pane_screen import PaneScreen
from cmdare.tui.widgets.quiet import update_static

KeyRow = tuple[str, str]  # (key as shown, what it does)
Section = tuple[str, list[KeyRow]]  # (heading, its keys)
KEY_NAMES = {"question_mark": "?", "slash": "/", "full_stop": ".", "plus": "+", "minus": "-"}


def key_label(key: str) -> str:
    """A binding's key as a user types it (``question_mark`` → ``?``; ``a,b`` → ``a/b``)."""
    return "/".join(KEY_NAMES.get(k.strip(), k.strip()) for k in key.split(","))


def binding_rows(
    bindings: Iterable[object], keymap: dict[str, str], allowed: Callable[[str], bool]
) -> list[KeyRow]:
    """(key, long description) of each Binding that has a description and whose action is allowed;
    keys as remapped by ``keymap`` (binding id → key)."""
    out = []
    for b in bindings:
        if isinstance(b, Binding) and (b.tooltip or b.description) and allowed(b.action.split("(")[0]):
            out.append((key_label(keymap.get(b.id or "", b.key)), b.tooltip or b.description))
    return out


def help_sections(pane: str, pane_keys: list[KeyRow], everywhere: list[Binding], pane_titles: list[str],
                  keymap: dict[str, str], allowed: Callable[[str], bool],
                  table_keys: list[KeyRow] | None = None) -> list[Section]:  # fmt: skip
    """The focused ``pane``'s keys first, then the app's (``everywhere``): its pane-switching keys
    as one row, the command palette last; then, for a pane with a table, the table's keys
    (``table_keys`` after :data:`NAVIGATION`) and the mouse; last the legend of symbols."""
    jumps = [b for b in everywhere if b.action.startswith("show_pane")]
    rows = binding_rows([b for b in everywhere if b not in jumps], keymap, allowed)
    if jumps:
        rows.insert(
            3, ("/".join(key_label(keymap.get(b.id or "", b.key)) for b in jumps), " ".join(pane_titles))
        )
    rows.append(("ctrl+p", "Command palette"))
    tables = [("In tables", NAVIGATION + table_keys), ("Mouse", MOUSE)] if table_keys is not None else []
    return [(f"{pane} pane", pane_keys), ("Everywhere", rows), *tables, ("Symbols and abbreviations", LEGEND)]


# Keys of every table that no binding id names (tui/widgets/line_table.py); the rest come from the bindings
NAVIGATION: list[KeyRow] = [("↑ ↓", "Row up / down"), ("← →", "Scroll sideways"), ("PgUp PgDn", "Page up / down"),
                            ("Home End", "Left / right edge"), ("ctrl+Home", "First row"), ("ctrl+End", "Last row"),
                            ("enter", "Open the row")]  # fmt: skip
MOUSE: list[KeyRow] = [("click", "Focus; cursor to the row"), ("click again", "Open the row"),
                       ("click label", "Sort; again: reverse"), ("wheel", "Scroll; shift sideways"),
                       ("drag bar", "Scroll a long table")]  # fmt: skip
LEGEND: list[KeyRow] = [("●", "up: answered the last poll"), ("◌", "silent: stopped answering"),
                        ("✖", "revoked: preempted or gone"), ("○", "pending: never answered"),
                        ("⚑", "a flag raised on the task"), ("‼ ▲ ℹ", "critical / warning / info"),
                        ("▶", "Planner: the current shape"), ("★", "Planner: best trade-off"),
                        ("†", "a move to another region"), ("▲ ▼", "sorted column: up / down"),
                        ("usc1", "region: us-central1"), ("euw4", "region: europe-west4"),
                        ("pre", "preemptible"), ("od", "on-demand (standard)"), ("spot", "spot"),
                        ("comp", "bound by compute"), ("net", "bound by the network"),
                        ("ps", "bound by the PS; role PS"), ("Δ", "against the current shape"),
                        ("–", "not measured / unknown")]  # fmt: skip


HELP_WIDTH = 74  # the help's text width: 78 columns less its border and padding (fits 80x24)
KEY_STYLE = "bold cyan"


def key_grid(keys: list[KeyRow], width: int = HELP_WIDTH) -> Text:
    """Two columns of keys as one Text (keys never cut; a description too long for its half ends in
    "…"). Plain text lines, not a Rich table: the help opens in a fraction of the time (issue 28)."""
    out = Text()
    half = (len(keys) + 1) // 2
    pairs = [(keys[i], keys[half + i] if half + i < len(keys) else ("", "")) for i in range(half)]
    kw = max((len(k) for k, _ in keys), default=1)
    left_room = (width - 1) // 2 - kw - 1
    dw = min(max((len(d) for (_, d), _ in pairs), default=0), left_room)
    right_room = width - (kw + 1 + dw + 1) - kw - 1
    for i, ((k1, d1), (k2, d2)) in enumerate(pairs):
        if i:
            out.append("\n")
        out.append(k1.ljust(kw), KEY_STYLE).append(" " + fitted(d1, dw).ljust(dw) + " ")
        out.append(k2.ljust(kw) if k2 else "", KEY_STYLE).append((" " + fitted(d2, right_room)) if k2 else "")
    return out


def fitted(text: str, room: int) -> str:
    """``text`` in ``room`` characters (its end cut to "…")."""
    return text if len(text) <= room else text[: max(room - 1, 0)] + "…"


class HelpOverlay(VerticalScroll, can_focus=False):
    """The help, a box over the panes on a layer of its own (``help``, declared by the app's screen,
    which centres it), shown and hidden in place: never a screen pushed and popped. A pushed screen was
    composed, mounted and styled at each opening and painted whole, and closing it repainted the whole
    screen below (issue 28); showing this box mounts nothing, lays the screen out once and paints the
    cells it covers, hiding it repaints those cells. Its text is made again only when what it says changed
    (another pane, keys remapped, a replay ended). The panes stay in sight around it. Closed, it is
    hidden (``visibility``), not taken out of the layout: a box that came and went changed the painting
    order of every widget on the screen, so the whole screen was written again at each opening and
    closing (~25 kB through tmux for a 78-column box, issue 28). Closing asks the screen to paint the cells
    the box covered in the frame that first draws the screen without it (:meth:`PaneScreen.paint_when_gone`):
    the box's own repaint was not enough (when a layout had hidden it first, the compositor skipped it as
    invisible and the box stayed on the terminal, about one close in ten in the demo, in tmux), and a repaint
    of the screen's region came in a second frame, the same ~22 kB written twice.

    It never takes the focus: while it is open the screen sends it the keys (:meth:`PaneScreen.take_keys`:
    its own close and scroll keys, then the app's that work over it), and the focused table stays focused
    and unchanged below it (moving the focus restyled and repainted the table twice, issue 28). The mouse
    wheel scrolls it as any box; a click beside it closes it (the app)."""

    DEFAULT_CSS = """
    HelpOverlay { layer: help; visibility: hidden; width: 78; max-width: 100%; height: auto; max-height: 100%;
        border: round $accent; background: $surface; padding: 0 1; }
    """
    BINDINGS = [Binding("escape,q,question_mark", "close", "Close help", id="help.close")]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(Static("", id="help-text"), id=id)
        self.sections: list[Section] = []
        self._shown = False
        self._before: Widget | None = None  # the text field that had the focus when the help opened

    def open(self, sections: list[Section], notes: list[str]) -> None:
        """Show the help for ``sections`` (scrolled to its top) and take the keys. A focused field that
        takes typed text (the filter line) gives up the focus until the help closes."""
        self.sections = sections
        update_static(self.query_one("#help-text", Static), help_text(sections, notes))
        self.styles.visibility = "visible"
        self._shown = True
        if self.scroll_y:
            self.scroll_home(animate=False, immediate=True)
        focused = self.app.focused
        if focused is not None and focused.check_consume_key("a", "a"):
            self._before = focused
            self.screen.set_focus(None)
        self._screen().take_keys(self)

    @property
    def shown(self) -> bool:
        """Whether the help is open (read at every check of a key's binding: an attribute, not a style)."""
        return self._shown

    def action_close(self) -> None:
        """Hide the help; the keys go back to the focused widget (a text field to the focus it gave up)."""
        self.close(restore_focus=True)

    def close(self, *, restore_focus: bool) -> None:
        """Hide the help; the keys go back to the focused widget. With ``restore_focus``, a text field that
        gave up the focus at opening takes it back (not when a click already put the focus elsewhere); with
        nothing focused, the app gives a pane the focus (:class:`Closed`)."""
        self._screen().paint_when_gone(self, self.region)  # border included (see the class's docstring)
        self.styles.visibility = "hidden"
        self._shown = False
        self._screen().take_keys(None)
        before, self._before = self._before, None
        if restore_focus and before is not None and before.is_attached and before.focusable:
            before.focus(scroll_visible=False)
        self.post_message(self.Closed())

    def _screen(self) -> PaneScreen:
        screen = self.screen
        assert isinstance(screen, PaneScreen), "the help lives on the app's PaneScreen"
        return screen

    class Closed(Message):
        """The help was closed (the app gives the focus a pane when nothing had it)."""


def help_text(sections: list[Section], notes: list[str]) -> Text:
    """The whole help as one Text: a title, the notes (read-only…), each section's heading and keys."""
    text = Text("cmdare-tui — keys (esc closes)", style="bold")
    if notes:
        text.append("\n" + "\n".join(notes))
    for heading, keys in sections:
        if keys:
            text.append("\n" + heading + "\n", "bold underline").append_text(key_grid(keys))
    return text
