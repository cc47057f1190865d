"""Columns sized to what they hold (as k9s and htop do), and text cut where it tells least.

A column is as wide as its widest cell or its label (:func:`natural_widths`); an empty column that may
collapse takes no room. When the columns together are wider than the room, the ones wider than their
floor give up cells, the widest first (:func:`fit_widths`), down to that floor (a table wider still
scrolls sideways). A cell cut to fit keeps what tells it from its neighbours in the column
(:func:`distinct_spans`): three tasks ``trainer-worker-0N-us-central1-a`` read ``trainer-worker-01…-a``,
three targets on one host ``127…:9101``, never three times ``trainer-w`` (:func:`cut_text`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich.cells import cell_len
from rich.text import Text

ELLIPSIS = "…"
Span = tuple[int, int]  # [start, end) of the characters that tell a value from its neighbours


def natural_widths(
    labels: Sequence[str], rows: Iterable[Sequence[str]], collapse: Sequence[bool]
) -> list[int]:
    """Per column: its widest cell or its label; 0 for a column that may ``collapse`` and whose cells
    are all empty (or when there are no rows)."""
    widest = [0] * len(labels)
    for cells in rows:
        for j, text in enumerate(cells[: len(labels)]):
            if text and text != "–" or not collapse[j]:
                n = cell_len(text)
                if n > widest[j]:
                    widest[j] = n
    return [0 if collapse[j] and widest[j] == 0 else max(widest[j], cell_len(label))
            for j, label in enumerate(labels)]  # fmt: skip


def fit_widths(
    natural: Sequence[int], floor: Sequence[int], room: int, pad: int, through: int | None = None
) -> list[int]:
    """The columns' widths such that those up to column ``through`` (all when None) fit in ``room``
    cells (each column drawn ``pad`` cells wider either side): the widest of them give up cells in
    turn, none below its ``floor`` (nor below its natural width); the columns after ``through`` keep
    theirs (they scroll into view); a hidden column (natural 0) stays hidden."""
    widths = list(natural)
    last = len(widths) if through is None else through + 1
    limit = [min(n, f) if j < last else n for j, (n, f) in enumerate(zip(natural, floor, strict=True))]
    excess = sum(w + 2 * pad for w in widths[:last] if w) - room
    while excess > 0:
        can = [j for j, w in enumerate(widths) if w > limit[j]]
        if not can:
            break
        top = max(widths[j] for j in can)
        tops = [j for j in can if widths[j] == top]
        second = max([widths[j] for j in can if widths[j] < top] + [max(limit[j] for j in tops)])
        step = max(1, min(top - second, -(-excess // len(tops))))
        for j in tops:
            cut = min(step, widths[j] - limit[j], excess)
            widths[j] -= cut
            excess -= cut
            if excess <= 0:
                break
    return widths


def _common(a: str, b: str) -> int:
    """How many characters ``a`` and ``b`` share at their start."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _shared(values: list[str]) -> dict[str, int]:
    """Per value: the longest start it shares with any other value (its neighbours once sorted)."""
    ordered = sorted(set(values))
    out = {}
    for i, v in enumerate(ordered):
        before = _common(v, ordered[i - 1]) if i else 0
        after = _common(v, ordered[i + 1]) if i + 1 < len(ordered) else 0
        out[v] = max(before, after)
    return out


def _word(value: str, start: int, end: int) -> Span:
    """``[start, end)`` grown to whole runs of letters and digits (``0`` of ``-01-`` grows to ``01``)."""
    while start > 0 and value[start - 1].isalnum() and (start == len(value) or value[start].isalnum()):
        start -= 1
    while end < len(value) and value[end].isalnum() and value[end - 1].isalnum():
        end += 1
    return start, end


def distinct_spans(values: Iterable[str]) -> dict[str, Span]:
    """Per value, the part that tells it from the column's other values: after the longest start it
    shares with another, before the longest end it shares with another, grown to whole words. A value
    alone in its column has no such part (the whole of it)."""
    values = list(values)
    starts = _shared(values)
    ends = _shared([v[::-1] for v in values])
    out = {}
    for v in set(values):
        head, tail = starts[v], ends[v[::-1]]
        start = min(head, len(v) - 1) if v else 0
        end = max(len(v) - tail, start + 1)
        out[v] = _word(v, start, min(end, len(v))) if len(starts) > 1 else (0, len(v))
    return out


def cut_text(text: Text, width: int, keep: Span | None = None) -> Text:
    """``text`` in at most ``width`` cells, one line: whole when it fits; else cut where it tells least,
    keeping the span ``keep`` (what tells it from its neighbours): the end cut when ``keep`` fits
    before it, else the part before ``keep``, else the middle. Single-width characters assumed beyond
    the first cut (cell cuts of wide characters fall back to a plain end cut)."""
    plain = text.plain
    if cell_len(plain) <= width:
        return text
    if width <= 1:
        return Text(ELLIPSIS[:width])
    if len(plain) != cell_len(plain):
        return text[: width - 1] + Text(ELLIPSIS)
    start, end = keep if keep is not None else (0, len(plain))
    if (start, end) == (0, len(plain)):  # nothing tells it apart: the middle goes
        head = (width - 1 + 1) // 2
        return text[:head] + Text(ELLIPSIS) + text[len(plain) - (width - 1 - head) :]
    if end <= width - 1:  # what tells it apart is in the first width-1 cells: the end goes
        return text[: width - 1] + Text(ELLIPSIS)
    rest = len(plain) - start
    if rest <= width - 2:  # a head, then from the distinct part to the end
        head = width - 1 - rest
        return text[:head] + Text(ELLIPSIS) + text[start:]
    head = max(0, min(start, (width - 2 - (end - start)) // 2))  # a head, the distinct part, cut after
    return text[:head] + Text(ELLIPSIS) + text[start : start + width - 2 - head] + Text(ELLIPSIS)


def fitting_floor(floor: int, label: str) -> int:
    """A column's floor: its declared width, at least its label's (a label is never cut)."""
    return max(floor, cell_len(label), 1)


__all__ = ["ELLIPSIS", "cut_text", "distinct_spans", "fit_widths", "fitting_floor", "natural_widths"]
