"""The parameter-server tier of an asynchronous PS cluster: service time per step with ``n_ps`` servers.

Physical structure (seconds per global step; coefficients fitted in ``speed_model.json``):

* Every PS serves one RPC round per worker step whatever its share (``ps_const``, not divided); per-tensor
  work (``ps_tensor``) divides evenly, because TensorFlow's default placement (``replica_device_setter``,
  round-robin over variables in creation order) spreads tensor *counts* evenly; per-byte work
  (``ps_param``: PS CPU applying gradients + PS NIC, 4 B each way per parameter) is carried by each PS in
  proportion to the bytes it holds, and the busiest PS sets the capacity.
* Round-robin does not balance *bytes*. The variables of a CNN are created layer by layer: per convolution
  its kernel (nearly all the bytes) and a fixed number of small ones (bias, batch-norm gamma/beta and moving
  mean/variance), ``period`` variables in all. Kernels then land on every ``period``-th slot, so with
  ``g = gcd(period, n_ps)`` they share only ``n_ps / g`` of the servers. The periods come from the study's
  tensor counts: its ResNets have 3 trainable tensors per convolution (kernel, gamma, beta: Res15 50 = 3 x 16
  + 2, Res32 104 ~ 3 x 33 + 2), hence 5 variables; its Shake-Shake nets 4 (kernel, bias, gamma, beta: d26
  216 ~ 4 x 53 + 4), hence 6 — two PS get the ResNet kernels alternately but every Shake-Shake kernel on one
  server. (Inferred from the counts; the study does not list its variables.) An unknown family averages the two. The busiest server's share is then ``1 / (n_ps / g)`` plus
  half a largest tensor (kernels alternate within a stage), never less than the largest tensor.
  A greedy byte-balancing placement (``GreedyLoadBalancingStrategy``) would reach ``max(1/n, max_share)``;
  the band (:mod:`cmdare.planner.speed.speed_band`) spans from "the extra PS adds nothing" to that.
* The worker side of the transfer: each worker pushes and pulls all its bytes through its own NIC however
  many servers share them; the fitted share ``ps_wire`` of the per-byte time is that worker-side part, which
  adding servers does not shorten.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from cmdare.planner.speed.speed_terms import Floats

__all__ = ["PLACEMENTS", "busiest_share", "capacity_seconds", "cycle_seconds", "nic_floor", "share_of"]

VARS_PER_LAYER = {"resnet": 5, "shake": 6}  # variables created per convolution (see the module docstring)


def _periodic_share(n: np.ndarray, m: np.ndarray, period: int) -> np.ndarray:
    """Busiest server's byte share when kernels recur every ``period`` variables (round-robin)."""
    g = np.gcd(n.astype(int), period)
    used = n / g
    return np.where(used > 1, 1.0 / used + m / 2.0, 1.0)


PLACEMENTS = ("round-robin", "balanced", "worst")


def busiest_share(
    n_ps: npt.ArrayLike, max_share: npt.ArrayLike, family: str | None = None, placement: str = "round-robin"
) -> Floats:
    """Share of the parameter bytes on the busiest of ``n_ps`` servers (vectorised over ``n_ps``).

    ``max_share`` is the largest tensor's share of the bytes; ``family`` ("resnet", "shake", None =
    unknown) sets the round-robin period. ``placement``: "round-robin" (TensorFlow's default, the
    expectation), "balanced" (greedy by bytes: the best case) or "worst" (the least favourable of the
    layer periods seen in the study: the layout of the network is not known for sure).
    """
    n = np.maximum(np.rint(np.asarray(n_ps, dtype=float)), 1.0)
    m = np.clip(np.asarray(max_share, dtype=float), 1e-6, 1.0)
    floor: Floats = np.maximum(1.0 / n, m)
    if placement == "balanced":
        return floor
    if placement == "worst":
        share = np.max([_periodic_share(n, m, k) for k in VARS_PER_LAYER.values()], axis=0)
    else:
        periods = [VARS_PER_LAYER[family]] if family in VARS_PER_LAYER else list(VARS_PER_LAYER.values())
        share = np.mean([_periodic_share(n, m, k) for k in periods], axis=0)
    out: Floats = np.clip(share, floor, 1.0)
    return out


@functools.lru_cache(maxsize=4096)
def share_of(n_ps: int, max_share: float, family: str | None, placement: str = "round-robin") -> float:
    """:func:`busiest_share` for one shape (cached: the planner asks for the same few shapes each refresh)."""
    return float(busiest_share(n_ps, max_share, family, placement))


def nic_floor(th: Mapping[str, float], nic_gbps: float | None) -> float:
    """Per-parameter PS seconds: fitted, or a slower NIC's line rate (4 B each way per parameter)."""
    return th["ps_param"] if nic_gbps is None else max(th["ps_param"], 32.0 / (nic_gbps * 1e9))


def capacity_seconds(
    th: Mapping[str, float],
    p: npt.ArrayLike,
    t: npt.ArrayLike,
    n_ps: npt.ArrayLike,
    share: npt.ArrayLike,
    nic_gbps: float | None = None,
) -> Floats:
    """Busiest PS's service seconds per global step (the tier serves ``1 / this`` steps/s); ``share`` is
    that server's share of the bytes (:func:`busiest_share`)."""
    n = np.asarray(n_ps, dtype=float)
    per_byte = nic_floor(th, nic_gbps) * np.asarray(p, dtype=float) * np.asarray(share, dtype=float)
    out: Floats = th["ps_const"] + th["ps_tensor"] * np.asarray(t, dtype=float) / n + per_byte
    return out


def cycle_seconds(
    th: Mapping[str, float],
    p: npt.ArrayLike,
    t: npt.ArrayLike,
    n_ps: npt.ArrayLike,
    share: npt.ArrayLike,
    nic_gbps: float | None = None,
) -> Floats:
    """PS seconds inside one worker's cycle: the busiest PS's part plus the worker-side transfer share
    ``ps_wire`` of the per-byte time, which more servers do not shorten."""
    n = np.asarray(n_ps, dtype=float)
    wire = th.get("ps_wire", 0.0)
    per_byte = (
        nic_floor(th, nic_gbps)
        * np.asarray(p, dtype=float)
        * (wire + (1.0 - wire) * np.asarray(share, dtype=float))
    )
    out: Floats = th["ps_const"] + th["ps_tensor"] * np.asarray(t, dtype=float) / n + per_byte
    return out
