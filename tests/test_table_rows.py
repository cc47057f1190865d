"""Issue 20: the table's order (:class:`RowOrder`) is kept by position and made again only where rows
changed; checked here against the plain definition (filter every row, then a stable sort with unknown
values last) over random refreshes: rows replaced (the same values or new ones), added and removed,
filters and sorts set and cleared, cells that read a clock."""

from __future__ import annotations

import random

from cmdare.tui.widgets.table_rows import UNKNOWN, Row, RowOrder, plain, row_order_key

VALUES = [None, "–", "", float("nan"), 0, 1, 2.5, -3, "alpha", "Beta", "beta", "gamma", 7, 7.0]


def reference(rows: list[Row], needle: str, col: int | None, reverse: bool) -> list[str]:
    """The rows as shown, by definition: filtered, then sorted (stable; unknowns last either way)."""
    if needle:
        rows = [r for r in rows if any(needle.lower() in plain(c).lower() for c in r.values())]
    if col is not None:
        known = [r for r in rows if row_order_key(r, col) != UNKNOWN]
        known.sort(key=lambda r: row_order_key(r, col), reverse=reverse)
        rows = known + [r for r in rows if row_order_key(r, col) == UNKNOWN]
    return [r.key for r in rows]


def make_row(rng: random.Random, key: str, clock: list[int]) -> Row:
    """A row of three columns: sort values, or none (sorted by text), or cells that read ``clock``."""
    values = tuple(rng.choice(VALUES) for _ in range(3))
    kind = rng.random()
    if kind < 0.4:
        return Row(key, tuple("–" if v is None else str(v) for v in values), values)
    if kind < 0.7:
        return Row(key, tuple(str(rng.choice(VALUES[4:])) for _ in range(3)))
    return Row(key, lambda: (key, str(clock[0] % 3), "ticks"), dim=rng.random() < 0.5)


def test_kept_order_is_the_defined_order_over_random_refreshes():
    rng = random.Random(20)
    clock = [0]
    order = RowOrder()
    rows = [make_row(rng, f"k{i}", clock) for i in range(60)]
    for _ in range(600):
        step = rng.random()
        if step < 0.5:  # some rows replaced: new objects, some with new values
            rows = list(rows)
            for i in rng.sample(range(len(rows)), rng.randint(0, len(rows) // 4)):
                rows[i] = make_row(rng, rows[i].key, clock) if rng.random() < 0.7 else Row(*rows[i])
        elif step < 0.6 and rows:  # the count changes
            rows = (
                rows[1:] if rng.random() < 0.5 else rows + [make_row(rng, f"n{rng.randrange(10**6)}", clock)]
            )
        elif step < 0.7:
            order.filter = rng.choice(["", "", "a", "be", "7", "0", "tick", "1"])
            order.reorder()
        elif step < 0.85:
            order.sort_col, order.reverse = rng.choice([None, 0, 1, 2]), rng.random() < 0.5
            order.reorder()
        moved = rng.random() < 0.2
        clock[0] += moved
        order.set_rows(rows, cells_moved=moved)
        assert [r.key for r in order.shown] == reference(rows, order.filter, order.sort_col, order.reverse)
        key = rng.choice(rows).key if rows else "none"
        at = order.index_of(key)
        assert at is None or order.shown[at].key == key


def test_the_same_rows_again_change_nothing_and_cost_no_sort_key():
    made: list[int] = []

    def sort(i: int) -> tuple[int]:
        made.append(i)
        return (i % 7,)

    rows = [Row(f"r{i}", (str(i),), lambda i=i: sort(i)) for i in range(500)]
    order = RowOrder()
    order.sort_col = 0
    order.set_rows(rows)
    assert len(made) == 500
    assert order.set_rows(list(rows)) is False  # the very same objects: nothing to do
    replaced = list(rows)
    replaced[3] = Row("r3", ("3",), replaced[3].sort)  # a new row, the same sort values object
    assert order.set_rows(replaced) and len(made) == 500 and order.shown[order.index_of("r3")] is replaced[3]
    replaced[4] = Row("r4", ("4",), lambda: (0,))  # a new sort value: one key made, the order changes
    order.set_rows(replaced)
    assert len(made) == 500 and [r.key for r in order.shown][:2] == ["r0", "r4"]
