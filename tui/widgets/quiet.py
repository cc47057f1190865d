"""Updates that paint only what changed (issue 34): a refresh whose data did not change sends nothing
to the terminal.

Textual repaints on every ``Static.update`` (and lays the screen out again unless told not to) and on
every border (sub)title assignment, even when the content is the one already shown: watching two static
targets, every 2 s refresh rewrote 39 of the 40 rows (~12.8 kB) though only the poll counter changed.
These helpers compare what would be shown with what is, by value (strings, rich ``Text``, and rich
``Table`` grids of those), and leave the widget alone when they are equal."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text
from textual.widget import Widget
from textual.widgets import Static

_SHOWN = "_quiet_shown"  # the attribute holding the key of what a widget shows (per helper)


class _Unique:
    """A key equal to nothing else: a renderable whose value cannot be compared is always repainted."""

    __slots__ = ()


def content_key(content: Any) -> Any:
    """A value equal for two renderables that draw the same: ``str`` as is, ``Text`` by its characters,
    spans and style, a ``Table`` by its columns' settings and cells; anything else by nothing (unique)."""
    if isinstance(content, str):
        return content
    if isinstance(content, Text):
        return ("text", content.plain, tuple(content.spans), str(content.style), content.justify)
    if isinstance(content, Table):
        cols = tuple(
            (
                c.header and content_key(c.header),
                str(c.style),
                c.width,
                c.ratio,
                c.no_wrap,
                c.overflow,
                tuple(content_key(cell) for cell in c._cells),
            )  # fmt: skip
            for c in content.columns
        )
        rows = tuple(str(r.style) for r in content.rows)
        return ("table", cols, rows, content.expand, content.padding, content.show_header, content.box)
    return _Unique()


def update_static(widget: Static, content: Any, *, layout: bool = True) -> bool:
    """``widget.update(content, layout=layout)`` unless it already shows the same; True when it updated."""
    key = content_key(content)
    shown = getattr(widget, _SHOWN + "_content", None)  # (key, the content object it was made from)
    if shown is not None and shown[0] == key and shown[1] is widget.content and not isinstance(key, _Unique):
        return False  # (another update in between replaced the content object: not the same any more)
    widget.update(content, layout=layout)
    setattr(widget, _SHOWN + "_content", (key, widget.content))
    return True


def set_subtitle(widget: Widget, title: str | Text) -> bool:
    """Set ``widget.border_subtitle`` unless it already reads the same (Textual repaints the whole
    widget on every assignment); True when it changed."""
    key = content_key(title)
    shown = getattr(widget, _SHOWN + "_subtitle", None)  # (key, the title Textual stored for it)
    if shown is not None and shown[0] == key and shown[1] is widget._border_subtitle:
        return False  # (a title set elsewhere in between is another object: set again)
    widget.border_subtitle = title
    setattr(widget, _SHOWN + "_subtitle", (key, widget._border_subtitle))
    return True
