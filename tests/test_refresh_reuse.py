"""A refresh that brings nothing new for a task reuses what was computed from its last sample: the
store skips a scrape's values read again (series read in turns, as through Prometheus at scale), the
overview reuses a task's figures (only the uptime moves) and an answer's rows are checked in bulk,
with the same results as the per-row and per-refresh paths."""

from __future__ import annotations

import math

import orjson

from cmdare.collectors import metrics as M
from cmdare.collectors.lifecycle import Lifecycle
from cmdare.collectors.observed import NodeView, cached_view, node_view
from cmdare.collectors.prometheus.answers import decode, well_formed
from cmdare.collectors.samples import TaskInfo, TaskPoll
from cmdare.collectors.store import Store

W = TaskInfo(job="j", task="w1", role="worker", gpu="P100", region="us-central1", provisioning="preemptible")
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
    built: dict[str, NodeView] = {}  # the overview's views so far (a session's OverviewCache.built)
    first = cached_view(ts, status, 120.0, None, (), built)
    again = cached_view(ts, status, 125.0, None, (), built)
    assert again is first and again == node_view(ts, status, 125.0)  # nothing new: the same object
    assert again.uptime_s(125.0) is not None and again.uptime_s(125.0) - first.uptime_s(120.0) == 5.0
    store.add(ok(130.0, **{STEPS: 160.0, SUM: 65.0, COUNT: 130.0}))  # a new point: recomputed
    assert cached_view(ts, status, 131.0, None, (), built) == node_view(ts, status, 131.0)
    assert cached_view(ts, status, 131.0, None, ("duplicate-identity",), built).flags == (
        "duplicate-identity",
    )


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


def test_the_session_overview_rebuilds_only_what_changed_and_equals_a_fresh_one():
    """build_jobs with a session's cache (views of changed tasks only) against a one-off build over the
    same store and lifecycle, through 40 cycles of random polls: some tasks answer, some fail, one is
    revoked, three change their labels (one into another job: a new task; one becomes the chief, which
    moves it in the order), host detail arrives for one host."""
    import random
    from collections import Counter

    from cmdare.collectors.observed import OverviewCache, build_jobs

    rng = random.Random(7)
    infos = {
        f"w{i}": TaskInfo(
            job="a" if i < 30 else "b",
            task=f"w{i}",
            role="worker",
            gpu="P100",
            region="us-central1",
            provisioning="spot",
        )
        for i in range(40)
    }
    store, life, cache = Store(), Lifecycle(silent_after=2), OverviewCache()
    unchanged_reused = 0
    for cycle in range(40):
        t = 100.0 + 2 * cycle
        polls = []
        for name, info in infos.items():
            roll = rng.random()
            if roll < 0.3:  # answers with a new point
                polls.append(TaskPoll(source=f"http://{name}", t=t, ok=True, info=info, host=f"h{name[-1]}",
                                      values={STEPS: t * (1 + int(name[1:])), M.K_PREEMPTED: 0.0}))  # fmt: skip
            elif roll < 0.35:
                polls.append(TaskPoll(source=f"http://{name}", t=t, ok=False, info=info, error="timed out"))
        if cycle == 10:  # a revocation notice
            polls.append(
                TaskPoll(source="http://w3", t=t, ok=True, info=infos["w3"], values={M.K_PREEMPTED: 1.0})
            )
        if cycle == 20:  # labels enriched, and a task that moves to job b
            infos["w5"] = TaskInfo(
                job="a", task="w5", role="worker", gpu="P100", region="us-central1", zone="us-central1-a"
            )
            infos["w6"] = TaskInfo(job="b", task="w6", role="worker", gpu="P100", region="us-central1")
            infos["w29"] = TaskInfo(
                job="a", task="w29", role="chief", gpu="P100", region="us-central1", provisioning="spot"
            )  # sorts first
        if cycle % 7 == 0:  # host detail for the tasks on host h1
            node = TaskInfo(job="hosts", task="h1", role="node", gpu="NVIDIA T4")
            polls.append(TaskPoll(source="http://h1:9100", t=t, ok=True, info=node, host="h1", host_only=True,
                                  values={M.K_CPU_BUSY: t, M.K_CPU_ALL: 2 * t}))  # fmt: skip
        polls = life.resolve(polls)
        for p in polls:
            store.add(p)
        life.observe(polls)
        before = {k: v for k, v in cache.views.items()}
        cached = build_jobs(store, life, t + 1, cache=cache)
        fresh = build_jobs(store, life, t + 1)
        assert [(j.name, j.nodes) for j in cached] == [(j.name, j.nodes) for j in fresh], cycle
        for j in cached:  # the census kept as views changed equals one counted from the nodes
            assert j._kinds == dict(
                Counter((n.role, n.gpu, n.region, n.provisioning, n.status) for n in j.nodes)
            )
        unchanged_reused += sum(cache.views[k] is v for k, v in before.items())
    assert (
        unchanged_reused > 40 * 40 * 0.4
    )  # most views were the very same objects from one refresh to the next


async def test_the_live_ranking_is_throttled_on_the_states_clock():
    """The session starts a ranking at most every RANK_EVERY_S seconds of the state's time (the clock
    the live planner throttles itself by), so a replay played fast ranks as often per recorded second
    as the live job did. The engine here only counts its calls (what it ranks is the planner's tests)."""
    from dataclasses import replace

    from cmdare.tui.options import SessionOptions
    from cmdare.tui.session import RANK_EVERY_S, MonitorSession, MonitorState

    class CountingEngine:
        live_plans: dict = {}

        def __init__(self) -> None:
            self.asked: list[float] = []

        def rank(self, jobs: object, now: float, lifetimes: object, columns: object = None) -> dict:
            self.asked.append(now)
            return {}

        def ranking_columns(self, jobs: object) -> dict:
            return {}

    session = MonitorSession(SessionOptions(read_only=True))
    engine = CountingEngine()
    session.analysis = engine  # type: ignore[assignment]
    base = MonitorState(t=1000.0, cycles=1, jobs=[], alerts=[], alert_history=[], sources=[], demo=False,
                        read_only=True)  # fmt: skip
    for t in (1000.0, 1000.0 + RANK_EVERY_S / 2, 1000.0 + RANK_EVERY_S, 900.0):  # the last: a rewound replay
        session.state = replace(base, t=t)
        session._start_ranking()
        await session._ranking
    assert engine.asked == [1000.0, 1000.0 + RANK_EVERY_S, 900.0]


def test_node_detail_of_a_host_no_task_runs_on_is_a_row_of_its_own():
    """Node detail joins the tasks on its host; a host no task runs on shows as a row of its own."""
    from cmdare.collectors.observed import build_jobs

    store, life = Store(), Lifecycle()
    w = TaskInfo(job="a", task="w0", role="worker", gpu="P100", region="us-central1")
    polls = [TaskPoll(source="http://w0", t=10.0, ok=True, info=w, host="h1", values={STEPS: 1.0})]
    for host in ("h1", "h2"):
        node = TaskInfo(job="hosts", task=host, role="node", gpu="NVIDIA T4")
        polls.append(
            TaskPoll(
                source=f"http://{host}:9100",
                t=10.0,
                ok=True,
                info=node,
                host=host,
                host_only=True,
                values={M.K_CPU_BUSY: 1.0, M.K_CPU_ALL: 2.0},
            )
        )
    for p in life.resolve(polls):
        store.add(p)
    rows = {(j.name, n.name) for j in build_jobs(store, life, 11.0) for n in j.nodes}
    assert ("a", "w0") in rows and ("hosts", "h2") in rows and ("hosts", "h1") not in rows


def test_a_job_met_a_slice_at_a_time_keeps_the_order_a_full_sort_gives():
    """A fleet's sweep meets its tasks a slice a refresh: the session's overview puts each new task in its
    place (a bisection into the order kept), pending targets' rows among them, and sorts anew when a
    role changes; every refresh's rows equal a stable sort of the tasks' views (first met first) and the
    pending rows (lifecycle order) by role, then name in natural order, and a one-off build. Names
    collide in natural order (``w01``/``w1``), pending targets come and then answer."""
    import random

    from cmdare.collectors.observed import _ROLE_ORDER, OverviewCache, _natural, build_jobs

    rng = random.Random(11)
    names = [f"w{n}" for n in rng.sample(range(400), 150)] + ["w01", "w1", "w001", "chief-x"]
    rng.shuffle(names)
    roles = {n: "chief" if n.startswith("chief") else "worker" for n in names}
    store, life, cache = Store(), Lifecycle(silent_after=2), OverviewCache()
    met = seen_pending = 0
    for cycle in range(25):
        t = 100.0 + 2 * cycle
        if cycle == 15:  # a worker becomes the PS: it moves
            roles[names[3]] = "ps"
        met = min(len(names), met + rng.randint(0, 14))
        polls = []
        for i, name in enumerate(names):
            info = TaskInfo(job="a", task=name, role=roles[name], gpu="P100", region="r")
            if i < met and rng.random() < 0.5:
                polls.append(TaskPoll(source=f"http://{name}", t=t, ok=True, info=info, values={STEPS: t}))
            elif met <= i < met + 4:  # next in line: not answering yet (a pending target)
                polls.append(TaskPoll(source=f"http://{name}", t=t, ok=False, info=info, error="refused"))
        polls = life.resolve(polls)
        for p in polls:
            store.add(p)
        life.observe(polls)
        (job,) = build_jobs(store, life, t + 1, cache=cache)
        views = [cache.views[k] for k in store.members["a"]]
        pending = [n for k, s in life.nodes.items() if k not in store.tasks for n in [s.info.task]]
        rows = {n.name: n for n in job.nodes if n.status == "pending"}
        assert len(job.nodes) == len(views) + len(pending) and set(rows) == set(pending), cycle
        seen_pending += len(rows)
        want = sorted(
            [*views, *(rows[name] for name in pending)],  # the pending rows in the lifecycle's order
            key=lambda n: (_ROLE_ORDER.get(n.role, 9), _natural(n.name)),
        )
        assert job.nodes == want, cycle
        assert build_jobs(store, life, t + 1)[0].nodes == job.nodes, cycle
    assert seen_pending > 20 and met > 100
