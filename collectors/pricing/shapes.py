"""Host VM shapes that carry each GPU type on Google Compute Engine, and the parameter-server shape.

A node's price is ``count × GPU rate + vCPUs × vCPU rate + memory × RAM rate`` of the host
series (units: vCPU-hours and GiB-hours). The accelerator-optimized shapes (a2, a3, a4, g2) are
fixed by GCP; their vCPU / memory figures are those of GCP's "GPU machine types" documentation and
match ``gcp_gpu_host_vms_a2_a3_a4.csv`` (../shared/data/gcp-catalog, from SkyPilot's catalog).

N1 GPUs (K80, P100, P4, T4, V100) attach to any N1 shape up to a per-GPU maximum, so GCP fixes no
shape. ASSUMPTION (ours, stated in the report): ``n1-standard-8`` per V100/P100 GPU (as SkyPilot's
default V100 host, 8 vCPU per GPU) and ``n1-standard-4`` per K80/T4/P4 GPU (the CM-DARE study's K80
workers had 4 vCPUs; SkyPilot's T4 ×1 default is 4 vCPUs). n1-standard-N = N vCPU, 3.75·N GiB.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["HostShape", "DEFAULT_SHAPES", "PS_SHAPE", "n1_standard"]


@dataclass(frozen=True)
class HostShape:
    """A host machine type: ``series`` selects the vCPU/RAM rates; memory in GiB."""

    machine_type: str
    series: str
    vcpus: float
    memory_gib: float


def n1_standard(vcpus: int) -> HostShape:
    """GCP n1-standard-N: N vCPUs and 3.75 GiB per vCPU (GCP machine-types documentation)."""
    return HostShape(f"n1-standard-{vcpus}", "n1", float(vcpus), 3.75 * vcpus)


def _n1_per_gpu(vcpus_per_gpu: int, counts: tuple[int, ...]) -> dict[int, HostShape]:
    return {n: n1_standard(vcpus_per_gpu * n) for n in counts}


def _fixed(prefix: str, series: str, vcpu_per_gpu: float, mem_per_gpu: float) -> dict[int, HostShape]:
    return {n: HostShape(f"{prefix}-{n}g", series, vcpu_per_gpu * n, mem_per_gpu * n) for n in (1, 2, 4, 8)}


def _g2() -> dict[int, HostShape]:
    # g2-standard-4/24/48/96 carry 1/2/4/8 L4 GPUs; 4 GiB per vCPU (GCP G2 documentation).
    return {
        n: HostShape(f"g2-standard-{v}", "g2", float(v), 4.0 * v)
        for n, v in ((1, 4), (2, 24), (4, 48), (8, 96))
    }


#: GPU name → GPU count → host shape.
DEFAULT_SHAPES: dict[str, dict[int, HostShape]] = {
    "K80": _n1_per_gpu(4, (1, 2, 4, 8)),
    "P4": _n1_per_gpu(4, (1, 2, 4)),
    "T4": _n1_per_gpu(4, (1, 2, 4)),
    "P100": _n1_per_gpu(8, (1, 2, 4)),
    "V100": _n1_per_gpu(8, (1, 2, 4, 8)),
    "L4": _g2(),
    # a2-highgpu-Ng: 12 vCPU + 85 GiB per A100 40GB; a2-megagpu-16g: 96 vCPU, 1360 GiB.
    "A100": {**_fixed("a2-highgpu", "a2", 12, 85), 16: HostShape("a2-megagpu-16g", "a2", 96, 1360)},
    # a2-ultragpu-Ng: 12 vCPU + 170 GiB per A100 80GB.
    "A100-80GB": _fixed("a2-ultragpu", "a2", 12, 170),
    # a3-highgpu-Ng: 26 vCPU + 234 GiB per H100.
    "H100": _fixed("a3-highgpu", "a3", 26, 234),
    "H200": {8: HostShape("a3-ultragpu-8g", "a3", 224, 2952)},
    "B200": {8: HostShape("a4-highgpu-8g", "a4", 224, 3968)},
}

#: CPU-only parameter-server node (our choice, as in the issue): n1-standard-8.
PS_SHAPE: HostShape = n1_standard(8)
