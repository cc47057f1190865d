"""Revocation overheads derived from the study, and the study's time-to-finish estimator."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from cmdare.planner.risk_cost.overheads import Overheads, degraded_wait
from tests.conftest import CMDARE

DERIVED = CMDARE / "derived"


@pytest.fixture(scope="module")
def ov() -> Overheads:
    return Overheads.load()


def test_values_match_the_study(ov: Overheads) -> None:
    assert 80 <= ov.server_start("K80", "preemptible") <= 92  # preemptible start 80-92 s
    assert 69 <= ov.server_start("P100", "standard") <= 76  # on-demand 69-76 s
    assert ov.server_start("T4", "spot") == ov.server_start_s["preemptible"]["*"]
    assert 66 <= ov.replacement_join("P100") <= 78 and ov.replacement_join("K80", cross_region=True) == 78.0
    assert 76 <= ov.framework_restart(warm=False) <= 91 and 15 <= ov.framework_restart(warm=True) <= 31
    assert ov.chief_lost_s_per_step * 500 == pytest.approx(58, abs=1.0)  # ≈58 s per 500 steps
    assert float(ov.checkpoint_cost(0.0)) == pytest.approx(3.75, abs=0.15)  # 3.75 s + 0.02 s/MB
    assert ov.checkpoint_s_per_mb == pytest.approx(0.02, abs=0.002)
    assert ov.checkpoint_mb(1857722) == pytest.approx(15.99, rel=0.15)  # ResNet-32 checkpoint 15.99 MB


def test_lost_work_scales_with_speed(ov: Overheads) -> None:
    assert float(ov.lost_work(500, 1 / ov.chief_lost_s_per_step)) == pytest.approx(58, abs=1.0)
    np.testing.assert_allclose(ov.lost_work(np.array([1000, 1000]), np.array([10.0, 20.0])), [100.0, 50.0])


def test_penalty_vanishes_when_speed_is_not_degraded() -> None:
    assert float(degraded_wait(np.array(150.0), np.array(10.0), np.array(10.0))) == 0.0
    assert float(degraded_wait(np.array(150.0), np.array(10.0), np.array(0.0))) == 150.0


def test_estimator_reproduces_the_11_runs(ov: Overheads) -> None:
    """The 11 runs (derived/revocation_training_time_estimate_vs_actual.csv) are ResNet-32, 64k steps on
    4 K80 workers with one revoked (assumption inferred from the data: the implied restored speed,
    ≈18.2 steps/s, is the 4-worker K80 ResNet-32 speed of derived/cluster_speed_vs_workers.csv)."""
    with (DERIVED / "cluster_speed_vs_workers.csv").open() as fh:
        speed = {
            int(r["num_workers"]): float(r["speed_steps_per_sec_mean"])
            for r in csv.DictReader(fh)
            if r["gpu"] == "K80" and r["num_ps"] == "1" and r["model"] == "ResNet-32"
        }
    with (DERIVED / "revocation_training_time_estimate_vs_actual.csv").open() as fh:
        runs = list(csv.DictReader(fh))
    assert len(runs) == 11
    remaining = np.array([64000 - int(r["revocation_step"]) for r in runs])
    actual = np.array([float(r["actual_s"]) for r in runs])
    est = remaining / speed[4] + degraded_wait(ov.request_overhead("K80", "preemptible"), speed[4], speed[3])
    mape = float(np.mean(np.abs(est - actual) / actual))
    assert mape < 0.02, mape
