"""Checks of the CM-DARE cluster simulator (tests/alert_sim.py) that the alert tests and benchmarks share."""

from __future__ import annotations

import math

from tests.alert_sim import Harness, SimCluster, SimPipeline, load_curves


# ----------------------------------------------------------------------------------- checks of the simulator
async def test_sim_reproduces_the_measured_p100_plateau_through_the_store(shared_dir):
    curves = load_curves()
    sim = SimCluster("ResNet-32", {"P100": curves[("P100", "ResNet-32")]}, ["P100"] * 8, noise=0.0)
    h = Harness(sim)
    for _ in range(6):
        await h.refresh()
    (job,) = h.jobs
    assert math.isclose(job.steps_per_sec, 43.15, rel_tol=1e-3)
    assert math.isclose(job.workers()[0].step_seconds, 1 / 11.36, rel_tol=1e-3)


async def test_sim_pipeline_period_is_the_slow_link():
    links = {frozenset(("a", "b")): 0.36}
    pipe = SimPipeline(["a", "a", "b", "b"], links, noise=0.0)
    assert math.isclose(pipe.period(), 2 * 50e6 * 8 / 0.36e9)
