"""Cluster pane: one row per task (role, GPU, region, provisioning, status, steps/s, uptime)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable

from cmdare.tui.format import STATUS_SYMBOL, bytes_rate, duration, num, rate
from cmdare.tui.session import MonitorState

COLUMNS = (("Status", 9), ("Task", 10), ("Role", 6), ("GPU", 5), ("Region", 12), ("Prov", 11),
           ("Steps/s", 7), ("Step ms", 7), ("Net in", 9), ("Up", 7), ("Flag", 16))
STATUS_STYLE = {"up": "green", "silent": "yellow", "revoked": "red bold"}


class ClusterPane(Vertical):
    DEFAULT_CSS = """
    ClusterPane DataTable { height: 1fr; }
    """

    def compose(self) -> ComposeResult:
        table = DataTable(id="cluster-table", cursor_type="row", zebra_stripes=False)
        for label, width in COLUMNS:
            table.add_column(label, width=width, key=label)
        yield table

    def update_state(self, state: MonitorState) -> None:
        table = self.query_one(DataTable)
        flags: dict[str, list[str]] = {}
        for a in state.alerts:
            flags.setdefault(a.subject, []).append(a.kind)
        row = table.cursor_row
        table.clear()
        for job in state.jobs:
            for n in job.nodes:
                subject = f"{job.name}/{n.name}"
                status = Text(f"{STATUS_SYMBOL.get(n.status, '?')} {n.status}", style=STATUS_STYLE.get(n.status, ""))
                marks = flags.get(subject, [])
                if n.role in ("ps",):
                    marks = marks + [k for k in flags.get(job.name, []) if k == "ps-saturation"]
                flag = Text(("⚑ " + ",".join(marks)) if marks else "", style="bold yellow")
                net = n.net_in_bps
                table.add_row(
                    status, n.name, n.role, n.gpu or "CPU", n.region or "–", n.provisioning or "–",
                    rate(n.steps_per_sec), num(n.step_seconds * 1000 if n.step_seconds else None, 0),
                    bytes_rate(net), duration(n.uptime_s), flag, key=subject,
                )
        if table.row_count:
            table.move_cursor(row=min(row, table.row_count - 1))
        total = sum(len(j.nodes) for j in state.jobs)
        up = sum(j.counts.get("up", 0) for j in state.jobs)
        self.border_subtitle = f"{up}/{total} up"
