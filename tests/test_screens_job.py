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
