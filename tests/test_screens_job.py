"""Issue 18 (screens): the Job pane's plots say what they show — the per-worker plot says "k of n" when not
every worker fits, and the throughput plot is titled "measured vs predicted" only with a predicted line. The
real app on the real demo cluster (Pilot), at 80x24 and 120x40."""

from __future__ import annotations

import pytest
from textual_plotext import PlotextPlot

from cmdare.tui.widgets.plots import nodes_shown
from tests.test_app_pilot import fast_demo_app, wait_for


def test_nodes_shown_keeps_the_slowest():
    assert nodes_shown(["a", "b", "c"], [3.0, None, 1.0], 2) == (["b", "c"], [0.0, 1.0])


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_per_worker_plot_says_k_of_n(size):
    app = fast_demo_app(first_revocation_s=1000)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.state is not None and app.state.cycles >= 2)
        await pilot.press("2", "p")
        plot = app.query_one(PlotextPlot)
        await wait_for(pilot, lambda: "per worker" in getattr(plot, "shown_title", ""), timeout=20)
        n = len(app.state.job().workers())
        room = plot.size.height - 5
        if room < n:
            assert plot.shown_title.endswith(f"slowest {room} of {n} workers")
        else:
            assert "of" not in plot.shown_title


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_geo_job_says_s_per_iteration_hides_images_and_explains_a_boundary(size):
    from cmdare.demo.cluster import DemoCluster
    from cmdare.tui.app import CmdareApp
    from cmdare.tui.options import SessionOptions
    from cmdare.tui.session import MonitorSession
    from cmdare.tui.widgets.explain import ExplainScreen

    opts = SessionOptions(demo=True, refresh=0.5)
    session = MonitorSession(opts, demo_factory=lambda: DemoCluster(geo=True, first_revocation_s=1000))
    app = CmdareApp(opts, session)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.state is not None and len(app.state.jobs) == 2)
        await pilot.press("n")
        await wait_for(
            pilot,
            lambda: (
                app.state.job().name == "lm-pipeline-3dc"
                and getattr(app.state.planner.job("lm-pipeline-3dc"), "pipeline", None)
            ),
            timeout=30,
        )
        await pilot.pause(0.6)
        from cmdare.tui.panes.job import JobPane, summary_grid

        points = list(app.query_one(JobPane)._points.get("lm-pipeline-3dc", ()))
        grid = summary_grid(app.state.job(), app.state, None, points)
        labels = [str(c) for c in grid.columns[0].cells]
        values = [c.plain for c in grid.columns[1].cells]
        assert "Images/s" not in labels
        sps = app.state.job().steps_per_sec
        if sps is not None and sps < 1:  # a 40 s iteration: timed from the global step, never "0.0"
            row = labels.index("s/iteration")
            assert "Steps/s" not in labels and not values[row].startswith("0.0")
        await pilot.press("3")
        table = app.query_one("#pipeline-table")
        await wait_for(
            pilot, lambda: app.query_one("#pane-planner").mode == "pipeline" and table.row_count > 0
        )
        table.focus()
        await pilot.pause(0.3)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ExplainScreen), timeout=10)
        await pilot.press("escape")
