"""A task's whole footprint within the history budget (issue 34: 100,000 tasks in a long session): the
newest rows kept only while a rate needs them, the same figures as when all sixteen were kept, and the
floors a fleet's budget gives way to (the points an hour-long figure needs are kept)."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from cmdare.collectors import metrics as M
from cmdare.collectors.observed import CHECKPOINT_WINDOW_S, _checkpoints
from cmdare.collectors.samples import TaskInfo, TaskPoll
from cmdare.collectors.store import (
    HOUR_MIN_POINTS,
    LATEST_LOOKBACK,
    MIN_POINTS,
    RECENT_POINTS,
    TASK_BYTES,
    SparseWindow,
    Store,
    TaskSeries,
)

KEYS = (M.K_WORKER_STEPS, M.K_STEP_SECONDS_SUM, M.K_STEP_SECONDS_COUNT, M.K_GLOBAL_STEP)
WINDOWS = (10.0, 60.0)  # the views' rate window and the rules' engine window


def _all_rows() -> SparseWindow:
    """A window that keeps every newest row up to :data:`RECENT_POINTS` (the rows before they were cut)."""
    sw = SparseWindow(300.0)
    sw.widest = sw.reach = math.inf
    return sw


@settings(max_examples=80, deadline=None)
@given(
    st.lists(  # points: a time step (a sweep's 2 min, a refresh's 2 s, a scrape's 15 s) and the keys read
        st.tuples(st.sampled_from([2.0, 15.0, 120.0, 130.0]), st.sets(st.sampled_from(KEYS), min_size=1)),
        min_size=1,
        max_size=40,
    ),
    st.sampled_from([0.0, 30.0, 300.0]),  # the sparse window (0: none; 300: 2.5 sweeps of 2 min)
)
def test_fewer_newest_rows_give_the_same_rates_ratios_and_latest_values(steps, sparse):
    """A task keeping only the newest rows its readers need computes every rate, ratio and latest value
    exactly as a task keeping all sixteen (full precision: counters near 1.7e9 that float32 would round)."""
    cut, whole = TaskSeries(TaskInfo(job="j", task="w"), 64), TaskSeries(TaskInfo(job="j", task="w"), 64)
    cut.sparse = SparseWindow(sparse)
    for w in WINDOWS:  # a reader asks the same windows every refresh
        cut.sparse.asked(w)
    whole.sparse = _all_rows()
    whole.sparse.s = sparse
    t = 1.7e9
    kept: list[tuple[float, frozenset[str]]] = []  # the rows as the rule reads: at most 16, then the
    for n, (dt, keys) in enumerate(steps):  # oldest while the next one already reaches back over reach
        t += dt  # and, among the 8 newest, a newer row read again every key it read
        values = {k: 1.7e9 + 3.0 * n + i for i, k in enumerate(KEYS) if k in keys}
        cut.append(t, values)
        whole.append(t, values)
        kept = [*kept[-(RECENT_POINTS - 1) :], (t, frozenset(keys))]
        while len(kept) > 1 and kept[1][0] < t - cut.sparse.reach:
            if len(kept) <= LATEST_LOOKBACK and not kept[0][1] <= frozenset().union(
                *(k for _, k in kept[1:])
            ):
                break
            kept.pop(0)
        assert cut._recent.times() == [a for a, _ in kept] and len(whole._recent) == min(n + 1, RECENT_POINTS)
        for w in WINDOWS:
            assert cut.rate(M.K_WORKER_STEPS, w) == whole.rate(M.K_WORKER_STEPS, w)
            got = cut.mean_of_ratio(M.K_STEP_SECONDS_SUM, M.K_STEP_SECONDS_COUNT, w)
            want = whole.mean_of_ratio(M.K_STEP_SECONDS_SUM, M.K_STEP_SECONDS_COUNT, w)
            assert got == want or (got != got and want != want)
        for k in KEYS:
            assert cut.latest(k) == whole.latest(k)
    assert min(len(steps), 2) <= len(cut._recent) <= len(whole._recent) <= RECENT_POINTS


def test_a_swept_task_keeps_four_rows_and_its_rate_is_the_definition():
    """A large fleet's task, read every two minutes with a 5-minute sparse window: 4 newest rows (8 before),
    and its rate is the counter's increase over its last two points over their measured time apart."""
    store = Store()
    store.set_sparse_window(300.0)
    info = TaskInfo(job="j", task="w")
    for n in range(20):
        t = 1.7e9 + 120.0 * n + (n % 3)  # a sweep a little late now and then
        store.add(
            TaskPoll(source="s", t=t, ok=True, info=info, values={M.K_WORKER_STEPS: 1.7e9 + 7.0 * n * n})
        )
    ts = store.tasks["j/w"]
    assert len(ts._recent) == 4
    t18, t19 = 1.7e9 + 120.0 * 18 + 0, 1.7e9 + 120.0 * 19 + 1
    assert ts.rate(M.K_WORKER_STEPS, 10.0) == (7.0 * 19 * 19 - 7.0 * 18 * 18) / (t19 - t18)


def test_latest_reaches_past_the_kept_rows_into_the_grid():
    """A gauge last read 10 points back is found with a lookback of 12 though only 4 rows are kept (its
    row went once 8 points newer: past what latest() reads by default), as float32 from the grid."""
    ts = TaskSeries(TaskInfo(job="j", task="w"), 64)
    ts.sparse = SparseWindow(300.0)
    for n in range(20):
        ts.append(120.0 * n, {M.K_WORKER_STEPS: float(n), **({"gauge": 5.5} if n == 9 else {})})
    assert len(ts._recent) == 4
    assert ts.latest("gauge") is None and ts.latest("gauge", 12) == 5.5 and ts.latest("gauge", 10) is None


def test_at_fleet_scale_the_budget_counts_the_whole_task_and_floors_keep_an_hour_for_checkpoints():
    """With the budget's share of a task below what it takes besides its points (100,000 tasks in 104 MB),
    each task keeps :data:`MIN_POINTS`; a task with a checkpoint series keeps :data:`HOUR_MIN_POINTS`, so a
    long session still shows its checkpoint interval (writes 20 min apart, read every 2 min)."""
    store = Store(
        capacity=1800, history_bytes=200 * 500
    )  # 500 bytes a task: under what one takes besides its ring
    store.set_sparse_window(300.0)
    for n in range(40):  # 80 min of 2-minute sweeps
        t = 1.7e9 + 120.0 * n
        for i in range(200):
            values = {M.K_WORKER_STEPS: 1.7e9 + n, M.K_GLOBAL_STEP: float(n)}
            if i == 0:
                values[M.K_CHECKPOINT_SECONDS_COUNT] = float(n // 10)  # a write every 20 min
                values[M.K_CHECKPOINT_SECONDS_SUM] = 3.0 * (n // 10)
            store.add(
                TaskPoll(source=f"s{i}", t=t, ok=True, info=TaskInfo(job="j", task=f"w{i}"), values=values)
            )
        store.release_figures()
    plain, checkpointed = store.tasks["j/w1"], store.tasks["j/w0"]
    assert len(plain.times) == MIN_POINTS and len(plain._recent) == 4
    # no point twice: the ring holds the 2 older ones, the newest rows the 4 newest (8 + 8 before)
    assert plain._n == plain._slots == MIN_POINTS - 4
    assert plain.times.tail() == [1.7e9 + 120.0 * n for n in range(40 - MIN_POINTS, 40)]
    assert len(checkpointed.times) == HOUR_MIN_POINTS
    assert checkpointed.times.tail()[-1] - checkpointed.times.tail()[0] >= CHECKPOINT_WINDOW_S - 240
    assert _checkpoints(checkpointed, 1.7e9 + 120.0 * 40)[2] == 1200.0  # (last, mean write, interval)
    # the whole task counted: at 10,000 tasks' share (10x) the points fit in the share less the rest
    roomy = Store(capacity=1800, history_bytes=200 * 10_000)
    for i in range(200):
        roomy.add(
            TaskPoll(source=f"s{i}", t=1.0, ok=True, info=TaskInfo(job="j", task=f"w{i}"), values={"a": 1.0})
        )
    allowed = roomy.allowed(1, rows=RECENT_POINTS)
    assert (
        TASK_BYTES + 8 * (RECENT_POINTS + 1) * 2 + allowed * 12
        <= 10_000
        < TASK_BYTES + 8 * 17 * 2 + (allowed + 1) * 12
    )


@settings(max_examples=80, deadline=None)
@given(
    st.lists(  # polls: a time step (0: the same scrape time again) and the keys read with their values
        st.tuples(
            st.sampled_from([0.0, 0.0, 2.0]),
            st.dictionaries(
                st.sampled_from(("a", "b", "c")), st.floats(0, 1e9) | st.just(math.nan), max_size=3
            ),
        ),
        max_size=30,
    ),
)
def test_the_newest_values_are_the_merge_of_the_polls_of_the_newest_time(steps):
    """What is known at the newest scrape time (kept in the newest row until a second poll of that time
    comes): each key's value from the polls of that time, the last read of it; unread keys unknown."""

    def same(a: float, b: float) -> bool:
        return a == b or (a != a and b != b)

    ts = TaskSeries(TaskInfo(job="j", task="w"), 16)
    t, last_t, known = 1.7e9, math.nan, {}
    for dt, values in steps:
        t += dt
        repeat = ts.is_repeat(t, values)
        assert repeat == (t == last_t and all(k in known and same(known[k], v) for k, v in values.items()))
        if not repeat:
            ts.append(t, values)
            known = {**known, **values} if t == last_t else dict(values)
            last_t = t
        for k in ("a", "b", "c"):
            got = ts.last_value(k)
            assert (got is None) == (k not in known) and (got is None or same(got, known[k]))


def test_at_fleet_scale_a_fast_polled_task_keeps_its_newest_rows_and_nothing_twice():
    """A task polled every 2 s holds :data:`RECENT_POINTS` rows (its rate windows reach further back): at
    the floor they are its points, its ring holds none, and a window past the rows (the rules' minute)
    reads them all, as when the ring held the same 16 besides."""
    store = Store(capacity=1800, history_bytes=200 * 500)  # under what a task takes besides its ring
    for n in range(60):
        for i in range(200):
            values = {M.K_WORKER_STEPS: 1.7e9 + 3.0 * n * n}
            store.add(
                TaskPoll(
                    source=f"s{i}", t=2.0 * n, ok=True, info=TaskInfo(job="j", task=f"w{i}"), values=values
                )
            )
        store.release_figures()
    ts = store.tasks["j/w3"]
    assert ts.rate(M.K_WORKER_STEPS, 60.0) is not None
    assert len(ts._recent) == RECENT_POINTS == len(ts.times) and ts._slots == 0
    t, v = ts.window_values(M.K_WORKER_STEPS, 60.0)
    assert t == [2.0 * n for n in range(60 - RECENT_POINTS, 60)]
