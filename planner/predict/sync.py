"""``predict`` rows of synchronous data-parallel shapes (``mode`` = ``sync``, ``fsdp``, ``zero1``, ``zero2``).

Input columns besides the PS ones (all optional): ``mode`` (``sync`` = DDP/Horovod all-reduce, ``fsdp`` =
ZeRO-3 sharding, ``zero1``/``zero2``; empty, ``ps`` or ``async-ps`` = a PS row), ``gpus_per_node`` (default 1),
``nic_gbps`` (the node's NIC line rate, Gbit/s; default: the GPU's usual GCP node, ``interconnect.csv``),
``transport`` (``tcp`` default, GCP's; ``rdma`` for InfiniBand/RoCE/EFA), ``precision`` (``fp32`` default,
``tf32``, ``fp16``/``bf16``/``amp``), ``bucket_mb`` (DDP's 25 by default; Horovod's fusion buffer is 64),
``hop_us`` (a per-step NIC latency instead of the published one), ``activation_gb`` (per-GPU activation peak;
default the transformer estimate), ``recompute`` (1 = activation recomputation, for that estimate),
``tensors`` (parameter tensors; read by the PS model too), ``measured_step_s`` (one GPU's measured seconds a
step of this network on this GPU, e.g. from a one-GPU run: the compute term, which then has no band).
``workers`` = GPUs in all (a multiple of
``gpus_per_node``), ``ps`` = 0, ``gpu`` one GPU type. For a network that is not one of the study's (by name),
``model_flops`` is the training FLOPs of one GPU's step (forward + backward on its batch).

Output as for PS rows (``steps_per_sec`` with its P10–P90 band: compute spread plus the scaling residuals of
published results, :mod:`cmdare.planner.speed.sync_band`; ``examples_per_sec`` = steps/s × GPUs × batch;
``bottleneck`` compute | network | interconnect | memory; ``ps_utilization`` empty) plus ``allreduce_share``
(a rank's share of the step in the all-reduce call), ``compute_s`` (one GPU's compute seconds a step),
``algorithm`` (ring | tree | none), ``memory_gb`` (per GPU) and ``memory`` ("fits: needs X GB a GPU, has Y" or
"does not fit: …"). A shape that does not fit gets no speed (empty ``steps_per_sec`` and band) and
``bottleneck`` = memory.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from cmdare.collectors.samples import ModelSpec
from cmdare.planner.speed.allreduce import SyncParams, sync_step
from cmdare.planner.speed.gpu_catalog import UnknownGpuError, get_gpu
from cmdare.planner.speed.interconnect import node_links
from cmdare.planner.speed.memory_fit import memory_need
from cmdare.planner.speed.speed_band import speed_band
from cmdare.planner.speed.speed_model import SpeedModel
from cmdare.planner.speed.sync_band import compute_spread, sync_band
from cmdare.planner.speed.sync_compute import ComputeEstimate, canonical_precision, sync_compute

SYNC_MODES = ("sync", "sync-allreduce", "ddp", "fsdp", "zero1", "zero2")
PS_MODES = ("", "ps", "async-ps")
SYNC_COLUMNS = ("allreduce_share", "compute_s", "algorithm", "memory_gb", "memory")
SYNC_INPUTS = ("mode", "gpus_per_node", "nic_gbps", "transport", "precision", "bucket_mb", "hop_us",
               "activation_gb", "recompute", "measured_step_s")  # fmt: skip
MAX_NIC_GBPS = 10_000.0
MIN_NIC_GBPS = 0.01  # 10 Mbit/s: below any cloud GPU node's NIC (1e-300 gave steps/s no one could read)
LIMITS = {"bucket_mb": (0.01, 100_000.0), "hop_us": (0.0, 1e6), "activation_gb": (0.0, 1e5),
          "measured_step_s": (1e-6, 1e5)}  # fmt: skip


class SyncRowError(ValueError):
    """A sync row is malformed (the caller adds the row's place)."""


def is_sync(row: dict[str, str]) -> bool:
    """Whether a row asks for a synchronous shape; raises :class:`SyncRowError` on an unknown mode."""
    mode = (row.get("mode") or "").strip().lower()
    if mode not in SYNC_MODES + PS_MODES:
        raise SyncRowError(f"mode={mode!r} must be sync, fsdp, zero1, zero2 or ps (empty = ps)")
    return mode in SYNC_MODES


def sharding_of(mode: str) -> str:
    """The memory/communication scheme of a sync mode: ddp | fsdp | zero1 | zero2."""
    m = mode.strip().lower()
    return m if m in ("fsdp", "zero1", "zero2") else "ddp"


def _int(row: dict[str, str], col: str, default: int, low: int, high: int) -> int:
    raw = (row.get(col) or "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SyncRowError(f"{col}={raw!r} is not a number") from None
    if not low <= value <= high or value != int(value):  # NaN and ±inf fail the range first
        raise SyncRowError(f"{col}={raw!r} must be a whole number {low}..{high}")
    return int(value)


def _float(row: dict[str, str], col: str, low: float, high: float) -> float | None:
    raw = (row.get(col) or "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise SyncRowError(f"{col}={raw!r} is not a number") from None
    if not low <= value <= high:  # NaN fails too
        raise SyncRowError(f"{col}={raw!r} must be {low:g}..{high:g}")
    return value


def _choice(row: dict[str, str], col: str, choices: tuple[str, ...], default: str) -> str:
    raw = (row.get(col) or "").strip().lower() or default
    if raw not in choices:
        raise SyncRowError(f"{col}={raw!r} must be one of {', '.join(choices)}")
    return raw


def predict_sync_row(model: SpeedModel, network: ModelSpec, row: dict[str, str]) -> dict[str, str]:
    """The output fields of one sync row."""
    g = _int(row, "gpus_per_node", 1, 1, 16)
    workers = _int(row, "workers", 0, 1, 10_000)
    if (row.get("ps") or "0").strip() not in ("0", "0.0", ""):
        raise SyncRowError("ps must be 0 for a synchronous row (no parameter server)")
    if workers % g:
        raise SyncRowError(f"workers={workers} (GPUs in all) is not a multiple of gpus_per_node={g}")
    text = (row.get("gpu") or "").strip()
    try:
        gpu = get_gpu(text).name
        precision = canonical_precision(row.get("precision") or "fp32")
    except (UnknownGpuError, ValueError) as exc:
        raise SyncRowError(str(exc)) from None
    sharding = sharding_of(row.get("mode") or "")
    transport = _choice(row, "transport", ("tcp", "rdma"), "tcp")
    bucket = _float(row, "bucket_mb", *LIMITS["bucket_mb"])
    hop = _float(row, "hop_us", *LIMITS["hop_us"])
    act = _float(row, "activation_gb", *LIMITS["activation_gb"])
    recompute = _int(row, "recompute", 0, 0, 1) == 1
    mem = memory_need(network.params, gpu, workers, sharding, precision, network.model_flops, act, recompute)
    measured = _float(row, "measured_step_s", *LIMITS["measured_step_s"])
    comp = sync_compute(model, network, gpu, precision)
    if measured is not None:
        comp = ComputeEstimate(measured, "measured_step_s as given")
    links = node_links(
        gpu, g, nic_gbps=_float(row, "nic_gbps", MIN_NIC_GBPS, MAX_NIC_GBPS), transport=transport
    )
    p = SyncParams(mode=sharding, hop_s=None if hop is None else hop * 1e-6)
    if bucket is not None:
        p = replace(p, bucket_bytes=bucket * 2**20)
    if sharding != "ddp" and precision == "fp16":
        p = replace(p, bytes_per_param=2.0)  # ZeRO/FSDP move fp16/bf16 values: 2 B each

    def a(x: float) -> np.ndarray:  # one row
        return np.array([x], dtype=float)

    t = sync_step(a(comp.seconds), network.params, a(workers // g), a(g), a(links.intra_bus_gbps),
                  a(links.nic_bus_gbps), a(links.intra_latency_s), a(links.nic_latency_s), p)  # fmt: skip
    x = float(t.steps_per_sec[0])
    known = model._resolve(network).known is not None
    if measured is not None:
        c_band, extrapolation = None, "none"
    elif known:
        one = model.predict(network, {gpu: 1}, 1)
        b = speed_band(model, network, {gpu: 1}, ps=1, prediction=one)
        c_band = (math.log(b.p10 / one.steps_per_sec), math.log(b.p90 / one.steps_per_sec))
        extrapolation = "allreduce" if b.extrapolation == "none" else b.extrapolation
    else:
        c_band, extrapolation = compute_spread()[:2], "network"
    band = sync_band(c_band, workers)
    share = float(t.comm_share[0])
    bottleneck = "compute" if share < 0.5 else ("network" if t.link[0] == "nic" else "interconnect")
    out = {
        "steps_per_sec": f"{x:.6g}",
        "steps_per_sec_p10": f"{x * band.low:.6g}",
        "steps_per_sec_p90": f"{x * band.high:.6g}",
        "extrapolation": extrapolation,
        "examples_per_sec": f"{x * workers * network.effective_batch_size:.6g}",
        "bottleneck": bottleneck,
        "ps_utilization": "",
        "allreduce_share": f"{share:.4f}",
        "compute_s": f"{comp.seconds:.6g}",
        "algorithm": str(t.algorithm[0]) if t.algorithm is not None else "",
        "memory_gb": f"{mem.needs_gb:.3g}",
        "memory": mem.verdict(),
    }
    if not mem.fits:
        out.update(steps_per_sec="", steps_per_sec_p10="", steps_per_sec_p90="", examples_per_sec="",
                   bottleneck="memory")  # fmt: skip
    return out
