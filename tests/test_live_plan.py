"""The live planner ranks alternatives for a running job, anchored on its own measurements."""

from __future__ import annotations

from cmdare.collectors.observed import JobView, NodeView
from cmdare.collectors.pricing import load_offline_book
from cmdare.collectors.samples import JobFacts, ModelSpec
from cmdare.planner.live.plan import LivePlanner, workload_for_job
from cmdare.planner.speed.speed_model import SpeedModel

# ResNet-32 facts and P100 speeds: shared/data/cmdare (0latency_p100_new2.csv; cluster_speed_vs_workers.csv)
FACTS = JobFacts(
    "j", ModelSpec(name="ResNet-32", model_flops=1658696889.0, params=1857722.0, batch_size=128), 64000
)


def node(
    name: str, role: str, gpu: str = "P100", status: str = "up", step_s: float | None = 0.082
) -> NodeView:
    return NodeView(
        name=name,
        role=role,
        gpu=gpu if role != "ps" else "",
        region="us-central1",
        zone="us-central1-c",
        provisioning="preemptible" if role != "ps" else "standard",
        status=status,
        steps_per_sec=5.5,
        step_seconds=step_s if role != "ps" else None,
        gpu_util=None,
        net_in_bps=None,
        net_out_bps=None,
        started_at=100.0,
        last_error=None,
        restarts=0,
        cause="",
    )


def job(history: list[float], workers: int = 8) -> JobView:
    nodes = [node("ps-0", "ps")] + [
        node(f"worker-{i}", "chief" if i == 0 else "worker") for i in range(workers)
    ]
    return JobView(
        name="j",
        facts=FACTS,
        steps_per_sec=history[-1],
        examples_per_sec=history[-1] * 128,
        global_step=1000.0,
        eta_seconds=None,
        nodes=nodes,
        history=history,
    )


def test_workload_reads_the_live_shape_and_remaining_steps():
    w, why = workload_for_job(job([44.0]), load_offline_book())
    assert why is None
    assert (w.current.gpu, w.current.workers, w.current.ps) == ("P100", 8, 1)
    assert w.current.provisioning == "preemptible" and w.current.region == "us-central1"
    assert w.target.steps == 63000


def test_plateaued_p100_job_is_anchored_and_more_ps_ranks_faster():
    # measured P100 1-PS plateau of ResNet-32 at 8 workers: 43–47 steps/s
    lp = LivePlanner(SpeedModel.load(), load_offline_book(), objective="time")
    plan = lp.update(job([44.6, 44.2, 47.4, 43.2] * 4), now=0.0)
    assert plan.table is not None and plan.note is None
    assert plan.calibration_samples >= 16 and plan.calibration_residual < 0.1
    cur = plan.table.current
    assert 40 < cur["steps_per_sec"] < 50  # anchored on what the job really does
    best = plan.table.top(1)[0]
    assert best["ps"] > 1 and best["steps_per_sec"] > 1.5 * cur["steps_per_sec"]
    assert plan.price_source == "offline"


def test_plan_is_reused_until_something_changes():
    lp = LivePlanner(SpeedModel.load(), load_offline_book())
    j = job([44.0] * 10)
    first = lp.update(j, now=0.0)
    again = lp.update(j, now=5.0)
    assert again.table is first.table  # not re-ranked
    assert again.calibration_samples == first.calibration_samples
    lp.set_price_book(load_offline_book())
    assert lp.update(j, now=6.0).table is not first.table
    assert {r["provisioning"] for r in first.table.top()} == {"preemptible", "standard"}


def test_an_unchanged_job_is_not_ranked_again_at_rank_every():
    """Issue 34: the same job (same workload, calibration, prices) past ``rank_every`` keeps its ranking;
    the same job with work done ranks again."""
    lp = LivePlanner(SpeedModel.load(), load_offline_book(), rank_every=60.0)
    j = job([44.0] * 10)
    first = lp.update(j, now=0.0)
    assert first.table is not None
    assert lp.update(j, now=600.0).table is first.table  # ten rank_every later, nothing changed
    moved = JobView(
        name="j",
        facts=FACTS,
        steps_per_sec=44.0,
        examples_per_sec=44.0 * 128,
        global_step=5000.0,
        eta_seconds=None,
        nodes=j.nodes,
        history=j.history,
    )  # 4,000 steps on
    assert lp.update(moved, now=1200.0).table is not first.table


def test_job_without_facts_says_why():
    bare = JobView(
        name="j",
        facts=JobFacts("j"),
        steps_per_sec=1.0,
        examples_per_sec=None,
        global_step=None,
        eta_seconds=None,
        nodes=[node("ps-0", "ps"), node("w", "worker")],
        history=[1.0],
    )
    plan = LivePlanner(SpeedModel.load(), load_offline_book()).update(bare, now=0)
    assert plan.table is None and "network" in plan.note


def test_revocation_risk_learns_from_the_clusters_own_lifetimes():
    """Many early revocations observed here raise the current shape's risk above the published fit."""
    from cmdare.collectors.samples import Lifetime

    lp = LivePlanner(SpeedModel.load(), load_offline_book())
    j = job([44.0] * 10)
    before = lp.update(j, now=0.0).table.current["p_revocation"]
    seen = [
        Lifetime(
            task=f"j/w{i}",
            start=0.0,
            end=600.0,
            cause="preempted",
            gpu="P100",
            region="us-central1",
            provisioning="preemptible",
        )
        for i in range(60)
    ]
    seen.append(
        Lifetime(
            task="j/w99",
            start=0.0,
            end=None,
            cause="running",
            gpu="P100",
            region="us-central1",
            provisioning="preemptible",
        )
    )
    lp.learn(seen, now=1200.0)
    plan = lp.update(j, now=1.0)  # a new lifetime ended: re-ranked at once
    after = plan.table.current["p_revocation"]
    assert after > before + 0.1
    assert "own history n=61" in lp.revocation.basis("P100", "us-central1", "preemptible")
    lp.learn(seen, now=1300.0)  # nothing new ended: the model is kept
    assert lp.update(j, now=2.0).table is plan.table


def test_k80_job_the_book_cannot_price_is_still_ranked_with_price_unknown():
    """Issue 16 item 5: GCP no longer prices K80; the alternatives are ranked, the current cost is unknown."""
    nodes = [node("ps-0", "ps")] + [node(f"worker-{i}", "worker", gpu="K80", step_s=0.22) for i in range(8)]
    k80 = JobView(
        name="j",
        facts=FACTS,
        steps_per_sec=36.0,
        examples_per_sec=36.0 * 128,
        global_step=1000.0,
        eta_seconds=None,
        nodes=nodes,
        history=[36.0] * 10,
    )
    plan = LivePlanner(SpeedModel.load(), load_offline_book()).update(k80, now=0.0)
    assert plan.table is not None and not plan.table.current_priced
    assert plan.table.current["gpu"] == "K80" and plan.table.current["cost_usd_p50"] is None
    assert len(plan.table) > 50 and plan.table.top(1)[0]["cost_usd_p50"] > 0
    assert "price unknown" in plan.note and plan.price_date.startswith("price date unknown (derived")


def test_a_cpu_only_worker_is_not_a_gpu_type_of_the_shape():
    from cmdare.planner.live.outlook import current_shape

    nodes = [node("ps-0", "ps"), node("worker-0", "worker"), node("worker-1", "worker", gpu="CPU")]
    shape = current_shape(
        JobView(
            name="j",
            facts=FACTS,
            steps_per_sec=10.0,
            examples_per_sec=None,
            global_step=None,
            eta_seconds=None,
            nodes=nodes,
            history=[10.0],
        )
    )
    assert shape is not None and dict(shape.gpus) == {"P100": 1}
