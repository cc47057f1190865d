"""The rule engine's alerts beside the app's own: the firing alerts of the generated rule file (``cmdare-tui
rules``), read from a Prometheus-API server with ``--prometheus``
(:meth:`cmdare.collectors.prometheus.source.PrometheusAPISource.engine_alerts`: labels already cleaned), become
:class:`Alert` rows marked by origin. One that the app raises too is shown once, as the app's (its message
names the measurements) marked ``app+engine``; one only the engine raises is marked ``engine``."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace

from cmdare.planner.rules.alerts import SEVERITIES, Alert
from cmdare.planner.rules.engine_rules import ALERT_KINDS

#: Verdicts whose subject is a task (the others: the job; the app's ps-saturation may name its one PS).
PER_TASK = frozenset({"node-revoked", "node-silent", "straggler"})


def _subject(kind: str, labels: Mapping[str, str]) -> str:
    job, task = labels.get("cmdare_job", ""), labels.get("task", "")
    return f"{job}/{task}" if kind in PER_TASK and task else job


def _same(app: Alert, kind: str, subject: str) -> bool:
    """The app's alert is the engine's: same kind, same subject (a job-level engine verdict matches the
    app's verdict on that job or on one of its tasks)."""
    return app.kind == kind and (app.subject == subject or app.subject.split("/", 1)[0] == subject)


def merge_engine_alerts(
    own: Sequence[Alert], rows: Sequence[Mapping[str, str]], jobs: Collection[str], now: float
) -> list[Alert]:
    """The app's alerts, each one the engine raises too marked ``app+engine``, then the engine's alerts on
    the app's ``jobs`` that the app has not raised (marked ``engine``), once each."""
    engine: dict[tuple[str, str], Mapping[str, str]] = {}
    for labels in rows:
        kind = labels.get("kind") or ALERT_KINDS.get(labels.get("alertname", ""), "")
        if kind and labels.get("cmdare_job") in jobs:
            engine.setdefault((kind, _subject(kind, labels)), labels)
    out: list[Alert] = []
    matched: set[tuple[str, str]] = set()
    for a in own:
        hit = next((k for k in engine if _same(a, *k)), None)
        if hit is not None:
            matched.add(hit)
            a = replace(a, origin="app+engine")
        out.append(a)
    for (kind, subject), labels in engine.items():
        if (kind, subject) in matched:
            continue
        name = labels.get("alertname", "")
        severity = labels.get("severity", "warning")
        out.append(
            Alert(
                kind,
                subject,
                severity if severity in SEVERITIES else "warning",
                f"raised by the rule engine ({name}, from the generated rules), not by the app on this refresh: "
                "its figures are in the rule's annotations (Prometheus / Alertmanager)",
                {"measured": ["the engine's recorded figures"], "alertname": name, "origin": "engine"},
                None,
                now,
                now,
                origin="engine",
            )
        )
    return out
