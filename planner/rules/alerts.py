"""Bottleneck and lifecycle flags with hysteresis: a condition must hold for ``raise_after``
refreshes to raise a flag and be false for ``clear_after`` refreshes to clear it.

Rules are plain functions ``(AlertContext) -> list[Finding]``; the engine owns the hysteresis and
the history. Kinds are stable names (they appear in ``snapshot --json`` ``alerts[].kind``).
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cmdare.collectors.observed import JobView, NodeView
from cmdare.planner.rules.inputs import RuleInputs

log = logging.getLogger(__name__)

SEVERITIES = ("info", "warning", "critical")


@dataclass(frozen=True, kw_only=True)
class Finding:
    """A rule's verdict for one subject on one refresh."""

    kind: str
    subject: str  # "job", "job/task" or "job/a->b"
    severity: str
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)
    fix: str | None = None  # suggested fix with its predicted effect
    raise_after: int | None = None  # override the engine's default hysteresis for this kind
    # True: the condition is inside its rule's hysteresis band (past the clear line, short of the raise
    # line): it keeps a raised flag up and never counts toward raising one
    holds: bool = False


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
    origin: str = "app"  # who raised it: "app", "engine" (the generated Prometheus rules) or "app+engine"

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
            "origin": self.origin,
        }


@dataclass(frozen=True)
class AlertContext:
    """What every rule sees on one refresh: the time, the job views and the typed :class:`RuleInputs`."""

    now: float
    jobs: Sequence[JobView]
    inputs: RuleInputs = field(default_factory=RuleInputs)  # predictions, thresholds, prices, goals, ...


Rule = Callable[[AlertContext], list[Finding]]


def node_state_rule(ctx: AlertContext) -> list[Finding]:
    """``node-silent`` / ``node-revoked`` from the collectors' lifecycle states, with the expected
    replacement time: measured on this cluster (``inputs.replacement_seconds``, GPU → s) when a
    replacement was seen, else the CM-DARE request overhead (server start + join, ``overheads.json``)."""
    out: list[Finding] = []
    for job in ctx.jobs:
        if not (job.counts.get("revoked") or job.counts.get("silent")):
            continue  # counted once per view: most refreshes of most jobs have neither
        for n in job.nodes:
            subject = f"{job.name}/{n.name}"
            if n.status == "revoked":
                why = (
                    "the cloud sent a preemption notice"
                    if n.cause == "preempted"
                    else "it vanished while its peers run"
                )
                msg = f"{n.name} ({_gpu(n)}, {n.provisioning or '?'}) revoked: {why}"
                replace, source = _replacement_seconds(ctx, n)
                evidence: dict[str, Any] = {
                    "measured": [
                        "lifecycle: preemption notice"
                        if n.cause == "preempted"
                        else "lifecycle: scrapes failing"
                    ],
                    "cause": n.cause,
                    "last_error": n.last_error,
                    "gpu": _gpu(n),
                    "role": n.role,
                }
                if replace:
                    msg += f"; a replacement typically trains again after ~{replace:.0f} s ({source})"
                    evidence.update(expected_replacement_s=round(replace, 1), replacement_source=source)
                out.append(
                    Finding(
                        kind="node-revoked",
                        subject=subject,
                        severity="critical" if n.role in ("ps", "chief") else "warning",
                        message=msg,
                        evidence=evidence,
                        raise_after=1,
                    )
                )
            elif n.status == "silent":
                out.append(
                    Finding(
                        kind="node-silent",
                        subject=subject,
                        severity="warning",
                        message=f"{n.name} does not answer: {n.last_error or 'no data'}",
                        evidence={
                            "measured": ["lifecycle: scrapes failing"],
                            "last_error": n.last_error,
                            "gpu": _gpu(n),
                            "role": n.role,
                        },
                        raise_after=1,
                    )
                )
    return out


def _gpu(n: NodeView) -> str:
    """A task's GPU in a flag: its label, "CPU" for a parameter server that names none, else "not given"."""
    return n.gpu or ("CPU" if n.role == "ps" else "not given")


def _replacement_seconds(ctx: AlertContext, n: NodeView) -> tuple[float | None, str]:
    """(seconds until a replacement of ``n`` trains again, where the figure comes from)."""
    gpu, provisioning = n.gpu, n.provisioning
    measured = ctx.inputs.replacement_seconds.get(_gpu(n))  # keyed as the flags' evidence
    if measured:
        return float(measured), "measured"
    overheads = ctx.inputs.overheads
    if overheads is None or not gpu:
        return None, ""
    try:
        return float(overheads.request_overhead(gpu, provisioning or "preemptible")), "CM-DARE start + join"
    except (KeyError, ValueError):
        return None, ""


class AlertEngine:
    """Runs the rules once per refresh and keeps the flags with hysteresis and a bounded history.

    ``raise_after_by_kind`` / ``clear_after_by_kind`` override the defaults per kind (a finding's own
    ``raise_after`` wins over both). A rule that raises is logged and skipped for that refresh.
    """

    def __init__(
        self,
        rules: Sequence[Rule] = (node_state_rule,),
        raise_after: int = 3,
        clear_after: int = 3,
        history_limit: int = 500,
        *,
        raise_after_by_kind: Mapping[str, int] | None = None,
        clear_after_by_kind: Mapping[str, int] | None = None,
    ) -> None:
        self.rules = list(rules)
        self.raise_after = raise_after
        self.clear_after = clear_after
        self.raise_after_by_kind = dict(raise_after_by_kind or {})
        self.clear_after_by_kind = dict(clear_after_by_kind or {})
        self.history_limit = history_limit
        self.active: dict[tuple[str, str], Alert] = {}
        self.history: list[Alert] = []  # every alert ever raised, newest last (bounded)
        self.rule_errors: dict[str, str] = {}  # rule name -> last exception text
        self._true: dict[tuple[str, str], int] = {}
        self._false: dict[tuple[str, str], int] = {}

    def _findings(self, ctx: AlertContext) -> dict[tuple[str, str], Finding]:
        findings: dict[tuple[str, str], Finding] = {}
        for rule in self.rules:
            name = getattr(rule, "__name__", repr(rule))
            try:
                found = rule(ctx)
            except Exception as exc:  # one broken rule must not hide the others
                log.warning("alert rule %s failed: %s", name, exc, exc_info=log.isEnabledFor(logging.DEBUG))
                self.rule_errors[name] = f"{type(exc).__name__}: {exc}"
                continue
            self.rule_errors.pop(name, None)
            for f in found:
                findings[(f.kind, f.subject)] = f
        return findings

    def _needed(self, f: Finding) -> int:
        return f.raise_after or self.raise_after_by_kind.get(f.kind, self.raise_after)

    def evaluate(self, ctx: AlertContext) -> list[Alert]:
        """Run every rule once; returns the active alerts, most severe first."""
        findings = self._findings(ctx)
        for key in [k for k, f in findings.items() if f.holds and k not in self.active]:
            del findings[key]  # inside the band with no flag up: as good as false
        for key, f in findings.items():
            self._false.pop(key, None)
            self._true[key] = self._true.get(key, 0) + 1
            alert = self.active.get(key)
            if alert is not None:
                alert.severity, alert.message, alert.evidence, alert.fix = (
                    f.severity,
                    f.message,
                    f.evidence,
                    f.fix,
                )
                alert.updated_at = ctx.now
            elif self._true[key] >= self._needed(f):
                alert = Alert(f.kind, f.subject, f.severity, f.message, f.evidence, f.fix, ctx.now, ctx.now)
                self.active[key] = alert
                self.history.append(alert)
                del self.history[: -self.history_limit]
        for key in [k for k in self._true if k not in findings]:
            self._true.pop(key, None)
        for key in [k for k in self.active if k not in findings]:
            self._false[key] = self._false.get(key, 0) + 1
            clear = (
                1
                if key[0] in ("node-revoked", "node-silent")
                else self.clear_after_by_kind.get(key[0], self.clear_after)
            )
            if self._false[key] >= clear:
                self.active.pop(key).cleared_at = ctx.now
                self._false.pop(key, None)
        rank = {s: i for i, s in enumerate(reversed(SEVERITIES))}
        return sorted(self.active.values(), key=lambda a: (rank.get(a.severity, 9), a.kind, a.subject))

    def measured_replacement_seconds(self) -> dict[str, float]:
        """Median seconds from a ``node-revoked`` flag to its node answering again, per GPU type."""
        spans: dict[str, list[float]] = {}
        for a in self.history:
            if a.kind == "node-revoked" and a.cleared_at is not None and a.cleared_at > a.raised_at:
                spans.setdefault(str(a.evidence.get("gpu", "not given")), []).append(
                    a.cleared_at - a.raised_at
                )
        return {gpu: float(statistics.median(v)) for gpu, v in spans.items()}
