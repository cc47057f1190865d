"""The speed model's named terms, with their units, and the closed-form pieces of a worker's step time.

Shared by the estimator (:mod:`speed_model`) and its fit (:mod:`speed_fit`), which import this module and
not each other's internals. Every function is vectorised over numpy arrays.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

# Worker compute features (seconds per step = coefficient x feature); f FLOPs/step, p parameters,
# t parameter tensors, peak FP32 TFLOPS, bw memory GB/s (planner/data/gpus.csv). Every term scales
# with a catalog feature of the GPU, so an unmeasured GPU (V100, T4, ...) needs no free parameter.
_FEATURES = {
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


def max_share_rule(rule: Mapping[str, float], fam: str | None, params) -> np.ndarray:
    """Largest tensor's share of the parameters by family ``fam`` (rules in speed_model.json): ResNets keep one
    largest kernel size, Shake-Shake a fixed share; an unknown family takes the larger (more imbalance)."""
    p = np.asarray(params, dtype=float)
    resnet = np.minimum(rule.get("resnet_max_tensor", 147456.0) / p, 1.0)
    shake = rule.get("shake_max_share", 0.05) * np.ones_like(p)
    return shake if fam == "shake" else resnet if fam is not None else np.maximum(resnet, shake)


def compute_features(f, p, t, peak_tflops, bw_gbs) -> dict[str, np.ndarray]:
    """Compute-time feature columns of :data:`COMPUTE_TERMS` (vectorised)."""
    pk, bw = np.asarray(peak_tflops, dtype=float), np.asarray(bw_gbs, dtype=float)
    return {k: _FEATURES[k](f, p, t, pk, bw) for k in COMPUTE_TERMS}


def _gpu_time(th: Mapping[str, float], f, p, t, peak_tflops, bw_gbs):
    """GPU seconds per step (forward + backward kernels), vectorised over numpy arrays."""
    feats = compute_features(f, p, t, peak_tflops, bw_gbs)
    return sum(th.get(k, 0.0) * v for k, v in feats.items())


def compute_time(th: Mapping[str, float], f, p, t, peak_tflops, bw_gbs):
    """Worker seconds per step without latency and PS service: the GPU time and the per-tensor
    host-side work (one send/recv per variable and gradient) overlap, combined as a smooth maximum
    ``(gpu^q + host^q)^(1/q)`` (q = ``overlap_q``; q = 1 is no overlap, large q a hard maximum)."""
    gpu = _gpu_time(th, f, p, t, peak_tflops, bw_gbs)
    host = th.get("w_tensor", 0.0) * np.asarray(t, dtype=float) / np.asarray(peak_tflops, dtype=float)
    q = th.get("overlap_q", 1.0)
    return (gpu**q + host**q) ** (1.0 / q)


def latency_time(th: Mapping[str, float], p, t, latency_ms):
    """Seconds per step spent waiting on the network at ``latency_ms`` one-way latency."""
    lat = np.asarray(latency_ms)
    return lat * (th.get("lat_const", 0.0) + th.get("lat_param", 0.0) * p)


def blend(rate, cap, p):
    """Smooth minimum of the compute-bound rate and the PS capacity (steps/s)."""
    rate, cap = np.asarray(rate, dtype=float), np.asarray(cap, dtype=float)
    return (rate ** (-p) + cap ** (-p)) ** (-1.0 / p)
