"""Cluster pane: one row per task (status, task, role, GPU, provisioning, steps/s, uptime, region, …).

Columns are ordered so that what matters fits in 80 columns; the rest scrolls sideways."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical

from cmdare.planner.overview import JobView, NodeView
from cmdare.tui.format import STATUS_SYMBOL, bytes_rate, duration, num, provisioning, rate, region_code
from cmdare.tui.session import MonitorState
from cmdare.tui.widgets.table import FilterTable, Row, TableBox

COLUMNS = (("Status", 9), ("Task", 9), ("Role", 6), ("GPU", 4), ("Prov", 7), ("Steps/s", 7), ("Up", 6),
           ("Region", 12), ("Step ms", 7), ("Net in", 9), ("Flag", 18))  # fmt: skip
STATUS_STYLE = {"up": "green", "silent": "yellow", "revoked": "red bold"}


def node_row(job: JobView, n: NodeView, marks: list[str]) -> Row:
    status = Text(f"{STATUS_SYMBOL.get(n.status, '?')} {n.status}", style=STATUS_STYLE.get(n.status, ""))
    flag = Text(("⚑ " + ",".join(marks)) if marks else "", style="bold yellow")
    step_ms = n.step_seconds * 1000 if n.step_seconds else None
    cells = (status, n.name, n.role, n.gpu or "CPU", provisioning(n.provisioning), rate(n.steps_per_sec),
             duration(n.uptime_s), region_code(n.region), num(step_ms, 0), bytes_rate(n.net_in_bps), flag)  # fmt: skip
    sort = (n.status, n.name, n.role, n.gpu, n.provisioning, n.steps_per_sec, n.uptime_s, n.region, step_ms,
            n.net_in_bps, ",".join(marks))  # fmt: skip
    return Row(f"{job.name}/{n.name}", cells, sort)


class ClusterPane(Vertical):
    def compose(self) -> ComposeResult:
        yield TableBox(FilterTable(COLUMNS, id="cluster-table"))

    def update_state(self, state: MonitorState) -> None:
        flags: dict[str, list[str]] = {}
        for a in state.alerts:
            flags.setdefault(a.subject, []).append(a.kind)
        rows = []
        for job in state.jobs:
            for n in job.nodes:
                marks = flags.get(f"{job.name}/{n.name}", [])
                if n.role == "ps":
                    marks = marks + [k for k in flags.get(job.name, []) if k == "ps-saturation"]
                rows.append(node_row(job, n, marks))
        self.query_one(FilterTable).set_rows(rows)
        total = sum(len(j.nodes) for j in state.jobs)
        up = sum(j.counts.get("up", 0) for j in state.jobs)
        self.border_subtitle = f"{up}/{total} up"
