"""A large fleet's sweep reads a bounded slice a refresh (issue 34: 100,000 tasks): past SWEEP_MAX tasks a call the
sweep period stretches, and says so, and a slow refresh never makes the next one read more."""

from __future__ import annotations

import math

from cmdare.collectors.prometheus.fleet import SWEEP_MAX, SWEEP_S, Sweep


def test_the_sweep_reads_at_most_sweep_max_a_refresh_and_says_its_period():
    tasks = [f"10.0.{i // 250}.{i % 250}:9400" for i in range(100_000)]
    sweep = Sweep(first_most=SWEEP_MAX)  # the steady sweep (the first pass: below)
    assert sweep.take(tasks, 0.0) == []  # the first call: nothing
    seen: set[str] = set()
    for k in range(1, 6):
        got = sweep.take(tasks, 2.0 * k)
        assert len(got) == SWEEP_MAX  # 100,000 x 2 s / 120 s would be 1,667
        seen.update(got)
    assert len(seen) == 5 * SWEEP_MAX  # slices follow each other: no task read twice before the others
    assert sweep.period == 100_000 * 2.0 / SWEEP_MAX > SWEEP_S  # the whole sweep takes 400 s, said as such
    assert len(sweep.take(tasks, 60.0)) == SWEEP_MAX  # a refresh 50 s late reads no more


def test_a_fleet_within_the_bound_keeps_the_nominal_period():
    tasks = [f"t{i}" for i in range(10_000)]
    sweep = Sweep()
    sweep.take(tasks, 0.0)
    assert len(sweep.take(tasks, 2.0)) == 167  # 10,000 x 2 s / 120 s
    assert sweep.period == SWEEP_S


def test_past_30000_tasks_the_columns_are_read_less_often_and_said():
    from cmdare.collectors.prometheus.fleet import COLUMNS_EVERY_S, FleetReader
    from cmdare.collectors.samples import TaskInfo

    reader = FleetReader('job="bench"')
    reader.know({f"10.{i // 62500}.{i // 250 % 250}.{i % 250}:9400": TaskInfo(job="big", task=f"worker-{i}", role="worker")
                 for i in range(45_000)})  # fmt: skip
    assert reader.columns_period == 1.5 * COLUMNS_EVERY_S
    reader.plan(0.0)
    assert reader.note is not None and reader.note.endswith(f"each read every {1.5 * COLUMNS_EVERY_S:.0f} s")


def test_the_stretched_period_holds_through_a_refresh_s_jitter():
    """The store sets the sweep's window on every task when it changes: the period does not follow each
    refresh's few hundred milliseconds of jitter."""
    tasks = [f"t{i}" for i in range(100_000)]
    sweep = Sweep(first_most=SWEEP_MAX)
    sweep.take(tasks, 0.0)
    sweep.take(tasks, 2.0)
    stretched = 100_000 * 2.0 / SWEEP_MAX
    assert sweep.period == stretched
    periods = {sweep.period for t in (4.3, 6.1, 8.4, 10.2, 12.0) if sweep.take(tasks, t)}
    assert periods == {stretched}


def test_the_sweep_stops_growing_where_the_columns_do():
    """At the default 2 s refresh the sweep reaches its bound at COLUMNS_FULL_TASKS tasks, the size past which the
    columns are read less often too: past it neither a refresh's detail nor its columns grow with the fleet."""
    from cmdare.collectors.prometheus.fleet import COLUMNS_FULL_TASKS

    for n, period in ((COLUMNS_FULL_TASKS, SWEEP_S), (2 * COLUMNS_FULL_TASKS, 2 * SWEEP_S)):
        sweep = Sweep(first_most=SWEEP_MAX)
        tasks = [f"t{i}" for i in range(n)]
        sweep.take(tasks, 0.0)
        assert len(sweep.take(tasks, 2.0)) == SWEEP_MAX
        assert sweep.period == period


def test_the_first_pass_lists_the_fleet_sooner_then_the_sweep_settles():
    """A task is listed once its detail has been read: the first pass reads up to FIRST_SWEEP_MAX a refresh, then
    the sweep keeps to SWEEP_MAX, every task still read once a pass and none twice within one."""
    from cmdare.collectors.prometheus.fleet import FIRST_SWEEP_MAX

    n = 100_000
    tasks = [f"t{i:06d}" for i in range(n)]
    sweep = Sweep()
    sweep.take(tasks, 0.0)
    taken: list[str] = []
    t = 0.0
    while len(taken) < n:
        t += 2.0
        got = sweep.take(tasks, t)
        assert len(got) == FIRST_SWEEP_MAX
        taken += got
    assert t == 2.0 * math.ceil(n / FIRST_SWEEP_MAX)  # 250 s at 100,000 tasks
    assert sorted(set(taken[:n])) == tasks  # every task once in the first pass
    steady = [sweep.take(tasks, t + 2.0 * k) for k in range(1, 4)]
    assert [len(g) for g in steady] == [SWEEP_MAX] * 3
    assert steady[0][0] == tasks[len(taken) % n]  # the sweep goes on where the first pass ended
    assert sweep.period == n * 2.0 / SWEEP_MAX
