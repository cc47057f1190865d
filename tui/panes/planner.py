"""Planner pane: the current shape (reference row) and alternatives, with the model's prediction,
its bottleneck and the change against the current shape. Figures are model predictions; the
subtitle names the model and the price source."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable

from cmdare.planner.job_plan import ShapeOutlook
from cmdare.tui.format import pct, rate, signed_pct
from cmdare.tui.session import MonitorState


class PlannerPane(Vertical):
    DEFAULT_CSS = """
    PlannerPane DataTable { height: 1fr; }
    """

    def compose(self) -> ComposeResult:
        table = DataTable(id="planner-table", cursor_type="row")
        for label, width in (("Shape", 20), ("Steps/s", 8), ("Δ speed", 8), ("Bound by", 8), ("PS load", 7)):
            table.add_column(label, width=width, key=label)
        yield table

    def update_state(self, state: MonitorState) -> None:
        table = self.query_one(DataTable)
        job = state.job()
        rows: list[ShapeOutlook] = state.extras.get("outlook", {}).get(job.name, []) if job else []
        table.clear()
        if not rows:
            self.border_subtitle = "needs the job's network facts and shape"
            return
        base = rows[0].prediction.steps_per_sec
        for r in rows:
            p = r.prediction
            label = Text(("▶ " if r.current else "  ") + r.shape.label, style="bold" if r.current else "")
            delta = Text("now" if r.current else signed_pct(p.steps_per_sec / base - 1 if base else None))
            table.add_row(label, rate(p.steps_per_sec), delta, p.bottleneck, pct(p.ps_utilization), key=r.shape.label)
        self.border_subtitle = "predicted · " + rows[0].prediction.source
