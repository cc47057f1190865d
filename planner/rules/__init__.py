"""Live rules: alerts and the bottleneck findings they rest on, with their thresholds.

Public names load lazily (PEP 562): importing the package costs nothing until a name is used,
and no module of the package imports another through this file."""

from __future__ import annotations

from cmdare.planner.lazy_exports import lazy_getattr

_HOME: dict[str, str] = {
    "Alert": "alerts",
    "AlertContext": "alerts",
    "AlertEngine": "alerts",
    "Finding": "alerts",
    "DEFAULT_RULES": "bottlenecks",
    "rule_inputs": "bottlenecks",
    "RuleInputs": "inputs",
    "shipped_overheads": "bottlenecks",
    "JobGoal": "inputs",
    "Thresholds": "thresholds",
    "DEFAULT_THRESHOLDS": "thresholds",
    "pipelines": "wan_rules",
    "ps_load": "ps_rules",
    "straggler_rule": "worker_rules",
    "input_bound_rule": "worker_rules",
    "PredictedGain": "rule_support",
}

__all__ = sorted(_HOME)
__getattr__ = lazy_getattr(__name__, _HOME)
