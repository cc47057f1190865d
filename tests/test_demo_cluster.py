"""The demo cluster's simulation without numpy: its interpolation of the measured curve is numpy's."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cmdare.demo.cluster import DemoCluster, interp, load_calibration


@given(
    st.lists(st.floats(-1e3, 1e3), min_size=1, max_size=12, unique=True),
    st.lists(st.floats(-1e3, 1e3), min_size=12, max_size=12),
    st.floats(-2e3, 2e3),
)
def test_interp_gives_numpys_values(xs, ys, x):
    """Inside the points, on them and past either end (held at the end values)."""
    xs = sorted(xs)
    ys = ys[: len(xs)]
    assert interp(x, xs, ys) == pytest.approx(float(np.interp(x, xs, ys)), rel=1e-12, abs=1e-9)
    for xi, yi in zip(xs, ys, strict=True):
        assert interp(xi, xs, ys) == yi == float(np.interp(xi, xs, ys))


def test_cluster_speed_follows_the_measured_curve():
    """The demo's cluster steps/s at 0.5-10 workers: numpy's interpolation of the CM-DARE curve."""
    curve = np.array(load_calibration()["cluster_curve_1ps"], dtype=float)
    demo = DemoCluster()
    for n in [0.5, *range(1, 11), 4.5]:
        assert demo.cluster_speed(n) == float(np.interp(n, curve[:, 0], curve[:, 1]))
    assert demo.cluster_speed(0) == 0.0
