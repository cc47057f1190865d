"""The per-swept-task work's fast paths hold to their definitions (issue 34: 100,000 tasks, growth
10,000 -> 100,000 <= 3x): each one computes what the slower definition it stands for computes."""

from __future__ import annotations

import math
from typing import Any

from cmdare.collectors import metrics as M


def _keys() -> list[str]:
    """Every kind of series key a source checks: bounded, folded, counters, devices, stages, unknown."""
    return sorted(
        {
            *M.VALUE_BOUNDS,
            *M.COUNTER_KEYS,
            *M.RATE_BOUNDS,
            M.device_key(M.K_GPU_UTIL, "0"),
            M.device_key(M.K_GPU_FB_USED, "3"),
            M.device_key("unbounded_name", "1"),
            M.stage_bytes_key("stage-1"),
            "a_gauge_no_bound_names",
        }
    )


def test_value_range_accepts_exactly_what_valid_value_accepts() -> None:
    edges = [
        -math.inf,
        -1e31,
        -M.MAX_ABS_VALUE,
        -1.0,
        -0.0,
        0.0,
        5e-324,
        0.5,
        1.0,
        100.0,
        1e30,
        1e31,
        math.inf,
    ]
    for key in _keys():
        low, high = M.value_range(key)
        values = [*edges, math.nan]
        for b in (low, high):  # each end, and the floats either side of it
            values += [b, math.nextafter(b, -math.inf), math.nextafter(b, math.inf)]
        for x in values:
            assert (low <= x <= high) == M.valid_value(key, x), (key, x)


def test_a_large_fleets_folded_detail_drops_each_implausible_value_and_keeps_a_good_tasks_dict() -> None:
    from cmdare.collectors.prometheus.fleet import FoldedDetail
    from cmdare.collectors.prometheus.source import PrometheusAPISource, _Target
    from cmdare.collectors.samples import TaskInfo

    good = {M.K_WORKER_STEPS: 10.0, M.K_PROCESS_CPU: 3.5, M.K_GLOBAL_STEP: 7.0}
    bad = {M.K_WORKER_STEPS: -1.0, M.K_PROCESS_CPU: 3.5, M.K_NET_RX: 1e31, M.K_GLOBAL_STEP: 7.0}
    folded = FoldedDetail({"a:1": "1700000000.5", "b:1": "1700000001"}, {"a:1": good, "b:1": bad})
    targets = {i: _Target(TaskInfo(job="j", task=i)) for i in ("a:1", "b:1")}
    # no query is sent: the source only folds what it is given (a closed port, never reached)
    PrometheusAPISource("http://127.0.0.1:9")._fill_folded(targets, folded)
    a, b = targets["a:1"], targets["b:1"]
    assert a.values is good and a.dropped == 0 and a.scrape_time == 1700000000.5
    want = {k: v for k, v in bad.items() if M.valid_value(k, v)}
    assert b.values == want == {M.K_PROCESS_CPU: 3.5, M.K_GLOBAL_STEP: 7.0}
    assert b.dropped == 2


def _view_cases() -> list[dict[str, float]]:
    """Two points' values of a task: none, one or both of each pair of series the view's short cuts skip."""
    last, ck_sum, ck_count = M.K_LAST_CHECKPOINT, M.K_CHECKPOINT_SECONDS_SUM, M.K_CHECKPOINT_SECONDS_COUNT
    ar_sum, ar_count = M.K_ALLREDUCE_SECONDS_SUM, M.K_ALLREDUCE_SECONDS_COUNT
    return [
        {},
        {ar_sum: 1.0},
        {ar_count: 4.0},
        {ar_sum: 1.0, ar_count: 4.0},
        {last: 1.7e9},
        {ck_count: 3.0},
        {ck_sum: 6.0},
        {ck_sum: 6.0, ck_count: 3.0, last: 1.7e9 + 50},
    ]


def test_a_views_skipped_figures_are_what_their_definitions_give() -> None:
    """node_view leaves a task's all-reduce and checkpoint figures unread when it holds neither series of
    them: each figure is still what its definition (the store's ratio, the checkpoint reading) gives."""
    from cmdare.collectors.lifecycle import Lifecycle
    from cmdare.collectors.observed import STEP_WINDOW_S, _finite, node_view
    from cmdare.collectors.samples import TaskInfo, TaskPoll
    from cmdare.collectors.store import Store

    info = TaskInfo(job="j", task="w1", role="worker", gpu="P100")
    shown: set[str] = set()
    for case in _view_cases():
        store, life = Store(), Lifecycle()
        for t, grow in ((1.7e9, 0.0), (1.7e9 + 10, 1.0)):  # a counter grows between the two points
            values = {
                M.K_WORKER_STEPS: 100.0 + 10 * grow,
                **{k: v if k == M.K_LAST_CHECKPOINT else v * (1 + grow) for k, v in case.items()},
            }
            poll = TaskPoll(source="http://w1", t=t, ok=True, info=info, values=values)
            store.add(poll)
            life.observe([poll])
        ts, status, now = store.tasks[info.key], life.nodes[info.key], 1.7e9 + 20
        view = node_view(ts, status, now)
        ratio = ts.mean_of_ratio(M.K_ALLREDUCE_SECONDS_SUM, M.K_ALLREDUCE_SECONDS_COUNT, STEP_WINDOW_S)
        assert view.allreduce_seconds == _finite(ratio), case
        last = ts.latest(M.K_LAST_CHECKPOINT)
        assert view.last_checkpoint_at == (last if last is not None and 1e9 < last <= now + 60 else None), (
            case
        )
        total, count = ts.latest(M.K_CHECKPOINT_SECONDS_SUM), ts.latest(M.K_CHECKPOINT_SECONDS_COUNT)
        want = total / count if total is not None and count else None
        assert view.checkpoint_seconds == want, case
        if M.K_CHECKPOINT_SECONDS_COUNT not in case:
            assert view.checkpoint_interval_s is None
        shown.update(k for k in ("allreduce_seconds", "checkpoint_seconds", "last_checkpoint_at")
                     if getattr(view, k) is not None)  # fmt: skip
    assert shown == {"allreduce_seconds", "checkpoint_seconds", "last_checkpoint_at"}  # each one met, too


def test_columns_updated_at_the_overviews_changed_positions_are_the_columns_compared_and_read_whole() -> None:
    """A job view says which positions of its node list hold new views (``JobView.change``); the planner's
    columns read only those, and hold what a comparison of every position and a whole read give."""
    import numpy as np

    from cmdare.collectors.lifecycle import Lifecycle
    from cmdare.collectors.observed import OverviewCache, build_jobs
    from cmdare.collectors.samples import TaskInfo, TaskPoll
    from cmdare.collectors.store import Store
    from cmdare.planner.rules.worker_columns import _ARRAYS, JobColumns

    store, life, cache = Store(), Lifecycle(), OverviewCache()
    infos = [TaskInfo(job="j", task=f"worker-{i}", role="worker", gpu="K80") for i in range(12)]
    cols: JobColumns | None = None
    for step, t in enumerate((1000.0, 1002.0, 1004.0, 1006.0)):
        # each refresh a few tasks bring a point (a sweep), one of them slower each time
        polls = [
            TaskPoll(source=f"http://{i.task}", t=t, ok=True, info=i,
                     values={M.K_WORKER_STEPS: t * (1 + k % 3), M.K_STEP_SECONDS_SUM: t / 10, M.K_STEP_SECONDS_COUNT: t})
            for k, i in enumerate(infos) if step == 0 or k % 4 == step % 4
        ]  # fmt: skip
        for p in polls:
            store.add(p)
        life.observe(polls)
        (job,) = build_jobs(store, life, t, cache=cache)
        if cols is None:
            cols = JobColumns.of(job)
            continue
        was = list(cols.nodes)
        assert job.change is not None and job.change.base is cols.nodes and job.change.nodes is job.nodes
        compared = [k for k, (a, b) in enumerate(zip(job.nodes, was, strict=True)) if a is not b]
        assert job.change.positions == compared and compared  # the same positions a comparison finds
        cols = cols.update(job.nodes, job.change)
        assert cols.changed == len(compared)
        whole = JobColumns(job.nodes)
        for name in _ARRAYS:
            assert np.array_equal(getattr(cols, name), getattr(whole, name), equal_nan=True), name
    # a change that does not describe the list last read is not trusted: every position compared
    assert cols is not None
    stale = JobColumns(list(cols.nodes))  # the same views, another list than the change's base
    poll = TaskPoll(source="http://w", t=1008.0, ok=True, info=infos[0], values={M.K_WORKER_STEPS: 9e3})
    store.add(poll)
    life.observe([poll])
    (job,) = build_jobs(store, life, 1008.0, cache=cache)
    assert job.change is not None and job.change.positions == [0]
    wrong = type(job.change)(job.change.base, job.change.nodes, [])  # positions a reader must not trust
    assert stale.update(job.nodes, wrong).changed == 1  # compared: the one new view read


def _detail_rows() -> Any:
    """A detail answer's rows: each series of the folded ones, the keyed ones (a direction, a peer) and one
    not read, from two instances and two scrape jobs, with labels in the shapes engines write and others
    (an extra label, sorted or not, none at all), values as any engine or a hostile one writes them, and
    scrape-time rows (right, wrong or without an instance)."""
    from hypothesis import strategies as st

    from cmdare.collectors.prometheus.aggregate import KEY_LABEL, T_KEY
    from cmdare.collectors.prometheus.fleet import DETAIL_METRICS

    names = st.sampled_from([*DETAIL_METRICS, M.PS_BYTES_SAMPLE, M.STAGE_BYTES_SAMPLE, "not_read", ""])
    extra = st.dictionaries(st.sampled_from(["direction", "peer", "device", "zone"]),
                            st.sampled_from(["in", "out", "stage-1", "0", ""]), max_size=2)  # fmt: skip
    series = st.builds(
        lambda name, inst, job, more, named: {**({"__name__": name} if named else {}), "instance": inst,
                                              "job": job, **more},
        names, st.sampled_from(["a:1", "b.2:9100"]), st.sampled_from(["x", "y"]), extra,
        st.sampled_from([True, True, True, False]),  # a row without a name: now and then
    )  # fmt: skip
    stamp = st.builds(
        lambda inst, key, keyed: {KEY_LABEL: key, **({"instance": inst} if keyed else {})},
        st.sampled_from(["a:1", "b.2:9100"]), st.sampled_from([T_KEY, "other"]), st.booleans(),
    )  # fmt: skip
    labels = (series | stamp | st.just({})).flatmap(
        lambda d: st.permutations(list(d.items())).map(dict) | st.just(dict(sorted(d.items())))
    )
    value = st.sampled_from(["1", "2.5", "1e3", "-4", "NaN", "+Inf", "x", "1700000000.5"])
    return st.lists(
        st.builds(lambda m, v: {"metric": m, "value": [1700000000, v]}, labels, value), max_size=30
    )


def test_a_detail_answer_read_as_labelled_text_folds_as_its_decoded_rows_do() -> None:
    """fold_by_task reads a :class:`LabelledRows` answer's usual row shapes (name, instance, job; a scrape
    time and its instance) in one regex pass: it folds to what the decoded rows of the same answer give."""
    import orjson
    from hypothesis import given, settings

    from cmdare.collectors.prometheus.answers import LabelledRows, decode, decode_labelled
    from cmdare.collectors.prometheus.fleet import _SHAPES, fold_by_task

    shaped = []  # answers every row of which the regex pass read (the quick way, whole)

    @settings(max_examples=300, deadline=None)
    @given(_detail_rows(), _detail_rows())
    def check(first: list[dict[str, Any]], second: list[dict[str, Any]]) -> None:
        answers = [
            orjson.dumps({"status": "success", "data": {"resultType": "vector", "result": rows}})
            for rows in (first, second)
        ]
        text = [decode_labelled(a, "application/json", 200) for a in answers]
        assert all(isinstance(t, LabelledRows) for t in text if t)
        for t in text:
            if isinstance(t, LabelledRows) and all(
                r[0] or r[3] for r in _SHAPES.findall("\n".join(t.labels))
            ):
                shaped.append(len(t.labels))  # every row in a usual shape
        rows = [decode(a, "application/json", 200) for a in answers]
        quick, slow = fold_by_task(text), fold_by_task(rows)
        assert (quick.times, quick.values) == (slow.times, slow.values)

    check()
    assert max(shaped) >= 3  # the quick way was taken on answers of several rows
