"""A task's compact storage (issue 34: 100,000 tasks in the store): the value grid, the newest points at
full precision, what the newest scrape time read, and the figures a large store lets go of after a cycle,
each checked against a plain reference of what was appended."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cmdare.collectors import metrics as M
from cmdare.collectors.samples import TaskInfo, TaskPoll
from cmdare.collectors.store import FIGURES_KEPT_UNDER, RECENT_POINTS, Store, TaskSeries

KEYS = ("a", "b", "c", "d")


def _reference(
    points: list[tuple[float, dict[str, float]]], keys: list[str], n: int
) -> dict[str, list[float]]:
    """Each key's newest ``n`` values as float32, NaN where a point did not read it (a plain list)."""
    return {k: [float(np.float32(v.get(k, math.nan))) for _, v in points[-n:]] if n else [] for k in keys}


@settings(max_examples=120, deadline=None)
@given(
    st.integers(1, 24),  # capacity
    st.lists(  # points: a time step (0: the same scrape time again) and the keys read with their values
        st.tuples(
            st.sampled_from([0.0, 0.5, 2.0]),
            st.dictionaries(st.sampled_from(KEYS), st.floats(0, 1e9, allow_nan=False), max_size=4),
        ),
        max_size=60,
    ),
)
def test_the_grid_holds_what_each_key_read_in_the_order_met(capacity, steps):
    """Keys met late read NaN back to the task's first point; the grid grows with the time ring and then
    overwrites its oldest points; every key's column, window and length agree with a plain list."""
    ts = TaskSeries(TaskInfo(job="j", task="w"), capacity)
    points: list[tuple[float, dict[str, float]]] = []
    order: list[str] = []
    t = 0.0
    for dt, values in steps:
        t += dt
        ts.append(t, values)
        points.append((t, values))
        order += [k for k in values if k not in order]
    held = min(len(points), capacity)
    assert ts.keys() == order and list(ts.values) == order and len(ts.values) == len(order)
    assert ts.times.tail() == [p[0] for p in points[-held:]] if held else ts.times.tail() == []
    want = _reference(points, order, held)
    for k in order:
        col = ts.values[k]
        assert len(col) == held
        assert np.array_equal(np.array(col.tail(), np.float32), np.array(want[k], np.float32), equal_nan=True)
        assert col.last().dtype == np.float32 and np.array_equal(col.last(), col.tail(), equal_nan=True)
        tt, vv = ts.window(k, 1e9)
        assert tt.tolist() == ts.times.tail() and np.array_equal(vv, col.last(), equal_nan=True)
        assert ts.window_values(k, 1e9)[1] == pytest.approx(col.tail(), nan_ok=True)
    rows = len(ts._recent)  # the newest rows: the newest points' times and values at full precision
    assert 0 < rows <= min(len(points), RECENT_POINTS) if points else rows == 0
    assert ts._recent.times() == [p[0] for p in points[len(points) - rows :]]
    for i, k in enumerate(order):
        got, want_rows = ts._recent.column(i), [v.get(k, math.nan) for _, v in points[len(points) - rows :]]
        assert got == pytest.approx(want_rows, nan_ok=True, rel=0, abs=0)
    # one buffer a task: the ring of the points older than the rows (times, and the float32 grid two to a
    # float64 slot), then the newest rows; no point in both (the ring is empty until the rows let one go)
    newest = 0 if ts._last is None else 8 * len(ts._last)  # the newest values count too
    grid = 4 * ts._slots * len(order)
    assert ts.times.nbytes == 8 * (ts._slots + rows)
    assert len(ts._buf) == ts._slots + (grid + 4) // 8 + rows * (len(order) + 1)
    assert ts._n <= ts._slots and (ts._n == 0 or ts._recent.full) and ts._n + rows >= held
    assert ts.nbytes == 8 * ts._slots + 8 * ((grid + 4) // 8) + 8 * rows * (len(order) + 1) + newest
    assert "zz" not in ts.values and ts.window("zz", 10.0)[0].size == 0


def test_rates_read_the_newest_points_at_full_precision_with_a_key_met_late():
    """A counter near 1.7e9 (a Unix time, a byte count) rates exactly from the newest points (float32
    would round it to 128), also after another key widened the rows; past the newest points the rows
    keep :data:`RECENT_POINTS` of them."""
    ts = TaskSeries(TaskInfo(job="j", task="w"), 64)
    for i in range(RECENT_POINTS + 5):
        values = {M.K_WORKER_STEPS: 1.7e9 + 3.0 * i}
        if i >= 10:  # met late
            values[M.K_EXAMPLES] = 32.0 * i
        ts.append(2.0 * i, values)
    assert ts.rate(M.K_WORKER_STEPS, 10.0) == 1.5  # 3 steps every 2 s, not a float32 step
    assert ts.rate(M.K_EXAMPLES, 10.0) == 16.0
    assert len(ts._recent) == RECENT_POINTS
    assert ts._recent.column(1)[: RECENT_POINTS - 11] == pytest.approx([math.nan] * 5, nan_ok=True)
    assert ts.latest(M.K_EXAMPLES) == 32.0 * (RECENT_POINTS + 4)


def test_the_newest_scrape_time_merges_the_series_read_in_turns():
    """Polls of one scrape time reading different series repeat only what was read at that time; a new
    time starts afresh; keys past the series cap are known all the same."""
    ts = TaskSeries(TaskInfo(job="j", task="w"), 16, max_series=2)
    ts.append(10.0, {"a": 1.0})
    assert not ts.is_repeat(10.0, {"b": 2.0}) and ts.is_repeat(10.0, {"a": 1.0})
    ts.append(10.0, {"b": 2.0, "c": 3.0})  # "c": past the cap of two series
    assert ts.keys() == ["a", "b"]
    assert ts.is_repeat(10.0, {"a": 1.0, "b": 2.0, "c": 3.0}) and not ts.is_repeat(10.0, {"b": 2.5})
    assert (ts.last_value("a"), ts.last_value("b"), ts.last_value("c")) == (1.0, 2.0, 3.0)
    ts.append(12.0, {"b": 4.0})
    assert ts.last_value("a") is None and ts.last_value("c") is None and ts.last_value("b") == 4.0
    assert not ts.is_repeat(12.0, {"a": 1.0}) and ts.is_repeat(12.0, {"b": 4.0})
    nan = TaskSeries(TaskInfo(job="j", task="n"), 16)
    nan.append(1.0, {"a": math.nan})
    assert nan.is_repeat(1.0, {"a": math.nan}) and not nan.is_repeat(2.0, {"a": math.nan})


def _poll(i: int, t: float, steps: float) -> TaskPoll:
    info = TaskInfo(job="j", task=f"w{i}")
    return TaskPoll(source=f"s{i}", t=t, ok=True, info=info, values={M.K_WORKER_STEPS: steps})


@pytest.mark.parametrize("tasks", [3, FIGURES_KEPT_UNDER + 1])
def test_a_large_store_lets_its_figures_go_after_a_cycle_and_computes_the_same(tasks):
    """Below :data:`FIGURES_KEPT_UNDER` tasks a figure is memoised until the task's next point; past it
    the memo goes at the next cycle, and the figure computed again is the same."""
    store = Store(capacity=16)
    for t in (0.0, 2.0):
        for i in range(tasks):
            store.add(_poll(i, t, 5.0 * t + i))
    ts = store.tasks["j/w0"]
    assert ts.rate(M.K_WORKER_STEPS, 10.0) == 5.0 and ts._memo is not None
    store.release_figures()
    assert (ts._memo is None) == (tasks > FIGURES_KEPT_UNDER)
    assert ts.rate(M.K_WORKER_STEPS, 10.0) == 5.0
    store.release_figures()
    store.release_figures()  # its book was emptied: nothing held twice, nothing left behind
    assert not store._figured


def test_an_identity_is_made_again_only_when_the_labels_it_is_made_of_change():
    """The Prometheus source keeps a task's identity while the labels it is made of stay the same (the
    same object: nothing downstream is rebuilt), makes it again when one changes, and holds the values
    many tasks share (job, role, GPU, region) as one string each."""
    from cmdare.collectors.prometheus.source import PrometheusAPISource

    src = PrometheusAPISource("http://127.0.0.1:9", 'job="x"')

    def row(i: int, **more: str) -> dict:
        labels = {"__name__": "cmdare_task_info", "instance": f"10.0.0.{i}:9400", "job": "x"}
        labels |= {"exported_job": "big", "task": f"worker-{i}", "role": "worker", "gpu": "K80", **more}
        return {"metric": {k: "".join(v) for k, v in labels.items()}, "value": [0, "1"]}  # fresh strings

    first = src._targets([row(i) for i in range(3)], 0.0)
    again = src._targets([row(i, scrape_pool="other") for i in range(3)], 1.0)  # a label no identity reads
    assert [t.info for t in again.values()] == [t.info for t in first.values()]
    assert all(a.info is b.info for a, b in zip(first.values(), again.values(), strict=True))
    moved = src._targets([row(0, region="us-east1"), row(1), row(2)], 2.0)
    infos = [t.info for t in moved.values()]
    assert infos[0].region == "us-east1" and infos[0] is not first["10.0.0.0:9400"].info
    assert infos[1] is first["10.0.0.1:9400"].info
    assert infos[1].gpu is infos[2].gpu and infos[1].job is infos[2].job  # one string for shared values


def test_the_tasks_on_a_host_follow_them_whether_one_or_several():
    """A host holds one task or several; a task that moves leaves its old host; a host's detail marks
    the tasks on it (and only them) as changed."""
    store = Store(capacity=16)

    def poll(task: str, host: str, t: float = 1.0, host_only: bool = False) -> TaskPoll:
        info = TaskInfo(job="j", task=task, role="node" if host_only else "worker")
        return TaskPoll(source=task, t=t, ok=True, info=info, values={"x": t}, host=host, host_only=host_only)

    store.add(poll("a", "h1"))
    store.add(poll("b", "h1"))
    store.add(poll("c", "h2"))
    assert store.has_tasks_on("h1") and store.has_tasks_on("h2") and not store.has_tasks_on("h3")
    store.add(poll("c", "h3", 2.0))  # moved
    assert not store.has_tasks_on("h2") and store.has_tasks_on("h3")
    store.add(poll("a", "h3", 2.0))
    store.add(poll("b", "h3", 2.0))
    assert not store.has_tasks_on("h1")
    store.take_dirty()
    store.add(poll("n3", "h3", 3.0, host_only=True))
    assert store.take_dirty() == {"j/a", "j/b", "j/c"}
    store.add(poll("n1", "h1", 3.0, host_only=True))
    assert store.take_dirty() == set()


def _rate_by_definition(ts: TaskSeries, key: str, seconds: float) -> tuple[list[float], list[float]]:
    """The points a rate reads, as the store defines them: the window's, else the sparse window's last two."""
    t, v = ts._points(key, seconds)
    return (t, v) if len(v) >= 2 else ts._sparse_points(key, seconds)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(  # points: a time step (a fleet's sweep: minutes apart; a dense poll: 2 s) and what each read
        st.tuples(
            st.sampled_from([0.0, 2.0, 7.0, 60.0, 130.0, 400.0]),
            st.dictionaries(
                st.sampled_from(("c", "s", "n")),
                st.one_of(st.floats(0, 1e6, allow_nan=False), st.just(math.nan)),
                max_size=3,
            ),
        ),
        max_size=30,
    ),
    st.sampled_from([0.0, 300.0]),  # the sparse window: none, or a fleet's 2.5 sweeps
    st.sampled_from([2.0, 10.0, 60.0]),  # the rate window
)
def test_one_walk_over_the_newest_points_reads_what_the_two_windows_read(steps, sparse_s, seconds):
    """:meth:`TaskSeries._windows` (a swept task's rates and ratios from one walk over its newest points)
    and :meth:`TaskSeries._window_values` (a ratio's: the values only) give the points, rates and ratios of
    the two windows read one after the other (the definition)."""
    ts = TaskSeries(TaskInfo(job="j", task="w"), 64)
    ts.sparse_s = sparse_s
    t = 1.7e9
    for dt, values in steps:
        t += dt
        ts.append(t, values)
    for key in ("c", "s", "n", "absent"):
        want = _rate_by_definition(ts, key, seconds)
        assert ts._rate_points(key, seconds) == want
        got = ts._windows(key, seconds)
        if got is not None:
            assert got[0] == ts._points(key, seconds) and got[1] == ts._sparse_points(key, seconds)
        values = ts._window_values(key, seconds)  # what a ratio reads: the same windows' values
        assert values == (None if got is None else (got[0][1], got[1][1]))
    for num, den in (("s", "c"), ("c", "s"), ("n", "absent")):
        _, d = ts._points(den, seconds)
        a, b = (ts._points, ts._points) if len(d) >= 2 else (ts._sparse_points, ts._sparse_points)
        nv, dv = a(num, seconds)[1], b(den, seconds)[1]
        dn = _increase_ref(dv) if len(dv) >= 2 else math.nan
        want_ratio = None if not dn > 0 else (_increase_ref(nv) if len(nv) >= 2 else math.nan) / dn
        got_ratio = ts.mean_of_ratio(num, den, seconds)
        assert got_ratio == want_ratio or (got_ratio != got_ratio and want_ratio != want_ratio)


def _increase_ref(v: list[float]) -> float:
    total = 0.0
    for a, b in zip(v, v[1:], strict=False):
        total += b - a if b >= a else b
    return total


@pytest.mark.parametrize("tasks", [3, FIGURES_KEPT_UNDER + 1])
def test_a_new_sparse_window_reaches_every_task_and_the_rates_memoised_before_go(tasks):
    """The store's tasks share its sparse window: a new one is every task's (met before or after) and no
    rate memoised with the old one survives it, in a small store (memos kept over cycles) and past
    :data:`FIGURES_KEPT_UNDER` tasks (only the book's tasks hold memos)."""
    store = Store(capacity=16)
    for t in (0.0, 120.0):  # a sweep's two reads, two minutes apart: no two points in 60 s
        for i in range(tasks):
            store.add(_poll(i, t, t + i))
    first = store.tasks["j/w0"]
    assert first.rate(M.K_WORKER_STEPS, 10.0) is None  # six windows back: 60 s
    store.release_figures()  # a small store keeps its memo, out of the book
    assert first.rate(M.K_WORKER_STEPS, 10.0) is None
    store.set_sparse_window(300.0)
    store.add(_poll(tasks, 120.0, 1.0))  # met after the change
    assert first.sparse_s == store.tasks[f"j/w{tasks}"].sparse_s == store.sparse_s == 300.0
    assert first.rate(M.K_WORKER_STEPS, 10.0) == 1.0
    assert store.tasks[f"j/w{tasks - 1}"].rate(M.K_WORKER_STEPS, 10.0) == 1.0
    store.set_sparse_window(0.0)
    assert first.rate(M.K_WORKER_STEPS, 10.0) is None


def test_the_roles_index_holds_every_role_but_the_workers_and_follows_a_change():
    """:attr:`Store.roles` indexes the PS (what the rules ask for) and every role but the workers (a
    fleet's 100,000 workers are not indexed twice); a task whose role changes moves in or out."""
    store = Store(capacity=16)
    for name, role in (("w0", "worker"), ("p0", "ps"), ("c0", "chief")):
        info = TaskInfo(job="j", task=name, role=role)
        store.add(TaskPoll(source=name, t=1.0, ok=True, info=info, values={M.K_WORKER_STEPS: 1.0}))
    assert {r: list(ts) for r, ts in store.roles.items()} == {"ps": ["j/p0"], "chief": ["j/c0"]}
    became = TaskInfo(job="j", task="w0", role="ps")  # the same key (a named task): now a PS
    store.add(TaskPoll(source="w0", t=2.0, ok=True, info=became, values={M.K_WORKER_STEPS: 2.0}))
    assert sorted(store.roles["ps"]) == ["j/p0", "j/w0"]
    back = TaskInfo(job="j", task="w0", role="worker")
    store.add(TaskPoll(source="w0", t=3.0, ok=True, info=back, values={M.K_WORKER_STEPS: 3.0}))
    assert list(store.roles["ps"]) == ["j/p0"] and len(store.members["j"]) == 3


def test_values_past_float32_range_read_infinite_in_the_grid_and_exact_in_the_newest_rows():
    """A value float32 cannot hold (a garbage counter) is infinite where the grid holds it, as ``array``
    stored it, and exact in the newest rows; nothing raises on its way into the ring."""
    ts = TaskSeries(TaskInfo(job="j", task="w"), 64)
    for i in range(RECENT_POINTS + 4):  # the first 4 go into the ring
        ts.append(2.0 * i, {"x": 1e39 * (-1) ** i, "y": float(i)})
    assert ts.values["x"].tail()[:4] == [math.inf, -math.inf, math.inf, -math.inf]
    assert ts.values["x"].tail()[-1] == -math.inf and ts.values["y"].tail() == [float(i) for i in range(20)]
    assert ts.latest("x") == -1e39 and ts._n == 4
