"""The overview as plain rich tables (``snapshot`` without ``--json``): scripts, cron, TERM=dumb."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from cmdare.tui.format import SEVERITY_SYMBOL, STATUS_SYMBOL, bytes_rate, duration, num, rate
from cmdare.tui.session import MonitorState


def print_overview(state: MonitorState, console: Console | None = None) -> None:
    console = console or Console()
    if state.demo:
        console.print("DEMO: simulated cluster on loopback, calibrated from CM-DARE measurements")
    for job in state.jobs:
        console.print(f"Job {job.name} ({job.facts.model or 'unknown network'}): {rate(job.steps_per_sec)} steps/s "
                      f"measured, global step {num(job.global_step, 0)}, ETA {duration(job.eta_seconds)}")
        t = Table(title="Cluster", title_justify="left")
        for col in ("Status", "Task", "Role", "GPU", "Region", "Prov", "Steps/s", "Step ms", "Net in", "Up"):
            t.add_column(col)
        for n in job.nodes:
            t.add_row(f"{STATUS_SYMBOL.get(n.status, '?')} {n.status}", n.name, n.role, n.gpu or "CPU",
                      n.region or "–", n.provisioning or "–", rate(n.steps_per_sec),
                      num(n.step_seconds * 1000 if n.step_seconds else None, 0), bytes_rate(n.net_in_bps),
                      duration(n.uptime_s))
        console.print(t)
    a = Table(title="Alerts", title_justify="left")
    for col in ("Severity", "Kind", "Subject", "Message"):
        a.add_column(col)
    for al in state.alerts:
        a.add_row(f"{SEVERITY_SYMBOL.get(al.severity, '?')} {al.severity}", al.kind, al.subject,
                  al.message + (f" → {al.fix}" if al.fix else ""))
    console.print(a if state.alerts else "Alerts: none")
    for s in state.sources:
        console.print(f"source {s.name}: {s.message}")
