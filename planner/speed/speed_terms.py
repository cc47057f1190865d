"""The speed model's named terms, with their units, and the closed-form pieces of a worker's step time.

Shared by the estimator (:mod:`speed_model`) and its fit (:mod:`speed_fit`), which import this module and
not each other's internals. Every function is vectorised over numpy arrays.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import numpy.typing as npt

# The terms are vectorised: each takes numbers or numpy arrays (broadcast together) and returns an array.
Floats = npt.NDArray[np.float64]

# Worker compute features (seconds per step = coefficient x feature); f FLOPs/step, p parameters,
# t parameter tensors, peak FP32 TFLOPS, bw memory GB/s (planner/data/gpus.csv). Every term scales
# with a catalog feature of the GPU, so an unmeasured GPU (V100, T4, ...) needs no free parameter.
_FEATURES: dict[str, Callable[[Floats, Floats, Floats, Floats, Floats], Floats]] = {
    "a_flops": lambda f, p, t, pk, bw: f / (pk * 1e12),  # FLOP-bound convolution work
    "a_mem": lambda f, p, t, pk, bw: f * np.sqrt(t / p) / (bw * 1e9),  # activation traffic ~ F / width
    "a_const": lambda f, p, t, pk, bw: 1.0 / bw * np.ones_like(f * pk),  # fixed GPU work per step
}
COMPUTE_TERMS: tuple[str, ...] = tuple(_FEATURES)
WORKER_TERMS = ("w_tensor",)  # GPU-independent seconds per parameter tensor on the worker (overlapped)
LATENCY_TERMS = ("lat_const", "lat_param")  # round trips per step; window-limited bytes
PS_TERMS = ("ps_const", "ps_tensor", "ps_param")
SHAPE_TERMS = ("ps_wire", "overlap_q", "blend_p")  # worker-side byte share; smooth-max exponents
BOUNDED = {"ps_wire": (0.0, 1.0), "overlap_q": (1.0, 30.0), "blend_p": (1.0, 30.0)}


def param_names() -> tuple[str, ...]:
    """Names of the fitted coefficients, in the order the fit uses."""
    return (*COMPUTE_TERMS, *WORKER_TERMS, *LATENCY_TERMS, *PS_TERMS, *SHAPE_TERMS)


def max_share_rule(rule: Mapping[str, float], fam: str | None, params: npt.ArrayLike) -> Floats:
    """Largest tensor's share of the parameters by family ``fam`` (rules in speed_model.json): ResNets keep one
    largest kernel size, Shake-Shake a fixed share; an unknown family takes the larger (more imbalance)."""
    p = np.asarray(params, dtype=float)
    resnet = np.minimum(rule.get("resnet_max_tensor", 147456.0) / p, 1.0)
    shake = rule.get("shake_max_share", 0.05) * np.ones_like(p)
    return shake if fam == "shake" else resnet if fam is not None else np.maximum(resnet, shake)


def compute_features(
    f: npt.ArrayLike, p: npt.ArrayLike, t: npt.ArrayLike, peak_tflops: npt.ArrayLike, bw_gbs: npt.ArrayLike
) -> dict[str, Floats]:
    """Compute-time feature columns of :data:`COMPUTE_TERMS` (vectorised)."""
    pk, bw = np.asarray(peak_tflops, dtype=float), np.asarray(bw_gbs, dtype=float)
    fa, pa, ta = (np.asarray(x, dtype=float) for x in (f, p, t))
    return {k: _FEATURES[k](fa, pa, ta, pk, bw) for k in COMPUTE_TERMS}


def _gpu_time(
    th: Mapping[str, float],
    f: npt.ArrayLike,
    p: npt.ArrayLike,
    t: npt.ArrayLike,
    peak_tflops: npt.ArrayLike,
    bw_gbs: npt.ArrayLike,
) -> Floats:
    """GPU seconds per step (forward + backward kernels), vectorised over numpy arrays."""
    feats = compute_features(f, p, t, peak_tflops, bw_gbs)
    out: Floats = np.zeros(np.broadcast(*feats.values()).shape)
    for k, v in feats.items():
        out = out + th.get(k, 0.0) * v
    return out


def compute_time(
    th: Mapping[str, float],
    f: npt.ArrayLike,
    p: npt.ArrayLike,
    t: npt.ArrayLike,
    peak_tflops: npt.ArrayLike,
    bw_gbs: npt.ArrayLike,
) -> Floats:
    """Worker seconds per step without latency and PS service: the GPU time and the per-tensor
    host-side work (one send/recv per variable and gradient) overlap, combined as a smooth maximum
    ``(gpu^q + host^q)^(1/q)`` (q = ``overlap_q``; q = 1 is no overlap, large q a hard maximum)."""
    gpu = _gpu_time(th, f, p, t, peak_tflops, bw_gbs)
    host = th.get("w_tensor", 0.0) * np.asarray(t, dtype=float) / np.asarray(peak_tflops, dtype=float)
    q = th.get("overlap_q", 1.0)
    out: Floats = (gpu**q + host**q) ** (1.0 / q)
    return out


def latency_time(
    th: Mapping[str, float], p: npt.ArrayLike, t: npt.ArrayLike, latency_ms: npt.ArrayLike
) -> Floats:
    """Seconds per step spent waiting on the network at ``latency_ms`` one-way latency."""
    lat = np.asarray(latency_ms, dtype=float)
    out: Floats = lat * (th.get("lat_const", 0.0) + th.get("lat_param", 0.0) * np.asarray(p, dtype=float))
    return out


def blend(rate: npt.ArrayLike, cap: npt.ArrayLike, p: float) -> Floats:
    """Smooth minimum of the compute-bound rate and the PS capacity (steps/s)."""
    r, c = np.asarray(rate, dtype=float), np.asarray(cap, dtype=float)
    out: Floats = (r ** (-p) + c ** (-p)) ** (-1.0 / p)
    return out
