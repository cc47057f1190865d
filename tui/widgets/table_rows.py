"""The rows of a table and their order, the part of :class:`~cmdare.tui.widgets.table.FilterTable`
that knows nothing of the screen: a :class:`Row` per line, and :class:`RowOrder`, the rows as shown
(filtered, then sorted).

What a refresh costs is what changed. Handing over the very same row objects again costs one C-level
identity pass; for the positions holding a new object the sort key and the filter verdict are made
again (a sort key only when the row's ``sort`` object is new), and only when one of them changed is
the order made again: the last order, less the rows that moved, plus those, in one C-level sort. A
row's cells may be a function: they are made only for the rows on screen, or for every row while a
filter is set."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable, Sequence
from itertools import compress, filterfalse
from typing import Any, NamedTuple

from rich.text import Text

OrderKey = tuple[Any, ...]  # (0, 0, number) or (0, 1, text) before UNKNOWN
UNKNOWN: OrderKey = (1,)  # how None, NaN, "–" and "" sort: last


class Row(NamedTuple):
    """One table row: a stable ``key``, its ``cells`` (str or rich Text) and optional raw ``sort``
    values (one per column, or a sequence that makes each when read; None sorts last). Without
    ``sort`` the cell text is compared. A row that
    stays the same object from one refresh to the next costs nothing to show again. (Immutable; a
    named tuple because 10,000-task tables make thousands a refresh: it is made in half the time.)"""

    key: str
    cells: tuple[Any, ...] | Callable[[], tuple[Any, ...]]  # str cells: plain text (never markup)
    sort: Sequence[Any] | Callable[[], Sequence[Any]] | None = None  # a function: made when sorting
    dim: bool = False

    def values(self) -> tuple[Any, ...]:
        """The cells (made now when they were given as a function)."""
        return self.cells() if callable(self.cells) else self.cells

    def sort_values(self) -> Sequence[Any] | None:
        """The raw sort values (made now when they were given as a function), or None."""
        return self.sort() if callable(self.sort) else self.sort


def plain(cell: Any) -> str:
    """A cell's text without styles."""
    return cell.plain if isinstance(cell, Text) else str(cell)


def as_text(cell: Any) -> Text:
    """A cell as rich Text: data is never parsed as markup."""
    return cell if isinstance(cell, Text) else Text(str(cell))


def shown_cells(row: Row, values: Sequence[Any] | None = None) -> tuple[Text, ...]:
    """The cells of ``row`` (its ``values`` when made already) as drawn: rich Text, all dim for a
    dim row."""
    values = row.values() if values is None else values
    if row.dim:
        return tuple(Text(plain(c), style="dim") for c in values)
    return tuple(as_text(c) for c in values)


def same_values(old: Sequence[Any], new: Sequence[Any]) -> bool:
    """Whether two rows' cell values draw alike: equal strings, or Text with the same text, base
    style and spans."""
    return len(old) == len(new) and all(map(same_value, old, new))


def same_value(a: Any, b: Any) -> bool:
    """Whether two cell values draw alike (strings equal; Text with the same text, style and spans)."""
    if isinstance(a, Text) and isinstance(b, Text):
        return a.plain == b.plain and a.style == b.style and a.spans == b.spans
    return type(a) is type(b) and a == b


def order_key(value: Any) -> OrderKey:
    """How a raw value sorts: numbers by value, text case-insensitively, numbers before text; None,
    NaN, infinities, "–" and "" last."""
    if value is None or value in ("–", "") or (isinstance(value, float) and not math.isfinite(value)):
        return UNKNOWN
    return (0, 0, value) if isinstance(value, int | float) else (0, 1, str(value).lower())


def row_order_key(row: Row, col: int) -> OrderKey:
    """How ``row`` sorts by column ``col``: its sort value there, else the cell's text."""
    raw = row.sort_values()
    return order_key(raw[col] if raw is not None and col < len(raw) else plain(row.values()[col]))


class RowOrder:
    """The rows as shown: those matching :attr:`filter` (any cell containing it, case-insensitive),
    sorted by column :attr:`sort_col` (``reverse`` for descending; unknown values last either way,
    ties in the given order).

    What it knows of each row is kept by position in :attr:`rows` (its order key, whether it matches):
    a new sequence of rows is compared object for object in one C-level pass, and only the positions
    holding a new object are looked at again. The order is made again only when a kept key or verdict
    changed, and then from the last one: the rows that moved are taken out and put back by one
    C-level sort on (key, position), which merges two runs in near-linear time."""

    def __init__(self) -> None:
        self.rows: list[Row] = []
        self.shown: list[Row] = []
        self.filter = ""
        self.sort_col: int | None = None
        self.reverse = False
        self._order: list[int] | None = None  # positions in rows, as shown (None: every row, as given)
        self._keys: list[OrderKey] = []  # by position: the order key at _keys_col, then the position
        self._keys_col: int | None = None
        self._hits: list[bool] = []  # by position: whether the row matches _hits_for
        self._hit_from: list[object] = []  # by position: the cell values that verdict was made from
        self._hits_for = ""
        self._at: dict[str, int] | None = None  # row key -> position in rows (checked when asked)
        self._made: dict[str, tuple[object, tuple[int, int], OrderKey]] = {}  # key -> (from, when, key)
        self._hay: dict[str, tuple[object, str]] = {}  # row key -> (cell values, their text lowered)
        self._cells_seen = 1  # counts the times cells may have moved: keys from text made since
        self._by_text = False  # whether some row sorts by its cells' text (no sort values)

    def set_rows(self, rows: Sequence[Row], cells_moved: bool = False) -> bool:
        """Take ``rows``; False when they are the very rows held already and the order stands.
        ``cells_moved``: the rows' cells may read differently than before (they read a clock), so what
        the filter and a sort by text took from them is taken again."""
        rows = list(rows)
        self._cells_seen += cells_moved
        again = cells_moved and self._reads_cells()
        changed = self._new_positions(rows)
        if changed == [] and not again:
            return False
        self.rows = rows
        self._arrange(self._refit(changed, again))
        return True

    def reorder(self) -> None:
        """Filter and sort every row again (after a new filter or sort)."""
        self._arrange(self._refit(None))

    def index_of(self, key: str) -> int | None:
        """The position of the row ``key`` in :attr:`shown`, or None when it is not shown. Where
        each key is is remembered and checked when asked (made again only when it moved)."""
        at = self._at.get(key) if self._at is not None else None
        if at is None or at >= len(self.rows) or self.rows[at].key != key:
            self._at = {r.key: i for i, r in enumerate(self.rows)}
            at = self._at.get(key)
        if at is None or self._order is None:
            return at
        try:
            return self._order.index(at)
        except ValueError:
            return None

    # --- what is kept by position ---------------------------------------------------------------
    def _new_positions(self, rows: list[Row]) -> list[int] | None:
        """The positions where ``rows`` holds another object than :attr:`rows` (None: all, the count
        changed)."""
        if len(rows) != len(self.rows):
            return None
        return list(compress(range(len(rows)), map(operator.is_not, rows, self.rows)))

    def _refit(self, changed: list[int] | None, every: bool = False) -> set[int] | None:
        """Make again what is kept for the positions ``changed`` (None: all, the count changed), or
        for every row (``every``: cells may read differently, so verdicts and keys from text are made
        again); the positions whose verdict or key changed (their place in the order), or None when
        everything was made afresh (a new filter or sort, or another count)."""
        full, moved, n = changed is None, set(), len(self.rows)
        if self.filter:
            if changed is None or self._hits_for != self.filter or len(self._hits) != n:
                self._hits, self._hit_from = [], [None] * n
                self._hits_for, full = self.filter, True
                self._rematch(range(n))
            else:
                moved.update(self._rematch(range(n) if every else changed))
        col = self.sort_col
        if col is not None:
            if changed is None or self._keys_col != col or len(self._keys) != n:
                self._by_text = False
                self._keys = [self._placed(r, col, i) for i, r in enumerate(self.rows)]
                self._keys_col, full = col, True
            else:
                again = range(n) if every and self._by_text else changed
                moved.update(self._redo(self._keys, again, lambda r, i: self._placed(r, col, i)))
        return None if full else moved

    def _redo(self, kept: list[Any], positions: Iterable[int], make: Callable[[Row, int], Any]) -> list[int]:
        """Make ``kept[i]`` again (``make(row, i)``) at ``positions``; the positions whose value changed."""
        rows, changed = self.rows, []
        for i in positions:
            value = make(rows[i], i)
            if value != kept[i]:
                kept[i] = value
                changed.append(i)
        return changed

    def _arrange(self, moved: set[int] | None) -> None:
        """:attr:`shown` from the kept verdicts and keys: the rows at ``moved`` placed again (None:
        every row)."""
        if not self.filter and self.sort_col is None:
            self._order, self.shown = None, self.rows
            return
        if moved is None or self._order is None:
            self._order = self._ordered(self._candidates(None))
        elif moved:
            self._order = self._ordered(self._candidates(moved))
        self.shown = list(map(self.rows.__getitem__, self._order))

    def _candidates(self, moved: set[int] | None) -> list[int]:
        """The positions to show: every matching one (``moved`` None), or the last order without
        ``moved`` and then those of ``moved`` that match."""
        n = len(self.rows)
        if moved is None:
            return list(compress(range(n), self._hits)) if self.filter else list(range(n))
        kept = list(filterfalse(moved.__contains__, self._order or ()))
        return kept + [i for i in sorted(moved) if not self.filter or self._hits[i]]

    def _ordered(self, positions: list[int]) -> list[int]:
        """``positions`` in order: by position without a sort, else by the kept keys (they end in the
        position, so are unique: ties stay in the given order either way) in one C-level sort
        (nearly sorted input runs near linear), unknowns last."""
        if self.sort_col is None:
            return sorted(positions)
        order = sorted(positions, key=self._keys.__getitem__, reverse=self.reverse)
        if self.reverse:  # the unknowns came first (in the given order): they go last
            unknown = list(map(operator.itemgetter(0), map(self._keys.__getitem__, order))).count(1)
            order = order[unknown:] + order[:unknown]
        return order

    def _placed(self, row: Row, col: int, at: int) -> OrderKey:
        """The kept key of the row at position ``at``: its order key, then the position (negated for
        a reverse sort, which reverses the whole key)."""
        return (*self._key(row, col), -at if self.reverse else at)

    def _reads_cells(self) -> bool:
        """Whether the order depends on cells: a filter, or a sort by some row's text."""
        return bool(self.filter) or (self.sort_col is not None and self._by_text)

    # --- what is kept by row key --------------------------------------------------------------
    def _key(self, row: Row, col: int) -> OrderKey:
        """The order key of ``row`` at ``col``, made again only when what it comes from is new (or, for
        a key from the cells' text, when cells may have moved since)."""
        if len(self._made) > 2 * len(self.rows) + 64:
            self._made = {}
        by_text = row.sort is None
        source, seen = (row.cells, self._cells_seen) if by_text else (row.sort, 0)
        self._by_text |= by_text
        hit = self._made.get(row.key)
        if hit is not None and hit[0] is source and hit[1] == (seen, col):
            return hit[2]
        key = row_order_key(row, col)
        self._made[row.key] = (source, (seen, col), key)
        return key

    def _rematch(self, positions: Iterable[int]) -> list[int]:
        """The filter's verdict made again at ``positions`` where the row's cell values are other
        objects than the verdict was made from; the positions whose verdict changed."""
        rows, hits, made_from, moved = self.rows, self._hits, self._hit_from, []
        needle, fresh = self.filter.lower(), not hits
        for i in positions:
            values = rows[i].values()
            if values is made_from[i]:
                continue
            hit = needle in self._text(rows[i].key, values)
            made_from[i] = values
            if fresh:
                hits.append(hit)
            elif hit != hits[i]:
                hits[i] = hit
                moved.append(i)
        return moved

    def _text(self, key: str, values: Sequence[Any]) -> str:
        """The cells' text, lowered, one NUL between cells (kept per row while its values stay)."""
        if len(self._hay) > 2 * len(self.rows) + 64:
            self._hay = {}
        hit = self._hay.get(key)
        if hit is None or hit[0] is not values:
            hit = self._hay[key] = (values, "\x00".join(plain(c).lower() for c in values))
        return hit[1]
