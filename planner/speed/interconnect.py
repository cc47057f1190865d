"""Link figures for synchronous all-reduce: GPU-to-GPU inside a node (PCIe, NVLink) and the VM's NIC
between nodes (GCP's per-vCPU egress and its caps by tier), from ``planner/data/interconnect.csv``
(every row names its public source), with the share of each line rate an all-reduce achieves and the latency
of one collective step from published collective benchmarks (``collectives.csv``,
:mod:`cmdare.planner.speed.collectives`). GCP's VMs reach each other over TCP (``tcp``); a cluster with
InfiniBand/RoCE/EFA is ``rdma``.

A node of ``g`` GPUs is the GPU's usual GCP host (``gpus.csv`` ``host_shape``) scaled ``g`` times: its
vCPUs, hence its per-vCPU egress, grow with ``g`` up to the tier's cap. Units: Gbit/s per direction, s.
"""

from __future__ import annotations

import csv
import functools
import io
from dataclasses import dataclass
from importlib import resources

from cmdare.planner.speed.collectives import bus_fraction, hop_seconds
from cmdare.planner.speed.gpu_catalog import UnknownGpuError, get_gpu

__all__ = ["Link", "NodeLinks", "links", "node_links", "tiers_of", "NIC_TIERS", "NODE_SIZES"]

NODE_SIZES = (1, 2, 4, 8, 16)  # the GPU counts GCP GPU VMs come in (the price book says which exist)

# which link joins the GPUs of one node (GCP machine families: N1 PCIe; V100 8-GPU N1, A2, A3 NVLink)
_INTRA = {
    "K80": "pcie3",
    "P100": "pcie3",
    "P4": "pcie3",
    "T4": "pcie3",
    "V100": "nvlink2",
    "L4": "pcie4",
    "A100": "nvlink3",
    "A100-80GB": "nvlink3",
    "H100": "nvlink4",
    "H200": "nvlink4",
    "B200": "nvlink4",
}
# the NIC tier caps a GPU's VMs may choose: the default one first, then the faster tier (gVNIC)
_CAPS = {
    "K80": ("n1-cap",),
    "P100": ("n1-cap",),
    "P4": ("n1-cap",),
    "T4": ("n1-cap", "gvnic-100"),
    "V100": ("n1-cap", "gvnic-100"),
    "L4": ("n1-cap", "gvnic-100"),
    "A100": ("n1-cap", "gvnic-100"),
    "A100-80GB": ("n1-cap", "gvnic-100"),
    "H100": ("a3-high",),
    "H200": ("a3-high",),
    "B200": ("a3-high",),
}
NIC_TIERS = ("default", "fast")  # index into a GPU's caps (a GPU with one cap has one tier)


@dataclass(frozen=True)
class Link:
    """One row of ``interconnect.csv``."""

    name: str
    kind: str  # intra | inter (per vCPU) | cap
    gbps: float
    latency_s: float
    source: str


@dataclass(frozen=True, kw_only=True)
class NodeLinks:
    """The links of one node of ``gpus_per_node`` GPUs of one type: line rates (Gbit/s each way), and the
    achieved all-reduce bus bandwidth and per-step latency of each (``collectives.csv``)."""

    intra_gbps: float
    intra_latency_s: float
    nic_gbps: float
    nic_latency_s: float
    tier: str  # the cap's row name (n1-cap, gvnic-100, a3-high)
    intra_kind: str = "pcie"  # nvlink | pcie
    transport: str = "tcp"  # tcp | rdma

    @property
    def intra_bus_gbps(self) -> float:
        """The intra-node link's achieved all-reduce bus bandwidth."""
        return self.intra_gbps * bus_fraction(self.intra_kind)

    @property
    def nic_bus_gbps(self) -> float:
        """The NIC's achieved all-reduce bus bandwidth."""
        return self.nic_gbps * bus_fraction(self.transport)


@functools.cache
def links() -> dict[str, Link]:
    """Every link figure of ``interconnect.csv`` by name."""
    text = resources.files("cmdare.planner").joinpath("data/interconnect.csv").read_text("utf-8")
    rows = csv.DictReader(io.StringIO(text))
    return {
        r["link"]: Link(r["link"], r["kind"], float(r["gbps"]), float(r["latency_us"]) * 1e-6, r["source"])
        for r in rows
    }


def tiers_of(gpu: str) -> tuple[str, ...]:
    """The NIC tiers a GPU's VMs offer (``default``, and ``fast`` where a faster cap exists)."""
    try:
        name = get_gpu(gpu).name
    except UnknownGpuError:
        return NIC_TIERS[:1]
    return NIC_TIERS[: len(_CAPS.get(name, ("n1-cap",)))]


def node_links(
    gpu: str, gpus_per_node: int, tier: str = "default", nic_gbps: float | None = None, transport: str = "tcp"
) -> NodeLinks:
    """The links of a node with ``gpus_per_node`` GPUs: the GPU's intra-node link, and its NIC: per-vCPU
    egress of ``gpus_per_node`` × the usual host's share per GPU (``gpus.csv``) up to the tier's cap, unless ``nic_gbps``
    (a measured or chosen NIC rate) is given. A name the GPU catalog does not know (a CPU job) gets the links
    of a one-GPU N1 node (PCIe, n1-standard-8's 16 Gbit/s): the live calibration rescales them anyway.
    Latencies are the published per-step figures of the link kinds (``collectives.csv``), not the line table's."""
    if transport not in ("tcp", "rdma"):
        raise ValueError(f"transport={transport!r} must be tcp or rdma")
    table = links()
    try:
        spec = get_gpu(gpu)
    except UnknownGpuError:  # e.g. a CPU job: a 1-GPU N1 node's links (n1-standard-8: 16 Gbit/s)
        spec = get_gpu("K80")
    intra = table[_INTRA.get(spec.name, "pcie3")]
    caps = _CAPS.get(spec.name, ("n1-cap",))
    cap = table[caps[min(NIC_TIERS.index(tier), len(caps) - 1)]] if tier in NIC_TIERS else table[caps[0]]
    per_gpu = spec.host_nic_gbps / max(1, spec.host_gpus)
    nic = nic_gbps if nic_gbps else min(per_gpu * max(1, gpus_per_node), cap.gbps)
    kind = "nvlink" if intra.name.startswith("nvlink") else "pcie"
    return NodeLinks(
        intra_gbps=intra.gbps,
        intra_latency_s=hop_seconds(kind),
        nic_gbps=float(nic),
        nic_latency_s=hop_seconds(transport),
        tier=cap.name,
        intra_kind=kind,
        transport=transport,
    )
