"""The real app, driven by its Pilot, on the real demo cluster (exporters on 127.0.0.1)."""

from __future__ import annotations

import pytest

from cmdare.demo.cluster import DemoCluster
from cmdare.tui.app import CmdareApp
from cmdare.tui.options import SessionOptions
from cmdare.tui.panes.planner import PIPELINE_COLUMNS
from cmdare.tui.session import MonitorSession
from cmdare.tui.widgets.table import FilterTable
from tests.pilot_app import fast_demo_app, wait_for

pytestmark = pytest.mark.slow


async def test_panes_show_live_demo_data():
    app = fast_demo_app(first_revocation_s=1000)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.state is not None and app.state.cycles >= 3)
        titles = [p.border_title for p in app.query(".pane")]
        assert titles == ["Cluster", "Job", "Planner", "Alerts"]
        cluster = app.query_one("#cluster-table", FilterTable)
        assert cluster.row_count == 9
        first = app.state.job().steps_per_sec
        await wait_for(pilot, lambda: app.state.job().steps_per_sec != first)
        assert 5 < app.state.job().steps_per_sec < 80  # P100 ResNet-32 measured range
        assert "DEMO" in str(app.query_one("#badges").render())
        planner = app.query_one("#planner-table", FilterTable)
        assert planner.row_count > 3


async def test_revoked_worker_turns_up_in_alerts():
    # a revocation every 6 s (notice 1 s + replacement 2.2 s at time_factor 30): one still falls inside the
    # wait when a loaded machine starts the app after the first one is over
    app = fast_demo_app(first_revocation_s=3.0, revoke_every_s=6.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(
            pilot, lambda: app.state is not None and any(a.kind == "node-revoked" for a in app.state.alerts)
        )
        alerts = app.query_one("#alerts-table", FilterTable)
        kinds = [str(c) for c in alerts.get_column("Kind")]
        assert "node-revoked" in kinds
        revoked = [n for n in app.state.job().nodes if n.status == "revoked"]
        assert len(revoked) == 1 and revoked[0].cause == "preempted"


async def test_keys_move_between_panes_help_and_quit():
    app = fast_demo_app(first_revocation_s=1000)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.state is not None)
        assert app.query_one("#panes").has_class("-compact")
        assert app.query_one("#pane-cluster").display
        await pilot.press("tab")
        assert app.query_one("#pane-job").display
        assert not app.query_one("#pane-cluster").display
        await pilot.press("shift+tab", "4")
        assert app.query_one("#pane-alerts").display and not app.query_one("#pane-job").display
        await pilot.press("question_mark")
        assert app.help_shown and app.focused is app.query_one("#alerts-table")  # the help: keys only
        await pilot.press("escape")
        assert not app.help_shown and app.query_one("#pane-alerts").has_class("-focused")
        await pilot.press("q")
    assert app.return_value == 0


async def test_planner_pane_ranks_alternatives_calibrated_on_the_live_job():
    app = fast_demo_app(first_revocation_s=1000)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(
            pilot,
            lambda: (
                app.state is not None
                and getattr(app.state.planner.job("resnet32-p100"), "ranked", None) is not None
            ),
            timeout=30,
        )
        await pilot.pause(1.2)  # one more refresh renders the ranking
        pane = app.query_one("#pane-planner")
        assert "by balanced" in pane.border_subtitle and "offline prices" in pane.border_subtitle
        assert "calibrated" in pane.border_subtitle and "not calibrated" not in pane.border_subtitle
        assert len(str(pane.border_subtitle)) <= pane.size.width - 6  # fitted, never cut by the border
        table = app.state.planner.job("resnet32-p100").ranked
        cur = table.current
        assert (cur["gpu"], cur["workers"], cur["ps"]) == ("P100", 8, 1)
        assert table.top(1)[0]["steps_per_sec"] > cur["steps_per_sec"]


async def test_next_job_shows_the_geo_pipeline_and_its_wan_bound_link():
    opts = SessionOptions(demo=True, refresh=0.5)
    session = MonitorSession(opts, demo_factory=lambda: DemoCluster(geo=True, first_revocation_s=1000))
    app = CmdareApp(opts, session)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.state is not None and len(app.state.jobs) == 2)
        assert app.state.job().name == "resnet32-p100"
        await pilot.press("n")
        assert app.state.job().name == "lm-pipeline-3dc"
        await wait_for(
            pilot,
            lambda: (
                (p := getattr(app.state.planner.job("lm-pipeline-3dc"), "pipeline", None)) is not None
                and p.wan_bound > 0
            ),
            timeout=30,
        )
        await pilot.pause(0.6)
        pane = app.query_one("#pane-planner")
        assert pane.mode == "pipeline" and "WAN-bound" in pane.border_subtitle
        table = app.query_one("#pipeline-table", FilterTable)
        rows = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        labels = [label for label, _ in PIPELINE_COLUMNS]
        dcs, verdict = labels.index("DCs"), labels.index("Verdict")
        assert any(r[0] == "5->6" and r[dcs] == "usw1→euw4" and r[verdict] == "WAN-bound" for r in rows), rows
        assert any(r[verdict] == "ok" for r in rows)  # the fast link is not flagged


async def test_a_failing_planner_is_a_status_not_a_crash(monkeypatch):
    """Fault injected (no real part fails on demand here): the planner raises on every refresh."""
    from cmdare.planner import analysis

    def broken(*a, **k):
        raise RuntimeError("fitted parameters unreadable")

    monkeypatch.setattr(analysis.Analysis, "refresh", broken)
    app = fast_demo_app(first_revocation_s=1000)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.state is not None and app.state.cycles >= 3)
        assert app.query_one("#cluster-table", FilterTable).row_count == 9  # measurements still shown
        assert any("planner unavailable" in s.message for s in app.state.sources)
        assert "planner unavailable" in str(app.query_one("#badges").render())
