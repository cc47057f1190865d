"""A task's newest rows below :data:`LATEST_LOOKBACK` (issue 34: 100,000 swept tasks within the history
budget): a row goes once a newer one read again every key it read, and every reader of the task answers
exactly as when the 8 newest rows were always kept (the rule before, copied here as the reference)."""

from __future__ import annotations

import math
from array import array

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cmdare.collectors import metrics as M
from cmdare.collectors.observed import _checkpoints, node_view, training_figures
from cmdare.collectors.samples import TaskInfo
from cmdare.collectors.store import (
    FLOAT64,
    LATEST_LOOKBACK,
    RECENT_POINTS,
    SparseWindow,
    TaskSeries,
)

# counters near 1.7e9 (float32 rounds them: a row's float64 value and the grid's differ), a ratio's two
# series, a gauge, and the series a view reads over an hour (loss, checkpoints)
KEYS = (
    M.K_WORKER_STEPS,
    M.K_GLOBAL_STEP,
    M.K_STEP_SECONDS_SUM,
    M.K_STEP_SECONDS_COUNT,
    M.K_LOSS,
    M.K_CHECKPOINT_SECONDS_COUNT,
    M.K_LAST_CHECKPOINT,
)
WINDOWS = (10.0, 60.0)  # the views' rate window and the rules' engine window, asked every refresh


class EightRows(TaskSeries):
    """The rows' rule before: at least :data:`LATEST_LOOKBACK` newest rows kept, whatever they hold
    (``TaskSeries._append_row`` as it was, the rest of the task the same)."""

    __slots__ = ()

    def _append_row(self, t: float, row: list[float], reach: float) -> None:
        buf, at, stride = self._buf, self._rows_at(), len(row) + 1
        held = (len(buf) - at) // stride
        drop = 1 if held >= RECENT_POINTS else 0
        since = t - reach
        while held - drop >= LATEST_LOOKBACK and drop + 1 < held and buf[at + (drop + 1) * stride] < since:
            drop += 1
        if not drop:
            self._buf = buf + array(FLOAT64, (t, *row))
            return
        self._full = True
        end = len(buf)
        if drop == 1:
            gone_t, gone = buf[at], buf[at + 1 : at + stride]
            buf[at : end - stride] = buf[at + stride : end]
            buf[end - stride] = t
            buf[end - stride + 1 : end] = array(FLOAT64, row)
            self._to_ring(gone_t, gone, held)
            return
        let_go = buf[at : at + drop * stride]
        self._buf = buf[:at] + buf[at + drop * stride :] + array(FLOAT64, (t, *row))
        rows = held - drop + 1
        for start in range(0, len(let_go), stride):
            self._to_ring(let_go[start], let_go[start + 1 : start + stride], rows)


def _same(a: object, b: object) -> bool:
    """Equal, NaN equal to NaN (floats, lists and tuples of them, or any value by its repr)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (a != a and b != b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b or repr(a) == repr(b)


def _answers(ts: TaskSeries, now: float) -> dict[str, object]:
    """What every public reader of a task answers (the figures memoised at this point asked first)."""
    out: dict[str, object] = {}
    for k in (*KEYS, "absent"):
        for lookback in range(1, RECENT_POINTS + 1):
            out[f"latest {k} {lookback}"] = ts.latest(k, lookback)
        out[f"last {k}"] = ts.last_value(k)
        for w in WINDOWS:
            out[f"rate {k} {w}"] = ts.rate(k, w)
        for w in (*WINDOWS, 3600.0):
            out[f"window_values {k} {w}"] = ts.window_values(k, w)
            t, v = ts.window(k, w)
            out[f"window {k} {w}"] = (t.tolist(), v.tolist(), str(t.dtype), str(v.dtype))
        if k in ts.values:
            out[f"column {k}"] = ts.values[k].tail()
            out[f"column numpy {k}"] = ts.values[k].last().tolist()
    for w in WINDOWS:
        out[f"ratio {w}"] = ts.mean_of_ratio(M.K_STEP_SECONDS_SUM, M.K_STEP_SECONDS_COUNT, w)
    out["times"] = ts.times.tail()
    out["times numpy"] = ts.times.last().tolist()
    out["count_from"] = [ts.times.count_from(now - s) for s in (0.0, 10.0, 130.0, 400.0, 4000.0)]
    out["keys"] = ts.keys()
    out["gpu"] = ts.gpu_detail()
    out["checkpoints"] = _checkpoints(ts, now)
    out["training"] = training_figures([ts])
    out["view"] = node_view(ts, None, now)
    return out


@settings(max_examples=150, deadline=None)
@given(
    st.lists(  # polls: a time step (0: the same scrape time again, a second value group) and what it read
        st.tuples(
            st.sampled_from([0.0, 2.0, 15.0, 120.0, 130.0]),
            st.dictionaries(
                st.sampled_from(KEYS),
                st.sampled_from([0.0, 1.0, 3.5]) | st.just(math.nan) | st.just(math.inf),
                max_size=len(KEYS),
            ),
        ),
        min_size=1,
        max_size=40,
    ),
    st.sampled_from([0.0, 30.0, 300.0]),  # the sparse window (0: none; 300: 2.5 sweeps of 2 min)
    st.booleans(),  # every key read at every poll (a swept task) or some at random
)
def test_every_reader_answers_as_with_eight_rows_kept(steps, sparse, whole):
    """Random polls (keys missing at random, NaN read, polls of the same scrape time, dense and sparse
    timing): the task keeping only the rows its readers need answers every reader exactly as the task
    keeping 8 (full-precision values near 1.7e9, which float32 would round), and holds no more rows."""
    new, old = TaskSeries(TaskInfo(job="j", task="w"), 1800), EightRows(TaskInfo(job="j", task="w"), 1800)
    new.sparse, old.sparse = SparseWindow(sparse), SparseWindow(sparse)
    for w in WINDOWS:  # the widest window is asked from the first refresh on
        new.sparse.asked(w)
        old.sparse.asked(w)
    t = 1.7e9
    for n, (dt, read) in enumerate(steps):
        t += dt
        values = {k: 1.7e9 + 7.0 * n + x for k, x in (dict.fromkeys(KEYS, 0.0) if whole else read).items()}
        assert new.is_repeat(t, values) == old.is_repeat(t, values)
        if not new.is_repeat(t, values):
            new.append(t, values)
            old.append(t, values)
        got, want = _answers(new, t), _answers(old, t)
        for name, value in want.items():
            assert _same(got[name], value), (name, got[name], value)
        assert len(new._recent) <= len(old._recent)
        # each key's newest value among the last LATEST_LOOKBACK points is in a kept row
        rows_t = new._recent.times()
        for k in new.keys():
            column = new._recent.column(new._index[k])
            in_rows = next((x for x in reversed(column) if x == x), None)
            assert in_rows == new.latest(k) or (len(rows_t) > LATEST_LOOKBACK and new.latest(k) is None)


def test_a_swept_task_keeps_the_rows_its_rate_reaches_over():
    """A large fleet's task read every 2 min with all its keys, a 5-minute sparse window: 4 newest rows
    (the newest older than 5 minutes the last of them), 8 before; its rate is the counter's increase over
    its last two points over their measured time apart (full precision)."""
    ts = TaskSeries(TaskInfo(job="j", task="w"), 1800)
    ts.sparse = SparseWindow(300.0)
    for n in range(20):
        ts.append(1.7e9 + 120.0 * n, {M.K_WORKER_STEPS: 1.7e9 + 7.0 * n * n, "gauge": float(n)})
    assert ts._recent.times() == [1.7e9 + 120.0 * n for n in range(16, 20)]
    assert ts.rate(M.K_WORKER_STEPS, 10.0) == (7.0 * 19 * 19 - 7.0 * 18 * 18) / 120.0
    assert ts.latest("gauge") == 19.0


def test_a_value_group_read_in_turns_keeps_the_row_of_its_newest_values():
    """Two value groups read in turns (a mid-size Prometheus source): the row of the group read last
    time stays (its keys' newest values), the rows before it go once the rate's reach is covered."""
    ts = TaskSeries(TaskInfo(job="j", task="w"), 1800)
    ts.sparse = SparseWindow(300.0)
    for n in range(20):
        group = {"a": 1.7e9 + n} if n % 2 else {"b": 1.7e9 + n}
        ts.append(1.7e9 + 120.0 * n, {M.K_WORKER_STEPS: 1.7e9 + n, **group})
    assert len(ts._recent) == 4 and ts.latest("a") == 1.7e9 + 19 and ts.latest("b") == 1.7e9 + 18
    for n in range(20, 24):  # "b" no longer read: its newest row stays while latest() reads that far back
        ts.append(1.7e9 + 120.0 * n, {M.K_WORKER_STEPS: 1.7e9 + n, "a": 1.7e9 + n})
    assert ts.latest("b") == 1.7e9 + 18 and ts._recent.times()[0] == 1.7e9 + 120.0 * 18
    for n in range(24, 27):  # 8 polls on, it is past the lookback: unknown, and the row goes
        ts.append(1.7e9 + 120.0 * n, {M.K_WORKER_STEPS: 1.7e9 + n, "a": 1.7e9 + n})
    assert ts.latest("b") is None and len(ts._recent) == 4
    assert ts.latest("b", 9) == float(np.float32(1.7e9 + 18))  # further back: the grid's float32
