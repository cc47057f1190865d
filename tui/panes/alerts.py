"""Alerts pane: active flags (symbol + words, not colour alone) and the history of past flags. ``enter``
shows an alert whole: what it rests on (measured, model terms, not measured) and each evidence figure
with its unit (``evidence_value``)."""

from __future__ import annotations

import math
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable

from cmdare.tui.format import SEVERITY_SYMBOL
from cmdare.tui.session import MonitorState
from cmdare.tui.widgets.quiet import set_subtitle
from cmdare.tui.widgets.table import FilterTable, Row, TableBox

SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}
SEVERITY_RANK = {"critical": 0, "warning": 1, "info": 2}
COLUMNS = (("Sev", 10), ("Subject", 9), ("Message", 30), ("Kind", 14))  # widths: floors (column_fit.py)
BASIS_KEYS = ("measured", "model", "not_measured")
# (key suffix or word, unit): the first that matches an evidence key names its unit.
_UNITS = (("_gbps", "Gbit/s"), ("_bps", "B/s"), ("steps_per_sec", "steps/s"), ("_usd_per_hour", "$/h"),
          ("usd", "$"), ("seconds", "s"), ("_s", "s"), ("bytes_per_microbatch", "B"), ("ratio", "×"))  # fmt: skip
_SHARES = ("share", "util", "efficiency", "utilization")


def evidence_value(key: str, value: Any) -> str:
    """An evidence figure as words with its unit: ``None`` → "not measured", an empty label → "not
    given", shares as %, gains signed, Gbit/s, s, $; lists joined; a mapping as ``key value`` pairs,
    each value with its own unit (never a Python dict or a raw float repr)."""
    if value is None:
        return "not measured"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        pairs = [f"{k} {evidence_value(f'{key}_{k}' if _unit_of(str(k)) == '' else str(k), v)}"
                 for k, v in value.items()]  # fmt: skip
        return "; ".join(pairs) or "none"
    if isinstance(value, list | tuple):
        return ", ".join(evidence_value(key, v) if isinstance(v, dict) else str(v) for v in value) or "none"
    if isinstance(value, str):
        return value.strip() or "not given"
    if not isinstance(value, int | float):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "–"
    if "gain" in key:
        return f"{value:+.0%}"
    if any(w in key for w in _SHARES):
        return f"{value:.0%}"
    unit = _unit_of(key)
    if unit == "$":
        return f"${value:,.2f}"
    if unit == "$/h":
        return f"${value:,.3f}/h"
    if unit == "s" and 0 < abs(value) < 1:
        return f"{value * 1000:.3g} ms"
    text = f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.4g}"
    return f"{text} {unit}".rstrip()


ORIGIN_WORDS = {"app": "the app", "engine": "the rule engine (cmdare-tui rules, via --prometheus)",
                "app+engine": "the app and the rule engine"}  # fmt: skip


def kind_with_origin(kind: str, origin: str) -> str:
    """The Kind cell: the verdict, and who raised it when the rule engine did (``straggler · engine``)."""
    return kind if origin == "app" else f"{kind} · {origin}"


def _unit_of(key: str) -> str:
    """The unit an evidence key names ("" when none does)."""
    return next(
        (
            u
            for suffix, u in _UNITS
            if key.endswith(suffix) or (suffix in ("usd", "seconds") and suffix in key)
        ),
        "",
    )


def evidence_rows(evidence: dict[str, Any]) -> list[tuple[str, str]]:
    """Detail rows: what the verdict rests on first, then every other figure with its unit."""
    rows = []
    if "measured" in evidence:
        rows.append(("Rests on", evidence_value("measured", evidence["measured"])))
    if evidence.get("model"):
        rows.append(("Model terms", evidence_value("model", evidence["model"])))
    if evidence.get("not_measured"):
        rows.append(("Not measured", evidence_value("not_measured", evidence["not_measured"])))
    rows += [(f"  {k}", evidence_value(k, v)) for k, v in evidence.items() if k not in BASIS_KEYS]
    return rows


class AlertsPane(Vertical):
    """The Alerts pane: active flags with their evidence and fix, then the cleared ones."""

    KEYS_HELP = (("enter", "Evidence (units) and fix"),)  # keys this pane answers (the help screen)

    def __init__(self, **kw) -> None:  # noqa: ANN003
        super().__init__(**kw)
        self._state: MonitorState | None = None

    def compose(self) -> ComposeResult:
        yield TableBox(FilterTable(COLUMNS, cut_end=("Message",), id="alerts-table"))

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
        from cmdare.tui.widgets.explain import ExplainScreen, detail_grid  # on enter only, not at start-up

        rows = [("Severity", f"{SEVERITY_SYMBOL.get(a.severity, '?')} {a.severity}"), ("Subject", a.subject),
                ("Kind", a.kind), ("Raised by", ORIGIN_WORDS.get(a.origin, a.origin)), ("Message", a.message),
                ("Fix", a.fix or "–")]  # fmt: skip
        rows += evidence_rows(a.evidence)
        state = "active" if a.active else "cleared"
        self.app.push_screen(
            ExplainScreen(f"Alert: {a.kind}", detail_grid(rows), f"{state}; evidence as measured")
        )

    def update_state(self, state: MonitorState) -> None:
        """Show the alerts of ``state`` (active first, then the history of cleared ones)."""
        self._state = state
        rows = []
        for a in state.alerts:
            sev = Text(
                f"{SEVERITY_SYMBOL.get(a.severity, '?')} {a.severity}",
                style=SEVERITY_STYLE.get(a.severity, ""),
            )
            msg = a.message + (f" → {a.fix}" if a.fix else "")
            subject = a.subject.split("/", 1)[-1]
            kind = kind_with_origin(a.kind, a.origin)
            rows.append(
                Row(
                    f"{a.kind}:{a.subject}",
                    (sev, subject, msg, kind),
                    (SEVERITY_RANK.get(a.severity, 9), subject, msg, kind),
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
        set_subtitle(self, f"{len(state.alerts)} active · {len(past)} cleared")
