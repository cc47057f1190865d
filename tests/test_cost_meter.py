"""Cost accrued while monitored: node prices from the price book integrated over the clock."""

from __future__ import annotations

import pytest

from cmdare.collectors.observed import JobView, NodeView
from cmdare.collectors.pricing import load_offline_book
from cmdare.collectors.samples import JobFacts
from cmdare.planner.risk_cost.cost_meter import CostMeter


def node(name, role, gpu, status="up", region="us-central1", prov="preemptible"):
    return NodeView(
        name=name,
        role=role,
        gpu=gpu,
        region=region,
        zone="",
        provisioning=prov,
        status=status,
        steps_per_sec=None,
        step_seconds=None,
        gpu_util=None,
        net_in_bps=None,
        net_out_bps=None,
        started_at=None,
        last_error=None,
        restarts=0,
        cause="",
    )


def test_accrues_price_times_time_and_skips_down_nodes():
    book = load_offline_book()
    worker = book.node_price("V100", 1, "us-central1", "preemptible").usd_per_hour
    ps = book.ps_node_price("us-central1", "standard").usd_per_hour
    nodes = [
        node("ps-0", "ps", "", prov="standard"),
        node("w0", "worker", "V100"),
        node("w1", "worker", "V100"),
    ]
    meter = CostMeter(book, budget_usd=10.0)
    meter.update(
        [
            JobView(
                name="j",
                facts=JobFacts("j"),
                steps_per_sec=None,
                examples_per_sec=None,
                global_step=None,
                eta_seconds=None,
                nodes=nodes,
                history=[],
            )
        ],
        now=0.0,
    )
    nodes[2] = node("w1", "worker", "V100", status="revoked")
    view = meter.update(
        [
            JobView(
                name="j",
                facts=JobFacts("j"),
                steps_per_sec=None,
                examples_per_sec=None,
                global_step=None,
                eta_seconds=None,
                nodes=nodes,
                history=[],
            )
        ],
        now=3600.0,
    )["j"]
    assert view.accrued_usd == pytest.approx(ps + 2 * worker)  # the first hour ran at the first rate
    assert view.usd_per_hour == pytest.approx(ps + worker)  # the revoked worker no longer costs
    assert view.budget_left_hours == pytest.approx((10 - view.accrued_usd) / view.usd_per_hour)
    assert view.complete and view.price_source == "offline"


def test_unknown_price_is_reported_not_guessed():
    meter = CostMeter(load_offline_book())
    nodes = [node("w0", "worker", "K80")]  # the current offline book has no K80
    view = meter.update(
        [
            JobView(
                name="j",
                facts=JobFacts("j"),
                steps_per_sec=None,
                examples_per_sec=None,
                global_step=None,
                eta_seconds=None,
                nodes=nodes,
                history=[],
            )
        ],
        now=0.0,
    )["j"]
    assert view.usd_per_hour is None and not view.complete and "w0" in view.unpriced[0]


def test_a_fleet_of_unpriced_tasks_is_counted_and_only_the_first_few_named():
    """10,000 workers of a GPU the book does not price: the view counts them all and names 10 (a list of
    10,000 strings a refresh cost more than the rest of the meter)."""
    from cmdare.planner.risk_cost.cost_meter import UNPRICED_NAMED

    nodes = [node(f"worker-{i}", "worker", "NoSuchGPU") for i in range(10_000)] + [
        node("worker-x", "worker", "P100")
    ]
    job = JobView(
        name="big",
        facts=JobFacts("big"),
        steps_per_sec=None,
        examples_per_sec=None,
        global_step=None,
        eta_seconds=None,
        nodes=nodes,
    )
    view = CostMeter(load_offline_book()).update([job], 0.0)["big"]
    assert view.unpriced_tasks == 10_000 and not view.complete
    assert len(view.unpriced) == UNPRICED_NAMED and view.unpriced[0].startswith("worker-0: ")
    assert view.usd_per_hour is not None  # the priced worker still counts
