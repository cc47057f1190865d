"""A large fleet's per-task columns read without an object a row (``answers.decode_pairs``): the same
instances and values as the rows :func:`decode` gives, the same errors and caps, whatever the answer
holds; answers of another shape (escapes, other labels, another layout) are read the slow way, never
wrongly. The real engines' own answers take the quick way: tests/test_prometheus_fleet.py (Prometheus)
and the VictoriaMetrics case below."""

from __future__ import annotations

import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from itertools import repeat
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cmdare.collectors import caps
from cmdare.collectors import metrics as M
from cmdare.collectors.http_client import Budget
from cmdare.collectors.prometheus import answers as A
from cmdare.collectors.prometheus.answers import Pairs, PrometheusAPIError, decode, decode_pairs
from cmdare.collectors.prometheus.fleet import ColumnValues, FleetColumns, _float
from cmdare.collectors.samples import TaskInfo


def _body(rows: list[object], **extra: object) -> bytes:
    return orjson.dumps({"status": "success", "data": {"resultType": "vector", "result": rows}, **extra})


def _row(instance: str, value: object, t: object = 1733245000.123) -> dict[str, object]:
    return {"metric": {"instance": instance}, "value": [t, value]}


def _as_rows(body: bytes) -> Pairs:
    """What the answer's rows say (decode, then taken apart): what decode_pairs must give."""
    rows = decode(body, "application/json", 200)
    return Pairs([r["metric"].get("instance", "") for r in rows], [r["value"][1] for r in rows])


def _quick(body: bytes) -> bool:
    """Whether ``decode_pairs`` reads the answer the quick way (no object a row)."""
    span = A._checked_array(body, A._one_label("instance")[0])
    try:
        return span is not None and bool(list(A._pair_chunks(span, "instance", None)))
    except A._Unpaired:  # e.g. a byte not UTF-8 in the array
        return False


ROWS = [_row(f"10.0.{i // 250}.{i % 250}:9400", repr(0.1 + i / 7)) for i in range(1000)]


@pytest.mark.parametrize(
    ("body", "quick"),
    [
        (_body(ROWS), True),  # the usual answer
        (_body(ROWS[:3], warnings=["x"], stats={"seriesFetched": "3"}), True),  # envelope fields around it
        (_body([_row("a:1", "NaN", 1733245000), _row("b:1", "+Inf", -1)]), True),  # whole-second time
        (_body([_row('a"b:1', "1"), _row("c\\d", "2")]), False),  # escapes: read as JSON
        (_body([_row("a:1", "1"), {"metric": {"instance": "b:1", "job": "x"}, "value": [1, "2"]}]), False),
        (_body([_row("a:1", "1"), {"metric": {}, "value": [1, "2"]}]), False),  # no label: ""
        (_body([_row("a:1", 5), _row("b:1", None), _row("c:1", "7")]), False),  # not text: left to the reader
        (_body([_row("a:1", "1", 1e300), _row("b:1", "2", "x")]), False),  # bad times: rows dropped
        (_body([_row("a:1", "1"), ["not", "a row"], _row("b:1", "2")]), False),
        (_body([]), False),
        (
            orjson.dumps(
                {"data": {"result": [_row("a:1", "1")], "resultType": "vector"}, "status": "success"}
            ),
            True,
        ),
        (
            b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{"instance":"a"},"value":[1,"2"]}]}}',
            True,
        ),
        (
            b'{"status": "success", "data": {"resultType": "vector", "result": [{"metric": {"instance": "a"}, "value": [1, "2"]}]}}',
            False,
        ),
    ],
    ids=lambda x: x[:60].decode(errors="replace") if isinstance(x, bytes) else str(x),
)
def test_the_same_instances_and_values_as_the_rows(body: bytes, quick: bool) -> None:
    assert decode_pairs(body, "application/json", 200, "instance") == _as_rows(body)
    assert _quick(body) == quick


@pytest.mark.parametrize(
    "body",
    [
        # a nested "result" before the real one: the envelope check finds the array is not data.result
        orjson.dumps(
            {
                "status": "success",
                "x": {"result": [_row("evil:1", "9")]},
                "data": {"resultType": "vector", "result": [_row("a:1", "1")]},
            }
        ),
        # an error answer whose text holds a result array
        orjson.dumps(
            {
                "status": "error",
                "errorType": "bad_data",
                "error": "no",
                "data": {"result": [_row("a:1", "1")]},
            }
        ),
        # a matrix, or another result type, with rows of the same look
        orjson.dumps({"status": "success", "data": {"resultType": "matrix", "result": [_row("a:1", "1")]}}),
        # the array's rows fine, what follows it not JSON
        _body([_row("a:1", "1")])[:-1] + b",}",
        # two "result" keys: JSON's last one wins
        b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{"instance":"a"},"value":[1,"2"]}],"result":[]}}',
        b"\xff" + _body([_row("a:1", "1")]),
        # a raw control character in a label value (not JSON: decode refuses the answer; so must this)
        _body([_row("a:1", "1")]).replace(b"a:1", b"a\x1b[2J:1"),
        # a byte that is not UTF-8 inside the array (the envelope fine): JSON refuses the answer
        _body([_row("a:1", "1"), _row("b:1", "2")]).replace(b"b:1", b"b\xff:1"),
    ],
    ids=range(8),
)
def test_odd_answers_give_what_decode_gives(body: bytes) -> None:
    try:
        want: Pairs | str = _as_rows(body)
    except PrometheusAPIError as exc:
        want = str(exc)
    try:
        got: Pairs | str = decode_pairs(body, "application/json", 200, "instance")
    except PrometheusAPIError as exc:
        got = str(exc)
    assert got == want
    assert not _quick(body)


def test_an_html_page_and_the_budget_refuse_as_decode_does() -> None:
    with pytest.raises(PrometheusAPIError, match="HTML page"):
        decode_pairs(b"<html>login</html>", "text/html", 200, "instance")
    body = _body(ROWS)
    shared = Budget(100)  # the refresh's JSON values: this answer alone is past them
    with pytest.raises(PrometheusAPIError, match="JSON values together refused"):
        decode_pairs(body, "application/json", 200, "instance", shared)


def test_rows_past_the_cap_are_dropped_and_counted() -> None:
    before = caps.current()
    caps.configure(rows_per_answer=600)
    try:
        cut: list[int] = []
        got = decode_pairs(_body(ROWS), "application/json", 200, "instance", cut=cut)
        assert len(got.keys) == len(got.values) == 600 and cut == [400]
        assert got.keys[:5] == _as_rows(_body(ROWS)).keys[:5]
    finally:
        caps.configure(before)


@pytest.mark.slow
def test_victoriametrics_answers_take_the_quick_way(tmp_path: Path) -> None:
    """Debian's VictoriaMetrics answering a column query (``max by (instance) (…)``) over series imported
    into it: its answer takes the quick read, which gives what the rows give."""
    from tests.engines import victoria_metrics

    vm = victoria_metrics(tmp_path / "vm", [], "1s").start()
    try:
        page = "".join(
            f'cmdare_worker_steps_total{{instance="10.0.0.{i}:9400",job="j"}} {i * 3.5}\n' for i in range(50)
        )
        urllib.request.urlopen(
            urllib.request.Request(f"{vm.url}/api/v1/import/prometheus", page.encode()), timeout=5
        )
        url = f"{vm.url}/api/v1/query?" + urllib.parse.urlencode(
            {"query": "max by (instance) (cmdare_worker_steps_total)"}
        )
        for _ in range(100):  # until the import is searchable (a hang bound)
            with urllib.request.urlopen(url, timeout=5) as r:
                body = r.read()
            if body.count(b'"instance"') == 50:
                break
            time.sleep(0.1)
    finally:
        vm.stop()
    assert _quick(body)
    got = decode_pairs(body, "application/json", 200, "instance")
    assert got == _as_rows(body) and len(got.keys) == 50 and "10.0.0.7:9400" in got.keys


DETAIL = [
    {"metric": {"__name__": "cmdare_worker_steps_total", "instance": "10.0.0.1:9400", "job": "bench"}, "value": [1733245000.5, "12"]},
    {"metric": {"__name__": "cmdare_ps_bytes_total", "direction": "in", "instance": "h:1", "job": "a{b}:c,d"}, "value": [1, "3e5"]},
    {"metric": {"cmdare_key": "__scrape_time", "instance": "10.0.0.1:9400"}, "value": [1733245000.5, "1733244999.9"]},
    {"metric": {"empty": "", "instance": "x"}, "value": [1, "NaN"]},
    {"metric": {}, "value": [1, "1"]},
]  # fmt: skip


def _labelled_as_rows(got: list[dict] | A.LabelledRows) -> list[tuple[dict[str, str], object]]:
    if isinstance(got, A.LabelledRows):
        return [(A.labels_of(t), v) for t, v in zip(got.labels, got.values, strict=True)]
    return [(r["metric"], r["value"][1]) for r in got]


@pytest.mark.parametrize(
    ("rows", "quick"),
    [
        (DETAIL, True),  # any labels, braces, commas and colons in values, an empty value, no label at all
        (DETAIL + [{"metric": {"instance": 'q"uote'}, "value": [1, "1"]}], False),  # escapes: read as JSON
        (
            DETAIL + [{"metric": {"instance": "x", "n": 5}, "value": [1, "1"]}],
            False,
        ),  # a label value no string
        (
            DETAIL + [{"metric": {"instance": "x"}, "value": [1, 2]}],
            False,
        ),  # a value no string: the rows' way
    ],
    ids=range(4),
)
def test_labelled_rows_are_the_rows_decode_gives(rows: list[object], quick: bool) -> None:
    body = _body(rows)
    got = A.decode_labelled(body, "application/json", 200)
    assert isinstance(got, A.LabelledRows) == quick
    want = decode(body, "application/json", 200)
    assert _labelled_as_rows(got) == [(r["metric"], r["value"][1]) for r in want]


@pytest.mark.parametrize(
    "body",
    [
        _body(DETAIL).replace(b'"instance":"', b'"instance":"\x07', 1),  # a raw control character
        _body(DETAIL).replace(b'"instance":"', b'"instance":"\xff', 1),  # a byte not UTF-8 in the array
    ],
    ids=["control", "not-utf8"],
)
def test_labelled_rows_leave_what_is_not_json_to_decode(body: bytes) -> None:
    with pytest.raises(PrometheusAPIError) as want:
        decode(body, "application/json", 200)
    with pytest.raises(PrometheusAPIError) as got:
        A.decode_labelled(body, "application/json", 200)
    assert str(got.value) == str(want.value)


def test_labelled_rows_keep_decodes_errors_and_cap() -> None:
    with pytest.raises(PrometheusAPIError, match="unexpected result type"):
        A.decode_labelled(
            orjson.dumps({"status": "success", "data": {"resultType": "matrix", "result": []}}), "", 200
        )
    with pytest.raises(PrometheusAPIError, match="bad_data"):
        A.decode_labelled(orjson.dumps({"status": "error", "errorType": "bad_data", "error": "x"}), "", 400)
    before = caps.current()
    caps.configure(rows_per_answer=3)
    try:
        cut: list[int] = []
        got = A.decode_labelled(_body(DETAIL), "application/json", 200, cut=cut)
        assert isinstance(got, A.LabelledRows) and len(got.labels) == len(got.values) == 3 and cut == [2]
    finally:
        caps.configure(before)


def test_identities_read_as_labelled_rows_make_the_same_tasks() -> None:
    """Every task's identity read without an object a row (``LabelledQuery``) gives the identities the
    rows give: the same labels, the same cleaning, the same reuse of a known identity."""
    from cmdare.collectors.prometheus.source import PrometheusAPISource

    rows = [
        {"metric": {"__name__": "cmdare_task_info", "instance": f"10.0.0.{i}:9400", "job": "bench",
                    "exported_job": "big", "task": f"worker-{i}", "role": "worker", "gpu": "K80",
                    "region": "us-east1" if i % 2 else "x" * 300}, "value": [1, "1"]}
        for i in range(20)
    ]  # fmt: skip
    body = _body(rows)
    labelled = A.decode_labelled(body, "application/json", 200)
    assert isinstance(labelled, A.LabelledRows)
    a, b = PrometheusAPISource("http://127.0.0.1:9"), PrometheusAPISource("http://127.0.0.1:9")
    by_rows = a._targets(decode(body, "application/json", 200), 0.0)
    by_text = b._targets(labelled, 0.0)
    assert {i: t.info for i, t in by_rows.items()} == {i: t.info for i, t in by_text.items()}
    again = b._targets(A.decode_labelled(body, "application/json", 200), 1.0)
    kept = [i for i in again if again[i].info is by_text[i].info]  # unchanged labels: the same identity
    assert sorted(kept) == sorted(i for i, t in again.items() if t.info.region == "us-east1")  # (a cut value
    # reads as changed: made again, _made_from)


# --- a column read a chunk at a time straight into the fleet's array (read_pairs → FleetColumns.lay_out)


def _old_column(cols: FleetColumns, rows: list[dict[str, Any]]) -> tuple[np.ndarray, int]:
    """The column as it was read before (the whole answer's rows, converted at once): the reference."""
    keys = [r["metric"].get("instance", "") for r in rows]
    texts = [r["value"][1] for r in rows]
    n = len(cols.instances)
    out = np.full(n + 1, np.nan)
    idx = np.fromiter(map(cols.index.get, keys, repeat(n)), np.intp, len(keys))
    try:
        vals = np.array(texts, dtype=float) if texts else np.empty(0)
    except (TypeError, ValueError):
        vals = np.array([_float(x) for x in texts], dtype=float)
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(vals) & (vals >= 0) & (vals <= M.MAX_ABS_VALUE)
        out[idx] = np.where(ok, vals, np.nan)
    return out[:n], int(np.count_nonzero(~ok & ~np.isnan(vals)))


_VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["+Inf", "-Inf", "NaN", "1e309", "-0", "1e30", "1.0000001e30", "garbage", "", "1_0"]),
)
_INSTANCES = [f"10.0.0.{i}:9400" for i in range(12)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(st.tuples(st.sampled_from([*_INSTANCES, "elsewhere:1"]), _VALUES), max_size=40),
    chunk=st.integers(1, 400),
    cap=st.integers(1, 50),
    known=st.integers(0, 12),
    moved=st.booleans(),
)
def test_a_column_read_in_chunks_is_the_column_read_whole(
    rows: list[tuple[str, str]], chunk: int, cap: int, known: int, moved: bool
) -> None:
    """Any rows (duplicates, instances not known, values no number, infinite, negative, past 1e30), any
    chunk size and rows cap: the same array, the same implausible count and the same rows cut as the
    whole answer's rows read at once; laid out over the tasks known before a new read of who they are,
    then taken by the new columns: as if read over the new ones."""
    body = _body([_row(i, v) for i, v in rows])
    tasks = {i: TaskInfo(job="j", task=f"worker-{n}") for n, i in enumerate(_INSTANCES[:known])}
    now = {i: TaskInfo(job="j", task=f"worker-{n}") for n, i in enumerate(_INSTANCES[known // 2 :])}
    over = FleetColumns(tasks)
    cols = FleetColumns(now, carry=over) if moved else over
    before = caps.current()
    caps.configure(rows_per_answer=cap)
    old_chunk = A.CHUNK_BYTES
    A.CHUNK_BYTES = chunk
    try:
        want_cut: list[int] = []
        kept = decode(body, "application/json", 200, cut=want_cut)
        want, want_bad = _old_column(cols, kept)
        cut: list[int] = []
        laid = A.read_pairs(body, "application/json", 200, "instance", over.lay_out, cut=cut)
    finally:
        A.CHUNK_BYTES = old_chunk
        caps.configure(before)
    cols.take("steps", laid, 1.0)
    assert np.array_equal(cols.arrays["steps"], want, equal_nan=True)
    assert cols.implausible == laid.implausible == want_bad
    assert sum(cut) == sum(want_cut)


def test_a_large_column_is_read_in_chunks_and_keeps_no_text() -> None:
    """A 20,000-row column: read in several chunks, kept as one array over the tasks (no text)."""
    instances = [f"10.{i // 250}.0.{i % 250}:9400" for i in range(20_000)]
    body = _body([_row(i, repr(n / 3)) for n, i in enumerate(instances)])
    cols = FleetColumns({i: TaskInfo(job="j", task=f"worker-{n}") for n, i in enumerate(instances)})
    sizes: list[int] = []

    def lay_out(chunks: Iterator[Pairs]) -> ColumnValues:
        return cols.lay_out(c for c in chunks if not sizes.append(len(c.keys)))

    laid = A.read_pairs(body, "application/json", 200, "instance", lay_out)
    assert len(sizes) > 2 and sum(sizes) == 20_000 and max(sizes) < 10_000
    assert laid.over is cols and laid.stray_keys == [] and laid.values.dtype == np.float64
    assert np.allclose(laid.values, np.arange(20_000) / 3)
