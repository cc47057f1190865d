"""Step time of synchronous data-parallel training (DDP, Horovod): compute plus the exposed all-reduce.

Terms (seconds per global step; every GPU takes every step):

* ``compute`` — one GPU's forward + backward + update on its own batch (the per-GPU speed model, or
  the live job's measured ``cmdare_step_seconds``);
* ``allreduce`` — ring all-reduce of the gradients, ``S = params × bytes_per_param / compression``
  bytes over ``N = nodes × gpus_per_node`` GPUs: each GPU sends and receives ``2(N−1)/N × S`` bytes
  through the ring's slowest link (the node's NIC when the ring leaves the node, else the GPUs'
  PCIe/NVLink; :mod:`cmdare.planner.speed.interconnect`), plus ``2(N−1)`` hop latencies per bucket;
* ``exposed`` — the part backward does not hide: gradients go in ``k = ⌈S₀ / bucket⌉`` buckets (``S₀``
  uncompressed: DDP buckets gradient tensors, a compression hook shrinks each bucket) and a
  bucket's all-reduce starts as soon as backward has produced it, so all but the last bucket overlap
  the rest of backward (``backward_share × compute × (1 − 1/k)``); the last bucket never overlaps:
  ``exposed = max(allreduce − overlap, allreduce / k)``.

``step = compute + exposed``; weak-scaling factor (same batch per GPU) = ``compute / step``.

Calibration (:func:`calibrate`): from a live job's measured compute and exposed all-reduce, the scale
of each term that makes this model reproduce it (``comm_scale`` multiplies the wire time, i.e. divides
the link's line rate by the share achieved: protocol overhead, contention, a throttled network; the hop
latencies stay as given). Vectorised over shapes (numpy).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = [
    "SyncParams",
    "SyncTerms",
    "ring_parts",
    "ring_seconds",
    "sync_step",
    "calibrate",
    "DDP_BUCKET_BYTES",
]

DDP_BUCKET_BYTES = 25 * 2**20  # PyTorch DDP's default bucket_cap_mb = 25
BACKWARD_SHARE = 2.0 / 3.0  # backward ≈ 2 × forward FLOPs (the usual count: 2 matmuls per weight)


@dataclass(frozen=True)
class SyncParams:
    """Knobs of the all-reduce model; ``comm_scale``/``compute_scale`` are per-job calibration."""

    bucket_bytes: float = DDP_BUCKET_BYTES
    backward_share: float = BACKWARD_SHARE
    bytes_per_param: float = 4.0  # fp32 gradients
    compression: float = 1.0  # gradient compression ratio (1 = none)
    compute_scale: float = 1.0
    comm_scale: float = 1.0


@dataclass(frozen=True)
class SyncTerms:
    """Per-shape terms (arrays, seconds per step) and the derived rates."""

    compute: np.ndarray
    allreduce: np.ndarray  # the whole ring all-reduce
    exposed: np.ndarray  # the part backward does not hide
    step: np.ndarray
    buckets: np.ndarray
    link: np.ndarray  # "nic" | "intra" | "none": the ring's bottleneck
    latency: np.ndarray  # the hop-latency part of ``allreduce`` (not scaled by ``comm_scale``)

    @property
    def steps_per_sec(self) -> np.ndarray:
        return 1.0 / self.step

    @property
    def comm_share(self) -> np.ndarray:
        """Exposed all-reduce's share of the step."""
        return self.exposed / self.step


def ring_parts(
    grad_bytes: np.ndarray, n_gpus: np.ndarray, gbps: np.ndarray, hop_s: np.ndarray, buckets: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(wire, latency) seconds of a ring all-reduce of ``grad_bytes`` over ``n_gpus`` through links of
    ``gbps`` (per direction): ``2(N−1)/N × S`` bytes each way, and ``2(N−1)`` hops per bucket."""
    n = np.maximum(np.asarray(n_gpus, dtype=float), 1.0)
    share = 2.0 * (n - 1.0) / n
    wire = share * np.asarray(grad_bytes, dtype=float) * 8.0 / (np.asarray(gbps, dtype=float) * 1e9)
    return wire, np.asarray(buckets, dtype=float) * 2.0 * (n - 1.0) * np.asarray(hop_s, dtype=float)


def ring_seconds(
    grad_bytes: np.ndarray, n_gpus: np.ndarray, gbps: np.ndarray, hop_s: np.ndarray, buckets: np.ndarray
) -> np.ndarray:
    """Ring all-reduce seconds (wire + latency, :func:`ring_parts`); 0 for one GPU."""
    wire, lat = ring_parts(grad_bytes, n_gpus, gbps, hop_s, buckets)
    return wire + lat


def exposed_seconds(
    allreduce: np.ndarray, compute: np.ndarray, buckets: np.ndarray, share: float
) -> np.ndarray:
    """What of ``allreduce`` backward does not hide (all but the last bucket overlap backward)."""
    k = np.maximum(np.asarray(buckets, dtype=float), 1.0)
    overlap = share * np.asarray(compute, dtype=float) * (1.0 - 1.0 / k)
    return np.maximum(allreduce - overlap, allreduce / k)


def sync_step(
    compute_s: np.ndarray,
    params: float,
    nodes: np.ndarray,
    gpus_per_node: np.ndarray,
    intra_gbps: np.ndarray,
    nic_gbps: np.ndarray,
    intra_latency_s: np.ndarray,
    nic_latency_s: np.ndarray,
    p: SyncParams = SyncParams(),
) -> SyncTerms:
    """Step terms of synchronous shapes (arrays broadcast together)."""
    nodes = np.asarray(nodes, dtype=float)
    g = np.asarray(gpus_per_node, dtype=float)
    n = nodes * g
    raw = params * p.bytes_per_param
    grad = raw / max(p.compression, 1e-9)
    # DDP buckets the uncompressed gradient tensors; a compression hook shrinks each bucket's bytes
    buckets = np.broadcast_to(float(max(1, math.ceil(raw / p.bucket_bytes))), n.shape)
    multi = nodes > 1
    gbps = np.where(multi, np.minimum(nic_gbps, intra_gbps), intra_gbps)
    hop = np.where(multi, nic_latency_s, intra_latency_s)
    compute = np.asarray(compute_s, dtype=float) * p.compute_scale
    wire, lat = ring_parts(grad, n, gbps, hop, buckets)
    ar = np.where(n > 1, wire * p.comm_scale + lat, 0.0)
    exposed = exposed_seconds(ar, compute, buckets, p.backward_share)
    link = np.where(n <= 1, "none", np.where(multi & (np.asarray(nic_gbps) < intra_gbps), "nic", "intra"))
    return SyncTerms(compute, ar, exposed, compute + exposed, buckets, link, np.where(n > 1, lat, 0.0))


def calibrate(
    measured_compute: float, measured_exposed: float, predicted: SyncTerms, p: SyncParams
) -> SyncParams:
    """``p`` with the scales that make ``predicted`` (the live job's own shape, one row, uncalibrated)
    reproduce the measured compute and exposed all-reduce seconds per step."""
    c0, k = float(predicted.compute[0]), float(predicted.buckets[0])
    lat0 = float(predicted.latency[0])
    wire0 = float(predicted.allreduce[0]) - lat0
    compute_scale = measured_compute / c0 if c0 > 0 and measured_compute > 0 else 1.0
    comm_scale = 1.0
    if wire0 > 0 and measured_exposed >= 0:
        overlap = p.backward_share * measured_compute * (1.0 - 1.0 / max(k, 1.0))
        # exposed(x) = max(x − overlap, x / k) is increasing in x: invert it at the measurement
        x = (
            measured_exposed + overlap
            if k <= 1 or measured_exposed >= overlap / (k - 1)
            else measured_exposed * k
        )
        comm_scale = max(x - lat0, 1e-3 * wire0) / wire0  # the achieved bandwidth; hop latency as given
    return SyncParams(
        p.bucket_bytes, p.backward_share, p.bytes_per_param, p.compression, compute_scale, comm_scale
    )
