"""Closed-form checks of the geo-distributed iteration model (issue 7)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cmdare.planner.geo.bubbles import PrefillSpec, memory_cap, prefill_flops, requests_per_bubble
from cmdare.planner.geo.geo_model import (
    DataCenter,
    GeoJob,
    LanguageModel,
    Layout,
    evaluate,
    pipeline_time,
    wan_bound_from_live,
    with_layout,
)
from cmdare.planner.geo.wan import WanLink

# GPT-3 175B shape (Brown et al. 2020, Table 2.1): 96 layers, d_model 12288, context 2048.
GPT3 = LanguageModel(layers=96, hidden=12288, seq_len=2048, micro_batch=1, params=175e9)


def _chain_job(
    dp: int, gbps: float = 5.0, schedule: str = "1f1b", sharing: str = "spatial", m: int = 32
) -> GeoJob:
    dcs = tuple(DataCenter(name=f"dc{i}", gpu="A100-80GB", gpus=64, usd_per_gpu_hour=1.0) for i in range(8))
    links = tuple(
        WanLink(a=f"dc{i}", b=f"dc{i + 1}", bandwidth_gbps=gbps, rtt_ms=0.0, n_conn=1) for i in range(7)
    )
    layout = Layout(
        pp=8,
        dp=dp,
        tp=8,
        placement=tuple(f"dc{i}" for i in range(8)),
        n_microbatches=m,
        schedule=schedule,
        sharing=sharing,
    )
    return GeoJob(model=GPT3, dcs=dcs, links=links, layout=layout, stage_compute_s=(0.21,) * 8)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize(("p", "m"), [(2, 1), (4, 8), (8, 32), (6, 5)])
def test_zero_communication_bubble_is_the_floor(schedule, p, m):
    t = pipeline_time(
        [0.1] * p, [0.2] * p, [0.0] * (p - 1), [0.0] * (p - 1), [True] * (p - 1), 4, m, schedule
    )
    assert t.total == pytest.approx((m + p - 1) * 0.3)
    bubble = 1 - m * 0.3 / t.total
    assert bubble == pytest.approx((p - 1) / (m + p - 1))


def test_zero_communication_bubble_through_evaluate():
    job = _chain_job(1, gbps=1e12)
    job = GeoJob(
        **{
            **job.__dict__,
            "dcs": (DataCenter(name="dc0", gpu="A100-80GB", gpus=64, usd_per_gpu_hour=1.0, intra_gbps=1e9),),
        }
    )
    r = evaluate(with_layout(job, placement=("dc0",) * 8))  # one DC, near-free intra-DC hops
    floor = 7 / (32 + 7)
    assert r.bubble_floor == pytest.approx(floor)
    assert r.bubble_fraction == pytest.approx(floor, rel=0.02)


def test_gpt3_activation_is_about_50_mb():
    assert GPT3.activation_bytes == pytest.approx(50e6, rel=0.02)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_gpt3_compute_bound_alone_wan_bound_with_eight_pipelines(schedule):
    one = evaluate(_chain_job(1, schedule=schedule))
    eight = evaluate(_chain_job(8, schedule=schedule))
    assert not any(b.wan_bound for b in one.boundaries)  # 50 MB / 5 Gbit/s = 0.08 s < 0.21 s
    assert all(b.wan_bound for b in eight.boundaries)  # 8 × 0.08 s = 0.64 s > 0.21 s
    assert eight.boundaries[0].link_busy_seconds == pytest.approx(8 * 50.33e6 * 8 / 5e9, rel=1e-3)
    assert eight.iteration_seconds > 2 * one.iteration_seconds
    assert eight.bound in ("wan", "round-trip")  # 1F1B: the in-flight limit over the slow round trip


@settings(max_examples=60, deadline=None)
@given(
    p=st.integers(1, 6),
    m=st.integers(1, 40),
    d=st.integers(1, 8),
    a=st.floats(0.0, 0.5),
    lat=st.floats(0.0, 0.2),
    schedule=st.sampled_from(["gpipe", "1f1b"]),
)
def test_temporal_sharing_never_slower_than_spatial(p, m, d, a, lat, schedule):
    args = ([0.1] * p, [0.2] * p, [lat] * (p - 1), [a] * (p - 1), [True] * (p - 1), d, m, schedule)
    assert pipeline_time(*args, "temporal").total <= pipeline_time(*args, "spatial").total + 1e-12


def test_temporal_gain_on_a_compute_bound_chain():
    job = _chain_job(4, gbps=50.0, sharing="spatial")
    spatial = evaluate(job).iteration_seconds
    temporal = evaluate(with_layout(job, sharing="temporal")).iteration_seconds
    assert temporal < spatial


def test_prefill_fits_in_bubbles_under_memory():
    spec = PrefillSpec(params=8e9, layers=32, hidden=4096, prompt_tokens=512, efficiency=0.302)
    assert prefill_flops(spec) == pytest.approx(2 * 8e9 * 512 + 2 * 32 * 512**2 * 4096)
    assert requests_per_bubble(1.0, 0.3, cap=100) == 3
    assert requests_per_bubble(1.0, 0.3, cap=2) == 2
    # 8 GPUs × 20 GB = 160 GB; weights 16 GB; KV 2·32·4096·512·2 B = 268 MB per request
    assert memory_cap(spec, 20.0, 8) == math.floor((160e9 - 16e9) / (2 * 32 * 4096 * 512 * 2))
    assert memory_cap(spec, 1.0, 8) == 0
    job = GeoJob(**{**_chain_job(8).__dict__, "prefill": spec})
    r = evaluate(job)
    assert r.prefill_capacity > 0
    assert r.gpu_utilization < r.gpu_utilization_with_prefill <= 1.0
    assert r.fillable_gpu_seconds <= r.idle_gpu_seconds + 1e-9
    starved = evaluate(
        GeoJob(
            **{
                **job.__dict__,
                "prefill": PrefillSpec(
                    params=8e9,
                    layers=32,
                    hidden=4096,
                    prompt_tokens=512,
                    efficiency=0.302,
                    precision_bytes=2,
                    memory_limit_gb=1.0,
                ),
            }
        )
    )
    assert starved.prefill_capacity == 0


def test_bubbles_add_up_to_idle_time():
    r = evaluate(_chain_job(1, schedule="gpipe"))  # dp = 1: no all-reduce
    for k in range(8):
        idle = sum(b.seconds * b.count for b in r.bubbles if b.stage == k)
        assert idle == pytest.approx(r.iteration_seconds - 32 * 0.21, rel=1e-6)


def test_allreduce_adds_time_only_with_dp():
    dcs = (DataCenter(name="a", gpu="A100-80GB", gpus=64, usd_per_gpu_hour=1.0),)
    layout = Layout(
        pp=2, dp=4, tp=8, placement=("a", "a"), n_microbatches=16, schedule="1f1b", sharing="temporal"
    )
    r = evaluate(GeoJob(model=GPT3, dcs=dcs, links=(), layout=layout))
    assert r.allreduce_seconds > 0
    r1 = evaluate(
        GeoJob(
            model=GPT3,
            dcs=dcs,
            links=(),
            layout=Layout(pp=2, dp=1, tp=8, placement=("a", "a"), n_microbatches=16),
        )
    )
    assert r1.allreduce_seconds == 0


def test_missing_link_is_an_error():
    job = _chain_job(1)
    with pytest.raises(ValueError, match="no WAN link"):
        evaluate(with_layout(job, placement=("dc0", "dc7", *(f"dc{i}" for i in range(2, 8)))))


def test_live_verdict_uses_the_same_rule():
    verdicts = wan_bound_from_live(
        stage_compute_s_per_mb={"s0": 0.21, "s1": 0.2},
        boundary_bytes_per_s={("s0", "s1"): 8 * 50e6 * 1.0},
        microbatches_per_s=1.0,
        stage_wait_share={"s1": 0.7},
        link_capacity_gbps={("s0", "s1"): 5.0},
    )
    (v,) = verdicts
    assert v.transfer_seconds == pytest.approx(8 * 50e6 * 8 / 5e9)
    assert v.wan_bound
    calm = wan_bound_from_live({"s0": 0.21}, {("s0", "s1"): 50e6}, 1.0, {"s1": 0.1}, {("s0", "s1"): 5.0})
    assert not calm[0].wan_bound
