"""Issue 18 (screens): the Job pane's plots say what they show — the per-worker plot says "k of n" when not
every worker fits, and the throughput plot is titled "measured vs predicted" only with a predicted line. The
real app on the real demo cluster (Pilot), at 80x24 and 120x40."""

from __future__ import annotations

import re

import pytest
from textual_plotext import PlotextPlot

from cmdare.tui.widgets.plots import NODE_PLOT_CHROME, nodes_shown, nodes_title
from tests.test_app_pilot import fast_demo_app, wait_for


def test_nodes_shown_keeps_the_slowest():
    assert nodes_shown(["a", "b", "c"], [3.0, None, 1.0], 2) == (["b", "c"], [0.0, 1.0])


def test_the_k_of_n_title_fits_the_canvas():
    assert nodes_title(8, 8, 10) == "steps/s per worker, measured"
    assert nodes_title(4, 8, 80).endswith("slowest 4 of 8 workers")
    for room in (36, 26, 14):
        title = nodes_title(4, 8, room)
        assert len(title) <= room and "4 of 8" in title, (room, title)


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_per_worker_plot_says_k_of_n(size):
    app = fast_demo_app(first_revocation_s=1000)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.state is not None and app.state.cycles >= 2)
        await pilot.press("2", "p")
        plot = app.query_one(PlotextPlot)
        await wait_for(pilot, lambda: "per worker" in getattr(plot, "shown_title", ""), timeout=20)
        await pilot.pause(0.3)
        n = len(app.state.job().workers())
        room = plot.size.height - NODE_PLOT_CHROME
        drawn = plot.render().plain  # what the terminal shows (plotext drops a title wider than its canvas)
        if room < n:
            assert f"slowest {room} of {n}" in plot.shown_title and plot.shown_title in drawn, drawn
        else:
            assert "of" not in plot.shown_title and plot.shown_title in drawn
        labelled = [line for line in drawn.splitlines() if "┤" in line]
        bars = [line for line in drawn.splitlines() if "█" in line]
        assert len(labelled) == min(room, n), drawn  # one row a bar, each with its worker's name
        assert all("┤" in line for line in bars), drawn


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
        pipeline = lambda: app.state.planner.job("lm-pipeline-3dc").pipeline  # noqa: E731
        await wait_for(pilot, lambda: all(b.bytes_per_microbatch > 0 for b in pipeline().boundaries))
        table.focus()
        await pilot.pause(0.3)
        assert_wire_time_readable(table, pipeline(), size)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ExplainScreen), timeout=10)
        await pilot.pause(0.3)
        text = popup_text(app.screen)
        links = {f"{b.link_gbps:.2f}" for b in pipeline().boundaries}
        shown = re.search(r"Capacity (\S+) Gbit/s capacity", text)
        assert shown and shown.group(1) in links, text  # the link's own capacity, not the rate it sent
        worked = re.search(r"([\d.]+) MB × 8 ÷ ([\d.]+) Gbit/s = ([\d.]+) s", text)
        mb, gbps, wire = map(float, worked.groups())
        assert mb > 0 and gbps == float(shown.group(1)) and abs(mb * 8 / (gbps * 1e3) - wire) <= 0.002, text
        assert "on average" in text and "paces every stage" in text  # why the sent rate is no capacity
        await pilot.press("escape")


def popup_text(screen) -> str:
    """The explanation popup's body as plain text, at its own width."""
    from rich.console import Console
    from textual.containers import VerticalScroll

    body = screen.query_one(VerticalScroll)
    console = Console(width=body.content_region.width, color_system=None)
    with console.capture() as cap:
        console.print(screen._body)
    return screen._title + "\n" + " ".join(cap.get().split())


def assert_wire_time_readable(table, pipeline, size) -> None:
    """Each boundary's wire time reads off the screen: MB/mb × 8 ÷ Link Gb/s = Wire s/mb, with the link's
    capacity (the demo's [links]) — two boundaries sending alike at different capacities are told apart."""
    from cmdare.tui.panes.planner import PIPELINE_COLUMNS

    labels = [label for label, _ in PIPELINE_COLUMNS]
    last = "Compute s" if size == (80, 24) else "Wire s/mb"
    widths = [c.get_render_width(table) for c in table.ordered_columns]
    assert sum(widths[: labels.index(last) + 1]) <= table.scrollable_content_region.width
    links = set()
    for i in range(table.row_count):
        row = dict(zip(labels, (str(c) for c in table.get_row_at(i)), strict=True))
        mb, link, wire = float(row["MB/mb"]), float(row["Link Gb/s"]), float(row["Wire s/mb"])
        assert abs(mb * 8 / (link * 1e3) - wire) <= 0.01 * wire + 0.002, row
        links.add(link)
    known = {b.link_gbps for b in pipeline.boundaries}
    assert None not in known and links == {round(g, 2) for g in known} and len(links) == 2


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_eta_at_the_first_poll_asks_for_a_rate_not_a_target(size):
    """The demo job has a target step; before a second poll there is no rate, and the ETA says so."""
    from rich.console import Console
    from textual.widgets import Static

    from cmdare.demo.cluster import DemoCluster
    from cmdare.tui.app import CmdareApp
    from cmdare.tui.options import SessionOptions
    from cmdare.tui.session import MonitorSession

    opts = SessionOptions(demo=True, refresh=600)  # one poll for the whole test
    app = CmdareApp(opts, MonitorSession(opts, demo_factory=lambda: DemoCluster(first_revocation_s=1000)))
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.state is not None and app.state.cycles == 1)
        await pilot.press("2")
        await pilot.pause(0.3)
        job = app.state.job()
        assert job.facts.target_steps and job.eta_seconds is None
        summary = app.query_one("#job-summary", Static)
        console = Console(width=summary.content_region.width, color_system=None)
        with console.capture() as cap:
            console.print(summary.content)
        eta = next(line for line in cap.get().splitlines() if line.startswith("ETA"))
        assert "needs a measured rate" in eta and "target" not in eta, eta


def test_the_deferred_plot_is_not_mounted_into_a_pane_the_app_has_left():
    """A quit signal right after the first data frame detaches the panes before the plot's deferred
    mount runs (seen once in tmux: a MountError traceback and exit 1 instead of 0): it does nothing."""
    from cmdare.tui.panes.job import JobPane

    pane = JobPane()
    assert not pane.is_attached
    pane._mount_plot()  # no MountError
    assert not pane.children
