"""Thresholds of the bottleneck rules (:mod:`cmdare.planner.rules.bottlenecks`) and their hysteresis.

Each default says where it comes from. "CM-DARE" figures are from
``shared/data/cmdare/derived/cluster_speed_vs_workers.csv`` compared with the shipped speed model
(``planner/data/speed_model.json``): measured cluster steps/s ÷ the model's compute-bound rate
(N × single-worker) is 0.88–1.04 for every K80 1-PS point (1–8 workers, 4 networks) and 0.40–0.78
for every P100 1-PS point at 5–8 workers, where the model's implied PS utilisation
(measured steps/s × predicted PS seconds per step) is 0.89–1.04.

Not used to set any threshold, and so held out by ``benchmarks/detection.py``: the P100 1-PS points at 1–4
workers (every network), on which the engine is scored against the measured efficiency.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Kinds whose flags raise on the first refresh that shows them (the lifecycle already debounces).
_IMMEDIATE = {"node-silent": 1, "node-revoked": 1}


@dataclass(frozen=True, kw_only=True)
class Thresholds:
    """Every number the rules compare against. Ratios are plain fractions; times in seconds."""

    # --- hysteresis (refreshes) -------------------------------------------------------------------
    raise_after: int = 3  # a condition must hold this many refreshes to raise (issue 8: K refreshes)
    clear_after: int = 3  # and be false this many to clear
    # Per-kind overrides. ps-saturation raises after 2: its signal (efficiency < 0.80 against ≥ 0.88
    # on every healthy K80 point) leaves a wide margin, and a cold start has no rate on refresh 1,
    # so 2 makes "flag within 3 refreshes" (issue 8) possible. Assumption, checked by the benchmark.
    raise_after_by_kind: dict[str, int] = field(default_factory=lambda: {**_IMMEDIATE, "ps-saturation": 2})

    # --- ps-saturation ----------------------------------------------------------------------------
    ps_efficiency_max: float = 0.80  # measured ÷ compute-bound rate below this (CM-DARE: K80 ≥ 0.88)
    ps_utilization_min: float = 0.70  # implied PS busy share (CM-DARE P100 plateaus ≥ 0.89; margin for noise)
    compute_normal_max: float = 1.3  # worker step time ≤ 1.3 × predicted = "compute is normal" (issue 8)
    ps_nic_util_max: float = 0.85  # PS NIC throughput near capacity (assumption: 85% of line rate)
    ps_cpu_util_max: float = 0.95  # PS CPU pegged: busy CPU-seconds ÷ (vCPUs × s) (assumption)
    ps_max_suggested: int = 4  # largest PS count the fix search tries (the planner's outlook max_ps)
    # Without model facts (no cmdare_job_info) the PS is judged from measurements only: workers computing
    # less than ps_efficiency_max of the time (step seconds × own steps/s) while the busiest PS moves at
    # least this much each way. CM-DARE: every single-PS P100 point at 5–8 workers with efficiency < 0.8 moved
    # 2.1–5.5 Gbit/s each way (measured steps/s × params × 4 B); the lowest is ResNet-15 at 6 workers.
    ps_traffic_high_gbps: float = 2.0
    # Known out-of-sample error of the speed model's 2-PS predictions (issue 16: 20% mean absolute error on
    # withheld P100 2-PS measurements, over-predicting up to 2× on large networks). A predicted gain of
    # one more PS within this error is stated as uncertain ("may be none").
    known_2ps_error: float = 0.20
    ps_measured_max: int = 2  # most PS of any measurement the model saw; more is extrapolation

    # --- straggler --------------------------------------------------------------------------------
    straggler_ratio: float = 1.3  # step time ≥ 1.3 × median of its peers (issue 8)
    straggler_min_workers: int = 2  # sync jobs' ranks (sync_rules: compute time split from all-reduce)
    # A raised straggler holds until its ratio falls below this (a band, not one line: a worker at
    # 1.25-1.35x would otherwise raise and clear in turn). Assumption: half the raise margin.
    straggler_clear_ratio: float = 1.15
    # Peers an unexplained straggler is told against: with one peer, "slower than its peers' median" is
    # one worker against another and either may be the odd one (two CPU workers sharing a loaded host
    # took turns at 1.30-1.55x, issue 28); with two that agree, the third is the odd one. Assumption.
    straggler_min_peers: int = 2

    # --- allreduce-bound (sync jobs) ---------------------------------------------------------------
    # exposed all-reduce ≥ 30% of a step: past Zhang et al. 2020's measured 64-GPU scaling factors of
    # 0.60-0.76 would leave 24-40% to communication; 30% is their middle (assumption, not fitted)
    allreduce_share_max: float = 0.30

    # --- input-bound ------------------------------------------------------------------------------
    gpu_util_max: float = 60.0  # % DCGM utilisation below this is "well below capacity" (assumption)
    busy_share_max: float = 0.6  # step seconds × own steps/s below this (assumption, same meaning)

    # --- wan-bound --------------------------------------------------------------------------------
    wan_wait_share_min: float = 0.5  # receiving stage waits ≥ half its time (geo_model default)

    # --- eta-slip / cost-overrun ------------------------------------------------------------------
    eta_slip_margin: float = 0.0  # flag when the projected finish passes the deadline by > margin × left
    cost_overrun_margin: float = 0.0  # flag when the projected cost passes the budget by > margin × budget
    critical_overrun: float = 0.2  # 20% past the deadline / budget → critical (assumption)


DEFAULT_THRESHOLDS = Thresholds()
