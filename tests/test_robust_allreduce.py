"""An all-reduce longer than the ranks' own steps (issue 27: 50x the step time gave "750x link
figures"): a rank whose compute and exposed all-reduce a step add up to more than the time between
its steps (its own steps/s) is refused with a note; the others still calibrate the sync model."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cmdare.collectors.observed import JobView, NodeView
from cmdare.collectors.pricing.loader import load_offline_book
from cmdare.collectors.samples import JobFacts, ModelSpec
from cmdare.planner.live.plan import LivePlanner
from cmdare.planner.live.sync_job import STEP_PERIOD_SLACK, allreduce_refusals, measured_split
from cmdare.planner.speed.speed_model import SpeedModel


def _rank(rank: int, compute: float, exposed: float, steps_per_sec: float) -> NodeView:
    return NodeView(
        name=f"worker-{rank}",
        role="chief" if rank == 0 else "worker",
        gpu="T4",
        region="us-central1",
        zone="",
        provisioning="spot",
        status="up",
        steps_per_sec=steps_per_sec,
        step_seconds=compute,
        gpu_util=None,
        net_in_bps=None,
        net_out_bps=None,
        started_at=100.0,
        last_error=None,
        restarts=0,
        cause="",
        allreduce_seconds=exposed,
        rank=str(rank),
        local_rank="0",
    )


def _job(nodes: list[NodeView]) -> JobView:
    facts = JobFacts(
        "ddp",
        ModelSpec(name="shakebig", model_flops=2.3e10, params=26e6, batch_size=128, sync="sync-allreduce"),
        10_000,
    )
    return JobView(
        name="ddp",
        facts=facts,
        steps_per_sec=2.0,
        examples_per_sec=None,
        global_step=100.0,
        eta_seconds=None,
        nodes=nodes,
        sync="sync-allreduce",
        sync_how="declared",
    )


def test_an_allreduce_50x_the_step_is_refused_and_the_honest_ranks_calibrate():
    honest = [_rank(r, 0.2, 0.3, 2.0) for r in range(3)]  # 0.5 s a step, 2 steps/s: consistent
    liar = _rank(3, 0.2, 10.0, 2.0)  # 10 s of all-reduce in a 0.5 s step
    job = _job([*honest, liar])
    split = measured_split(job)
    assert split is not None and split.ranks == 3 and split.refused == 1 and split.exposed_s == 0.3
    (why,) = allreduce_refusals(job)
    assert why.startswith("worker-3: compute 200 ms + all-reduce 10,000 ms a step beside 2 steps/s")
    plan = LivePlanner(SpeedModel.load(), load_offline_book()).update(job, now=0.0)
    assert plan.table is not None and plan.calibration_samples == 3
    assert plan.note is not None and "all-reduce of 1 rank(s) refused" in plan.note
    assert plan.table.current["comm_share"] == pytest.approx(0.6, rel=1e-6)  # the honest ranks' split


def test_every_rank_refused_leaves_the_model_uncalibrated_and_says_why():
    job = _job([_rank(r, 0.2, 10.0, 2.0) for r in range(4)])
    assert measured_split(job) is None
    plan = LivePlanner(SpeedModel.load(), load_offline_book()).update(job, now=0.0)
    assert plan.calibration_samples == 0 and plan.note is not None
    assert plan.note.startswith("not calibrated: all-reduce of 4 rank(s) refused")


def test_within_the_slack_or_without_a_step_rate_nothing_is_refused():
    near = [_rank(r, 0.2, 0.3 * STEP_PERIOD_SLACK * 0.99 + 0.05, 2.0) for r in range(2)]
    unrated = [replace(_rank(r, 0.2, 10.0, 2.0), steps_per_sec=None) for r in range(2, 4)]
    job = _job([*near, *unrated])
    assert allreduce_refusals(job) == () and measured_split(job).refused == 0  # type: ignore[union-attr]
