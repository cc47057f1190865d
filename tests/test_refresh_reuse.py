"""A refresh that brings nothing new for a task reuses what was computed from its last sample: the
store skips a scrape's values read again (series read in turns, as through Prometheus at scale), the
overview reuses a task's figures (only the uptime moves) and an answer's rows are checked in bulk,
with the same results as the per-row and per-refresh paths."""

from __future__ import annotations

import math

import orjson

from cmdare.collectors import metrics as M
from cmdare.collectors.lifecycle import Lifecycle
from cmdare.collectors.prometheus_answers import decode, well_formed
from cmdare.collectors.samples import TaskInfo, TaskPoll
from cmdare.collectors.store import Store
from cmdare.planner.overview import cached_view, node_view

W = TaskInfo("j", "w1", "worker", "P100", "us-central1", provisioning="preemptible")
STEPS, SUM, COUNT = M.K_WORKER_STEPS, M.K_STEP_SECONDS_SUM, M.K_STEP_SECONDS_COUNT


def ok(t: float, **values: float) -> TaskPoll:
    return TaskPoll(source="http://w1", t=t, ok=True, info=W, values=values)


def test_values_read_in_turns_are_stored_once_per_scrape():
    store = Store()
    for t, base in ((100.0, 0.0), (115.0, 15.0)):  # two scrapes, each read in two turns, then again
        for poll in (ok(t, **{STEPS: base}), ok(t, **{SUM: base / 2, COUNT: base}), ok(t, **{STEPS: base})):
            store.add(poll)
        store.add(ok(t, **{SUM: base / 2, COUNT: base}))
    ts = store.tasks[W.key]
    assert len(ts.times) == 4  # one point a turn that brought something; the repeats added none
    assert ts.rate(STEPS, 30.0) == 1.0
    assert ts.mean_of_ratio(SUM, COUNT, 30.0) == 0.5
    store.add(ok(115.0, **{STEPS: 16.0}))  # same scrape time, another value: kept
    assert len(ts.times) == 5


def test_cached_figures_are_the_same_view_and_uptime_moves():
    store, life = Store(), Lifecycle()
    for t in (100.0, 115.0):
        poll = ok(t, **{STEPS: t, SUM: t / 2, COUNT: t})
        store.add(poll)
        life.observe([poll])
    ts, status = store.tasks[W.key], life.nodes[W.key]
    first = cached_view(ts, status, 120.0, None, ())
    again = cached_view(ts, status, 125.0, None, ())
    assert again is first and again == node_view(ts, status, 125.0)  # nothing new: the same object
    assert again.uptime_s(125.0) is not None and again.uptime_s(125.0) - first.uptime_s(120.0) == 5.0
    store.add(ok(130.0, **{STEPS: 160.0, SUM: 65.0, COUNT: 130.0}))  # a new point: recomputed
    assert cached_view(ts, status, 131.0, None, ()) == node_view(ts, status, 131.0)
    assert cached_view(ts, status, 131.0, None, ("duplicate-identity",)).flags == ("duplicate-identity",)


def _answer(rows: list) -> bytes:
    return orjson.dumps({"status": "success", "data": {"resultType": "vector", "result": rows}})


def test_bulk_row_check_keeps_exactly_the_well_formed_rows():
    good = [{"metric": {"instance": f"h{i}:1"}, "value": [1.7e9 + i, str(i)]} for i in range(50)]
    bad = [
        [1, 2],
        {"metric": {"instance": 5}, "value": [1.7e9, "1"]},
        {"metric": {}, "value": [1.7e9]},
        {"metric": {}, "value": ["nan", "1"]},
        {"metric": {}, "value": [1e308, "1"]},  # finite, though the times' sum overflows
        {"metric": {}, "value": [True, "1"]},
        {"value": [1.7e9, "1"]},
    ]
    assert decode(_answer(good), "application/json", 200) == good
    mixed = good[:10] + bad + good[10:] + [{"metric": {}, "value": [1e308, "2"]}]
    rows = decode(_answer(mixed), "application/json", 200)
    assert rows == [r for r in orjson.loads(_answer(mixed))["data"]["result"] if well_formed(r)]
    assert len(rows) == 50 + 3 and all(math.isfinite(float(r["value"][0])) for r in rows)
