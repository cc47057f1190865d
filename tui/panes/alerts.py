"""Alerts pane: active flags (symbol + words, not colour alone) and the history of past flags."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable

from cmdare.tui.format import SEVERITY_SYMBOL
from cmdare.tui.session import MonitorState

SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}


class AlertsPane(Vertical):
    DEFAULT_CSS = """
    AlertsPane DataTable { height: 1fr; }
    """

    def compose(self) -> ComposeResult:
        table = DataTable(id="alerts-table", cursor_type="row")
        for label, width in (("Sev", 9), ("Kind", 14), ("Subject", 22), ("Message", 60)):
            table.add_column(label, width=width, key=label)
        yield table

    def update_state(self, state: MonitorState) -> None:
        table = self.query_one(DataTable)
        table.clear()
        for a in state.alerts:
            sev = Text(f"{SEVERITY_SYMBOL.get(a.severity, '?')} {a.severity}", style=SEVERITY_STYLE.get(a.severity, ""))
            msg = a.message + (f" → {a.fix}" if a.fix else "")
            table.add_row(sev, a.kind, a.subject.split("/", 1)[-1], msg, key=f"{a.kind}:{a.subject}")
        past = [a for a in reversed(state.alert_history) if not a.active][:50]
        for a in past:
            table.add_row(Text("✓ cleared", style="dim"), Text(a.kind, style="dim"),
                          Text(a.subject.split("/", 1)[-1], style="dim"), Text(a.message, style="dim"),
                          key=f"past:{a.kind}:{a.subject}:{a.raised_at}")
        self.border_subtitle = f"{len(state.alerts)} active · {len(past)} cleared"
