"""The overview as plain rich tables (``snapshot`` without ``--json``): scripts, cron, TERM=dumb.

Not a terminal (a pipe, cron) → wide enough that nothing is cut; ``TERM=dumb`` → ASCII borders and
no colour. States are symbols *and* words, as in the app. Data is printed as rich ``Text``, never
parsed as markup (the console has markup and emoji codes off as well)."""

from __future__ import annotations

import os
import sys

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from cmdare.tui.format import SEVERITY_SYMBOL, STATUS_SYMBOL, bytes_rate, duration, money, num, rate
from cmdare.tui.session import MonitorState

PIPE_WIDTH = 200  # columns used when stdout is not a terminal


def plain_console() -> Console:
    """A Rich console for plain output: no colour or markup on a dumb terminal or a pipe."""
    dumb = os.environ.get("TERM", "") in ("dumb", "")
    tty = sys.stdout.isatty()
    return Console(width=None if tty else PIPE_WIDTH, no_color=dumb or not tty, highlight=False,
                   force_terminal=False if dumb else None, markup=False, emoji=False)  # fmt: skip


def _table(title: str, columns: tuple[str, ...]) -> Table:
    dumb = os.environ.get("TERM", "") in ("dumb", "")
    t = Table(title=title, title_justify="left", box=box.ASCII if dumb else box.SIMPLE_HEAD)
    for col in columns:
        t.add_column(col, no_wrap=True)
    return t


def _row(table: Table, *cells: str) -> None:
    """A row of data cells, as text (a str cell would be parsed as markup)."""
    table.add_row(*map(Text, cells))


def print_overview(state: MonitorState, console: Console | None = None) -> None:
    """Print the overview of a state as the app's tables, for cron jobs and dumb terminals."""
    console = console or plain_console()
    if state.read_only:
        console.print("READ-ONLY: nothing is written")
    if state.demo:
        console.print("DEMO: simulated cluster on loopback, calibrated from CM-DARE measurements")
    costs = state.extras.get("cost", {})
    for job in state.jobs:
        console.print(Text(
            f"Job {job.name} ({job.facts.model.name or 'unknown network'}): {rate(job.steps_per_sec)} steps/s "
            f"measured{f' ({job.sync}, {job.sync_how})' if job.sync else ''}, global step "
            f"{num(job.global_step, 0)}, ETA {duration(job.eta_seconds)}"
        ))  # fmt: skip
        c = costs.get(job.name)
        if c is not None and c.usd_per_hour is not None:
            console.print(
                f"Cost {money(c.accrued_usd)} accrued while monitored, {money(c.usd_per_hour)}/h "
                f"({c.price_source} prices)"
            )
        tr = job.training
        if tr is not None:
            lr = "–" if tr.learning_rate is None else f"{tr.learning_rate:.3g}"
            console.print(
                f"Logged: loss {num(tr.loss, 4)}, learning rate {lr}, examples/s {num(tr.examples_per_sec, 0)}"
            )
        t = _table(
            "Cluster",
            ("Status", "Task", "Role", "GPU", "Region", "Prov", "Steps/s", "Step ms", "Net in", "Up"),
        )
        for n in job.nodes:
            _row(
                t,
                f"{STATUS_SYMBOL.get(n.status, '?')} {n.status}",
                n.name,
                n.role,
                n.gpu or "CPU",
                n.region or "–",
                n.provisioning or "–",
                rate(n.steps_per_sec),
                num(n.step_seconds * 1000 if n.step_seconds else None, 0),
                bytes_rate(n.net_in_bps),
                duration(n.uptime_s),
            )
        console.print(t)
    a = _table("Alerts", ("Severity", "Kind", "Subject", "Message"))
    for al in state.alerts:
        _row(
            a,
            f"{SEVERITY_SYMBOL.get(al.severity, '?')} {al.severity}",
            al.kind,
            al.subject,
            al.message + (f" → {al.fix}" if al.fix else ""),
        )
    console.print(a if state.alerts else "Alerts: none")
    for s in state.sources:
        console.print(Text(f"source: {s.message}"))
