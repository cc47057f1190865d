"""Cluster pane: a per-role summary line, then one row per task (status, task, role, steps/s, host CPU
and memory, GPU, GPU utilisation and memory, flags, provisioning, uptime, region, …).

At 10,000 tasks the table is virtual (see :mod:`cmdare.tui.widgets.table`): each row's cells are
made only when the row is on screen (or filtered on), its sort values always.

Columns are ordered by priority so that what matters fits in 80 columns (status, task, role,
steps/s, GPU, host CPU %, host memory, GPU %, provisioning); the rest scrolls sideways."""

from __future__ import annotations

import math
import statistics
from functools import partial

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from cmdare.planner.overview import JobView, NodeView
from cmdare.tui.format import STATUS_SYMBOL, bytes_rate, duration, num, provisioning, rate, region_code
from cmdare.tui.session import MonitorState
from cmdare.tui.widgets.table import FilterTable, Row, TableBox

COLUMNS = (("Status", 9), ("Task", 9), ("Role", 6), ("Steps/s", 7), ("GPU", 5), ("CPU", 4), ("Mem", 7),
           ("GPU%", 4), ("Prov", 7), ("Flag", 18), ("GPU mem", 8), ("Up", 6), ("Region", 12), ("Step ms", 7),
           ("Net in", 9))  # fmt: skip
STATUS_STYLE = {"up": "green", "silent": "yellow", "revoked": "red bold", "pending": "dim"}


def gpu_name(n: NodeView) -> str:
    """The task's GPU: its ``gpu`` label or the DCGM model's short name, else GPU / CPU."""
    return n.gpu or ("GPU" if n.owns_gpu else "CPU")


def used_of(used: float | None, total: float | None, unit: float) -> str:
    """``1.4/24G``: used of total, in units of ``unit`` bytes (or MiB)."""
    if used is None or total is None or not (math.isfinite(used) and math.isfinite(total)):
        return "–"
    return f"{used / unit:.1f}/{total / unit:.0f}G"


def node_cells(n: NodeView, marks: list[str], now: float) -> tuple[object, ...]:
    """The cells of a task's row (made when the row is painted; uptime at ``now``)."""
    status = Text(f"{STATUS_SYMBOL.get(n.status, '○')} {n.status}", style=STATUS_STYLE.get(n.status, ""))
    flag = Text(("⚑ " + ",".join(marks)) if marks else "", style="bold yellow")
    step_ms = n.step_seconds * 1000 if n.step_seconds else None
    cpu = f"{n.cpu_pct:.0f}%" if n.cpu_pct is not None else "–"
    gpu_pct = f"{n.gpu_util:.0f}%" if n.gpu_util is not None else "–"
    cells = (status, n.name, n.role, rate(n.steps_per_sec), gpu_name(n), cpu,
             used_of(n.mem_used_bytes, n.mem_total_bytes, 2**30), gpu_pct, provisioning(n.provisioning), flag,
             used_of(n.gpu_mem_used_mib, n.gpu_mem_total_mib, 1024), duration(n.uptime_s(now)), region_code(n.region),
             num(step_ms, 0), bytes_rate(n.net_in_bps))  # fmt: skip
    return cells


def node_sort(n: NodeView, marks: list[str], now: float) -> tuple[object, ...]:
    """The raw values a task's row sorts by, one per column (made only when the table sorts)."""
    step_ms = n.step_seconds * 1000 if n.step_seconds else None
    return (n.status, n.name, n.role, n.steps_per_sec, gpu_name(n), n.cpu_pct, n.mem_used_bytes, n.gpu_util,
            n.provisioning, ",".join(marks), n.gpu_mem_used_mib, n.uptime_s(now), n.region, step_ms, n.net_in_bps)  # fmt: skip


def node_row(job: JobView, n: NodeView, marks: list[str], now: float) -> Row:
    """One task's table row (cells made when painted, sort keys when sorting); ``marks`` are the flags
    raised on it; uptimes at ``now``."""
    marks = [*n.flags, *marks]
    return Row(f"{job.name}/{n.name}", partial(node_cells, n, marks, now), partial(node_sort, n, marks, now))


def role_summary(jobs: list[JobView]) -> Text:
    """One line: per role, how many tasks are up of all, and the median of their steps/s."""
    roles: dict[str, list[NodeView]] = {}
    for job in jobs:
        for n in job.nodes:
            roles.setdefault(n.role, []).append(n)
    line = Text()
    for role, nodes in sorted(roles.items(), key=lambda kv: -len(kv[1])):
        up = sum(n.status == "up" for n in nodes)
        rates = [n.steps_per_sec for n in nodes if n.steps_per_sec is not None]
        line.append(f"{role} ", "bold").append(f"{up:,}/{len(nodes):,} up")
        if len(nodes) > up:
            line.append(f" ({len(nodes) - up:,} not)", "yellow")
        if rates:
            line.append(f", median {rate(statistics.median(rates))} steps/s")
        line.append("  ")
    return line


class ClusterPane(Vertical):
    """The Cluster pane: a per-role summary line, then one row per task of every job."""

    DEFAULT_CSS = "ClusterPane > #cluster-summary { height: 1; width: 1fr; }"

    def compose(self) -> ComposeResult:
        yield Static(id="cluster-summary")
        yield TableBox(FilterTable(COLUMNS, id="cluster-table"))

    def update_state(self, state: MonitorState) -> None:
        """Show the tasks of ``state`` with the flags raised on them; the border counts those up."""
        flags: dict[str, list[str]] = {}
        for a in state.alerts:
            flags.setdefault(a.subject, []).append(a.kind)
        rows = []
        for job in state.jobs:
            for n in job.nodes:
                marks = flags.get(f"{job.name}/{n.name}", [])
                if n.role == "ps":
                    marks = marks + [k for k in flags.get(job.name, []) if k == "ps-saturation"]
                rows.append(node_row(job, n, marks, state.t))
        self.query_one(FilterTable).set_rows(rows)
        self.query_one("#cluster-summary", Static).update(
            role_summary(state.jobs), layout=False
        )  # one line, fixed
        total = sum(len(j.nodes) for j in state.jobs)
        up = sum(j.counts.get("up", 0) for j in state.jobs)
        self.border_subtitle = f"{up}/{total} up"
