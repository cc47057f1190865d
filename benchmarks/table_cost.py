"""What a refresh of the Cluster table costs the UI: CPU per refresh (the pane's ``update_state`` with its
table's ``set_rows``, then the paint that follows, until ``call_after_refresh`` fires and every widget is
idle) at 1,000 and 10,000 tasks, for the real Cluster pane in a headless Textual app (Pilot, 120x40,
the table focused), and for the same pane as it was before (``_table_before.py``: DataTable with a
placeholder row per row, a new ``Row`` per task every refresh), measured in the same run, in turns.

Scenarios (synthetic NodeViews of one job; the state's time moves 2 s a refresh):
- ``15% changed``: 15% of the tasks get a new view (new steps/s, CPU %), tasks up for a day or more
  (their uptime reads ``1d04h``: it moves once an hour);
- ``none changed``: the same views, only the clock moves;
- ``15% + young``: as the first, with every task up for less than an hour (every uptime on screen moves
  every refresh);
- ``15%, sorted``: as the first, the table sorted by steps/s;
- ``table alone``: the table widget by itself (``set_rows`` and the paint), both widgets handed the
  same rows (15% of them new objects each refresh, cells made when drawn).

Run: ``.venv/bin/python benchmarks/table_cost.py [--quick] [--sizes 1000,10000] [--refreshes 8]``.
Target (issue 20): at 10,000 tasks a refresh with 15% changed costs the UI <= 20 ms of CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.widgets import Static

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the baseline beside this script
import _table_before as before  # noqa: E402

from cmdare.collectors.observed import JobView, NodeView  # noqa: E402
from cmdare.collectors.samples import JobFacts, ModelSpec  # noqa: E402
from cmdare.tui.panes.cluster import COLUMNS, ClusterPane  # noqa: E402
from cmdare.tui.session import MonitorState  # noqa: E402
from cmdare.tui.widgets.table import FilterTable, Row, TableBox  # noqa: E402

T0 = 1_700_000_000.0
FACTS = JobFacts(
    "resnet32-p100",
    ModelSpec(name="ResNet-32", model_flops=1658696889.0, params=1857722.0, batch_size=128),
    64000,
)
SCENARIOS = ("15% changed", "none changed", "15% + young", "15%, sorted", "table alone")
TARGET_MS = 20.0


class PaneBefore(ClusterPane):
    """The Cluster pane as it was: the DataTable-based table, a new row per task every refresh."""

    def compose(self) -> ComposeResult:
        yield Static(id="cluster-summary")
        yield TableBox(before.FilterTable(COLUMNS, id="cluster-table"))  # type: ignore[arg-type]

    def update_state(self, state: MonitorState) -> None:
        self.query_one(before.FilterTable).set_rows(before.rows_before(state))
        self.query_one("#cluster-summary", Static).update(before.role_summary(state.jobs), layout=False)
        total = sum(len(j.nodes) for j in state.jobs)
        up = sum(j.counts.get("up", 0) for j in state.jobs)
        self.border_subtitle = f"{up}/{total} up"


class PaneApp(App[None]):
    """One Cluster pane filling the screen."""

    def __init__(self, pane: type[ClusterPane]) -> None:
        super().__init__()
        self.pane_type = pane

    def compose(self) -> ComposeResult:
        yield self.pane_type(id="pane-cluster")


class TableAlone(ClusterPane):
    """The pane's table by itself (the new one): ``update_state`` is just ``set_rows`` of given rows."""

    def compose(self) -> ComposeResult:
        yield FilterTable(COLUMNS, id="cluster-table")

    def update_state(self, state: MonitorState) -> None:
        self.query_one(FilterTable).set_rows(ROWS[state.cycles])


class TableAloneBefore(TableAlone):
    """The old table by itself."""

    def compose(self) -> ComposeResult:
        yield before.FilterTable(COLUMNS, id="cluster-table")

    def update_state(self, state: MonitorState) -> None:
        self.query_one(before.FilterTable).set_rows(ROWS[state.cycles])


ROWS: list[list[Row]] = []  # the table-alone scenario's rows, by refresh (the same for both tables)


def given_rows(runs: list[MonitorState]) -> list[list[Row]]:
    """Each state's rows as a pane would hand them over: a new row only for a new view."""
    out: list[list[Row]] = []
    for k, s in enumerate(runs):
        job = s.jobs[0]
        last = runs[k - 1].jobs[0].nodes if k else [None] * len(job.nodes)
        made = [before.node_row(job, n, [], s.t) if n is not was else out[-1][i]
                for i, (n, was) in enumerate(zip(job.nodes, last, strict=True))]  # fmt: skip
        out.append(made)
    return out


def node(i: int, young: bool, rng: random.Random) -> NodeView:
    """Task ``i``: a P100 worker (every 50th a PS), up for minutes (``young``) or days."""
    ps = i % 50 == 0
    started = T0 - (rng.uniform(60, 3000) if young else rng.uniform(86_400, 3 * 86_400))
    return NodeView(
        name=f"{'ps' if ps else 'worker'}-{i}", role="ps" if ps else "worker", gpu="" if ps else "P100",
        region="us-central1", zone="us-central1-a", provisioning="preemptible", status="up",
        steps_per_sec=None if ps else rng.uniform(4.5, 6.0), step_seconds=None if ps else 0.083,
        gpu_util=None if ps else rng.uniform(60, 99), net_in_bps=rng.uniform(1e6, 1e8), net_out_bps=None,
        started_at=started, last_error=None, restarts=0, cause="", owns_gpu=not ps,
        cpu_pct=rng.uniform(5, 95), mem_used_bytes=rng.uniform(2e9, 20e9), mem_total_bytes=32e9,
    )  # fmt: skip


def states(n: int, share: float, young: bool, count: int, seed: int = 0) -> list[MonitorState]:
    """``count`` successive states of ``n`` tasks; each gives ``share`` of the tasks a new view."""
    rng = random.Random(seed)
    nodes = [node(i, young, rng) for i in range(n)]
    out = []
    for k in range(count):
        for i in rng.sample(range(n), int(share * n)) if k else ():
            nodes[i] = replace(nodes[i], steps_per_sec=rng.uniform(4.5, 6.0), cpu_pct=rng.uniform(5, 95))
        job = JobView(
            name=FACTS.job,
            facts=FACTS,
            steps_per_sec=5.4 * n,
            examples_per_sec=None,
            global_step=1000.0 * k,
            eta_seconds=None,
            nodes=list(nodes),
        )
        out.append(
            MonitorState(
                t=T0 + 2.0 * k,
                cycles=k,
                jobs=[job],
                alerts=[],
                alert_history=[],
                sources=[],
                demo=False,
                read_only=True,
            )
        )
    return out


async def settled(app: App[None], pilot: Pilot[None]) -> None:
    """Until the screen has been painted after what was asked, and every widget is idle."""
    done = asyncio.Event()
    app.call_after_refresh(done.set)
    await done.wait()
    await pilot.pause()


async def timed(app: App[None], pilot: Pilot[None], step: Callable[[], None]) -> float:
    """CPU seconds of ``step`` and the paint that follows (the collector paused: steadier figures)."""
    gc.collect()
    gc.disable()
    try:
        t0 = time.process_time()
        step()
        await settled(app, pilot)
        return time.process_time() - t0
    finally:
        gc.enable()


async def run(pane: type[ClusterPane], scenario: str, runs: list[MonitorState]) -> list[float]:
    """CPU seconds of each refresh after the first two (warm-up), the pane in a 120x40 app."""
    app = PaneApp(pane)
    async with app.run_test(size=(120, 40)) as pilot:
        target = app.query_one(pane)
        table = app.query_one("#cluster-table")
        table.focus()
        target.update_state(runs[0])
        await settled(app, pilot)
        if scenario.endswith("sorted"):
            for _ in range(COLUMNS.index(("Steps/s", 7)) + 1):
                table.action_sort_next()  # type: ignore[attr-defined]
            await settled(app, pilot)
        costs = [await timed(app, pilot, lambda s=s: target.update_state(s)) for s in runs[1:]]
        idle = [await timed(app, pilot, lambda: None) for _ in range(3)]
    return [c - min(idle) for c in costs[2:]]


async def measure(n: int, scenario: str, refreshes: int) -> tuple[float, float]:
    """Median CPU ms per refresh before and after, in turns (two turns each)."""
    young = scenario.endswith("young")
    runs = states(n, 0.0 if scenario == "none changed" else 0.15, young, refreshes + 3)
    panes: tuple[type[ClusterPane], type[ClusterPane]] = (PaneBefore, ClusterPane)
    if scenario == "table alone":
        ROWS[:] = given_rows(runs)
        panes = (TableAloneBefore, TableAlone)
    got: dict[type[ClusterPane], list[float]] = {pane: [] for pane in panes}
    for _ in range(2):
        for pane in panes:
            got[pane] += await run(pane, scenario, runs)
    return 1000 * statistics.median(got[panes[0]]), 1000 * statistics.median(got[panes[1]])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="CI-sized run (fewer refreshes)")
    ap.add_argument("--sizes", default="1000,10000", help="comma-separated task counts")
    ap.add_argument("--refreshes", type=int, default=8, help="measured refreshes per turn")
    a = ap.parse_args()
    refreshes = 4 if a.quick else a.refreshes
    sizes = [int(s) for s in a.sizes.split(",") if s.strip()]
    print("CPU ms per refresh of the Cluster pane (update_state + set_rows + the paint that follows;")
    print("'table alone': set_rows + the paint),")
    print(f"median of {2 * refreshes} per cell, 120x40, the harness's own idle wait subtracted")
    print(f"{'tasks':>7}  {'scenario':<13} {'before':>9} {'after':>8} {'ratio':>7}")
    target: tuple[float, float] | None = None
    for n in sizes:
        for scenario in SCENARIOS:
            old, new = asyncio.run(measure(n, scenario, refreshes))
            print(f"{n:>7,}  {scenario:<13} {old:>9.1f} {new:>8.1f} {new / old:>7.3f}", flush=True)
            target = (old, new) if (n, scenario) == (10_000, SCENARIOS[0]) else target
    if target is not None:
        old, new = target
        verdict = "PASS" if new <= TARGET_MS else "MISS"
        print(f"10,000 tasks, 15% changed: {new:.1f} ms per refresh (target <= {TARGET_MS:.0f} ms): {verdict}; "
              f"ratio after/before {new / old:.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
