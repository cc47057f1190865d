"""Step time of synchronous data-parallel training (DDP, Horovod, ZeRO, FSDP): compute, the wait for the slowest
GPU and the exposed collective.

Terms (seconds per global step; every GPU takes every step):

* ``compute`` — one GPU's forward + backward + update on its own batch, without parameter-server terms
  (:mod:`cmdare.planner.speed.sync_compute`, or the live job's measured ``cmdare_step_seconds``);
* ``allreduce`` — the gradients' collective, ``S = params × bytes_per_param / compression`` bytes over
  ``N = nodes × gpus_per_node`` GPUs, as NCCL runs it (:mod:`cmdare.planner.speed.collectives`: ring or
  hierarchical tree, whichever is faster for the bucket, at the links' *achieved* bus bandwidth and published
  per-step latency; the callers pass achieved rates, :class:`~cmdare.planner.speed.interconnect.NodeLinks`).
  ``mode="fsdp"`` (ZeRO-3): all-gather of the parameters in forward and again in backward plus a
  reduce-scatter of the gradients, 1.5 × the bytes of an all-reduce; ``zero1``/``zero2`` move the bytes of an
  all-reduce (reduce-scatter + all-gather), as DDP;
* ``straggler`` — every GPU waits for the slowest: with each GPU's step time jittering within ±``straggler_cv``
  of its mean (bounded, uniform), the slowest of ``N`` is on average ``compute × cv × (N−1)/(N+1)`` above the
  mean: 0 for one GPU, a third of ``cv`` for two, approaching ``cv`` for many;
* ``exposed`` — the part backward does not hide: gradients go in ``k = ⌈S₀ / bucket⌉`` buckets (``S₀``
  uncompressed: DDP buckets gradient tensors, a compression hook shrinks each bucket) and a
  bucket's all-reduce starts as soon as backward has produced it, so all but the last bucket overlap
  the rest of backward (``backward_share × compute × (1 − 1/k)``); the last bucket never overlaps:
  ``exposed = max(allreduce − overlap, allreduce / k)``. FSDP prefetches the next unit's all-gather during the
  current unit's compute, so its overlap spans forward and backward (``compute × (1 − 1/k)``).

``step = compute + straggler + exposed``; weak-scaling factor (same batch per GPU) = ``compute / step``.

Calibration (:func:`calibrate`): from a live job's measured compute and exposed all-reduce, the scale
of each term that makes this model reproduce it (``comm_scale`` multiplies the wire time, i.e. divides
the link's line rate by the share achieved: protocol overhead, contention, a throttled network; the hop
latencies stay as given); a rank's measured all-reduce time includes its wait for the slowest rank, so the
job's own spread (``straggler_cv``) is taken from what the collective's least time leaves. Vectorised over
shapes (numpy).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from importlib import resources

import numpy as np

from cmdare.planner.speed.collectives import allreduce_parts

__all__ = [
    "SyncParams",
    "SyncTerms",
    "sync_step",
    "calibrate",
    "DDP_BUCKET_BYTES",
    "SYNC_MODES",
    "STRAGGLER_CV",
]

DDP_BUCKET_BYTES = 25 * 2**20  # PyTorch DDP's default bucket_cap_mb = 25
BACKWARD_SHARE = 2.0 / 3.0  # backward ≈ 2 × forward FLOPs (the usual count: 2 matmuls per weight)
SYNC_MODES = ("ddp", "fsdp", "zero1", "zero2")
FSDP_TRAFFIC = 1.5  # ZeRO-3: all-gather (fwd) + all-gather (bwd) + reduce-scatter = 3 × (N−1)/N × S
# Half-width of one GPU's step-time jitter relative to its mean: set on the fit half of the published scaling
# results (benchmarks/allreduce_public.py --fit writes planner/data/sync_validation.json; the held-out half is
# reported there, never used to set it)
STRAGGLER_CV = float(json.loads(resources.files("cmdare.planner").joinpath("data/sync_validation.json")
                                .read_text("utf-8"))["straggler_cv"])  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class SyncParams:
    """Knobs of the all-reduce model; ``comm_scale``/``compute_scale`` are per-job calibration."""

    bucket_bytes: float = DDP_BUCKET_BYTES
    backward_share: float = BACKWARD_SHARE
    bytes_per_param: float = 4.0  # fp32 gradients
    compression: float = 1.0  # gradient compression ratio (1 = none)
    compute_scale: float = 1.0
    comm_scale: float = 1.0
    mode: str = "ddp"  # ddp | fsdp (ZeRO-3) | zero1 | zero2
    straggler_cv: float = STRAGGLER_CV
    hop_s: float | None = None  # a per-step NIC latency to use instead of the published one (``hop_us``)


@dataclass(frozen=True, kw_only=True)
class SyncTerms:
    """Per-shape terms (arrays, seconds per step) and the derived rates."""

    compute: np.ndarray
    allreduce: np.ndarray  # the whole ring all-reduce
    exposed: np.ndarray  # the part backward does not hide
    step: np.ndarray
    buckets: np.ndarray
    link: np.ndarray  # "nic" | "intra" | "none": the collective's bottleneck
    latency: np.ndarray  # the hop-latency part of ``allreduce`` (not scaled by ``comm_scale``)
    straggler: np.ndarray | None = None  # seconds waiting for the slowest GPU
    algorithm: np.ndarray | None = None  # "ring" | "tree" | "none"

    @property
    def steps_per_sec(self) -> np.ndarray:
        out: np.ndarray = 1.0 / self.step
        return out

    @property
    def comm_share(self) -> np.ndarray:
        """The share of the step a rank spends in the all-reduce call (the exposed collective and the wait for
        the slowest rank, as ``cmdare_allreduce_seconds`` measures it)."""
        wait = self.straggler if self.straggler is not None else 0.0
        out: np.ndarray = (self.exposed + wait) / self.step
        return out


def exposed_seconds(
    allreduce: np.ndarray, compute: np.ndarray, buckets: np.ndarray, share: float
) -> np.ndarray:
    """What of ``allreduce`` backward does not hide (all but the last bucket overlap backward)."""
    k = np.maximum(np.asarray(buckets, dtype=float), 1.0)
    overlap = share * np.asarray(compute, dtype=float) * (1.0 - 1.0 / k)
    out: np.ndarray = np.maximum(allreduce - overlap, allreduce / k)
    return out


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
    """Step terms of synchronous shapes (arrays broadcast together). ``intra_gbps``/``nic_gbps`` are the links'
    achieved bus bandwidths and the latencies per collective step (:class:`NodeLinks` ``intra_bus_gbps`` …)."""
    nodes = np.asarray(nodes, dtype=float)
    g = np.asarray(gpus_per_node, dtype=float)
    n = nodes * g
    raw = params * p.bytes_per_param
    grad = raw / max(p.compression, 1e-9)
    # DDP buckets the uncompressed gradient tensors; a compression hook shrinks each bucket's bytes
    buckets = np.broadcast_to(float(max(1, math.ceil(raw / p.bucket_bytes))), n.shape)
    hop_nic = np.asarray(nic_latency_s, dtype=float) if p.hop_s is None else np.full(n.shape, p.hop_s)
    traffic = FSDP_TRAFFIC if p.mode == "fsdp" else 1.0
    compute = np.asarray(compute_s, dtype=float) * p.compute_scale
    wire, lat, algo = allreduce_parts(grad, nodes, g, intra_gbps, nic_gbps, intra_latency_s, hop_nic, buckets,
                                      traffic)  # fmt: skip
    ar = np.where(n > 1, wire * p.comm_scale + lat, 0.0)
    share = 1.0 if p.mode == "fsdp" else p.backward_share
    exposed = exposed_seconds(ar, compute, buckets, share)
    nn = np.maximum(n, 1.0)
    straggler = compute * p.straggler_cv * (nn - 1.0) / (nn + 1.0)
    multi = nodes > 1
    link = np.where(n <= 1, "none", np.where(multi & (np.asarray(nic_gbps) < intra_gbps), "nic", "intra"))
    return SyncTerms(
        compute=compute,
        allreduce=ar,
        exposed=exposed,
        step=compute + straggler + exposed,
        buckets=buckets,
        link=link,
        latency=np.where(n > 1, lat, 0.0),
        straggler=straggler,
        algorithm=algo,
    )


def calibrate(
    measured_compute: float, measured_exposed: float, predicted: SyncTerms, p: SyncParams
) -> SyncParams:
    """``p`` with the scales that make ``predicted`` (the live job's own shape, one row, uncalibrated)
    reproduce the measured compute and exposed all-reduce seconds per step (the latter = the wait for the
    slowest rank + the exposed collective: ``straggler + exposed``)."""
    c0, k = float(predicted.compute[0]), float(predicted.buckets[0])
    straggle0 = float(predicted.straggler[0]) if predicted.straggler is not None else 0.0
    lat0 = float(predicted.latency[0])
    wire0 = float(predicted.allreduce[0]) - lat0
    share = 1.0 if p.mode == "fsdp" else p.backward_share
    cv = p.straggler_cv
    if c0 > 0 and straggle0 > 0 and measured_compute > 0:
        # a rank's measured all-reduce time includes its wait for the slowest rank (not the links'): the
        # model's wait at the measured compute, at most what the collective's least exposed time leaves
        wait = measured_compute * straggle0 / c0
        least = float(exposed_seconds(np.array([lat0 + 1e-3 * wire0]), np.array([measured_compute]),
                                      np.array([k]), share)[0])  # fmt: skip
        room = max(measured_exposed - least, 0.0)
        cv = p.straggler_cv * min(1.0, room / wait)
        measured_exposed -= min(wait, room)
    compute_scale = measured_compute / c0 if c0 > 0 and measured_compute > 0 else 1.0
    comm_scale = 1.0
    if wire0 > 0 and measured_exposed >= 0:
        overlap = share * measured_compute * (1.0 - 1.0 / max(k, 1.0))
        # exposed(x) = max(x − overlap, x / k) is increasing in x: invert it at the measurement
        x = (
            measured_exposed + overlap
            if k <= 1 or measured_exposed >= overlap / (k - 1)
            else measured_exposed * k
        )
        comm_scale = max(x - lat0, 1e-3 * wire0) / wire0  # the achieved bandwidth; hop latency as given
    return replace(p, compute_scale=compute_scale, comm_scale=comm_scale, straggler_cv=cv)
