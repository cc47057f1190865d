"""Alerts pane: active flags (symbol + words, not colour alone) and the history of past flags."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable

from cmdare.tui.format import SEVERITY_SYMBOL
from cmdare.tui.session import MonitorState
from cmdare.tui.widgets.explain import ExplainScreen, detail_grid
from cmdare.tui.widgets.table import FilterTable, Row, TableBox

SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}
SEVERITY_RANK = {"critical": 0, "warning": 1, "info": 2}
COLUMNS = (("Sev", 10), ("Subject", 9), ("Message", 72), ("Kind", 14))


class AlertsPane(Vertical):
    def __init__(self, **kw) -> None:  # noqa: ANN003
        super().__init__(**kw)
        self._state: MonitorState | None = None

    def compose(self) -> ComposeResult:
        yield TableBox(FilterTable(COLUMNS, id="alerts-table"))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """``enter``: the whole alert (message, suggested fix, evidence) in a window."""
        key = str(event.row_key.value)
        alerts = (self._state.alerts + self._state.alert_history) if self._state else []
        a = next(
            (
                a
                for a in alerts
                if key in (f"{a.kind}:{a.subject}", f"past:{a.kind}:{a.subject}:{a.raised_at}")
            ),
            None,
        )
        if a is None:
            return
        rows = [("Severity", f"{SEVERITY_SYMBOL.get(a.severity, '?')} {a.severity}"), ("Subject", a.subject),
                ("Kind", a.kind), ("Message", a.message), ("Fix", a.fix or "–")]  # fmt: skip
        rows += [(f"  {k}", str(v)) for k, v in a.evidence.items()]
        state = "active" if a.active else "cleared"
        self.app.push_screen(
            ExplainScreen(f"Alert: {a.kind}", detail_grid(rows), f"{state}; evidence as measured")
        )

    def update_state(self, state: MonitorState) -> None:
        self._state = state
        rows = []
        for a in state.alerts:
            sev = Text(
                f"{SEVERITY_SYMBOL.get(a.severity, '?')} {a.severity}",
                style=SEVERITY_STYLE.get(a.severity, ""),
            )
            msg = a.message + (f" → {a.fix}" if a.fix else "")
            subject = a.subject.split("/", 1)[-1]
            rows.append(
                Row(
                    f"{a.kind}:{a.subject}",
                    (sev, subject, msg, a.kind),
                    (SEVERITY_RANK.get(a.severity, 9), subject, msg, a.kind),
                )
            )
        past = [a for a in reversed(state.alert_history) if not a.active][:50]
        for a in past:
            rows.append(
                Row(
                    f"past:{a.kind}:{a.subject}:{a.raised_at}",
                    ("✓ cleared", a.subject.split("/", 1)[-1], a.message, a.kind),
                    (9, a.subject, a.message, a.kind),
                    dim=True,
                )
            )
        self.query_one(FilterTable).set_rows(rows)
        self.border_subtitle = f"{len(state.alerts)} active · {len(past)} cleared"
