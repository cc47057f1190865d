"""Engine hysteresis and the goal rules (eta-slip, cost-overrun) with their fixes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cmdare.planner.rules.alerts import AlertContext, AlertEngine, Finding
from cmdare.planner.rules.bottlenecks import JobGoal
from tests.alert_sim import Harness, SimCluster, kinds, load_curves


def _flag(on: list[bool]):
    it = iter(on)

    def rule(ctx: AlertContext) -> list[Finding]:
        return (
            [Finding(kind="x", subject="j", severity="warning", message="m", evidence={"v": 1})]
            if next(it)
            else []
        )

    return rule


def test_hysteresis_raises_after_k_and_clears_after_k():
    pattern = [True, False, True, True, True, False, False, True, False, False, False]
    eng = AlertEngine([_flag(pattern)], raise_after=3, clear_after=3)
    active = [bool(eng.evaluate(AlertContext(float(i), []))) for i in range(len(pattern))]
    assert active == [False, False, False, False, True, True, True, True, True, True, False]
    assert len(eng.history) == 1 and eng.history[0].cleared_at == 10.0


def test_per_kind_raise_after_and_broken_rule_is_isolated():
    def broken(ctx: AlertContext) -> list[Finding]:
        raise RuntimeError("boom")

    eng = AlertEngine([broken, _flag([True, True])], raise_after=3, raise_after_by_kind={"x": 2})
    eng.evaluate(AlertContext(0.0, []))
    assert [a.kind for a in eng.evaluate(AlertContext(1.0, []))] == ["x"]
    assert "boom" in eng.rule_errors["broken"]


@pytest.fixture
def k80(shared_dir):
    c = load_curves()
    return {g: c[(g, "ResNet-32")] for g in ("K80", "P100")}


async def test_eta_past_the_deadline_is_eta_slip_with_a_fix(k80):
    sim = SimCluster("ResNet-32", k80, ["P100"] * 2, seed=1, job="j")
    sim.facts = replace(sim.facts, target_steps=200_000)
    h = Harness(sim)
    h.goals = {"j": JobGoal(deadline_at=h.clock.now() + 2 * 3600)}  # 200k steps at ~22.5/s ≈ 2.5 h
    for _ in range(5):
        alerts = await h.refresh()
    assert kinds(alerts) == {("eta-slip", "j")}
    a = alerts[0]
    assert a.evidence["late_s"] > 0 and a.evidence["needed_steps_per_sec"] > 22
    assert a.fix and a.fix.startswith("add 1 P100 worker(s)") and "$" in a.fix


async def test_projected_cost_past_the_budget_is_cost_overrun(k80):
    sim = SimCluster("ResNet-32", k80, ["P100"] * 2, seed=1, job="j")
    sim.facts = replace(sim.facts, target_steps=200_000)
    h = Harness(sim)
    h.goals = {"j": JobGoal(budget_usd=2.0, spent_usd=0.5)}  # 2.5 h × (2 × 0.81 + 0.38) $/h ≈ $5
    for _ in range(5):
        alerts = await h.refresh()
    assert kinds(alerts) == {("cost-overrun", "j")}
    ev = alerts[0].evidence
    assert ev["burn_usd_per_hour"] == pytest.approx(2 * 0.80786 + 0.380003, rel=1e-3)
    assert ev["projected_usd"] > 4 and alerts[0].severity == "critical"
    h.goals = {"j": JobGoal(budget_usd=100.0, spent_usd=0.5)}
    for _ in range(3):
        alerts = await h.refresh()
    assert alerts == []


def test_leave_one_out_median_matches_the_definition():
    import random
    import statistics

    import numpy as np

    from cmdare.planner.rules.worker_rules import _slowest

    rng = random.Random(3)
    for n in range(2, 12):
        vals = [rng.choice([0.1, 0.2, 0.25, 0.3, 1.0]) for _ in range(n)]
        ratios, meds, idx = _slowest(np.array(vals), 0.0)  # every worker: each against its peers' median
        assert sorted(idx.tolist()) == list(range(n))
        for r, m, k in zip(ratios.tolist(), meds.tolist(), idx.tolist(), strict=True):
            assert m == statistics.median(vals[:k] + vals[k + 1 :])
            assert r == vals[k] / m


def test_a_wide_fleet_flags_its_slowest_stragglers_not_thousands():
    """10,000 asynchronous workers whose step times spread over 4x: thousands pass the straggler ratio;
    the slowest STRAGGLERS_SHOWN are flagged, slowest first, each saying how many there are in all (and
    each found in O(1) of its peers: the majority GPU and region are counted once)."""
    from cmdare.collectors.observed import JobView, NodeView
    from cmdare.collectors.samples import JobFacts
    from cmdare.planner.rules.worker_rules import STRAGGLERS_SHOWN, straggler_rule

    def worker(i: int) -> NodeView:
        step = 0.1 * (1 + 3 * (i % 1000) / 999)
        return NodeView(
            name=f"worker-{i}",
            role="worker",
            gpu="T4",
            region="us-central1",
            zone="",
            provisioning="spot",
            status="up",
            steps_per_sec=1 / step,
            step_seconds=step,
            gpu_util=None,
            net_in_bps=None,
            net_out_bps=None,
            started_at=100.0,
            last_error=None,
            restarts=0,
            cause="",
        )

    nodes = [worker(i) for i in range(10_000)]
    job = JobView(
        name="big",
        facts=JobFacts("big"),
        steps_per_sec=1000.0,
        examples_per_sec=None,
        global_step=5.0,
        eta_seconds=None,
        nodes=nodes,
        sync="async-ps",
    )
    found = straggler_rule(AlertContext(0.0, [job]))
    assert len(found) == STRAGGLERS_SHOWN
    ratios = [f.evidence["ratio"] for f in found]
    assert ratios == sorted(ratios, reverse=True) and found[0].evidence["step_seconds"] == pytest.approx(0.4)
    assert found[0].evidence["stragglers"] > 1000 and found[0].evidence["peer_gpu"] == "T4"
