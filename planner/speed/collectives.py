"""Gradient collectives as NCCL runs them, with achieved bus bandwidth and per-step latency from published
collective benchmarks (``planner/data/collectives.csv``: every figure beside its source).

An all-reduce of ``S`` bytes over ``N = M × g`` GPUs (``M`` nodes of ``g`` GPUs), in ``k`` buckets:

* **ring** (one ring through every GPU): each link carries ``2(N−1)/N × S`` each way, the node's NIC included
  (the ring crosses it once a channel; channels split the bytes), paced by the slower of the intra-node link
  and the NIC; ``2(N−1)`` steps per bucket, each as slow as the slowest hop's latency;
* **tree / hierarchical** (NCCL's tree, Horovod's hierarchical all-reduce): reduce inside the node over
  NVLink/PCIe (``2(g−1)/g × S`` per GPU), between nodes over the NIC, back inside the node. Between nodes the
  NIC carries ``S`` at two nodes and as much as the ring from three on (NCCL maintainer, NVIDIA/nccl issue
  #209); latency ``2⌈log2 g⌉`` intra steps plus ``2⌈log2 M⌉`` NIC steps (binary trees inside and between
  nodes: a simplification — NCCL chains the GPUs of a node — that keeps packing GPUs into fewer nodes from
  adding latency, as it does not in practice where intra-node steps are the faster);
* NCCL picks the faster algorithm for the message size: here, per bucket, the smaller of the two times
  (inside one node too).

Achieved rates: the line rate (``interconnect.csv``) × the published ``bus_fraction`` of its kind (``nvlink``,
``pcie``; ``tcp`` sockets or ``rdma`` between nodes). Vectorised over shapes (numpy).
"""

from __future__ import annotations

import csv
import functools
import io
from dataclasses import dataclass
from importlib import resources

import numpy as np

__all__ = ["CollectiveFigure", "figures", "bus_fraction", "hop_seconds", "allreduce_parts", "TRANSPORTS"]

TRANSPORTS = ("tcp", "rdma")


@dataclass(frozen=True)
class CollectiveFigure:
    """One row of ``collectives.csv``."""

    kind: str
    quantity: str  # bus_fraction | hop_us
    value: float
    source: str


@functools.cache
def figures() -> dict[tuple[str, str], CollectiveFigure]:
    """Every figure of ``collectives.csv`` by (kind, quantity)."""
    text = resources.files("cmdare.planner").joinpath("data/collectives.csv").read_text("utf-8")
    rows = csv.DictReader(io.StringIO(text))
    return {
        (r["kind"], r["quantity"]): CollectiveFigure(r["kind"], r["quantity"], float(r["value"]), r["source"])
        for r in rows
    }


def kind_of(link: str) -> str:
    """The collective kind of an ``interconnect.csv`` link name (``nvlink2`` → ``nvlink``, ``pcie3`` → ``pcie``)."""
    return "nvlink" if link.startswith("nvlink") else "pcie" if link.startswith("pcie") else link


def bus_fraction(kind: str) -> float:
    """Achieved all-reduce bus bandwidth as a share of the line rate for a link kind."""
    return figures()[(kind_of(kind), "bus_fraction")].value


def hop_seconds(kind: str) -> float:
    """Latency of one ring step over a link kind, seconds."""
    return figures()[(kind_of(kind), "hop_us")].value * 1e-6


def allreduce_parts(
    nbytes: float | np.ndarray,
    nodes: np.ndarray,
    gpus_per_node: np.ndarray,
    intra_gbps: np.ndarray,
    nic_gbps: np.ndarray,
    intra_hop_s: np.ndarray,
    nic_hop_s: np.ndarray,
    buckets: np.ndarray,
    traffic: float = 1.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(wire seconds, latency seconds, algorithm "ring" | "tree" | "none") of an all-reduce of ``nbytes`` in
    ``buckets`` buckets at achieved rates ``intra_gbps``/``nic_gbps`` (Gbit/s each way). ``traffic`` scales the
    bytes (1.5 for ZeRO-3's all-gathers plus reduce-scatter, :mod:`cmdare.planner.speed.allreduce`)."""
    m = np.maximum(np.asarray(nodes, dtype=float), 1.0)
    g = np.maximum(np.asarray(gpus_per_node, dtype=float), 1.0)
    n = m * g
    s = np.asarray(nbytes, dtype=float) * 8.0 * traffic  # bits
    k = np.maximum(np.asarray(buckets, dtype=float), 1.0)
    bi, bn = np.asarray(intra_gbps, dtype=float) * 1e9, np.asarray(nic_gbps, dtype=float) * 1e9
    hi, hn = np.asarray(intra_hop_s, dtype=float), np.asarray(nic_hop_s, dtype=float)
    multi = m > 1
    ring_bits = 2.0 * (n - 1.0) / n * s
    slow = np.where(multi, np.where(g > 1, np.minimum(bi, bn), bn), bi)
    ring_wire = ring_bits / slow
    ring_lat = k * 2.0 * (n - 1.0) * np.where(multi, np.maximum(hn, hi), hi)
    nic_bits = np.where(m <= 2, s * (m - 1.0), ring_bits)
    intra_bits = 2.0 * (g - 1.0) / g * s
    tree_wire = np.maximum(intra_bits / bi, nic_bits / bn)
    tree_lat = k * (2.0 * np.ceil(np.log2(g)) * hi + 2.0 * np.ceil(np.log2(m)) * hn)
    ring_t, tree_t = ring_wire + ring_lat, tree_wire + tree_lat
    use_tree = tree_t < ring_t
    wire = np.where(n > 1, np.where(use_tree, tree_wire, ring_wire), 0.0)
    lat = np.where(n > 1, np.where(use_tree, tree_lat, ring_lat), 0.0)
    algo = np.where(n <= 1, "none", np.where(use_tree, "tree", "ring"))
    return wire, lat, algo
