"""Single-TCP (Mathis / window) and multi-connection WAN bandwidth."""

from __future__ import annotations

import math

import pytest

from cmdare.planner.geo.wan import (
    WanLink,
    effective_gbps,
    mathis_gbps,
    public_links,
    single_tcp_gbps,
    window_gbps,
)


def test_single_tcp_at_40ms_and_1e5_loss_is_about_100_mbit():
    g = single_tcp_gbps(40.0, 1e-5)
    assert 0.08 < g < 0.15  # Mathis: 1460·8/0.04 × 1.22/√1e-5 ≈ 113 Mbit/s
    assert g == pytest.approx(1460 * 8 / 0.04 * math.sqrt(1.5) / math.sqrt(1e-5) / 1e9)


def test_32_flows_approach_the_link():
    assert effective_gbps(5.0, 40.0, 1e-5, 1) < 0.03 * 5.0
    assert effective_gbps(5.0, 40.0, 1e-5, 32) > 0.7 * 5.0
    assert effective_gbps(1.12, 40.0, 1e-5, 32) == 1.12  # a 1.12 Gbit/s link is filled
    assert effective_gbps(5.0, 40.0, 1e-5, 64) == 5.0


def test_window_bounds_lossless_long_paths():
    assert mathis_gbps(223.0, 0.0) == math.inf
    assert single_tcp_gbps(223.0, 0.0) == pytest.approx(window_gbps(223.0))
    assert 0.1 < window_gbps(223.0) < 0.5  # a few hundred Mbit/s (background.md §2)


def test_link_helpers():
    link = WanLink(a="a", b="b", bandwidth_gbps=5.0, rtt_ms=40.0, loss=1e-5, n_conn=32)
    assert link.latency_s == pytest.approx(0.02)
    assert link.effective_gbps() == effective_gbps(5.0, 40.0, 1e-5, 32)
    assert link.effective_gbps(1) == pytest.approx(link.single_tcp_gbps())
    with pytest.raises(ValueError):
        effective_gbps(5.0, 40.0, 1e-5, 0)


def test_public_links_carry_the_background_figures():
    links = public_links()
    assert links["aws-virginia-ohio"].rtt_ms == 11 and links["aws-virginia-ohio"].gbps_low == 1.12
    assert links["aws-tokyo-frankfurt"].rtt_ms == 223 and links["aws-tokyo-frankfurt"].gbps_low == 0.36
    gcp = links["gcp-uscentral1-uswest1"]
    assert (gcp.gbps_low, gcp.gbps_high) == (0.18 * 8, 0.57 * 8) and math.isnan(gcp.rtt_ms)
