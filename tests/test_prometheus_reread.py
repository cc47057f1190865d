"""The periodic re-read of every task's identity in a large fleet (issue 34: its transient memory at 100,000
tasks). The source compares each read with the last as it goes, keeps the slots, position dict and fleet
columns when nothing changed, looks up only the keys it follows, and in fleet mode makes only the targets
whose detail was read; the answer's text is made a chunk at a time. Each new path is held here to the one it
replaced: the former ``_targets``/``_follow`` (kept below as the oracle, as they were) over random sequences
of reads (new, gone, moved, swapped and relabelled tasks, addresses reused, duplicates, forgetting), and
``decode_labelled``'s chunks to the answer made text whole. A pure-logic test: no server answers here (the
reads are rows as the decoders give them; the source's reads of a real Prometheus are tested elsewhere)."""

from __future__ import annotations

import math
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cmdare.collectors import caps
from cmdare.collectors.prometheus import answers as A
from cmdare.collectors.prometheus.fleet import FoldedDetail
from cmdare.collectors.prometheus.source import (
    PrometheusAPISource,
    _Books,
    _ident,
    _info,
    _made_from,
    _Target,
)

ADDRS = [f"10.0.0.{i}:9400" for i in range(6)]
TASKS = [f"worker-{i}" for i in range(5)]


def _old_targets(src: PrometheusAPISource, infos: list[dict[str, Any]], now: float) -> dict[str, _Target]:
    """The former ``_targets``: a ``_Target`` a row, every book, slot and fleet column made again."""
    out: dict[str, _Target] = {}
    current, slots, known = src._current, src._slots, src._known
    for labels in (r["metric"] for r in infos):
        ident = _ident(labels)
        if (slot := current.get(ident)) is not None:
            ident = slots[slot]
        books = known.get(ident)
        info = books.info if books is not None else None
        if info is None or not _made_from(info, labels):
            info = _info(labels)
        out[ident] = _Target(info)
    _old_follow(src, out, now)
    carried = src._carried
    for ident, tg in out.items():
        books = known.get(ident)
        if books is not None:
            books.info = tg.info
            continue
        books = known[ident] = _Books(tg.info)
        if carried and (source := carried.pop(ident, None)) is not None:
            books.source, books.backfilled = source, True
    carried.clear()
    src._slots = slots = list(out)
    src._current = current = {i: n for n, i in enumerate(slots)}
    src._gone_cache = None
    if len(out) > src.focus_from:
        src.fleet_reader.know({i: t.info for i, t in out.items()}, slots=(slots, current))
        src._full_due = False
    return out


def _old_follow(src: PrometheusAPISource, named: dict[str, _Target], now: float) -> None:
    """The former ``_follow``: a dict of every named target's key."""
    by_key = {tg.info.key: ident for ident, tg in named.items()}
    known = src._known
    moved = [(i, b.info) for i, b in known.items() if i not in named or named[i].info.key != b.info.key]
    sources = {i: src._source(i) for i, _ in moved}
    carry: list[tuple[str, str, str, str]] = []
    for ident, info in moved:
        successor = by_key.get(info.key)
        here = known.get(successor) if successor is not None else None
        if successor is not None and (here is None or here.info.key != info.key):
            carry.append((successor, sources[ident], info.key, ident))
            if ident in named:
                src._release(ident)
            else:
                src._drop(ident)
        elif ident in named:
            src._release(ident)
            if len(src._lost) < caps.current().tasks:
                src._lost[info.key] = (info, sources[ident], now)
        elif now - src._gone.setdefault(ident, now) > src.forget_after_s:
            src._drop(ident)
    for key in [k for k in src._lost if k in by_key]:
        info, source, _ = src._lost.pop(key)
        successor = by_key[key]
        if (here := known.get(successor)) is None or here.info.key != key:
            src._release(successor)
            carry.append((successor, source, key, ""))
    for successor, source, key, was in carry:
        src._carry_on(successor, source, key, was)
    for ident in named.keys() & src._gone.keys():
        del src._gone[ident]


def _row(addr: str, task: str, region: str) -> dict[str, Any]:
    labels = {"__name__": "cmdare_task_info", "instance": addr, "job": "x", "exported_job": "big"}
    labels |= {"task": task, "role": "worker", "region": region}
    return {"metric": {k: "".join(v) for k, v in labels.items()}, "value": [0, "1"]}  # fresh strings


def _state(src: PrometheusAPISource) -> dict[str, Any]:
    """Everything an identity read leaves behind, by value."""
    reader = src.fleet_reader
    columns = reader._columns
    return {
        "known": [(i, b.info, b.source, b.host, b.seen, b.last, b.backfilled) for i, b in src._known.items()],
        "slots": list(src._slots),
        "current": dict(src._current),
        "gone": dict(src._gone),
        "gone_known": src._gone_known(),
        "lost": dict(src._lost),
        "in_use": dict(src._in_use),
        "carried": dict(src._carried),
        "replaced": src.replaced,
        "full_due": src._full_due,
        "order": list(reader._order),
        "new": set(reader._new),
        "key_instances": list(reader._key_instances) if columns is not None else None,
        "columns": None if columns is None else (list(columns.instances), dict(columns.index)),
    }


# a read: the rows of some addresses, each naming one of a few tasks (moves, swaps, reused addresses and
# duplicates come of it), one label of the identity sometimes changed; or the last read again as it was
READS = st.lists(
    st.one_of(
        st.just(None),
        st.lists(
            st.tuples(st.sampled_from(ADDRS), st.sampled_from(TASKS), st.sampled_from(["a", "a", "a", "b"])),
            max_size=7,
        ),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reads=READS, steps=st.lists(st.sampled_from([0.0, 1.0, 3.0]), min_size=8, max_size=8))
def test_an_identity_read_leaves_what_the_former_one_left(reads: list[Any], steps: list[float]) -> None:
    """Every book, slot, fleet column, replacement, loss and forgetting as the former code left them,
    read after read (focus_from 2: the fleet's reader is told past two tasks)."""
    new = PrometheusAPISource("http://127.0.0.1:9", 'job="x"', forget_after_s=2.0, focus_from=2)
    old = PrometheusAPISource("http://127.0.0.1:9", 'job="x"', forget_after_s=2.0, focus_from=2)
    last: list[tuple[str, str, str]] = []
    now = 0.0
    for read, step in zip(reads, steps, strict=False):
        now += step
        rows_of = last if read is None else read
        last = rows_of
        got = new._targets([_row(*r) for r in rows_of], now)
        want = _old_targets(old, [_row(*r) for r in rows_of], now)
        assert [(i, t.info) for i, t in got.items()] == [(i, t.info) for i, t in want.items()]
        assert _state(new) == _state(old)


def test_a_read_that_names_the_same_targets_keeps_what_it_would_make_again() -> None:
    """The usual re-read (the same targets, the same identities): the same slots, position dict, fleet
    columns and identities (the objects), nothing rebuilt; one label changed: made again."""
    src = PrometheusAPISource("http://127.0.0.1:9", 'job="x"', focus_from=2)
    rows = [(a, t, "a") for a, t in zip(ADDRS, TASKS, strict=False)]
    src._targets([_row(*r) for r in rows], 0.0)
    slots, current, columns = src._slots, src._current, src.fleet_reader._columns
    infos = [b.info for b in src._known.values()]
    src._targets([_row(*r) for r in rows], 1.0)
    assert src._slots is slots and src._current is current and src.fleet_reader._columns is columns
    assert all(a is b.info for a, b in zip(infos, src._known.values(), strict=True))
    rows[2] = (rows[2][0], rows[2][1], "b")
    src._targets([_row(*r) for r in rows], 2.0)
    assert src._slots is not slots and src.fleet_reader._columns is not columns
    assert src._known[ADDRS[2]].info.region == "b" and src._known[ADDRS[1]].info is infos[1]


@settings(max_examples=100, deadline=None)
@given(
    read=st.lists(st.sampled_from([*ADDRS, "10.9.9.9:9400"]), max_size=8),
    times=st.lists(st.sampled_from(["1733245000.5", "NaN", "-1", "x"]), min_size=8, max_size=8),
)
def test_a_fleets_targets_are_those_all_targets_would_keep(read: list[str], times: list[str]) -> None:
    """In fleet mode only the targets whose folded detail was read are made (:meth:`_read_targets`): after
    ``_fill_folded`` and the finite-scrape-time filter, the same targets in the same order with the same
    times and values as every named target would give (an unknown instance, an implausible time, a value
    without a time)."""
    src = PrometheusAPISource("http://127.0.0.1:9", 'job="x"', focus_from=2)
    src._targets([_row(a, t, "a") for a, t in zip(ADDRS, TASKS, strict=False)], 0.0)
    folded = FoldedDetail(
        times={"".join(i): t for i, t in zip(read, times, strict=False)},  # the answer's own strings
        values={"".join(i): {"cmdare_worker_steps_total": 5.0} for i in [*read, ADDRS[4]]},
    )

    def kept(targets: dict[str, _Target]) -> list[tuple[str, float, dict[str, float]]]:
        src._fill_folded(targets, folded)
        return [(i, t.scrape_time, t.values) for i, t in targets.items() if math.isfinite(t.scrape_time)]

    assert kept(src._read_targets(folded)) == kept(src._named_targets())


def _body(rows: list[dict[str, Any]]) -> bytes:
    return orjson.dumps({"status": "success", "data": {"resultType": "vector", "result": rows}})


@pytest.mark.parametrize("chunk", [1, 200, 1 << 19])
@pytest.mark.parametrize("limit", [3, 1000])
def test_labelled_rows_a_chunk_at_a_time_are_the_rows_read_whole(
    monkeypatch: pytest.MonkeyPatch, chunk: int, limit: int
) -> None:
    """The answer made text a chunk of rows at a time: the same rows and the same rows cap (and count
    of rows cut) as the rows :func:`~.answers.decode` gives; a byte not UTF-8 in a later chunk still
    leaves the answer to it."""
    monkeypatch.setattr(A, "CHUNK_BYTES", chunk)
    rows = [_row(a, t, r) for a in ADDRS for t in TASKS for r in "ab"]
    body = _body(rows)
    was = caps.current()
    caps.configure(rows_per_answer=limit)
    try:
        cut: list[int] = []
        got = A.decode_labelled(body, "application/json", 200, None, cut)
    finally:
        caps.configure(was)
    assert isinstance(got, A.LabelledRows)
    assert [(A.labels_of(t), v) for t, v in zip(got.labels, got.values, strict=True)] == [
        (r["metric"], "1") for r in rows[:limit]
    ]
    assert sum(cut) == max(0, len(rows) - limit)
    bad = body[: len(body) - 200] + body[len(body) - 200 :].replace(b'"worker-', b'"\xffworker-', 1)
    with pytest.raises(A.PrometheusAPIError):
        A.decode_labelled(bad, "application/json", 200)
