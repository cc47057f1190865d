"""``predict`` rows of synchronous all-reduce shapes (``mode=sync``).

Columns: ``mode`` (``sync``; empty, ``ps`` or ``async-ps`` = a PS row), ``gpus_per_node`` (default 1),
``nic_gbps`` (the node's NIC, Gbit/s; default: the GPU's usual GCP node, ``planner/data/interconnect.csv``),
``workers`` = GPUs in all (a multiple of ``gpus_per_node``), ``ps`` = 0, ``gpu`` one GPU type. Output as for
PS rows (``steps_per_sec`` with its P10–P90 band — the one-worker compute band of the GPU, applied to the
step — ``examples_per_sec`` = steps/s × GPUs × batch, ``bottleneck`` compute | network | interconnect,
``ps_utilization`` empty) plus ``allreduce_share`` (the exposed all-reduce's share of a step).
"""

from __future__ import annotations

import numpy as np

from cmdare.collectors.samples import ModelSpec
from cmdare.planner.speed.allreduce import SyncParams, sync_step
from cmdare.planner.speed.gpu_catalog import UnknownGpuError, get_gpu
from cmdare.planner.speed.interconnect import node_links
from cmdare.planner.speed.speed_band import speed_band
from cmdare.planner.speed.speed_model import SpeedModel

SYNC_MODES = ("sync", "sync-allreduce")
PS_MODES = ("", "ps", "async-ps")
MAX_NIC_GBPS = 10_000.0
MIN_NIC_GBPS = 0.01  # 10 Mbit/s: below any cloud GPU node's NIC (1e-300 gave steps/s no one could read)


class SyncRowError(ValueError):
    """A sync row is malformed (the caller adds the row's place)."""


def is_sync(row: dict[str, str]) -> bool:
    """Whether a row asks for a synchronous shape; raises :class:`SyncRowError` on an unknown mode."""
    mode = (row.get("mode") or "").strip().lower()
    if mode not in SYNC_MODES + PS_MODES:
        raise SyncRowError(f"mode={mode!r} must be sync or ps (empty = ps)")
    return mode in SYNC_MODES


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


def _nic(row: dict[str, str]) -> float | None:
    raw = (row.get("nic_gbps") or "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise SyncRowError(f"nic_gbps={raw!r} is not a number") from None
    if not MIN_NIC_GBPS <= value <= MAX_NIC_GBPS:
        raise SyncRowError(f"nic_gbps={raw!r} must be {MIN_NIC_GBPS:g}..{MAX_NIC_GBPS:g}")
    return value


def predict_sync_row(model: SpeedModel, network: ModelSpec, row: dict[str, str]) -> dict[str, str]:
    """The output fields of one sync row."""
    g = _int(row, "gpus_per_node", 1, 1, 16)
    workers = _int(row, "workers", 0, 1, 10_000)
    if (row.get("ps") or "0").strip() not in ("0", "0.0", ""):
        raise SyncRowError("ps must be 0 for mode=sync (no parameter server)")
    if workers % g:
        raise SyncRowError(f"workers={workers} (GPUs in all) is not a multiple of gpus_per_node={g}")
    text = (row.get("gpu") or "").strip()
    try:
        gpu = get_gpu(text).name
    except UnknownGpuError as exc:
        raise SyncRowError(str(exc)) from None
    one = model.predict(network, {gpu: 1}, 1)
    links = node_links(gpu, g, nic_gbps=_nic(row))
    a = lambda x: np.array([x], dtype=float)  # noqa: E731
    t = sync_step(a(one.terms["compute"]), network.params, a(workers // g), a(g), a(links.intra_gbps),
                  a(links.nic_gbps), a(links.intra_latency_s), a(links.nic_latency_s), SyncParams())  # fmt: skip
    x = float(t.steps_per_sec[0])
    band = speed_band(model, network, {gpu: 1}, ps=1, prediction=one)
    share = float(t.comm_share[0])
    bottleneck = "compute" if share < 0.5 else ("network" if t.link[0] == "nic" else "interconnect")
    return {
        "steps_per_sec": f"{x:.6g}",
        "steps_per_sec_p10": f"{x * band.p10 / one.steps_per_sec:.6g}",
        "steps_per_sec_p90": f"{x * band.p90 / one.steps_per_sec:.6g}",
        "extrapolation": "allreduce" if band.extrapolation == "none" else band.extrapolation,
        "examples_per_sec": f"{x * workers * network.effective_batch_size:.6g}",
        "bottleneck": bottleneck,
        "ps_utilization": "",
        "allreduce_share": f"{share:.4f}",
    }
