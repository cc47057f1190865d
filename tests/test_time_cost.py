"""Time and cost to train: the study's 8 transient K80 vs 1 on-demand K80 check, quantiles, Poisson."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from cmdare.collectors.pricing import load_study_era_book
from cmdare.collectors.samples import ModelSpec
from cmdare.planner.risk_cost.overheads import Overheads
from cmdare.planner.risk_cost.revocation import RevocationModel
from cmdare.planner.risk_cost.time_cost import (
    PriceTable,
    RunSettings,
    ShapeColumns,
    estimate,
    poisson_quantile,
)
from cmdare.planner.speed.speed_model import SpeedModel
from tests.conftest import CMDARE

LOG = CMDARE / "icac2019_transient-deep-learning/data/lifetime/lifetime.csv"
RESNET32 = ModelSpec(
    name="resnet32", model_flops=1658696889, params=1857722, batch_size=128
)  # CM-DARE speed_data/0latency_k80_new.csv


def _columns(gpu, region, prov, workers, ps, ps_price_zero=None) -> ShapeColumns:
    gpu, region, prov = np.array(gpu), np.array(region), np.array(prov)
    workers, ps = np.array(workers), np.array(ps)
    sm = SpeedModel.load()
    v = sm.predict_shapes(RESNET32, gpu, workers, ps)["steps_per_sec"]
    deg = np.where(
        workers > 1, sm.predict_shapes(RESNET32, gpu, np.maximum(workers - 1, 1), ps)["steps_per_sec"], 0.0
    )
    w_usd, ps_usd = PriceTable(load_study_era_book()).lookup(gpu, region, prov, "standard")
    if ps_price_zero is not None:
        ps_usd = np.where(ps_price_zero, 0.0, ps_usd)
    return ShapeColumns(
        gpu=gpu,
        region=region,
        provisioning=prov,
        workers=workers,
        ps=ps,
        steps_per_sec=v,
        degraded_steps_per_sec=deg,
        worker_usd_per_hour=w_usd,
        ps_usd_per_hour=ps_usd,
        egress_usd=np.zeros(gpu.size),
    )


def _study_era_model() -> RevocationModel:
    """The CM-DARE fit updated with the Feb 2019 K80 lifetimes (the runs are from Feb 2019)."""
    path = Path(__file__).resolve().parents[1] / "scripts/fit_revocation_model.py"
    spec = importlib.util.spec_from_file_location("fit_revocation_model", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return RevocationModel.load().update(
        [lt for lt in mod.parse_icac_lifetime_log(LOG.read_text()) if lt.gpu == "K80"]
    )


def test_eight_transient_k80_vs_one_on_demand() -> None:
    """ICAC'19 (training/k80_spot/8-spot vs k80_on_demand/k80-demand): 1,840 s / $1.12 vs 14,078 s / $2.83,
    i.e. 7.65× faster and 60.6% cheaper. 8-spot runs were in us-east1 (8), us-central1 (9), us-west1 (9)
    (and europe-west1, not in the study-era book); the single on-demand run had no separate PS VM."""
    ov, model = Overheads.load(), _study_era_model()
    run = RunSettings(
        steps=64000, checkpoint_interval_steps=None, checkpoint_mb=ov.checkpoint_mb(RESNET32.params)
    )
    weights = {"us-east1": 8, "us-central1": 9, "us-west1": 9}
    speedups, savings = [], []
    for region in weights:
        cols = _columns(
            ["K80", "K80"], [region] * 2, ["preemptible", "standard"], [8, 1], [1, 1], [False, True]
        )
        tc = estimate(cols, run, ov, model)
        speedups.append(tc.seconds_expected[1] / tc.seconds_expected[0])
        savings.append(1 - tc.cost_expected[0] / tc.cost_expected[1])
        assert tc.seconds_expected[1] == pytest.approx(14078, rel=0.03)
        assert tc.cost_expected[1] == pytest.approx(2.83, rel=0.03)
    w = np.array(list(weights.values()), dtype=float)
    speedup, saving = np.average(speedups, weights=w), np.average(savings, weights=w)
    assert speedup == pytest.approx(7.65, rel=0.06)
    assert saving == pytest.approx(0.606, abs=0.05)


def test_quantiles_order_and_standard_is_deterministic() -> None:
    ov, model = Overheads.load(), RevocationModel.load()
    cols = _columns(["K80", "K80", "P100"], ["us-east1", "us-east1", "us-central1"],
                    ["preemptible", "standard", "spot"], [8, 8, 4], [1, 1, 2])  # fmt: skip
    tc = estimate(
        cols, RunSettings(steps=200000, checkpoint_interval_steps=None, checkpoint_mb=16.0), ov, model
    )
    assert np.all(tc.seconds_p50 <= tc.seconds_p90 + 1e-9)
    assert np.all(tc.cost_p50 <= tc.cost_p90 + 1e-9)
    assert tc.expected_revocations[1] == 0 and tc.p_revocation[1] == 0
    assert tc.seconds_p50[1] == tc.seconds_p90[1] == pytest.approx(tc.seconds_expected[1])
    assert tc.expected_revocations[0] > 0 and tc.seconds_revocation[0] > 0
    # transient is cheaper per hour but pays overheads
    assert tc.cost_expected[0] < tc.cost_expected[1] and tc.seconds_expected[0] > tc.seconds_expected[1]


def test_poisson_quantile_matches_scipy() -> None:
    from scipy.stats import poisson

    means = np.array([0.0, 0.05, 0.7, 1.0, 3.2, 10.0, 25.0])
    for q in (0.5, 0.9):
        np.testing.assert_array_equal(poisson_quantile(means, q), poisson.ppf(q, means))


def test_one_estimate_for_every_kind_of_node() -> None:
    """PS and synchronous shapes go through one estimate (``estimate_nodes``): a PS shape's workers alone
    give the figures of the same shape with its parameter servers counted as none, and a PS shape is the
    sum of its two kinds (cost grows with a second kind's price, risk with its revocations)."""
    from cmdare.planner.risk_cost.time_cost import NodeKind, estimate_nodes

    rev, hours = RevocationModel.load(), np.array([1.0, 10.0, 100.0])

    def curves(h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return rev.survival("K80", "us-east1", "spot", h), rev.expected_revocations(
            "K80", "us-east1", "spot", h
        )

    base, ckpt, egress = hours * 3600.0, np.full(3, 60.0), np.zeros(3)

    def kind(count: float, usd: float) -> NodeKind:
        return NodeKind(count=np.full(3, count), curves=curves, penalty_s=np.full(3, 300.0),
                        usd_per_hour=np.full(3, usd), request_s=100.0, start_s=90.0, redo_share=1.0)  # fmt: skip

    alone = estimate_nodes((kind(4, 1.0),), base, ckpt, egress, None)
    with_none = estimate_nodes((kind(4, 1.0), kind(0, 5.0)), base, ckpt, egress, None)
    with_two = estimate_nodes((kind(4, 1.0), kind(2, 5.0)), base, ckpt, egress, None)
    for name in (
        "seconds_expected",
        "seconds_p90",
        "cost_expected",
        "cost_p90",
        "p_revocation",
        "redo_events",
    ):
        np.testing.assert_allclose(getattr(with_none, name), getattr(alone, name), rtol=1e-12)
    assert np.all(with_two.cost_expected > alone.cost_expected)
    assert np.all(with_two.p_revocation > alone.p_revocation)
    assert np.all(with_two.expected_revocations > alone.expected_revocations)
