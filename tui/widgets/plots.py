"""Terminal plots (braille / block, via textual-plotext) for the Job pane. Each ``draw_*`` takes plain
numbers and returns None when it drew, or a sentence saying why there is nothing to draw."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # plotext loads when the Job pane first draws (tui/panes/job.py)
    from textual_plotext import PlotextPlot

PLOTS = ("throughput", "nodes", "cost", "loss")
PLOT_TITLES = {
    "throughput": "steps/s: measured vs predicted",
    "iterations": "s/iteration, measured (between advances of the global step)",
    "nodes": "steps/s per worker, measured",
    "cost": "USD accrued while monitored",
    "loss": "training loss, as logged",
}


NODE_PLOT_CHROME = 4  # plot rows that are not bars: title, top and bottom frame, x ticks


@dataclass(frozen=True)
class Point:
    """One refresh: time (s), measured and predicted steps/s, USD accrued, global step (NaN when unknown)."""

    t: float
    measured: float
    predicted: float
    accrued: float
    global_step: float = math.nan


def _finite(xs: Sequence[float]) -> bool:
    return any(math.isfinite(x) for x in xs)


def _reset(plot: PlotextPlot, title: str) -> None:
    plt = plot.plt
    plt.clear_figure()  # the widget re-applies its theme on every render
    plt.title(title)
    plot.shown_title = title  # type: ignore[attr-defined]  # what the plot says it shows (tests read it)


def step_changes(points: Sequence[Point]) -> list[tuple[float, float]]:
    """(time, global step) of each refresh at which the global step was seen to advance."""
    seen = [(p.t, p.global_step) for p in points if math.isfinite(p.global_step)]
    return [(t, s) for (_, s0), (t, s) in zip(seen, seen[1:], strict=False) if s > s0]


def draw_iterations(plot: PlotextPlot, points: Sequence[Point]) -> str | None:
    """Seconds per iteration, each timed between two advances of the global step (for a job whose
    iteration outlasts the rate window, such as a geo pipeline); no predicted line is claimed."""
    changes = step_changes(points)
    timed = [(t1, (t1 - t0) / (s1 - s0)) for (t0, s0), (t1, s1) in zip(changes, changes[1:], strict=False)]
    if len(timed) < 2:
        return (
            "s/iteration: waiting for three advances of the global step (each iteration is timed between two)"
        )
    now = points[-1].t
    _reset(plot, PLOT_TITLES["iterations"])
    plot.plt.plot([t - now for t, _ in timed], [v for _, v in timed], marker="braille", label="measured")
    plot.plt.xlabel("seconds before now")
    plot.refresh()
    return None


def draw_throughput(plot: PlotextPlot, points: Sequence[Point]) -> str | None:
    """Measured (braille line) and predicted (dots) cluster steps/s against seconds before now."""
    if len(points) < 2 or not _finite([p.measured for p in points]):
        return "throughput: waiting for two polls with a measured rate"
    now = points[-1].t
    xs = [p.t - now for p in points]
    predicted = _finite([p.predicted for p in points])
    _reset(plot, PLOT_TITLES["throughput"] if predicted else "steps/s: measured (no prediction for this job)")
    plt = plot.plt
    plt.plot(xs, [p.measured if math.isfinite(p.measured) else None for p in points], marker="braille",
             label="measured")  # fmt: skip
    if predicted:
        plt.plot(xs, [p.predicted if math.isfinite(p.predicted) else None for p in points], marker="•",
                 label="predicted")  # fmt: skip
    plt.xlabel("seconds before now")
    plot.refresh()
    return None


def nodes_shown(
    names: Sequence[str], rates: Sequence[float | None], room: int
) -> tuple[list[str], list[float]]:
    """The workers that fit ``room`` bars: the slowest first (a revoked worker counts as 0)."""
    pairs = sorted(zip(names, [r or 0.0 for r in rates], strict=True), key=lambda p: p[1])[: max(1, room)]
    return [n for n, _ in pairs], [r for _, r in pairs]


def nodes_title(k: int, n: int, room: int) -> str:
    """The per-worker plot's title, at most ``room`` characters when it can be (plotext drops a title wider
    than the plot's canvas, "k of n" with it): the full title, else shorter forms that keep "k of n"."""
    if k >= n:
        return PLOT_TITLES["nodes"]
    forms = (f"{PLOT_TITLES['nodes']} · slowest {k} of {n} workers", f"steps/s per worker · slowest {k} of {n}",
             f"slowest {k} of {n} workers", f"{k} of {n} workers")  # fmt: skip
    return next((f for f in forms if len(f) <= room), forms[-1])


def draw_nodes(plot: PlotextPlot, names: Sequence[str], rates: Sequence[float | None]) -> str | None:
    """Horizontal bars: each worker's own steps/s (a revoked worker shows as 0 and says so). When the plot
    has fewer rows than workers it shows the slowest ones and its title says "k of n"."""
    if not names:
        return "per-node: no worker seen yet"
    room = plot.size.height - NODE_PLOT_CHROME if plot.size.height else len(names)
    shown, values = (
        nodes_shown(names, rates, room) if room < len(names) else (list(names), [r or 0.0 for r in rates])
    )
    canvas = plot.size.width - max(map(len, shown)) - 3 if plot.size.width else 1 << 10  # bars' width
    _reset(plot, nodes_title(len(shown), len(names), canvas))
    plot.plt.bar(shown, values, orientation="horizontal", width=0.1)
    if plot.size.height and len(shown) < room:  # one row a bar (a wider scale drew a bar over 2-3 rows)
        plot.plt.ylim(0.5, room + 0.5)
    plot.refresh()
    return None


def draw_cost(
    plot: PlotextPlot, points: Sequence[Point], budget: float | None, why_missing: str | None
) -> str | None:
    """USD accrued over time, and the budget as a flat line when one is set."""
    if why_missing:
        return f"cost: – ({why_missing})"
    if len(points) < 2:
        return "cost: waiting for two polls"
    now = points[-1].t
    xs = [p.t - now for p in points]
    _reset(plot, PLOT_TITLES["cost"])
    plt = plot.plt
    plt.plot(xs, [p.accrued for p in points], marker="braille", label="accrued")
    if budget:
        plt.plot([xs[0], xs[-1]], [budget, budget], marker="•", label=f"budget ${budget:,.0f}")
    plt.xlabel("seconds before now")
    plot.refresh()
    return None


def draw_loss(plot: PlotextPlot, points: Sequence[tuple[float, float]]) -> str | None:
    """The logged training loss against seconds before its newest point."""
    if len(points) < 2:
        return (
            "loss: the job logs no loss (TensorBoard tag such as loss, train/loss, epoch_loss)"
            if not points
            else "loss: waiting for a second logged value"
        )
    now = points[-1][0]
    _reset(plot, PLOT_TITLES["loss"])
    plot.plt.plot([t - now for t, _ in points], [v for _, v in points], marker="braille", label="loss")
    plot.plt.xlabel("seconds before the newest value")
    plot.refresh()
    return None
