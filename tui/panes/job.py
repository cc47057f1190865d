"""Job pane: the job's figures (each says where it comes from) and one plot at a time — cluster
throughput measured vs predicted, steps/s per worker, cost accrued vs budget (``p`` cycles)."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from cmdare.collectors.observed import JobView, TrainingFigures
from cmdare.planner.live.sync_job import is_sync, measured_split, refusal_note
from cmdare.tui.format import clock, duration, money, num, rate, risk_words
from cmdare.tui.session import MonitorState
from cmdare.tui.widgets.plots import (
    PLOTS,
    Point,
    draw_cost,
    draw_iterations,
    draw_loss,
    draw_nodes,
    draw_throughput,
    step_changes,
)
from cmdare.tui.widgets.quiet import set_subtitle, update_static

if TYPE_CHECKING:
    from textual_plotext import PlotextPlot

    from cmdare.planner.risk_cost.checkpointing import WorkAtRisk
    from cmdare.planner.risk_cost.cost_meter import CostView

HISTORY = 240  # refreshes kept for the plots (8 min at the default 2 s)
ITERATIONS_TIMED = 10  # the newest global-step changes that time a slow iteration


def _cell(value: str, note: str = "", style: str = "") -> Text:
    """A value and, dimmed after it, where it comes from."""
    t = Text(value, style=style)
    if note:
        t.append("  " + note, style="dim")
    return t


def iteration_seconds(points: Sequence[Point], last: int = ITERATIONS_TIMED) -> tuple[float | None, int]:
    """Seconds per iteration from the times the global step was seen to change (over the ``last``
    changes), and how many iterations that spans; (None, n) before two changes were seen."""
    changes = step_changes(points)[-(last + 1) :]
    if len(changes) < 2 or changes[-1][1] <= changes[0][1]:
        return None, len(changes)
    (t0, s0), (t1, s1) = changes[0], changes[-1]
    return (t1 - t0) / (s1 - s0), int(s1 - s0)


def speed_row(sps: float | None, points: Sequence[Point], basis: str = "") -> tuple[str, Text]:
    """Steps/s, or s/iteration when an iteration takes a second or more (a geo pipeline): timed from
    the global step's changes, since a 10 s rate window sees 0 or 1 step of a 40 s iteration.
    ``basis``: where the rate comes from when not the tasks' own samples (a large fleet)."""
    per_iter, n = iteration_seconds(points)
    if sps is None or sps >= 1 or (per_iter is not None and per_iter < 1):  # a fast job (or one that stalled)
        return "Steps/s", _cell(rate(sps), f"measured ({basis})" if basis else "measured", "bold")
    if per_iter is not None:
        return "s/iteration", _cell(f"{per_iter:.1f}", f"measured over {n} iteration{'s' * (n > 1)}", "bold")
    return "s/iteration", _cell("–", "no step finished yet" if not n else "timing: needs a second step")


def summary_grid(
    job: JobView, state: MonitorState, cost: CostView | None, points: Sequence[Point] = ()
) -> Table:
    """The Job pane's summary: model, measured speed (or s/iteration), predicted speed, progress, ETA,
    tasks and cost; ``points`` are the pane's refreshes (they time a slow iteration)."""
    grid = Table.grid(padding=(0, 1), expand=True)
    grid.add_column(style="bold", no_wrap=True, width=11)
    grid.add_column(no_wrap=True, overflow="ellipsis", ratio=1)
    grid.add_row("Job", _cell(job.name, job.facts.model.name or "unknown network"))  # Text: never markup
    if job.stalled:  # no task up: the last rate is a past figure, not the job's speed
        grid.add_row("Steps/s", _stalled_cell(job))
    else:
        basis = "; ".join(b for b in (job.rate_basis, job.coverage_note("steps")) if b)
        grid.add_row(*speed_row(job.steps_per_sec, points, basis))
    view = state.planner.job(job.name)
    pred = view.prediction if view is not None else None
    if pred is not None:
        grid.add_row("Predicted", _cell(rate(pred.steps_per_sec), f"model, {pred.bottleneck}-bound"))
    split = measured_split(job) if is_sync(job) else None
    refused = refusal_note(job) if is_sync(job) else None  # figures longer than the ranks' own steps
    if split is not None:  # synchronous all-reduce: how much of a step waits for the gradients
        more = f"; {split.refused} rank(s) refused" if split.refused else ""
        grid.add_row(
            "All-reduce",
            _cell(f"{split.share:.0%} of a step", f"measured, median of {split.ranks} ranks{more}"),
        )
    elif refused:
        grid.add_row("All-reduce", _cell("–", refused))
    if not _is_pipeline(job) or job.examples_per_sec:  # a pipeline (LM) job counts no images: hidden
        grid.add_row("Images/s" if not _is_pipeline(job) else "Examples/s", _examples_cell(job))
    tr = job.training
    if tr is not None and tr.loss is not None:
        grid.add_row("Loss", _cell(num(tr.loss, 4), "logged"))
    if tr is not None and tr.learning_rate is not None:
        grid.add_row("LR", _cell(f"{tr.learning_rate:.3g}", "logged"))
    step = num(job.global_step, 0)
    if job.facts.target_steps:
        step += f"/{job.facts.target_steps:,} ({100 * (job.global_step or 0) / job.facts.target_steps:.1f}%)"
    grid.add_row("Global step", _cell(step, "measured"))
    grid.add_row("ETA", _cell(duration(job.eta_seconds), _eta_note(job, state)))
    c = job.counts
    done = c.get("finished", 0)
    tasks = f"{c['up']} up · {c['silent']} silent · {c['revoked']} revoked" + (
        f" · {done} finished" if done else ""
    )
    grid.add_row("Tasks", _cell(tasks))
    grid.add_row("Cost", _cost_cell(cost, job.stalled))
    risk = view.checkpoint if view is not None else None
    if risk is not None:
        grid.add_row("At risk", _risk_cell(risk))
    return grid


def _risk_cell(risk: WorkAtRisk) -> Text:
    value, note = risk_words(risk)
    return _cell(value, note, "bold yellow" if risk.overdue else "")


def _stalled_cell(job: JobView) -> Text:
    """'stalled  since 10:42 · last 9.6 measured · no task up' (or 'finished  …'): the state first, so
    that a narrow pane still shows it; the last rate said as past."""
    last = f" · last {rate(job.last_steps_per_sec)} measured" if job.last_steps_per_sec else ""
    word = "finished" if job.finished else "stalled"
    return _cell(word, f"since {clock(job.stalled_since)}{last} · no task up", "bold yellow")


def _is_pipeline(job: JobView) -> bool:
    """Whether the job is a pipeline across stages (a geo-distributed LM job), not image training."""
    return job.has_role("stage")


def _examples_cell(job: JobView) -> Text:
    """Examples/s measured from an examples counter, else as the job logs it."""
    if job.stalled:
        return _cell("–", "none while no task is up")
    logged = job.training.examples_per_sec if job.training else None
    if job.examples_per_sec is None and logged is not None:
        return _cell(examples(logged), "logged")
    part = job.coverage_note("examples")  # a sum over part of the tasks (a fleet's first refreshes)
    return _cell(examples(job.examples_per_sec), f"measured ({part})" if part else "measured")


def examples(x: float | None) -> str:
    """Examples/s: whole numbers, but a slow positive rate keeps two significant digits (never "0")."""
    return f"{x:.2g}" if x is not None and 0 < x < 10 else num(x, 0)


def _loss_points(tr: TrainingFigures | None) -> list[tuple[float, float]]:
    return tr.loss_points if tr is not None else []


def _eta_note(job: JobView, state: MonitorState) -> str:
    if job.stalled:
        return "none: the job finished" if job.finished else "none while the job is stalled"
    if job.eta_seconds is None:
        if not job.facts.target_steps:
            return "needs a target step"
        part = job.coverage_note("steps")  # a sum over part of the tasks is a fraction of the speed
        return f"waits for every task's rate ({part})" if part else "needs a measured rate (two polls)"
    deadline = state.planner.deadline_hours
    if deadline is None:
        return "at measured speed"
    late = job.eta_seconds / 3600 - deadline
    return f"deadline {deadline:g} h: " + ("on time" if late <= 0 else f"late by {duration(late * 3600)}")


def _cost_cell(cost: CostView | None, stalled: bool = False) -> Text:
    if stalled and cost is not None and cost.usd_per_hour is None:  # nothing up: nothing accrues now
        return _cell(f"{money(cost.accrued_usd)} · $0/h", "accrued while monitored; no task up")
    if cost is None or cost.usd_per_hour is None:
        return _cell("–", cost.unpriced[0] if cost and cost.unpriced else "no price yet")
    value = f"{money(cost.accrued_usd)} · {money(cost.usd_per_hour)}/h"
    if cost.budget_usd is None:
        note = "no budget set"
    else:
        note = f"budget {money(cost.budget_usd)}, {duration((cost.budget_left_hours or 0) * 3600)} left"
    if not cost.complete:
        note = f"{cost.unpriced_tasks:,} task(s) unpriced; " + note
    if (
        cost.assumed
    ):  # first: it qualifies the figure itself (the pane's note is short; the snapshot has it whole)
        note = "; ".join([*(a.split(" (", 1)[0] for a in cost.assumed), note])
    return _cell(value, note)


class JobPane(Vertical, can_focus=True):
    """The Job pane: the selected job's summary and one plot at a time (``p`` cycles them)."""

    KEYS_HELP = (("p", "Plot: speed/nodes/cost/loss"),)  # keys this pane answers (the help screen)
    DEFAULT_CSS = """
    JobPane #job-summary { height: auto; }
    JobPane #job-plot { height: 1fr; min-height: 5; }
    JobPane #plot-note { height: auto; color: $text-muted; }
    """

    def __init__(self, **kw) -> None:  # noqa: ANN003
        super().__init__(**kw)
        self.plot_kind = PLOTS[0]
        self._points: dict[str, deque[Point]] = {}
        self._state: MonitorState | None = None
        self._plot_pending = False
        self._plot_allowed = False  # the app allows the plot once its first data frame is painted
        self._summary_rows = -1  # the summary's rows as last drawn (its height)
        self._note: str | None = ""  # the plot's note as last drawn

    def compose(self) -> ComposeResult:
        yield Static("waiting for the first poll…", id="job-summary")
        yield Static("", id="plot-note")  # the plot itself is mounted after the first data frame

    def allow_plot(self) -> None:
        """Mount the plot from now on (the app calls this once its first data frame is painted:
        plotext, ~20 ms to import, and the plot's first draw wait for it; start-up, issue 20)."""
        self._plot_allowed = True
        if self._state is not None and self._state.job() is not None:
            self._plot_widget()

    def _plot_widget(self) -> PlotextPlot | None:
        """The plot, or None until it is mounted (after :meth:`allow_plot`, once a job is shown)."""
        found = self.query("#job-plot")
        if found:
            from textual_plotext import PlotextPlot  # imported already: it was mounted

            return found.first(PlotextPlot)
        if self._plot_allowed and not self._plot_pending:
            self._plot_pending = True
            self.call_after_refresh(self._mount_plot)
        return None

    def _mount_plot(self) -> None:
        if not self.is_attached:  # the app quit meanwhile (a signal right after the first frame)
            return
        from textual_plotext import PlotextPlot

        self.mount(PlotextPlot(id="job-plot"))
        if self._state is not None:
            self._draw(self._state)

    def next_plot(self) -> str:
        """Show the next plot (``p``); returns its name."""
        self.plot_kind = PLOTS[(PLOTS.index(self.plot_kind) + 1) % len(PLOTS)]
        if self._state is not None:
            self._draw(self._state)
        return self.plot_kind

    def update_state(self, state: MonitorState) -> None:
        """Show the selected job of ``state`` and add its newest points to the plots."""
        self._state = state
        job = state.job()
        summary = self.query_one("#job-summary", Static)
        if job is None:
            update_static(summary, Text("no job seen yet: " + "; ".join(s.message for s in state.sources)))
            return
        view = state.planner.job(job.name)
        cost = view.cost if view is not None else None
        pred = view.prediction if view is not None else None
        pts = self._points.setdefault(job.name, deque(maxlen=HISTORY))
        if not pts or pts[-1].t != state.t:
            pts.append(
                Point(
                    state.t,
                    _nan(job.steps_per_sec),
                    _nan(pred.steps_per_sec if pred else None),
                    _nan(cost.accrued_usd if cost and cost.usd_per_hour is not None else None),
                    _nan(job.global_step),
                )
            )
        grid = summary_grid(job, state, cost, pts)
        update_static(
            summary, grid, layout=grid.row_count != self._summary_rows
        )  # a layout only when its height moves
        self._summary_rows = grid.row_count
        self._draw(state)

    def _draw(self, state: MonitorState) -> None:
        job = state.job()
        if job is None:
            return
        plot = self._plot_widget()
        if plot is None:
            return
        pts = list(self._points.get(job.name, ()))
        if self.plot_kind == "throughput" and speed_row(job.steps_per_sec, pts)[0] == "s/iteration":
            why = draw_iterations(plot, pts)  # a 10 s window's steps/s of a 40 s iteration is 0 or 0.1
        elif self.plot_kind == "throughput":
            why = draw_throughput(plot, pts)
        elif self.plot_kind == "nodes":
            workers = job.workers()
            why = draw_nodes(plot, [n.name for n in workers], [n.steps_per_sec for n in workers])
        elif self.plot_kind == "loss":
            why = draw_loss(plot, _loss_points(job.training))
        else:
            view = state.planner.job(job.name)
            cost = view.cost if view is not None else None
            missing = (
                None
                if cost and cost.usd_per_hour is not None
                else (cost.unpriced[0] if cost and cost.unpriced else "no price for this job's nodes")
            )
            why = draw_cost(plot, pts, cost.budget_usd if cost else None, missing)
        note = self.query_one("#plot-note", Static)
        if why != self._note:  # each update asked for a layout of the whole screen (issue 28)
            self._note = why
            note.update(Text(why or ""))
        note.display = why is not None
        plot.display = why is None
        set_subtitle(self, f"p: next plot · {self.plot_kind}")


def _nan(x: float | None) -> float:
    return math.nan if x is None or not math.isfinite(x) else float(x)
