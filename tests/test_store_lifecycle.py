"""Ring buffers stay bounded, counter resets are handled once, and task states follow the evidence."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cmdare.collectors import metrics as M
from cmdare.collectors.lifecycle import Lifecycle
from cmdare.collectors.samples import TaskInfo, TaskPoll, TaskState
from cmdare.collectors.store import Ring, Store, TaskSeries

W = TaskInfo(job="j", task="w1", role="worker", gpu="P100", region="us-central1", provisioning="preemptible")
W2 = TaskInfo(job="j", task="w2", role="worker", gpu="P100", region="us-central1", provisioning="preemptible")


def ok(t: float, info: TaskInfo = W, **values: float) -> TaskPoll:
    return TaskPoll(source=f"http://{info.task}", t=t, ok=True, info=info, values=values)


def fail(t: float, info: TaskInfo = W, error: str = "connection refused") -> TaskPoll:
    return TaskPoll(source=f"http://{info.task}", t=t, ok=False, info=None, error=error)


def test_ring_is_bounded_and_ordered():
    r = Ring(4)
    for i in range(10):
        r.append(i)
    assert len(r) == 4
    assert list(r.last()) == [6, 7, 8, 9]
    assert list(r.last(2)) == [8, 9]


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 40),  # capacity
    st.integers(1, 40),  # initial size
    st.lists(st.floats(0.0, 5.0), max_size=120),  # seconds since the previous point (0: the same time)
    st.lists(st.integers(1, 64), min_size=1, max_size=4),  # the budget's limit on each append, cycled
)
def test_ring_matches_a_list_reference(capacity, initial, gaps, limits):
    """The ring (stdlib array) holds what a plain list kept to its size would: growth by doubling up
    to the capacity or the budget's limit, then its oldest points overwritten; ``last`` gives numpy
    arrays of the ring's dtype, ``tail`` Python floats, ``count_from`` a bisection of the times."""
    import itertools

    from cmdare.collectors.store import FLOAT64, Ring

    ring, ref, size, t = Ring(capacity, FLOAT64, initial), [], min(capacity, initial), 0.0
    for gap, limit in zip(gaps, itertools.cycle(limits)):
        t += gap
        if len(ref) == size and size < min(capacity, limit):  # full: it doubles, within the limit
            size = min(capacity, limit, size * 2)
        ring.append(t, limit)
        ref = (ref + [t])[-size:]
        assert ring.nbytes == size * 8
    assert len(ring) == len(ref) and ring.tail() == ref and ring.tail(3) == ref[-3:]
    assert ring.last().dtype == np.float64 and ring.last().tolist() == ref
    for x in [-1.0, *ref[:: max(1, len(ref) // 7)], t, t + 1, float("nan")]:
        assert ring.count_from(x) == sum(v >= x for v in ref)


def test_values_are_float32_and_times_float64_as_numpy_arrays():
    """The numpy readers hand out what they did when the rings were numpy arrays; ``window_values``
    the same points as Python floats."""
    ts = TaskSeries(TaskInfo(job="j", task="w"), capacity=16)
    for i in range(20):  # wraps around the 16-point ring; every 3rd point lacks the series
        ts.append(float(i), {M.K_WORKER_STEPS: i + 0.1} if i % 3 else {})
    t, v = ts.window(M.K_WORKER_STEPS, 4.5)
    assert t.dtype == np.float64 and v.dtype == np.float32
    assert t.tolist() == [15.0, 16.0, 17.0, 18.0, 19.0]
    expect = np.array([np.nan, 16.1, 17.1, np.nan, 19.1], dtype=np.float32)
    np.testing.assert_array_equal(v, expect)
    tt, vv = ts.window_values(M.K_WORKER_STEPS, 4.5)
    assert tt == t.tolist() and np.array_equal(np.array(vv, np.float32), expect, equal_nan=True)
    assert ts.window("missing", 4.5)[0].size == 0 and ts.window_values("missing", 4.5) == ([], [])
    js = Store().job("j")
    js.append(1.0, {"steps_per_sec": 2.5})
    assert js.last("steps_per_sec", 5).dtype == np.float32 and js.tail("steps_per_sec", 5) == [2.5]
    assert js.last("missing", 5).size == 0 and js.tail("missing", 5) == []


def counter_increase(values: np.ndarray) -> float:
    """Reference (oracle for the property test below): increase of a counter over consecutive samples, treating any drop as a reset to zero
    (what Prometheus' ``increase()`` does, without extrapolation). NaN samples are skipped."""
    v = values[~np.isnan(values)].astype(np.float64)
    if len(v) < 2:
        return float("nan")
    d = np.diff(v)
    resets = d < 0
    d[resets] = v[1:][resets]
    return float(d.sum())


def test_counter_reset_counts_the_new_value_as_increase():
    ts = TaskSeries(TaskInfo(job="j", task="w"), capacity=16)
    for t, v in enumerate((10.0, 20.0, 5.0, 15.0)):
        ts.append(float(t), {M.K_WORKER_STEPS: v})
    assert ts.rate(M.K_WORKER_STEPS, 10.0) * 3 == 10 + 5 + 10


def test_rate_divides_by_measured_time_and_survives_restart():
    s = Store(capacity=100)
    for t, v in [(0, 0), (2, 20), (4.5, 45), (6, 5), (8, 25)]:  # task restarted between 4.5 and 6
        s.add(ok(t, **{M.K_WORKER_STEPS: v}))
    rate = s.tasks["j/w1"].rate(M.K_WORKER_STEPS, 100)
    assert rate == pytest.approx((20 + 25 + 5 + 20) / 8)


def test_memory_is_bounded_by_capacity():
    s = Store(capacity=50)
    for t in range(1000):
        s.add(ok(t, **{M.K_WORKER_STEPS: t, M.K_GLOBAL_STEP: t}))
    ts = s.tasks["j/w1"]
    assert len(ts.times) == 50 and all(len(r) == 50 for r in ts.values.values())


def test_failed_poll_goes_silent_after_n_then_back_up():
    lc = Lifecycle(silent_after=3, vanished_after=100)
    lc.observe([ok(0)])
    for t in (2, 4):
        lc.observe([fail(t)])
        assert lc.nodes["j/w1"].state is TaskState.UP
    lc.observe([fail(6)])
    assert lc.nodes["j/w1"].state is TaskState.SILENT
    assert lc.nodes["j/w1"].last_error == "connection refused"
    lc.observe([ok(8)])
    assert lc.nodes["j/w1"].state is TaskState.UP


def test_a_status_version_moves_only_when_the_status_changes():
    """Readers cache a task's view on its status version: a poll that finds the task as it was
    changes nothing (each ``ok`` poll sets the failure count and error again)."""
    lc = Lifecycle(silent_after=3, vanished_after=100)
    lc.observe([ok(0)])
    node = lc.nodes["j/w1"]
    before = node.version
    lc.observe([ok(2)])
    lc.observe([ok(4)])
    assert node.version == before
    lc.observe([fail(6)])
    assert node.version > before and node.failures == 1
    failed = node.version
    lc.observe([ok(8)])
    assert node.version > failed and node.failures == 0


def test_preemption_notice_revokes_and_records_lifetime():
    lc = Lifecycle()
    lc.observe([ok(0), ok(0, W2)])
    changes = lc.observe([ok(100, **{M.K_PREEMPTED: 1}), ok(100, W2)])
    assert [(c.task, c.new) for c in changes] == [("j/w1", TaskState.REVOKED)]
    (life,) = lc.lifetimes
    assert life.revoked and life.cause == "preempted" and life.end - life.start == 100
    assert life.gpu == "P100" and life.provisioning == "preemptible"
    lc.observe([ok(200), ok(200, W2)])  # the replacement comes up
    assert lc.nodes["j/w1"].state is TaskState.UP and lc.nodes["j/w1"].restarts == 1


def test_transient_task_vanishing_while_peers_run_counts_as_revoked():
    lc = Lifecycle(silent_after=2, vanished_after=4)
    lc.observe([ok(0), ok(0, W2)])
    for t in range(1, 5):
        lc.observe([fail(t), ok(t, W2)])
    assert lc.nodes["j/w1"].state is TaskState.REVOKED and lc.nodes["j/w1"].cause == "vanished"


def test_on_demand_task_vanishing_stays_silent():
    std = TaskInfo(job="j", task="ps", role="ps", provisioning="standard")
    lc = Lifecycle(silent_after=2, vanished_after=4)
    lc.observe([ok(0, std), ok(0, W2)])
    for t in range(1, 8):
        lc.observe([fail(t, std), ok(t, W2)])
    assert lc.nodes["j/ps"].state is TaskState.SILENT


def test_latest_bridges_a_few_skipped_polls_but_not_more():
    s = Store(capacity=100)
    s.add(ok(0, **{M.K_GPU_UTIL: 80.0, M.K_WORKER_STEPS: 0}))
    for t in range(1, 5):  # node detail not read on these polls
        s.add(ok(t, **{M.K_WORKER_STEPS: t}))
    assert s.tasks["j/w1"].latest(M.K_GPU_UTIL) == 80.0
    for t in range(5, 20):
        s.add(ok(t, **{M.K_WORKER_STEPS: t}))
    assert s.tasks["j/w1"].latest(M.K_GPU_UTIL) is None


def test_rate_of_a_sparsely_read_series_uses_its_last_two_samples():
    """Node detail read every 5th refresh through Prometheus at scale: a 10 s window holds one
    sample at most, yet the rate is known (from the last two samples, within 6 windows)."""
    from cmdare.collectors.samples import TaskInfo
    from cmdare.collectors.store import TaskSeries

    ts = TaskSeries(TaskInfo(job="j", task="w0"), capacity=64)
    for i in range(20):
        values = {"cmdare_worker_steps_total": 10.0 * i}
        if i % 5 == 0:
            values["node_network_receive_bytes_total"] = 1000.0 * i
        ts.append(2.0 * i, values)
    assert ts.rate("cmdare_worker_steps_total", 10.0) == 5.0
    assert ts.rate("node_network_receive_bytes_total", 10.0) == 500.0  # (15000 - 10000) / (30 - 20 s)
    assert ts.rate("node_network_receive_bytes_total", 1.0) is None  # 6 s back: one sample only


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(0.1, 5.0),  # seconds since the previous point
            st.one_of(st.none(), st.floats(0, 1e6)),  # counter value, or missing at this point
            st.one_of(st.none(), st.floats(-1e3, 1e3)),  # gauge value, or missing
        ),
        min_size=1,
        max_size=80,
    ),
    st.sampled_from([1.0, 10.0, 30.0, 1e9]),
)
def test_rates_from_recent_points_equal_rates_from_the_rings(points, seconds):
    """Rates read from the newest points as Python floats (the fast path) equal those computed
    with numpy from the full rings, for any gaps, resets and window (beyond the recent points too)."""
    from cmdare.collectors import metrics as M
    from cmdare.collectors.samples import TaskInfo
    from cmdare.collectors.store import RECENT_POINTS, TaskSeries

    ts = TaskSeries(TaskInfo(job="j", task="w"), capacity=256)
    t = 0.0
    for dt, counter, gauge in points:
        t += dt
        values = {}
        if counter is not None:
            values[M.K_WORKER_STEPS] = counter
        if gauge is not None:
            values[M.K_GPU_UTIL] = gauge
        ts.append(t, values)
    for key, is_counter in ((M.K_WORKER_STEPS, True), (M.K_GPU_UTIL, False)):
        tt, vv = ts.window(key, seconds)
        ok = ~np.isnan(vv)
        expect = None
        if ok.sum() >= 2 and tt[ok][-1] > tt[ok][0]:
            inc = counter_increase(vv) if is_counter else float(vv[ok][-1] - vv[ok][0])
            expect = inc / float(tt[ok][-1] - tt[ok][0])
        got = ts.rate(key, seconds)
        if expect is None:
            continue  # the sparse-series bridge may answer where the window alone cannot
        # the rings hold float32 (the recent points Python floats): each value may differ by half a
        # float32 step, and an increase adds up one such step a point at most
        quantum = (
            ok.sum() * float(np.spacing(np.float32(np.nanmax(np.abs(vv))))) / float(tt[ok][-1] - tt[ok][0])
        )
        assert got == pytest.approx(expect, rel=1e-5, abs=max(1e-6, quantum))
        last = vv[ok][-1] if ok.any() else None
        newest = ts.latest(key, RECENT_POINTS)
        if ok[-min(len(ok), RECENT_POINTS) :].any():
            assert newest == pytest.approx(float(last), rel=1e-6)


def test_a_running_lifetime_is_made_once_and_again_when_what_it_holds_changes():
    """A running lifetime is the same object from one call to the next while the task's start and the
    identity it holds (GPU, region, provisioning) stay; a new zone keeps it (it holds none); a new
    provisioning or a new start (a replacement) makes it again; each equals one made afresh. The status
    holds it (no book of them by key beside the statuses), and holding it is no change of the status."""
    lc = Lifecycle()
    lc.observe([ok(0), ok(0, W2)])
    version = lc.nodes["j/w1"].version
    first = {lt.task: lt for lt in lc.all_lifetimes()}
    assert lc.nodes["j/w1"].version == version  # held by the status: no change of it (no view made again)
    assert set(first) == {"j/w1", "j/w2"} and all(lt.end is None for lt in first.values())
    zoned = dataclasses.replace(W, zone="us-central1-b")
    lc.observe([ok(10, zoned), ok(10, W2)])
    again = {lt.task: lt for lt in lc.all_lifetimes()}
    assert again["j/w1"] is first["j/w1"] and again["j/w2"] is first["j/w2"]
    spot = TaskInfo(job="j", task="w1", role="worker", gpu="P100", region="us-central1", provisioning="spot")
    lc.observe([ok(20, spot), ok(20, W2)])
    moved = {lt.task: lt for lt in lc.all_lifetimes()}
    assert moved["j/w1"] is not first["j/w1"] and moved["j/w1"].provisioning == "spot"
    assert moved["j/w1"] == Lifecycle._lifetime("j/w1", lc.nodes["j/w1"], None, "running")
    lc.observe([ok(30, spot, **{M.K_PREEMPTED: 1}), ok(30, W2)])
    lc.observe([ok(40, spot), ok(40, W2)])  # the replacement: a new start
    (new,) = [lt for lt in lc.all_lifetimes() if lt.task == "j/w1" and lt.end is None]
    assert new.start == 40 and new is not moved["j/w1"]


_CLAIMS = st.lists(  # cycles of polls: (source, identity claimed, answered)
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2), st.booleans()), max_size=6),
    min_size=1,
    max_size=12,
)


@settings(max_examples=120, deadline=None)
@given(_CLAIMS)
def test_an_identitys_owner_held_by_its_status_claims_as_a_book_of_owners_did(cycles: list) -> None:
    """Who owns an identity (the first claimant, or the replacement of one gone a cycle) is held by the
    identity's status once it has one (no book of 100,000 owners beside the statuses): every poll resolves
    to the key a book of owners by key gives (its own, or ``name@source`` when another source owns it),
    and the owners held are the book's."""
    lc = Lifecycle()
    owner: dict[str, str] = {}  # the book: key -> owner
    answered: dict[str, int] = {}
    for cycle, claims in enumerate(cycles, start=1):
        polls = [
            TaskPoll(source=f"http://s{src}", t=float(cycle), ok=up, info=TaskInfo(job="j", task=f"w{k}"))
            for src, k, up in claims
        ]
        want = []
        for p in polls:
            if not p.ok:
                continue
            assert p.info is not None
            answered[p.source] = cycle
            first = owner.setdefault(p.info.key, p.source)
            if first == p.source or answered.get(first, -9) < cycle - 1:
                owner[p.info.key] = p.source
                want.append(p.info.key)
            else:
                renamed = f"j/{p.info.task}@{p.source.removeprefix('http://')}"
                owner.setdefault(renamed, p.source)
                want.append(renamed)
        out = lc.resolve(polls)
        assert [p.info.key for p in out if p.ok and p.info is not None] == want, cycle
        lc.observe(out)
    held = {k: getattr(n, "_owner", None) for k, n in lc.nodes.items()} | lc._owner
    assert {k: v for k, v in held.items() if v is not None} == owner
