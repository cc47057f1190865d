"""Prediction bands, extrapolation labels and the PS tier, against the vendored CM-DARE measurements."""

from __future__ import annotations

import numpy as np
import pytest

from cmdare.collectors.samples import ModelSpec
from cmdare.planner.speed.ps_tier import busiest_share
from cmdare.planner.speed.speed_band import (
    EXTRAPOLATIONS,
    extrapolations,
    mix_bands,
    ps_gain_band,
    shape_bands,
    speed_band,
)
from cmdare.planner.speed.speed_cv import CATEGORIES, residuals
from cmdare.planner.speed.speed_model import SpeedModel
from scripts import fit_speed_model
from tests.conftest import REPO

MODEL = SpeedModel.load()
RES32 = ModelSpec(name="ResNet-32", model_flops=1658696889, params=1857722)
BIG = ModelSpec(name="Shake-Shake-big", model_flops=22864820174, params=26204362)
UNNAMED = ModelSpec(name="", model_flops=3e9, params=4e6)


@pytest.fixture(scope="module")
def obs():
    return fit_speed_model.load_observations(REPO)


@pytest.mark.parametrize(
    ("net", "gpus", "ps", "expected"),
    [
        (RES32, {"P100": 8}, 1, ()),
        (RES32, {"K80": 8}, 2, ()),  # measured: ICAC'19 experiment_1ps_vs_2ps
        (RES32, {"P100": 8}, 2, ("ps",)),
        (RES32, {"V100": 4}, 1, ("gpu",)),
        (RES32, {"P100": 16}, 1, ("workers",)),
        (UNNAMED, {"P100": 2}, 1, ("network",)),
        (UNNAMED, {"V100": 12}, 3, ("network", "gpu", "ps", "workers")),
    ],
)
def test_extrapolation_is_named_from_the_measured_domain(net, gpus, ps, expected):
    assert extrapolations(MODEL, net, gpus, ps) == expected
    band = speed_band(MODEL, net, gpus, ps)
    assert band.extrapolation in (expected or ("none",))
    assert band.p10 <= band.steps_per_sec <= band.p90 and band.p10 < band.p90
    assert band.basis.startswith("out-of-sample residuals")


def test_bands_widen_with_distance_from_the_domain():
    def width(b):
        return np.log(b.p90 / b.p10)

    inside = speed_band(MODEL, RES32, {"P100": 4})
    assert width(speed_band(MODEL, RES32, {"V100": 4})) > width(inside)
    assert width(speed_band(MODEL, BIG, {"P100": 8}, ps=2)) > 2 * width(inside)


def test_shipped_intervals_cover_every_category_from_held_out_residuals():
    assert set(MODEL.intervals_) == set(CATEGORIES) == set(EXTRAPOLATIONS)
    for cat, iv in MODEL.intervals_.items():
        assert iv["p10"] <= iv["p90"] and iv["n"] >= 7, cat
    assert MODEL.domain_["max_ps"] == {"K80/resnet32": 2} and MODEL.domain_["gpus"] == ["K80", "P100"]


def test_second_ps_gain_band_says_when_it_includes_no_gain():
    big = ps_gain_band(MODEL, BIG, {"P100": 8}, 1, 2)
    assert big.p50 < 0.2  # not the +70% of a model that halves the PS work
    assert big.p10 <= big.p50 <= big.p90 and big.p90 > 0.5  # a byte-balanced placement would gain
    k80 = ps_gain_band(MODEL, UNNAMED, {"K80": 2}, 1, 2)  # compute-bound: the 2nd PS barely matters
    assert k80.p50 < 0.1
    flat = ps_gain_band(MODEL, BIG, {"K80": 1}, 1, 2)
    assert flat.includes_no_gain == (flat.p10 <= 0)


def test_two_ps_rows_of_the_visible_data_are_fitted_and_scored(obs):
    two = [o for o in obs if o.ps == 2]
    assert len(two) == 7 and {o.workers for o in two} == set(range(2, 9)) and {o.gpu for o in two} == {"K80"}
    errors = [
        abs(MODEL.predict(RES32, {"K80": o.workers}, ps=2).steps_per_sec / o.steps_per_sec - 1) for o in two
    ]
    assert max(errors) < 0.03
    held = residuals(obs, "ps")  # fitted on 1-PS rows only
    assert len(held) == 7 and max(abs(r) for _, _, r in held) < 0.05


def test_shape_bands_agree_with_speed_band():
    gpu = np.array(["K80", "P100", "V100", "P100"])
    workers, ps = np.array([8, 8, 4, 16]), np.array([2, 2, 1, 1])
    out = shape_bands(MODEL, RES32, gpu, workers, ps)
    for i in range(gpu.size):
        band = speed_band(MODEL, RES32, {gpu[i]: int(workers[i])}, ps=int(ps[i]))
        assert out["steps_per_sec_p10"][i] == pytest.approx(band.p10)
        assert out["steps_per_sec_p90"][i] == pytest.approx(band.p90)
        assert out["extrapolation"][i] == band.extrapolation
    assert list(out["extrapolation"]) == ["none", "ps", "gpu", "workers"]


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 8])
@pytest.mark.parametrize("family", ["resnet", "shake", None])
def test_busiest_share_bounds(n, family):
    m = 0.05
    rr = float(busiest_share(n, m, family))
    bal = float(busiest_share(n, m, family, "balanced"))
    worst = float(busiest_share(n, m, family, "worst"))
    assert max(1 / n, m) == bal <= rr <= worst <= 1.0
    assert (rr == 1.0) == (
        n == 1 or (family == "resnet" and n == 5) or (family == "shake" and n in (2, 3, 6))
    )


def test_workers_band_grows_with_the_distance_beyond_the_measured_clusters():
    def width(n):
        b = speed_band(MODEL, RES32, {"K80": n})
        return b.p90 / b.p10

    assert width(8) <= width(12) <= width(32) and width(32) > width(8)
    assert MODEL.intervals_["workers"]["per_octave"] == 1


def test_band_is_public_in_the_speed_package():
    from cmdare.planner import speed

    band = speed_band(MODEL, RES32, {"P100": 8}, ps=2)
    assert type(band) is speed.SpeedBand and band.extrapolation == "ps"


@pytest.mark.parametrize(
    "net",
    [
        RES32,
        ModelSpec(name="", model_flops=3e9, params=4e6, batch_size=64),
        ModelSpec(name="shake-shake-small", model_flops=2e10, params=2e7, batch_size=128),
    ],
)
def test_mixes_on_arrays_agree_with_predict_and_speed_band(net):
    """predict's GPU mixes on arrays (issue 27): the same speed, bottleneck, band and label as one at a time."""
    from cmdare.planner.speed.gpu_catalog import gpu_names

    names, rng = gpu_names(), np.random.default_rng(27)
    mixes = [dict(zip(rng.choice(names, k, replace=False).tolist(), rng.integers(1, 6, k).tolist(), strict=True))
             for k in rng.integers(2, 4, 120)]  # fmt: skip
    gpu_at, count_at = np.zeros((len(mixes), 3), dtype=int), np.zeros((len(mixes), 3))
    for i, m in enumerate(mixes):
        for j, (g, c) in enumerate(m.items()):
            gpu_at[i, j], count_at[i, j] = names.index(g), c
    ps = rng.integers(1, 8, len(mixes))
    pred = MODEL.predict_mixes(net, names, gpu_at, count_at, ps)
    band = mix_bands(MODEL, net, names, gpu_at, count_at, ps, pred["steps_per_sec"])
    for i, m in enumerate(mixes):
        ref = MODEL.predict(net, m, ps=int(ps[i]))
        b = speed_band(MODEL, net, m, ps=int(ps[i]), prediction=ref)
        assert pred["steps_per_sec"][i] == pytest.approx(ref.steps_per_sec, rel=1e-12)
        assert pred["bottleneck"][i] == ref.bottleneck
        assert band["steps_per_sec_p10"][i] == pytest.approx(b.p10, rel=1e-12)
        assert band["steps_per_sec_p90"][i] == pytest.approx(b.p90, rel=1e-12)
        assert band["extrapolation"][i] == b.extrapolation
