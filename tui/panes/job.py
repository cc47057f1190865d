"""Job pane: cluster throughput over time, global step, ETA — each figure says where it comes from."""

from __future__ import annotations

import math

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Sparkline, Static

from cmdare.tui.format import duration, num, rate
from cmdare.tui.session import MonitorState


class JobPane(Vertical):
    DEFAULT_CSS = """
    JobPane #job-summary { height: auto; }
    JobPane Sparkline { height: 1fr; min-height: 2; margin: 1 0 0 0; }
    """

    def compose(self) -> ComposeResult:
        yield Static("waiting for the first poll…", id="job-summary")
        yield Sparkline([], id="job-throughput", summary_function=max)

    def update_state(self, state: MonitorState) -> None:
        job = state.job()
        summary = self.query_one("#job-summary", Static)
        spark = self.query_one(Sparkline)
        if job is None:
            summary.update("no job seen yet: " + "; ".join(s.message for s in state.sources))
            return
        grid = Table.grid(padding=(0, 1))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column(no_wrap=True)
        grid.add_column(style="dim", no_wrap=True)
        facts = job.facts
        model = facts.model or "unknown network"
        grid.add_row("Job", Text(job.name), Text(model))
        grid.add_row("Steps/s", Text(rate(job.steps_per_sec), style="bold cyan"), "measured")
        pred = state.extras.get("predicted", {}).get(job.name)
        if pred is not None:
            grid.add_row("Predicted", Text(rate(pred.steps_per_sec)), f"model: {pred.bottleneck}-bound")
        grid.add_row("Images/s", Text(num(job.examples_per_sec, 0)), "measured")
        step = num(job.global_step, 0)
        if facts.target_steps:
            done = (job.global_step or 0) / facts.target_steps
            step += f" / {facts.target_steps:,} ({100 * done:.1f}%)"
        grid.add_row("Global step", Text(step), "measured")
        grid.add_row("ETA", Text(duration(job.eta_seconds)), "at measured speed" if job.eta_seconds else "needs a target")
        counts = job.counts
        grid.add_row("Tasks", Text(f"{counts['up']} up · {counts['silent']} silent · {counts['revoked']} revoked"), "")
        summary.update(grid)
        spark.data = [x for x in job.history if math.isfinite(x)] or [0.0]
        self.border_subtitle = f"steps/s, last {len(job.history)} polls"
