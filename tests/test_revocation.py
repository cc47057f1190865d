"""Revocation model: fit quality against the CM-DARE CDFs, fallbacks, cluster risk, learning from history."""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from cmdare.collectors.samples import Lifetime
from cmdare.planner.risk_cost.revocation import RevocationModel
from tests.conftest import CMDARE

DERIVED = CMDARE / "derived"
LOG = CMDARE / "icac2019_transient-deep-learning/data/lifetime/lifetime.csv"


def _fit_script():
    path = Path(__file__).resolve().parents[1] / "scripts/fit_revocation_model.py"
    spec = importlib.util.spec_from_file_location("fit_revocation_model", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def model() -> RevocationModel:
    return RevocationModel.load()


def test_region_probabilities_reproduce_fitted_cdfs(model: RevocationModel) -> None:
    with (DERIVED / "lifetime_cdf_by_gpu_region.csv").open() as fh:
        rows = [r for r in csv.DictReader(fh) if int(r["hour_index"]) < 24]
    keys = {(r["gpu"], r["region"]) for r in rows}
    assert len(keys) == 12
    for gpu, region in keys:
        sub = [r for r in rows if (r["gpu"], r["region"]) == (gpu, region)]
        hours = np.array([int(r["hour_index"]) + 1.0 for r in sub])
        cdf = np.array([float(r["cdf"]) for r in sub])
        # hour_index 23 = revoked before the 24 h kill: evaluate just before it
        pred = 1 - model.survival(gpu, region, "preemptible", np.minimum(hours, 23.9))
        assert np.mean(np.abs(pred - cdf)) <= 0.05, (gpu, region)


def test_preemptible_hard_limit_spot_continues_standard_never(model: RevocationModel) -> None:
    h = np.array([12.0, 23.9, 24.0, 48.0])
    pre = model.survival("K80", "us-west1", "preemptible", h)
    spot = model.survival("K80", "us-west1", "spot", h)
    assert pre[2] == 0.0 and pre[3] == 0.0
    assert spot[2] > 0.5 and 0 < spot[3] < spot[2]
    np.testing.assert_allclose(pre[:2], spot[:2])
    assert np.all(model.survival("K80", "us-west1", "standard", h) == 1.0)


def test_fallbacks_say_which_basis(model: RevocationModel) -> None:
    assert model.resolve("K80", "us-west1")[0] == "K80/us-west1"
    key, basis = model.resolve("K80", "asia-east1")
    assert key == "K80/*" and "no data for asia-east1" in basis
    key, basis = model.resolve("T4", "us-central1")
    assert key == "*/*" and "no data for T4" in basis
    assert "never revoked" in model.basis("K80", "us-west1", "standard")


def test_renewals_count_revoked_replacements_and_standard_servers_never_go(model: RevocationModel) -> None:
    h = np.array([2.0])
    survival = model.survival("P100", "us-central1", "preemptible", h)[0]
    renewals = model.expected_revocations("P100", "us-central1", "preemptible", h)[0]
    assert 0 < survival < 1 and renewals >= -np.log(survival) * 0.999  # replacements can be revoked too
    assert model.survival("P100", "us-central1", "standard", h)[0] == 1.0
    assert model.expected_revocations("P100", "us-central1", "standard", h)[0] == 0.0


def test_early_hours_riskiest(model: RevocationModel) -> None:
    s = model.survival("V100", "*", "preemptible", np.array([0.0, 1.0, 2.0, 12.0, 13.0]))
    first_hour, later_hour = s[0] - s[1], s[3] - s[4]
    assert first_hour > 3 * later_hour


def test_start_hour_changes_risk(model: RevocationModel) -> None:
    h = np.array([3.0])
    night = model.with_start_hour(0).expected_revocations("P100", "us-east1", "preemptible", h)[0]
    midday = model.with_start_hour(11).expected_revocations("P100", "us-east1", "preemptible", h)[0]
    assert midday > night  # P100 revocations peak 9-15 h


def test_update_moves_toward_own_history() -> None:
    fresh = RevocationModel.load()
    before = 1 - fresh.survival("K80", "us-central1", "preemptible", np.array([23.5]))[0]
    start = 1.55e9
    calm = [
        Lifetime(
            task=f"k80-{i}",
            start=start,
            end=start + 86400,
            cause="stopped",
            gpu="K80",
            region="us-central1",
            provisioning="preemptible",
        )
        for i in range(40)
    ]
    fresh.update(calm)
    after = 1 - fresh.survival("K80", "us-central1", "preemptible", np.array([23.5]))[0]
    assert after < before * 0.6
    assert "own history n=40" in fresh.basis("K80", "us-central1", "preemptible")


def test_update_with_2019_log_moves_toward_its_lower_rates() -> None:
    log = _fit_script().parse_icac_lifetime_log(LOG.read_text())
    for gpu in ("K80", "P100", "V100"):
        mine = [lt for lt in log if lt.gpu == gpu]
        observed = np.mean([lt.revoked for lt in mine])  # 31% / 20% / 10% in the 2019 log
        m = RevocationModel.load()
        regions = sorted({lt.region for lt in mine})
        prior = np.mean([1 - m.survival(gpu, r, "preemptible", np.array([23.7]))[0] for r in regions])
        m.update(mine)
        post = np.mean([1 - m.survival(gpu, r, "preemptible", np.array([23.7]))[0] for r in regions])
        assert observed < post < prior, gpu
        assert abs(post - observed) < abs(prior - observed) * 0.9, gpu
