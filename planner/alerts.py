"""Bottleneck and lifecycle flags with hysteresis: a condition must hold for ``raise_after``
refreshes to raise a flag and be false for ``clear_after`` refreshes to clear it.

Rules are plain functions ``(AlertContext) -> list[Finding]``; the engine owns the hysteresis and
the history. Kinds are stable names (they appear in ``snapshot --json`` ``alerts[].kind``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cmdare.planner.overview import JobView

SEVERITIES = ("info", "warning", "critical")


@dataclass(frozen=True)
class Finding:
    """A rule's verdict for one subject on one refresh."""

    kind: str
    subject: str  # "job", "job/task" or "job/a->b"
    severity: str
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)
    fix: str | None = None  # suggested fix with its predicted effect
    raise_after: int | None = None  # override the engine's default hysteresis for this kind


@dataclass
class Alert:
    kind: str
    subject: str
    severity: str
    message: str
    evidence: dict[str, Any]
    fix: str | None
    raised_at: float
    updated_at: float
    cleared_at: float | None = None

    @property
    def active(self) -> bool:
        return self.cleared_at is None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "severity": self.severity,
            "subject": self.subject,
            "message": self.message,
            "evidence": self.evidence,
            "fix": self.fix,
            "raised_at": self.raised_at,
            "cleared_at": self.cleared_at,
        }


@dataclass(frozen=True)
class AlertContext:
    now: float
    jobs: Sequence[JobView]
    extras: dict[str, Any] = field(default_factory=dict)  # predictions, thresholds, workloads per job


Rule = Callable[[AlertContext], list[Finding]]


def node_state_rule(ctx: AlertContext) -> list[Finding]:
    """``node-silent`` / ``node-revoked`` from the collectors' lifecycle states."""
    out: list[Finding] = []
    for job in ctx.jobs:
        for n in job.nodes:
            subject = f"{job.name}/{n.name}"
            if n.status == "revoked":
                why = "the cloud sent a preemption notice" if n.cause == "preempted" else "it vanished while its peers run"
                replace = ctx.extras.get("replacement_seconds", {}).get(n.gpu or "CPU")
                msg = f"{n.name} ({n.gpu or 'CPU'}, {n.provisioning or '?'}) revoked: {why}"
                if replace:
                    msg += f"; a replacement typically trains again after ~{replace:.0f} s (measured)"
                out.append(Finding("node-revoked", subject, "critical" if n.role in ("ps", "chief") else "warning",
                                   msg, {"cause": n.cause, "last_error": n.last_error}, raise_after=1))
            elif n.status == "silent":
                out.append(Finding("node-silent", subject, "warning",
                                   f"{n.name} does not answer: {n.last_error or 'no data'}",
                                   {"last_error": n.last_error}, raise_after=1))
    return out


class AlertEngine:
    def __init__(self, rules: Sequence[Rule] = (node_state_rule,), raise_after: int = 3, clear_after: int = 3,
                 history_limit: int = 500) -> None:
        self.rules = list(rules)
        self.raise_after = raise_after
        self.clear_after = clear_after
        self.history_limit = history_limit
        self.active: dict[tuple[str, str], Alert] = {}
        self.history: list[Alert] = []  # every alert ever raised, newest last (bounded)
        self._true: dict[tuple[str, str], int] = {}
        self._false: dict[tuple[str, str], int] = {}

    def evaluate(self, ctx: AlertContext) -> list[Alert]:
        """Run every rule once; returns the active alerts, most severe first."""
        findings: dict[tuple[str, str], Finding] = {}
        for rule in self.rules:
            for f in rule(ctx):
                findings[(f.kind, f.subject)] = f
        for key, f in findings.items():
            self._false.pop(key, None)
            self._true[key] = self._true.get(key, 0) + 1
            alert = self.active.get(key)
            if alert is not None:
                alert.severity, alert.message, alert.evidence, alert.fix = f.severity, f.message, f.evidence, f.fix
                alert.updated_at = ctx.now
            elif self._true[key] >= (f.raise_after or self.raise_after):
                alert = Alert(f.kind, f.subject, f.severity, f.message, f.evidence, f.fix, ctx.now, ctx.now)
                self.active[key] = alert
                self.history.append(alert)
                del self.history[: -self.history_limit]
        for key in [k for k in self._true if k not in findings]:
            self._true.pop(key, None)
            if key in self.active:
                self._false[key] = self._false.get(key, 0) + 1
                if self._false[key] >= self.clear_after or key[0] in ("node-revoked", "node-silent"):
                    self.active.pop(key).cleared_at = ctx.now
                    self._false.pop(key, None)
        rank = {s: i for i, s in enumerate(reversed(SEVERITIES))}
        return sorted(self.active.values(), key=lambda a: (rank.get(a.severity, 9), a.kind, a.subject))
