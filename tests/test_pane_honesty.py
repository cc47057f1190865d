"""The Planner and Alerts panes say what a figure is (issue 16 items 3 and 6, issue 18 formatting): the real
app on the real demo cluster, driven by its Pilot; and the evidence formatter on its own."""

from __future__ import annotations

import re

import pytest

from cmdare.tui.panes.alerts import evidence_rows, evidence_value
from cmdare.tui.widgets.table import FilterTable
from tests.pilot_app import fast_demo_app, wait_for

pytestmark = pytest.mark.slow


async def test_planner_columns_carry_units_and_the_alert_names_its_measurements():
    app = fast_demo_app(first_revocation_s=1000)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.state is not None and getattr(app.state.planner.job("resnet32-p100"), "ranked", None) is not None,
                       timeout=30)  # fmt: skip
        await pilot.pause(1.2)
        pane = app.query_one("#pane-planner")
        assert "price date unknown" in pane.border_subtitle  # the offline book's rows carry no price date
        labels = [str(c.label) for c in app.query_one("#ranked-table", FilterTable).columns.values()]
        assert "P(≥1 rev)" in labels and "Risk" not in labels
        table = app.query_one("#ranked-table", FilterTable)
        deltas = [str(table.get_row_at(i)[3]) for i in range(1, min(table.row_count, 6))]
        assert deltas and all(d.endswith("%") and len(d) <= 5 for d in deltas)  # Δtime: its own column
        await wait_for(pilot, lambda: any(a.kind == "ps-saturation" for a in app.state.alerts), timeout=30)
        a = next(a for a in app.state.alerts if a.kind == "ps-saturation")
        assert a.evidence["measured"] and ("band: n/a until calibrated" in a.fix or "P10–P90" in a.fix)
        rows = dict(evidence_rows(a.evidence))
        assert rows["Rests on"].startswith("cluster steps/s") and "  efficiency" in rows


def test_evidence_values_have_units_and_words_not_raw_floats():
    assert evidence_value("steps_per_sec", 186.8361358642578) == "186.8 steps/s"
    assert evidence_value("ps_cpu_util", None) == "not measured"
    assert evidence_value("efficiency", 0.481) == "48%"
    assert evidence_value("ps_nic_gbps", 2.588) == "2.588 Gbit/s"
    assert evidence_value("fix_predicted_gain", 0.698) == "+70%"
    assert evidence_value("projected_usd", 4.2) == "$4.20"
    assert evidence_value("window_s", 10.0) == "10 s"
    assert evidence_value("measured", ["a", "b"]) == "a, b"
    assert evidence_value("bytes_per_microbatch", 50_000_000) == "50,000,000 B"


async def test_planner_pane_shows_an_unpriced_k80_job_as_price_unknown_and_ranks_the_rest():
    """The real PlannerPane in a Textual app, fed the live plan of a K80 job (GCP no longer prices K80)."""
    from textual.app import App, ComposeResult

    from cmdare.collectors.observed import JobView
    from cmdare.collectors.pricing import load_offline_book
    from cmdare.planner.live.plan import LivePlanner
    from cmdare.planner.speed.speed_model import SpeedModel
    from cmdare.planner.view import JobPlannerView, PlannerView
    from cmdare.tui.panes.planner import PlannerPane
    from cmdare.tui.session import MonitorState
    from tests.test_live_plan import FACTS, node

    nodes = [node("ps-0", "ps")] + [node(f"worker-{i}", "worker", gpu="K80", step_s=0.22) for i in range(8)]
    job = JobView(
        name="j",
        facts=FACTS,
        steps_per_sec=36.0,
        examples_per_sec=36.0 * 128,
        global_step=1000.0,
        eta_seconds=None,
        nodes=nodes,
        history=[36.0] * 10,
    )
    plan = LivePlanner(SpeedModel.load(), load_offline_book()).update(job, now=0.0)
    state = MonitorState(
        t=0.0,
        cycles=1,
        jobs=[job],
        alerts=[],
        alert_history=[],
        sources=[],
        demo=False,
        read_only=True,
        planner=PlannerView(jobs=(JobPlannerView(job="j", plan=plan),)),
    )

    class Host(App):
        def compose(self) -> ComposeResult:
            yield PlannerPane(id="pane-planner")

    app = Host()
    async with app.run_test(size=(120, 30)) as pilot:
        pane = app.query_one(PlannerPane)
        pane.update_state(state)
        await pilot.pause()
        table = app.query_one("#ranked-table", FilterTable)
        first = [str(c) for c in table.get_row_at(0)]
        assert "8×K80" in first[0] and first[2] == "unknown"
        assert table.row_count > 10 and str(table.get_row_at(1)[2]).startswith("$")
        assert str(table.get_row_at(1)[4]) == "n/a"  # Δcost: the current shape has no price
        assert re.search(r"current( shape)?: price unknown", str(pane.border_subtitle))  # fitted to the pane


def test_explanation_of_a_ranked_row_states_the_band_units_region_move_and_one_bottleneck():
    from pathlib import Path

    from rich.console import Console

    from cmdare.tui.commands.plan import build_table
    from cmdare.tui.widgets.explain import ExplainScreen

    table = build_table(Path(__file__).resolve().parents[1] / "examples/workload-resnet32.toml", "balanced")
    i = int(table.view[0])
    screen = ExplainScreen.for_ranked(table, i)
    console = Console(width=200, record=True)
    console.print(screen._body)
    text = console.export_text()
    assert "Steps/s" in text and ("P10–P90" in text or "band: n/a in this build" in text)
    assert "P(≥1 revocation)" in text and "Region move" in text and "capacity not guaranteed" in text
    assert "dominant" not in screen._foot
