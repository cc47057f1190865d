"""The help screen (``?``): the focused pane's keys first, then the keys that work everywhere; each
from the BINDINGS that declare them (the binding's tooltip is its long form) or the pane's ``KEYS_HELP``."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

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


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; background: $background; }
    /* opaque: a see-through modal re-tints every cell of the screen below it at each paint (issue 28) */
    HelpScreen > VerticalScroll { width: 78; max-width: 100%; height: auto; max-height: 100%;
        border: round $accent; background: $surface; padding: 0 1; }
    """
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close help", id="help.close")]

    def __init__(self, sections: list[Section], notes: list[str]) -> None:
        super().__init__()
        self.sections = sections
        self._notes = notes

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(help_text(self.sections, self._notes))


def help_text(sections: list[Section], notes: list[str]) -> Text:
    """The whole help as one Text: a title, the notes (read-only…), each section's heading and keys."""
    text = Text("cmdare-tui — keys (esc closes)", style="bold")
    if notes:
        text.append("\n" + "\n".join(notes))
    for heading, keys in sections:
        if keys:
            text.append("\n" + heading + "\n", "bold underline").append_text(key_grid(keys))
    return text

    def action_dismiss(self) -> None:
        self.dismiss(None)
