"""Issue 20: the line-drawn table looks like Textual's DataTable, segment for segment. A DataTable set
up as the old FilterTable was (row cursor, the same columns and Text cells) and a FilterTable with the
same rows, side by side in one real Textual app (Pilot): every line they draw is the same text in the
same styles, with the cursor, with focus, scrolled sideways; and the fast path for plain cells gives
what Rich's full rendering gives."""

from __future__ import annotations

import random

from rich.console import Console
from rich.padding import Padding
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.app import App, ComposeResult
from textual.containers import Horizontal
from textual.pilot import Pilot
from textual.renderables.styled import Styled
from textual.strip import Strip
from textual.widgets import DataTable

from cmdare.tui.widgets.line_table import plain_cell
from cmdare.tui.widgets.table import FilterTable, Row

COLUMNS = [
    ("Status", 9),
    ("Task", 9),
    ("A", 1),
    ("Rate", 7),
    ("Flag", 12),
    ("Region", 12),
    ("Up", 6),
    ("Mem", 14),
]
WORDS = ["● up", "◌ silent", "✖ revoked", "worker-12", "ps-0", "–", "", "5.40", "averyverylongname", "1d04h",
         "[red]x[/]", "日本語テキスト", "a\tb", "x" * 40, "usc1"]  # fmt: skip
STYLES = ["", "green", "bold yellow", "red bold", "dim", "italic"]


def cell(rng: random.Random) -> Text:
    """A cell as the panes make them: a Text, plain or styled, sometimes with a span."""
    text = Text(rng.choice(WORDS), style=rng.choice(STYLES))
    if rng.random() < 0.1 and text.plain:
        text.stylize("underline", 0, 1)
    return text


def table_rows(n: int, seed: int) -> list[tuple[Text, ...]]:
    rng = random.Random(seed)
    return [tuple(cell(rng) for _ in COLUMNS) for _ in range(n)]


class SideBySide(App[None]):
    CSS = "Horizontal > * { width: 1fr; height: 1fr; }"

    def compose(self) -> ComposeResult:
        with Horizontal():
            yield DataTable(cursor_type="row", id="old")
            yield FilterTable([(label, 99) for label, _ in COLUMNS], id="new")  # floors: never cut


def drawn(widget: DataTable | FilterTable) -> list[list[tuple[str, Style | None]]]:
    """Every line the widget draws now, as (text, style) runs."""
    return [[(s.text, s.style) for s in widget.render_line(y).simplify()] for y in range(widget.size.height)]


async def test_every_line_is_drawn_as_the_data_table_draws_it():
    """The DataTable is given the widths the FilterTable sized its columns to (floors high: no cut)."""
    app = SideBySide()
    async with app.run_test(size=(160, 30)) as pilot:
        old, new = app.query_one(DataTable), app.query_one(FilterTable)
        cells = table_rows(80, 1)
        new.set_rows([Row(f"r{i}", row) for i, row in enumerate(cells)])
        await pilot.pause()
        for column in new.ordered_columns:
            old.add_column(column.key, width=column.width, key=column.key)
        for i, row in enumerate(cells):
            old.add_row(*row, key=f"r{i}")
        app.set_focus(None)
        await pilot.pause()
        assert old.size == new.size
        assert drawn(old) == drawn(new)  # neither focused
        for x, y in ((0, 0), (6, 20)):
            for widget in (old, new):
                widget.move_cursor(row=y + 5)
                widget.scroll_to(x=x, y=y, animate=False, immediate=True)
            assert await focused(pilot, old) == await focused(pilot, new)
            assert (old.scroll_x, old.scroll_y) == (new.scroll_x, new.scroll_y) == (x, y)


async def focused(
    pilot: Pilot[None], widget: DataTable | FilterTable
) -> list[list[tuple[str, Style | None]]]:
    """What ``widget`` draws with the focus."""
    widget.focus()
    await pilot.pause()
    return drawn(widget)


def reference(text: Text, pre: Style, post: Style, width: int, console: Console) -> list[Segment]:
    """How DataTable draws a cell: Rich's full rendering."""
    options = console.options.update_dimensions(width, 1).update(no_wrap=True)
    return console.render_lines(Styled(Padding(text, (0, 1)), pre_style=pre, post_style=post), options)[0]


def test_the_fast_path_draws_what_rich_draws():
    console = Console(width=200, color_system="truecolor")
    rng = random.Random(7)
    pres = [Style(color="red", bgcolor="black"), Style(bgcolor="#112233", bold=True), Style()]
    posts = [Style.from_color(color=None), Style.from_color(color="white")]
    fast = 0
    for _ in range(3000):
        text, width = cell(rng), rng.randint(3, 16)
        text.no_wrap = rng.choice([None, None, True, False])
        pre, post = rng.choice(pres), rng.choice(posts)
        got = plain_cell(text, (pre, post, pre + post), width, 1, console)
        if got is None:
            continue
        fast += 1
        want = reference(text, pre, post, width, console)
        assert list(Strip(got).simplify()) == list(Strip(want).simplify()), (text, width)
    assert fast > 1200  # most cells (all but a null pre, spans, tabs, wide text cut) take the fast path
