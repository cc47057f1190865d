"""The terminal driver the app uses: :class:`EscapeDriver` (``esc`` after ``ESCDELAY``) whose writes carry a
style's code once per run of that style, not once per segment.

Textual writes each segment of a frame as its full style code, the text, and a reset (``ESC[0m``): a row of
table cells in one style is written as that style's code and a reset per cell. Most of a frame is such codes
(the help's close at 120×40: 16.6 kB of codes in 22.4 kB). :func:`compact_styles` drops a reset followed by
the very style it reset (cursor moves between them change no style), so the terminal ends in the same state
for every character written, and the frame is about half as long (issue 28: a frame's bytes are most of a
key's time through tmux or SSH)."""

from __future__ import annotations

import re

from cmdare.tui.escape_driver import EscapeDriver

RESET = "\x1b[0m"
# a style code (its parameters captured), a cursor move, a run of text, or any other escape's first byte
_TOKEN = re.compile(r"\x1b\[([0-9;]*)m|(\x1b\[[0-9;]*H)|[^\x1b]+|\x1b")


def compact_styles(data: str) -> str:
    """``data`` with each reset that is followed (after cursor moves only) by the single style code set
    since the previous reset left out, and that code too. Anything else is written as it came, a held
    reset before it; a write ends with its reset."""
    out: list[str] = []
    add = out.append
    run: str | None = None  # the one style code set since a reset written (None: unknown or several)
    clean = False  # a reset was written and nothing styled since (unknown at the start of a write)
    held = False  # a reset read and not yet written
    for token in _TOKEN.finditer(data):
        params = token.group(1)
        if params is None:  # text, a cursor move or another escape
            text = token.group()
            if held and token.group(2) is None:  # a cursor move keeps the reset held; text does not
                add(RESET)
                held, clean, run = False, True, None
            add(text)
        elif params in ("", "0"):  # a reset
            held = True
        elif held:
            held = False
            if params != run:  # another style: the reset and the style, as they came
                add(RESET)
                add(token.group())
                run, clean = params, False
        else:  # a style over the current one
            run, clean = (params if clean else None), False
            add(token.group())
    if held:
        add(RESET)
    return "".join(out)


class CompactDriver(EscapeDriver):
    """:class:`EscapeDriver` whose writes go through :func:`compact_styles`."""

    def write(self, data: str) -> None:
        """Write ``data`` (a frame, or a mode switch) with its style codes compacted."""
        super().write(compact_styles(data))
