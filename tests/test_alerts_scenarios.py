"""Scenario clusters from the CM-DARE measurements, through the real poller/store/lifecycle/overview path:
each bottleneck is flagged with its evidence and fix, and healthy clusters raise nothing."""

from __future__ import annotations

import pytest
from alert_sim import Harness, SimCluster, SimPipeline, kinds, load_curves

MODELS = ("ResNet-15", "ResNet-32", "Shake-Shake-small", "Shake-Shake-big")


@pytest.fixture(scope="module")
def curves():
    return load_curves()


def gpu_curves(curves, model):
    return {g: curves[(g, model)] for g in ("K80", "P100")}


@pytest.mark.parametrize("model", MODELS)
async def test_k80_cluster_scaling_linearly_raises_nothing(curves, model):
    h = Harness(SimCluster(model, gpu_curves(curves, model), ["K80"] * 8, seed=1))
    for _ in range(40):
        assert await h.refresh() == []


@pytest.mark.parametrize("model", MODELS)
async def test_p100_one_ps_at_8_workers_is_ps_saturation_within_3_refreshes(curves, model):
    h = Harness(SimCluster(model, gpu_curves(curves, model), ["P100"] * 8, seed=2))
    for _ in range(3):
        alerts = await h.refresh()
    assert kinds(alerts) == {("ps-saturation", "sim/ps-0")}
    (a,) = alerts
    assert a.evidence["efficiency"] < 0.8 and a.evidence["window_s"] == 10.0
    assert a.evidence["worker_step_time_ratio"] < 1.3
    assert a.fix.startswith("add a parameter server: predicted +") and "$0.38/h" in a.fix
    # Shake-Shake's kernels all land on one of two PS under round-robin placement (planner/speed/ps_tier.py):
    # the speed model predicts little gain from a 2nd PS there, and the fix must not promise more
    big = model == "Shake-Shake-big"
    assert a.evidence["fix_ps"] == 2 and (
        0 < a.evidence["fix_predicted_gain"] < 0.2 if big else a.evidence["fix_predicted_gain"] > 0.1
    )


async def test_one_worker_slowed_is_a_straggler_named_unexplained(curves):
    sim = SimCluster("ResNet-32", gpu_curves(curves, "ResNet-32"), ["K80"] * 6, seed=3)
    sim.workers[3].slow = 1.5
    h = Harness(sim)
    for _ in range(5):
        alerts = await h.refresh()
    assert kinds(alerts) == {("straggler", "sim/worker-3")}
    ev = alerts[0].evidence
    assert ev["causes"] == ["unexplained"] and 1.4 < ev["ratio"] < 1.6
    assert "worker-3" in alerts[0].message and "replace worker-3" in alerts[0].fix


async def test_a_slower_gpu_type_and_another_region_are_named(curves):
    sim = SimCluster(
        "ResNet-32",
        gpu_curves(curves, "ResNet-32"),
        ["P100", "P100", "P100", "K80"],
        seed=4,
        regions=["us-central1", "us-central1", "us-east1", "us-central1"],
    )
    sim.workers[2].slow = 1.5  # cross-region worker: each PS round trip takes longer
    h = Harness(sim)
    for _ in range(5):
        alerts = await h.refresh()
    got = {a.subject: a.evidence["causes"][0] for a in alerts if a.kind == "straggler"}
    assert got == {"sim/worker-3": "slower-gpu", "sim/worker-2": "other-region"}
    msg = next(a.message for a in alerts if a.subject == "sim/worker-3")
    assert "slower GPU type (K80 vs P100" in msg


async def test_pipeline_stage_over_a_slow_link_is_wan_bound():
    slow = {frozenset(("us-west1", "europe-west4")): 0.36}
    pipe = SimPipeline(["us-west1", "us-west1", "europe-west4", "europe-west4"], slow, seed=5)
    h = Harness(pipe)
    for _ in range(4):
        alerts = await h.refresh()
    assert kinds(alerts) == {("wan-bound", "pipe/1->2")}
    ev = alerts[0].evidence
    assert ev["receiver_wait_share"] > 0.8 and not ev["capacity_known"]
    assert ev["from_dc"] == "us-west1" and ev["to_dc"] == "europe-west4"
    # with the capacity known the transfer time is bytes / capacity
    h2 = Harness(
        SimPipeline(["us-west1", "us-west1", "europe-west4", "europe-west4"], slow, seed=5),
        link_capacity_gbps=slow,
    )
    for _ in range(4):
        alerts = await h2.refresh()
    assert alerts[0].evidence["transfer_seconds_per_microbatch"] == pytest.approx(2.22, rel=0.1)


async def test_pipeline_over_fast_links_is_not_wan_bound():
    links = {frozenset(("a", "b")): 5.0, frozenset(("b", "c")): 5.0}
    h = Harness(SimPipeline(["a", "a", "b", "b", "c", "c"], links, seed=6))
    for _ in range(30):
        assert await h.refresh() == []


async def test_input_bound_cluster_is_flagged_not_ps(curves):
    sim = SimCluster("ResNet-32", gpu_curves(curves, "ResNet-32"), ["K80"] * 4, seed=7, dcgm=True)
    for w in sim.workers:
        w.busy = 0.45
    h = Harness(sim)
    for _ in range(5):
        alerts = await h.refresh()
    assert kinds(alerts) == {("input-bound", "sim")}
    assert alerts[0].evidence["signal"] == "GPU utilisation (DCGM)" and alerts[0].fix


async def test_killed_task_goes_silent_then_revoked_by_the_preempted_gauge(curves):
    sim = SimCluster("ResNet-32", gpu_curves(curves, "ResNet-32"), ["K80"] * 4, seed=8)
    h = Harness(sim)
    for _ in range(5):
        assert await h.refresh() == []
    sim.workers[2].alive = False
    seen = []
    for _ in range(3):
        seen.append(kinds(await h.refresh()))
    assert ("node-silent", "sim/worker-2") in seen[-1] and ("node-silent", "sim/worker-2") not in seen[0]
    sim.workers[2].alive, sim.workers[2].preempted = True, True  # the metadata server reports preemption
    alerts = await h.refresh()
    assert ("node-revoked", "sim/worker-2") in kinds(alerts) and ("node-silent", "sim/worker-2") not in kinds(
        alerts
    )
    a = next(a for a in alerts if a.kind == "node-revoked")
    assert a.evidence["cause"] == "preempted" and a.evidence["expected_replacement_s"] == pytest.approx(
        83 + 70.33, rel=1e-3
    )
    sim.workers[2].preempted = False  # the replacement joins
    h.clock.advance(140)
    alerts = await h.refresh()
    assert not any(a.kind.startswith("node-") for a in alerts)
    assert h.engine.measured_replacement_seconds()["K80"] == pytest.approx(142.0)


@pytest.mark.parametrize(
    ("gpu", "model", "n"),
    [
        ("K80", "ResNet-32", 8),
        ("P100", "ResNet-32", 2),
        ("K80", "Shake-Shake-big", 8),
        ("P100", "ResNet-15", 3),
    ],
)
async def test_healthy_cluster_with_5pct_noise_for_500_refreshes_raises_nothing(curves, gpu, model, n):
    h = Harness(SimCluster(model, gpu_curves(curves, model), [gpu] * n, seed=9, noise=0.05))
    for _ in range(500):
        alerts = await h.refresh()
        assert alerts == [], (h.refreshes, alerts)
    assert h.engine.history == []
