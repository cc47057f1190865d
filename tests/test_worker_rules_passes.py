"""The straggler and input-bound rules read a job's workers in a few passes (a sort, comprehensions);
these tests hold them to the per-worker definitions they replace, on random fleets with ties, mixed
signals (DCGM, step compute share, the model) and CPU-only workers."""

from __future__ import annotations

import random
import statistics

import pytest

from cmdare.collectors.observed import JobView, NodeView
from cmdare.collectors.samples import JobFacts
from cmdare.planner.rules.rule_support import compute_share, compute_shares
from cmdare.planner.rules.worker_rules import _gpu_workers, _slowest
from cmdare.planner.speed.speed_model import SpeedPrediction


def _node(i: int, rng: random.Random, *, status: str = "up", role: str = "worker") -> NodeView:
    gpu = rng.choice(["V100", "V100", "K80", "CPU"])
    step = rng.choice([None, 0.1, 0.1, 0.2, round(rng.uniform(0.05, 0.6), 2)])  # ties on purpose
    sps = rng.choice([None, 0.0, 3.0, round(rng.uniform(1, 10), 2)])
    util = rng.choice([None, None, None, round(rng.uniform(10, 100), 1)])
    return NodeView(
        name=f"w{i}",
        role=role,
        gpu=gpu,
        region="us-central1",
        zone="",
        provisioning="spot",
        status=status,
        steps_per_sec=sps,
        step_seconds=step,
        gpu_util=util,
        net_in_bps=None,
        net_out_bps=None,
        started_at=0.0,
        last_error=None,
        restarts=0,
        cause="",
    )


def _job(nodes: list[NodeView]) -> JobView:
    return JobView(
        name="j",
        facts=JobFacts("j"),
        steps_per_sec=10.0,
        examples_per_sec=None,
        global_step=1.0,
        eta_seconds=None,
        nodes=nodes,
        sync="async-ps",
    )


def _slowest_reference(workers: list[NodeView], ratio_min: float) -> list[tuple[float, str, float]]:
    """Every worker against the median of all the others, slowest first (the later worker first on
    ties): the definition, at O(n²)."""
    out = []
    for i, w in enumerate(workers):
        peers = [p.step_seconds for j, p in enumerate(workers) if j != i]
        med = statistics.median(peers)
        if w.step_seconds / med >= ratio_min:
            out.append((w.step_seconds, i, w.step_seconds / med, med))
    out.sort(key=lambda x: (x[0], x[1]), reverse=True)
    return [(round(r, 12), workers[i].name, round(m, 12)) for _, i, r, m in out]


@pytest.mark.parametrize("seed", range(40))
def test_slowest_matches_every_worker_against_its_peers(seed):
    rng = random.Random(seed)
    workers = [w for w in (_node(i, rng) for i in range(rng.randint(2, 60))) if w.step_seconds]
    if len(workers) < 2:
        return
    ratio = rng.choice([1.2, 1.5, 2.0])
    got = [(round(r, 12), w.name, round(m, 12)) for r, w, m in _slowest(workers, ratio)]
    assert got == _slowest_reference(workers, ratio)


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("with_model", [False, True])
def test_compute_shares_match_compute_share_of_each_worker(seed, with_model):
    rng = random.Random(seed)
    nodes = [_node(i, rng, status=rng.choice(["up", "up", "silent"]), role=rng.choice(["worker", "ps", "chief"]))
             for i in range(rng.randint(1, 50))]  # fmt: skip
    rates = {"V100": 6.0, "K80": 0.0}  # a K80 rate of 0: the model cannot say (no share)
    pred = (
        SpeedPrediction(
            steps_per_sec=10.0,
            examples_per_sec=1280.0,
            bottleneck="compute",
            ps_utilization=0.1,
            worker_steps_per_sec=rates,
            compute_bound_steps_per_sec=10.0,
            terms={},
            source="test",
        )
        if with_model
        else None
    )
    job = _job(nodes)
    gpu_workers = [n for n in job.up_workers() if n.gpu != "CPU"]
    assert _gpu_workers(job) == gpu_workers
    for workers in (gpu_workers, job.up_workers()):  # input-bound's set, ps-saturation's set
        shares, first, dcgm = compute_shares(workers, pred)
        want = [(s, sig) for s, sig in (compute_share(w, pred) for w in workers) if s is not None]
        assert sorted(shares) == pytest.approx(sorted(s for s, _ in want))
        assert dcgm == any(sig.startswith("GPU utilisation") for _, sig in want)
        assert first == (want[0][1] if want else "")
