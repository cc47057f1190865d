"""GPU catalog: peak throughput, memory and usual GCP host network of each GPU type.

Values come from ``planner/data/gpus.csv``; every row names its public source (NVIDIA datasheets,
GCP machine-type network tables, and for K80/P100 the ``GPU TFLOPS`` column of the CM-DARE data so
that the fitted speed model sees the same feature the study used). Units: TFLOPS (dense, no sparsity),
GB/s, GB, Gbit/s.
"""

from __future__ import annotations

import csv
import functools
import io
import re
from dataclasses import dataclass
from importlib import resources

__all__ = ["GpuSpec", "UnknownGpuError", "get_gpu", "gpu_names", "all_gpus"]


class UnknownGpuError(ValueError):
    """A GPU name that is not in the catalog (nor an alias of a catalog entry)."""


@dataclass(frozen=True, kw_only=True)
class GpuSpec:
    """One GPU type. Throughputs are per GPU, dense (no structured sparsity)."""

    name: str
    aliases: tuple[str, ...]
    fp32_tflops: float
    tf32_tflops: float
    fp16_tflops: float
    mem_bw_gbs: float
    mem_gb: float
    host_shape: str
    host_gpus: int
    host_nic_gbps: float
    source: str
    notes: str = ""


def _key(name: str) -> str:
    """Normalise a GPU name for lookup: lower case, '_' and spaces as '-'."""
    return re.sub(r"[\s_]+", "-", name.strip().lower())


@functools.cache
def _load() -> dict[str, GpuSpec]:
    text = resources.files("cmdare.planner").joinpath("data/gpus.csv").read_text("utf-8")
    specs: dict[str, GpuSpec] = {}
    for row in csv.DictReader(io.StringIO(text)):
        spec = GpuSpec(
            name=row["name"],
            aliases=tuple(a for a in row["aliases"].split("|") if a),
            fp32_tflops=float(row["fp32_tflops"]),
            tf32_tflops=float(row["tf32_tflops"]),
            fp16_tflops=float(row["fp16_tflops"]),
            mem_bw_gbs=float(row["mem_bw_gbs"]),
            mem_gb=float(row["mem_gb"]),
            host_shape=row["host_shape"],
            host_gpus=int(row["host_gpus"]),
            host_nic_gbps=float(row["host_nic_gbps"]),
            source=row["source"],
            notes=row.get("notes", ""),
        )
        specs[spec.name] = spec
    return specs


@functools.cache
def _index() -> dict[str, str]:
    index: dict[str, str] = {}
    for spec in _load().values():
        for key in (spec.name, *spec.aliases):
            index[_key(key)] = spec.name
    return index


def gpu_names() -> list[str]:
    """Canonical catalog names, in catalog order (oldest first)."""
    return list(_load())


def all_gpus() -> list[GpuSpec]:
    """Every catalog entry, in catalog order."""
    return list(_load().values())


def get_gpu(name: str) -> GpuSpec:
    """Look a GPU up by name or alias, case-insensitively ("v100", "nvidia-tesla-v100", "A100-80GB").

    Raises :class:`UnknownGpuError` naming the known types when nothing matches.
    """
    canonical = _index().get(_key(str(name)))
    if canonical is None:
        raise UnknownGpuError(f"unknown GPU {str(name)!r}; known: {', '.join(gpu_names())}")
    return _load()[canonical]
