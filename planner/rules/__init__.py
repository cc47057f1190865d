"""Live rules: alerts and the bottleneck findings they rest on, with their thresholds.

Public names load lazily (PEP 562): importing the package costs nothing until a name is used,
and no module of the package imports another through this file."""

from __future__ import annotations

import importlib
from typing import Any

_HOME: dict[str, str] = {
    "Alert": "alerts",
    "AlertContext": "alerts",
    "AlertEngine": "alerts",
    "Finding": "alerts",
    "DEFAULT_RULES": "bottlenecks",
    "rule_extras": "bottlenecks",
    "shipped_overheads": "bottlenecks",
    "JobGoal": "goal_rules",
    "Thresholds": "thresholds",
    "DEFAULT_THRESHOLDS": "thresholds",
    "pipelines": "wan_rules",
    "ps_load": "ps_rules",
    "straggler_rule": "worker_rules",
    "input_bound_rule": "worker_rules",
    "PredictedGain": "rule_support",
}

__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    """Load a public name from its home module on first use."""
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
