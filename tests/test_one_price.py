"""One price for one shape, and dates called one way (issue 28 item 7): the cost meter prices a job
whose tasks name no region where the planner plans it (and says it assumed so), price messages never
show a blank region, ``prices`` says on stderr when it fell back from live prices, and the Planner's
subtitle uses the snapshot's words for the price date, fitted to the pane (never cut)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cmdare.collectors.observed import JobView, NodeView
from cmdare.collectors.pricing import load_offline_book
from cmdare.collectors.samples import JobFacts, ModelSpec
from cmdare.planner.live.plan import workload_for_job
from cmdare.planner.risk_cost.cost_meter import CostMeter
from cmdare.planner.risk_cost.workload import ASSUMED_REGION
from cmdare.tui.panes.job import _cost_cell
from cmdare.tui.panes.planner import fit_subtitle


def _node(name: str, role: str, gpu: str, region: str = "") -> NodeView:
    return NodeView(
        name=name,
        role=role,
        gpu=gpu,
        region=region,
        zone="",
        provisioning="standard",
        status="up",
        steps_per_sec=5.0,
        step_seconds=0.1,
        gpu_util=None,
        net_in_bps=None,
        net_out_bps=None,
        started_at=0.0,
        last_error=None,
        restarts=0,
        cause="",
    )


def _job(nodes: list[NodeView]) -> JobView:
    facts = JobFacts("j", ModelSpec(name="ResNet-32", model_flops=0.14e9, params=0.46e6), target_steps=10_000)
    return JobView(
        name="j",
        facts=facts,
        steps_per_sec=10.0,
        examples_per_sec=None,
        global_step=100.0,
        eta_seconds=None,
        nodes=nodes,
        sync="async-ps",
    )


def test_a_job_without_regions_is_priced_where_the_planner_plans_it():
    book = load_offline_book()
    job = _job([_node("ps-0", "ps", ""), _node("worker-0", "chief", "T4"), _node("worker-1", "worker", "T4")])
    cost = CostMeter(book).update([job], 0.0)["j"]
    t4 = book.node_price("T4", 1, ASSUMED_REGION, "standard").usd_per_hour
    ps = book.ps_node_price(ASSUMED_REGION, "standard").usd_per_hour
    assert cost.complete and cost.usd_per_hour == pytest.approx(2 * t4 + ps)
    assert cost.assumed == (f"{ASSUMED_REGION} assumed (3 task(s) name no region)",)
    w, why = workload_for_job(job, book)
    assert why is None and w.current.region == ASSUMED_REGION  # the planner's shape: the same region
    cell = str(_cost_cell(cost))
    assert f"{ASSUMED_REGION} assumed; no budget set" in cell and " in ;" not in cell


def test_a_cpu_labelled_worker_is_a_cpu_node_and_no_message_has_a_blank_region():
    book = load_offline_book()
    cost = CostMeter(book).update([_job([_node("worker-0", "worker", "cpu")])], 0.0)["j"]
    assert cost.usd_per_hour == pytest.approx(book.ps_node_price(ASSUMED_REGION).usd_per_hour)
    with pytest.raises(Exception) as exc:
        book.node_price("T4", 1, "", "standard")
    assert " in ;" not in str(exc.value) and "no region (none given)" in str(exc.value)


def test_prices_says_on_stderr_when_live_prices_were_not_used(isolated_home: Path):
    exe = Path(sys.executable).with_name("cmdare-tui")
    env = {k: v for k, v in os.environ.items() if k != "GOOGLE_APPLICATION_CREDENTIALS"}
    env["COLUMNS"] = "200"
    out = subprocess.run(
        [str(exe), "prices", "--gpu", "T4"], capture_output=True, text=True, timeout=60, env=env
    )
    assert out.returncode == 0, out.stderr
    (line,) = out.stderr.splitlines()
    assert (
        line.startswith("prices: live prices not used: ")
        and "offline prices, price date unknown (derived " in line
    )
    assert "offline prices, price date unknown (derived " in out.stdout  # the table's title, same words
    quiet = subprocess.run([str(exe), "prices", "--offline", "--gpu", "T4"], capture_output=True, text=True,
                           timeout=60, env=env)  # fmt: skip
    assert quiet.returncode == 0 and quiet.stderr == ""  # asked for offline: nothing to say


def test_the_planner_subtitle_keeps_its_words_and_fits_the_width():
    parts = [
        ("ranked by balanced", "by balanced"),
        ("offline prices, price date unknown (derived 2026-11-30 from a-catalog)",
         "offline prices, price date unknown (derived 2026-11-30)", "offline prices, price date unknown",
         "offline, price date unknown"),
        ("calibrated on 15 samples (residual 3%)", "calibrated on 15 samples", "calibrated"),
    ]  # fmt: skip
    assert fit_subtitle(parts, 500) == " · ".join(p[0] for p in parts)
    for width in (114, 100, 80, 66, 56):
        text = fit_subtitle(parts, width)
        assert len(text) <= width and "price date unknown" in text and "calibrated" in text, (width, text)
    assert fit_subtitle(parts, 80) == "ranked by balanced · offline prices, price date unknown · calibrated"


async def test_a_fix_prices_a_job_without_regions_as_the_cost_meter_does(shared_dir):
    """The eta-slip fix's $/h for tasks that name no region: the assumed region's price (the same fix
    as for tasks labelled with it), not a placeholder."""
    from dataclasses import replace

    from cmdare.planner.rules.bottlenecks import JobGoal
    from tests.alert_sim import Harness, SimCluster, load_curves

    k80 = {g: load_curves()[(g, "ResNet-32")] for g in ("K80", "P100")}
    fixes = []
    for regions in ([ASSUMED_REGION] * 2, [""] * 2):
        sim = SimCluster("ResNet-32", k80, ["P100"] * 2, seed=1, job="j", regions=regions)
        sim.facts = replace(sim.facts, target_steps=200_000)
        h = Harness(sim)
        h.goals = {"j": JobGoal(deadline_at=h.clock.now() + 2 * 3600)}
        for _ in range(5):
            alerts = await h.refresh()
        fixes.append(next(a.fix for a in alerts if a.kind == "eta-slip"))
    assert fixes[0] == fixes[1] and "$" in fixes[1], fixes
