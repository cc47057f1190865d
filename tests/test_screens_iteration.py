"""Issue 18 (screens): a geo pipeline's iteration takes ~40 s, so a 10 s rate window sees 0 or 1 step:
the Job pane times the iteration from the global step's changes and never shows "Steps/s 0.0" for a
figure it has not measured. Polls as the pane records them (one Point per refresh)."""

from __future__ import annotations

import math

from cmdare.tui.panes.job import iteration_seconds, speed_row
from cmdare.tui.widgets.plots import Point

NAN = math.nan


def polls(iteration_s: float, seconds: float, every: float = 2.0, start_step: int = 100) -> list[Point]:
    """Refreshes every ``every`` s of a job whose global step advances once per ``iteration_s``."""
    n = int(seconds / every) + 1
    return [
        Point(i * every, NAN, NAN, NAN, float(start_step + int(i * every / iteration_s))) for i in range(n)
    ]


def test_a_40s_iteration_is_timed_from_the_global_step():
    per_iter, n = iteration_seconds(polls(40.0, 200.0))
    assert n == 4 and abs(per_iter - 40.0) <= 2.0  # within one poll interval
    label, cell = speed_row(0.1, polls(40.0, 200.0))  # a 10 s window that caught one step
    assert (
        label == "s/iteration"
        and cell.plain.startswith("40.0")
        and "measured over 4 iterations" in cell.plain
    )


def test_before_two_steps_it_says_so_instead_of_zero():
    label, cell = speed_row(0.0, polls(40.0, 30.0))
    assert label == "s/iteration" and cell.plain.startswith("–") and "no step finished yet" in cell.plain
    label, cell = speed_row(0.1, polls(40.0, 60.0))
    assert cell.plain.startswith("–") and "needs a second step" in cell.plain
    assert "0.0" not in cell.plain


def test_a_fast_job_keeps_steps_per_second_even_when_it_stalls():
    assert speed_row(42.0, polls(0.05, 20.0))[0] == "Steps/s"
    label, cell = speed_row(0.0, polls(0.05, 20.0))  # it was fast: a stall is a measured 0
    assert label == "Steps/s" and cell.plain.startswith("0.0")
    assert speed_row(None, [])[0] == "Steps/s"  # before two polls: the usual "–"


def test_a_slow_examples_rate_is_never_shown_as_zero():
    from cmdare.tui.panes.job import examples

    assert examples(0.12) == "0.12" and examples(5530.4) == "5,530" and examples(None) == "–"
    assert examples(0.0) == "0"  # a measured zero stays zero


async def test_a_slow_jobs_plot_shows_seconds_per_iteration():
    from textual.app import App, ComposeResult
    from textual_plotext import PlotextPlot

    from cmdare.tui.widgets.plots import PLOT_TITLES, draw_iterations

    class PlotApp(App[None]):
        def compose(self) -> ComposeResult:
            yield PlotextPlot()

    app = PlotApp()
    async with app.run_test(size=(80, 24)) as pilot:
        plot = app.query_one(PlotextPlot)
        assert "waiting for three advances" in draw_iterations(plot, polls(40.0, 70.0))  # one step seen
        assert draw_iterations(plot, polls(40.0, 200.0)) is None
        await pilot.pause()
        assert plot.shown_title == PLOT_TITLES["iterations"] and "predicted" not in plot.shown_title


def test_the_snapshot_report_says_s_per_iteration_for_a_slow_pipeline():
    from types import SimpleNamespace

    from cmdare.tui.plain import speed_phrase

    def job(sync: str, sps: float | None) -> SimpleNamespace:
        return SimpleNamespace(
            sync=sync, steps_per_sec=sps, stalled=False, coverage_note=lambda: None
        )  # every task rated

    assert speed_phrase(job("pipeline", 0.025)) == "40.0 s/iteration measured"
    assert speed_phrase(job("pipeline", 0.0)).startswith("no iteration finished in the rate window")
    assert speed_phrase(job("async-ps", 0.0)) == "0.0 steps/s measured"  # a fast job's stall is a measured 0
    assert speed_phrase(job("pipeline", 3.0)) == speed_phrase(job("", 3.0)) == "3.0 steps/s measured"
