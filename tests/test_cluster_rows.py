"""Issue 20: the Cluster pane costs what changed. A task's row stays the very same object while the
overview hands over the same view and its flags stay (TaskRows); its cells stay the same tuple until
the uptime shown reads differently (TaskCells); the summary line is counted task by task (RoleTally,
checked against the plain definition over random refreshes); and the real pane at 10,000 tasks, in a
real Textual app (Pilot), repaints nothing when nothing on screen changed and shows names literally."""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import replace

from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import Static

from cmdare.collectors.observed import JobView, NodeView
from cmdare.collectors.samples import JobFacts, ModelSpec
from cmdare.planner.rules.alerts import Alert
from cmdare.tui.format import rate, uptime, uptime_until
from cmdare.tui.panes.cluster import ClusterPane, RoleTally, replaced, role_summary
from cmdare.tui.panes.cluster_rows import COLUMNS, UP, ShownAt, TaskCells, TaskRows, task_facts
from cmdare.tui.panes.ordered_values import OrderedValues
from cmdare.tui.session import MonitorState
from cmdare.tui.widgets.table import FilterTable

T0 = 1_700_000_000.0
FACTS = JobFacts(
    "j", ModelSpec(name="ResNet-32", model_flops=1658696889.0, params=1857722.0, batch_size=128), 64000
)


def view(i: int, role: str = "worker", started: float = T0 - 2 * 86_400, **kw: object) -> NodeView:
    fields = dict(name=f"{role}-{i}", role=role, gpu="P100", region="us-central1", zone="us-central1-a",
                  provisioning="preemptible", status="up", steps_per_sec=5.0 + i % 7 / 10, step_seconds=0.08,
                  gpu_util=90.0, net_in_bps=1e6, net_out_bps=None, started_at=started, last_error=None,
                  restarts=0, cause="")  # fmt: skip
    return NodeView(**{**fields, **kw})  # type: ignore[arg-type]


def state(
    nodes: list[NodeView], t: float = T0, alerts: list[Alert] | None = None, job: str = "j"
) -> MonitorState:
    return MonitorState(
        t=t,
        cycles=1,
        jobs=[
            JobView(
                name=job,
                facts=FACTS,
                steps_per_sec=5.0,
                examples_per_sec=None,
                global_step=0.0,
                eta_seconds=None,
                nodes=list(nodes),
            )
        ],
        alerts=alerts or [],
        alert_history=[],
        sources=[],
        demo=False,
        read_only=True,
    )


def alert(kind: str, subject: str) -> Alert:
    return Alert(kind, subject, "warning", "", {}, None, T0, T0)


def test_rows_stay_the_same_objects_while_views_and_flags_do():
    nodes = [view(i) for i in range(100)] + [view(0, "ps")]
    rows = TaskRows()
    first = rows.update(state(nodes))
    assert rows.made == 101 and len(rows.new) == 101
    again = rows.update(state(list(nodes), T0 + 2))
    assert rows.made == 0 and not rows.gone and all(map(lambda a, b: a is b, first, again))
    nodes[7] = replace(nodes[7], steps_per_sec=9.0)
    third = rows.update(state(nodes, T0 + 4))
    assert (
        rows.made == 1
        and third[7] is not first[7]
        and all(third[i] is first[i] for i in range(100) if i != 7)
    )
    assert rows.gone == [task_facts(view(7))]  # what the summary counted of the old worker-7
    fourth = rows.update(
        state(nodes, T0 + 6, [alert("straggler", "j/worker-3"), alert("ps-saturation", "j")])
    )
    assert rows.made == 2 and not rows.gone  # worker-3 and the PS: their flags, not their views, changed
    flag = [label for label, _ in COLUMNS].index("Flag")
    assert "straggler" in str(fourth[3].values()[flag]) and "ps-saturation" in str(fourth[100].values()[flag])
    fifth = rows.update(state(nodes[:50], T0 + 8))  # half the tasks left: the rest keep their rows
    assert rows.made == 1 and fifth[3] is not fourth[3] and fifth[4] is fourth[4]  # worker-3's flag went
    assert len(rows.gone) == 51


def test_cells_stay_the_same_tuple_until_the_uptime_shown_changes():
    shown = ShownAt(T0)
    cells = TaskCells(view(1, started=T0 - 30), (), shown)
    first = cells()
    assert first[UP] == "<1m" and cells() is first
    shown.now = T0 + 29
    assert cells() is first  # still "<1m"
    shown.now = T0 + 30
    second = cells()
    assert second[UP] == "1m" and second[:UP] == first[:UP] and second[UP + 1 :] == first[UP + 1 :]
    old = TaskCells(view(2, started=T0 - 2 * 86_400), (), shown)
    before = old()
    shown.now = T0 + 59
    assert old() is before  # "2d00h" for the next hour


def test_the_uptime_reads_the_same_until_the_time_said():
    rng = random.Random(11)
    near = [59.5, 60.5, 3599.5, 3600.5, 86399.5, 86400.5, 90000.5]
    samples = [rng.uniform(-5, 200_000) for _ in range(3000)] + [
        b + d for b in near for d in (-1e-9, 0, 1e-9)
    ]
    for up in samples:
        until = uptime_until(up)
        assert until >= up  # never behind
        for d in (0.0, (until - up) * 0.5, (until - up) * 0.999999, rng.uniform(0, until - up)):
            if up + d < until:  # (the sum in floating point may round up to the end)
                assert uptime(up + d) == uptime(up), (up, d, until)
    assert uptime_until(30.2) == 59.5 and uptime_until(4000.0) == 4019.5 and uptime_until(90000.0) == 93599.5
    assert [uptime(s) for s in (30, 59.4, 60, 185, 3599, 3600, 90000)] == [
        "<1m",
        "<1m",
        "1m",
        "3m",
        "59m",
        "1h00m",
        "1d01h",
    ]  # minutes under an hour: a row reads the same for a minute at least


def reference_line(nodes: list[NodeView]) -> str:
    """The summary line by definition: per role (by count, ties in first appearance), up of all, the
    median of finite steps/s."""
    roles: dict[str, list[NodeView]] = {}
    for n in nodes:
        roles.setdefault(n.role, []).append(n)
    out = ""
    for role, mine in sorted(roles.items(), key=lambda kv: -len(kv[1])):
        up = sum(n.status == "up" for n in mine)
        rates = [
            n.steps_per_sec for n in mine if n.steps_per_sec is not None and math.isfinite(n.steps_per_sec)
        ]
        out += f"{role} {up:,}/{len(mine):,} up" + (f" ({len(mine) - up:,} not)" if len(mine) > up else "")
        out += f", median {rate(statistics.median(rates))} steps/s" if rates else ""
        out += "  "
    return out


def test_rows_kept_across_refreshes_match_rows_made_afresh():
    """Incremental vs fresh: over random refreshes where views are replaced, tasks trade places (the
    same count: where each task is must be found again), and flags come and go on tasks and on the job
    (its PS rows), the kept rows read exactly as a new TaskRows' would (keys, cells, sort values)."""
    rng = random.Random(7)
    nodes = [view(i, "ps" if i % 10 == 0 else "worker", steps_per_sec=1.0) for i in range(60)]
    kept = TaskRows()
    for step in range(150):
        for i in rng.sample(range(len(nodes)), rng.randint(0, 6)):
            nodes[i] = replace(nodes[i], steps_per_sec=rng.choice([1.0, 2.0, None]))
        if step % 7 == 3:
            a, b = rng.sample(range(len(nodes)), 2)
            nodes[a], nodes[b] = nodes[b], nodes[a]
        subjects = [f"j/{n.name}" for n in rng.sample(nodes, rng.randint(0, 4))] + ["j/gone-9"]
        alerts = [alert(rng.choice(["straggler", "silent"]), s) for s in subjects]
        alerts += [alert("ps-saturation", "j")] if step % 3 == 0 else []
        now = state(nodes, T0 + step, alerts)
        got, fresh = kept.update(now), TaskRows().update(now)
        assert [r.key for r in got] == [r.key for r in fresh]
        assert [r.values() for r in got] == [r.values() for r in fresh]
        assert [list(r.sort_values() or ()) for r in got] == [list(r.sort_values() or ()) for r in fresh]


def test_the_tally_is_the_defined_summary_over_random_refreshes():
    rng = random.Random(3)
    roles = ["worker"] * 8 + ["ps", "chief"]
    values = [None, float("nan"), 1.0, 2.0, 2.0, 3.5, 4.25, 5.0]
    nodes = [view(i, rng.choice(roles), steps_per_sec=rng.choice(values)) for i in range(120)]
    tally, rows = RoleTally(), TaskRows()
    for step in range(300):
        for i in rng.sample(range(len(nodes)), rng.randint(0, 30)):
            status = rng.choice(["up", "up", "up", "silent", "revoked"])
            nodes[i] = replace(nodes[i], status=status, steps_per_sec=rng.choice(values))
        if step % 50 == 49:
            nodes = nodes[:-3] + [view(1000 + step, "worker", steps_per_sec=2.0)]  # tasks leave and come
        rows.update(state(nodes, T0 + step))
        tally.swap(rows.gone, rows.new)
        assert tally.line().plain == reference_line(nodes) == role_summary(state(nodes).jobs).plain
        assert tally.counts() == (sum(n.status == "up" for n in nodes), len(nodes))


def test_replaced_is_the_multiset_difference_and_union():
    rng = random.Random(5)
    for _ in range(500):
        ordered = sorted(rng.choice([1.0, 2.0, 3.0, rng.random()]) for _ in range(rng.randint(0, 40)))
        out = rng.sample(ordered, rng.randint(0, len(ordered)))
        add = [rng.choice([1.0, 2.0, rng.random()]) for _ in range(rng.randint(0, 10))]
        left = list(ordered)
        for value in out:
            left.remove(value)
        assert replaced(ordered, out, add) == sorted(left + add)


def test_ordered_values_kept_value_by_value_match_a_fresh_sort():
    """Incremental (chunks split and emptied, small batches one by one, large ones merged) vs the values
    sorted afresh each time, and the median vs statistics.median's, over random updates."""
    rng = random.Random(11)
    pool = [1.0, 2.0, 2.0, 3.5] + [rng.random() * 4 for _ in range(50)]
    held = sorted(rng.choice(pool) for _ in range(3000))
    kept = OrderedValues(held)
    for step in range(400):
        big = step % 40 == 0
        out = rng.sample(held, min(len(held), rng.randint(0, 800 if big else 60)))
        add = [
            rng.choice(pool) if rng.random() < 0.7 else rng.random() * 4
            for _ in range(rng.randint(0, 800 if big else 70))
        ]
        for value in out:
            held.remove(value)
        held = sorted(held + add)
        kept.update(out + ([9.0] if step % 13 == 0 else []), add)  # a value not held is passed over
        assert kept.values() == held and len(kept) == len(held)
        assert kept.median() == statistics.median(held)
    for _ in range(2500):  # one value at a time past the top: the last chunk overflows and splits, often
        kept.update([], [5.0])
    held += [5.0] * 2500
    assert kept.values() == held and kept.median() == statistics.median(held)
    for value in list(held):
        kept.update([value], [])  # one by one down to nothing (every chunk emptied)
    assert not kept and kept.values() == []


class PaneApp(App[None]):
    def compose(self) -> ComposeResult:
        yield ClusterPane(id="pane-cluster")


async def test_the_pane_at_10000_tasks_repaints_only_what_changed_and_shows_names_literally():
    rng = random.Random(9)
    nodes = [view(i, steps_per_sec=rng.uniform(4, 6)) for i in range(10_000)]
    nodes[1] = view(1, name="[red]x[/]")
    app = PaneApp()
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.query_one(ClusterPane)
        table = app.query_one(FilterTable)
        pane.update_state(state(nodes))
        await pilot.pause()
        assert " [red]x[/] " in table.render_line(2).text  # a name, not markup
        summary = app.query_one("#cluster-summary", Static)
        assert summary.render().plain == role_summary(state(nodes).jobs).plain  # type: ignore[union-attr]
        painted: list[int] = []
        original = table.render_line
        table.render_line = lambda y: (painted.append(y), original(y))[1]  # type: ignore[method-assign]
        summary_updates: list[object] = []
        original_update = summary.update
        summary.update = lambda *a, **k: (summary_updates.append(a), original_update(*a, **k))  # type: ignore[method-assign]
        pane.update_state(state(nodes, T0 + 2))  # the same views, the clock on: uptimes read "2d00h" still
        await pilot.pause()
        assert painted == [] and summary_updates == []
        for i in range(5000, 6500):  # 15% changed, none on screen
            nodes[i] = replace(nodes[i], steps_per_sec=rng.uniform(4, 6))
        pane.update_state(state(nodes, T0 + 4))
        await pilot.pause()
        assert painted == [] and len(summary_updates) <= 1  # the median may move: one line
        nodes[3] = replace(nodes[3], steps_per_sec=99.0)
        pane.update_state(state(nodes, T0 + 6))
        await pilot.pause()
        assert painted == [4]  # worker-3's line, once
        assert "99.0" in table.render_line(4).text  # the new Steps/s figure, as the pane formats it
        assert isinstance(table.get_row_at(3)[1], Text)
