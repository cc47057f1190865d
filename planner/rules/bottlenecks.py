"""The bottleneck rules: small functions ``(AlertContext) -> list[Finding]`` with evidence and fixes.

Kinds (stable, they appear in ``snapshot --json``): ``ps-saturation``, ``wan-bound``, ``straggler``
(PS and sync jobs), ``allreduce-bound`` (sync jobs: :mod:`~cmdare.planner.rules.sync_rules`),
``input-bound``, ``node-silent`` / ``node-revoked`` (:func:`cmdare.planner.rules.alerts.node_state_rule`),
``eta-slip``, ``cost-overrun`` and ``checkpoint-overdue`` (:mod:`~cmdare.planner.rules.checkpoint_rules`).
Rules read ``ctx.inputs``, a typed
:class:`~cmdare.planner.rules.inputs.RuleInputs` (built by :class:`cmdare.planner.analysis.Analysis`;
:func:`rule_inputs` fills the fields read from the store):

* ``predicted``: job → :class:`SpeedPrediction` of its current shape; ``model``: the :class:`SpeedModel`;
* ``price_book`` (``node_price`` / ``ps_node_price``), ``overheads`` (:class:`Overheads`);
* ``thresholds`` (:class:`Thresholds`), ``goals``: job → :class:`JobGoal`, ``rate_window_s``;
* ``stages``: job → stage counters per task, ``ps_cpu``: ``job/task`` → busy CPUs (from the store);
* ``link_capacity_gbps``: ``(job, from_stage, to_stage)`` → B_eff when known;
* ``work_at_risk``: job → its time since the last checkpoint and optimum interval.

Every finding carries the numbers it used and their window (``window_s``, seconds), and names what it
rests on: ``evidence["measured"]`` (measurements), ``["model"]`` (speed-model terms) and
``["not_measured"]`` (inputs it lacked; such a cause is said to be open, never "not the cause"). A fix
names its predicted effect from the speed model and the price book, with its band when the model gives
one (``band: n/a until calibrated`` until then). Rates are steps/s, prices USD/h.

The rules live in :mod:`~cmdare.planner.rules.ps_rules`, :mod:`~cmdare.planner.rules.worker_rules`,
:mod:`~cmdare.planner.rules.wan_rules` and :mod:`~cmdare.planner.rules.goal_rules` (shared helpers:
:mod:`~cmdare.planner.rules.rule_support`); this module wires them together and re-exports their names.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from cmdare.collectors import metrics as M
from cmdare.collectors.observed import RATE_WINDOW_S, STEP_WINDOW_S, JobView
from cmdare.collectors.store import Store
from cmdare.planner.risk_cost.overheads import Overheads
from cmdare.planner.rules.alerts import AlertContext, Finding, Rule, node_state_rule
from cmdare.planner.rules.checkpoint_rules import checkpoint_overdue_rule
from cmdare.planner.rules.goal_rules import cost_overrun_rule, eta_slip_rule
from cmdare.planner.rules.inputs import JobGoal, RuleInputs, StageRates, frozen_map
from cmdare.planner.rules.ps_rules import GBPS_PER_VCPU, PS_NIC_GBPS, PsLoad, ps_load, ps_saturation_rule
from cmdare.planner.rules.sync_rules import allreduce_bound_rule, sync_straggler_rule
from cmdare.planner.rules.wan_rules import ATLAS_MULTI_CONN_GBPS, stage_rates, wan_bound_rule
from cmdare.planner.rules.worker_rules import input_bound_rule, straggler_rule

__all__ = [
    "ATLAS_MULTI_CONN_GBPS",
    "allreduce_bound_rule",
    "sync_straggler_rule",
    "DEFAULT_RULES",
    "GBPS_PER_VCPU",
    "PS_NIC_GBPS",
    "RATE_WINDOW_S",
    "STEP_WINDOW_S",
    "AlertContext",
    "Finding",
    "JobGoal",
    "PsLoad",
    "Rule",
    "StageRates",
    "cost_overrun_rule",
    "eta_slip_rule",
    "input_bound_rule",
    "node_state_rule",
    "ps_load",
    "ps_saturation_rule",
    "RuleInputs",
    "rule_inputs",
    "shipped_overheads",
    "stage_rates",
    "straggler_rule",
    "wan_bound_rule",
]


@functools.cache
def shipped_overheads() -> Overheads:
    """The shipped CM-DARE overheads (``planner/data/overheads.json``), loaded once."""
    return Overheads.load()


# ----------------------------------------------------------------------------------- wiring
DEFAULT_RULES: tuple[Rule, ...] = (
    node_state_rule,
    ps_saturation_rule,
    straggler_rule,
    sync_straggler_rule,
    allreduce_bound_rule,
    input_bound_rule,
    wan_bound_rule,
    eta_slip_rule,
    cost_overrun_rule,
    checkpoint_overdue_rule,
)


def rule_inputs(store: Store, jobs: Sequence[JobView], window_s: float = RATE_WINDOW_S) -> RuleInputs:
    """What the rules need from the store beyond the job views: stage counters and PS CPU load (the
    other fields at their defaults: add them with :func:`dataclasses.replace`)."""
    ps_cpu: dict[str, float] = {}
    for key, ts in store.roles.get("ps", {}).items():  # the store's index: not a pass over 10,000 tasks
        busy = ts.rate(M.K_CPU_BUSY, window_s)
        if busy is None:
            busy = ts.rate(M.K_PROCESS_CPU, window_s)
        if busy is not None:
            ps_cpu[key] = busy
    # Pipelines tick once per micro-batch (seconds each): their counters use the longer step window.
    stage_window = max(window_s, STEP_WINDOW_S)
    return RuleInputs(
        stages=frozen_map(stage_rates(store, stage_window)),
        stage_window_s=stage_window,
        ps_cpu=frozen_map(ps_cpu),
        rate_window_s=window_s,
    )
