import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cmdare.collectors.samples import ModelSpec
from cmdare.planner.speed.gpu_catalog import gpu_names
from cmdare.planner.speed.ps_tier import PLACEMENTS, busiest_share
from cmdare.planner.speed.speed_model import SpeedModel

MODEL = SpeedModel.load()
RES32 = ModelSpec(name="ResNet-32", model_flops=1658696889, params=1857722)
nets = st.builds(
    ModelSpec,
    name=st.sampled_from(["", "mynet", "shake40", "ResNet-32", "custom9"]),
    model_flops=st.floats(1e8, 5e10),
    params=st.floats(1e5, 5e7),
    batch_size=st.sampled_from([32, 128]),
)
gpus = st.sampled_from(gpu_names())


@settings(max_examples=60, deadline=None)
@given(nets, gpus, st.integers(1, 31), st.integers(1, 4))
def test_adding_a_worker_never_slows_unless_saturated(net, gpu, n, ps):
    a = MODEL.predict(net, {gpu: n}, ps=ps)
    b = MODEL.predict(net, {gpu: n + 1}, ps=ps)
    assert b.steps_per_sec >= a.steps_per_sec or a.bottleneck == "ps"


@settings(max_examples=60, deadline=None)
@given(nets, gpus, st.integers(1, 32), st.integers(1, 7))
def test_more_ps_never_slows_with_byte_balanced_placement(net, gpu, n, ps):
    assert MODEL.predict(net, {gpu: n}, ps=ps + 1, placement="balanced").steps_per_sec >= MODEL.predict(
        net, {gpu: n}, ps=ps, placement="balanced"
    ).steps_per_sec * (1 - 1e-12)


@settings(max_examples=60, deadline=None)
@given(nets, gpus, st.integers(1, 32), st.integers(1, 8))
def test_placements_order_worst_round_robin_balanced(net, gpu, n, ps):
    speed = {p: MODEL.predict(net, {gpu: n}, ps=ps, placement=p).steps_per_sec for p in PLACEMENTS}
    assert speed["worst"] <= speed["round-robin"] * (1 + 1e-12) <= speed["balanced"] * (1 + 1e-9)


def test_round_robin_period_can_make_an_extra_ps_useless():
    """Round-robin over 5 variables per convolution (the study's ResNets) puts every kernel on one of 5
    servers: the 5th PS does not help; Shake-Shake (6 per convolution) gains nothing in bytes from a 2nd."""
    r4, r5 = (MODEL.predict(RES32, {"P100": 8}, ps=k).terms["ps"] for k in (4, 5))
    assert r5 > r4
    assert busiest_share(2, 0.05, "shake") == 1.0 and busiest_share(2, 0.05, "resnet") < 0.55


@settings(max_examples=60, deadline=None)
@given(nets, gpus, st.integers(1, 64), st.integers(1, 8), st.floats(0.0, 100.0))
def test_finite_positive_for_every_gpu(net, gpu, n, ps, lat):
    p = MODEL.predict(net, {gpu: n}, ps=ps, latency_ms=lat)
    assert math.isfinite(p.steps_per_sec) and p.steps_per_sec > 0
    assert 0 < p.ps_utilization <= 1
    assert p.bottleneck in {"compute", "ps", "network"}
    assert math.isclose(p.examples_per_sec, p.steps_per_sec * net.batch_size)


@settings(max_examples=60, deadline=None)
@given(nets, st.lists(gpus, min_size=2, max_size=3, unique=True), st.integers(1, 4), st.integers(1, 2))
def test_heterogeneous_bounded_by_homogeneous(net, kinds, each, ps):
    total = each * len(kinds)
    mixed = MODEL.predict(net, dict.fromkeys(kinds, each), ps=ps).steps_per_sec
    homo = [MODEL.predict(net, {g: total}, ps=ps).steps_per_sec for g in kinds]
    assert min(homo) * (1 - 1e-9) <= mixed <= max(homo) * (1 + 1e-9)


def test_predict_shapes_agrees_with_predict():
    names = np.array(gpu_names() * 3)
    workers = np.arange(1, len(names) + 1) % 9 + 1
    ps = np.arange(len(names)) % 3 + 1
    for net in (RES32, ModelSpec(name="", model_flops=3e9, params=4e6, batch_size=64)):
        out = MODEL.predict_shapes(net, names, workers, ps)
        for i, (g, n, p) in enumerate(zip(names, workers, ps, strict=True)):
            ref = MODEL.predict(net, {g: int(n)}, ps=int(p))
            assert math.isclose(out["steps_per_sec"][i], ref.steps_per_sec, rel_tol=1e-9)
            assert math.isclose(out["ps_utilization"][i], ref.ps_utilization, rel_tol=1e-9)
            assert math.isclose(
                out["compute_bound_steps_per_sec"][i], ref.compute_bound_steps_per_sec, rel_tol=1e-9
            )
            assert out["bottleneck"][i] == ref.bottleneck


def test_p100_resnet32_plateau_comes_from_ps():
    # derived/cluster_speed_vs_workers.csv: P100 1 PS ResNet-32 plateaus at 44-47 steps/s
    eight = MODEL.predict(RES32, {"P100": 8})
    assert 40 <= eight.steps_per_sec <= 52
    assert eight.bottleneck == "ps" and eight.ps_utilization > 0.9
    assert eight.compute_bound_steps_per_sec > 1.5 * eight.steps_per_sec
    k80 = MODEL.predict(RES32, {"K80": 8})  # K80 scales nearly linearly (7.4-8.0x)
    assert k80.steps_per_sec > 7.0 * MODEL.predict(RES32, {"K80": 1}).steps_per_sec


def test_second_ps_capacity_depends_on_placement_not_simply_doubled():
    one, two = MODEL.predict(RES32, {"P100": 8}, ps=1), MODEL.predict(RES32, {"P100": 8}, ps=2)
    assert 1.6 <= two.terms["ps"] ** -1 / one.terms["ps"] ** -1 < 2.0  # ResNet kernels alternate servers
    big = ModelSpec(name="Shake-Shake-big", model_flops=22864820174, params=26204362)
    one, two = MODEL.predict(big, {"P100": 8}, ps=1), MODEL.predict(big, {"P100": 8}, ps=2)
    assert two.terms["ps"] ** -1 / one.terms["ps"] ** -1 < 1.2  # every kernel on one server


def test_known_network_uses_measured_speed():
    p = MODEL.predict(RES32, {"P100": 1})
    assert "measured" in p.source
    assert abs(p.steps_per_sec / 12.1137 - 1) < 0.01  # networks.csv mean of 0latency_p100_new2.csv
    assert (
        "fitted"
        in MODEL.predict(
            ModelSpec(name="unseen-net", model_flops=1658696889, params=1857722), {"P100": 1}
        ).source
    )


def test_latency_slows_and_slow_nic_binds():
    fast = MODEL.predict(RES32, {"K80": 1}).steps_per_sec
    assert MODEL.predict(RES32, {"K80": 1}, latency_ms=30.3).steps_per_sec < fast
    big = ModelSpec(name="big", model_flops=2e10, params=2.6e7)
    slow = MODEL.predict(big, {"V100": 8}, ps_nic_gbps=1.0)
    assert slow.bottleneck == "network"
    assert slow.steps_per_sec < MODEL.predict(big, {"V100": 8}).steps_per_sec
