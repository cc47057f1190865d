"""Known CNNs of the CM-DARE study: FLOPs, parameters, tensor count and measured single-worker speed.

``planner/data/networks.csv`` is written by ``scripts/fit_speed_model.py`` from the CM-DARE tables
(``speed_data/0latency_k80_new.csv``, ``0latency_p100_new2.csv``): one row per network with
``model_flops`` (the study's ``Model FLOPs`` column, per training step at batch 128), ``params``,
``tensors`` (number of parameter tensors) and the mean measured single-worker speed in steps/s
(1 worker + 1 PS, 0.3 ms latency) per GPU type (``steps_per_sec_<GPU>``; empty when not measured).
"""

from __future__ import annotations

import csv
import functools
import io
import re
from dataclasses import dataclass, field
from importlib import resources

__all__ = [
    "KnownNetwork",
    "NETWORK_FIELDS",
    "MEASURED_GPUS",
    "canonical_network_name",
    "spellings_of",
    "family_of",
    "depth_of",
    "known_networks",
    "lookup_network",
]

MEASURED_GPUS = ("K80", "P100")
NETWORK_FIELDS = [
    "name",
    "aliases",
    "family",
    "model_flops",
    "params",
    "tensors",
    "batch_size",
    *(f"steps_per_sec_{g}" for g in MEASURED_GPUS),
    *(f"std_{g}" for g in MEASURED_GPUS),
    "source",
]

# Spellings used across the CM-DARE files (0lat_* folders, derived/ tables, speed_data_base) and the
# paper's names (Shake-Shake 26 2x32d = small, 2x96d = big; background.md). The middle Shake-Shake's
# width 64 follows from its parameter count (params scale with width^2: 0.74 M x 16 = 11.7 M).
_ALIASES = {
    "res15": "resnet15",
    "res32": "resnet32",
    "shakeshakesmall": "shakesmall",
    "shakeshakebig": "shakebig",
    "shakeshakemid": "shakemid",
    "shake32": "shakesmall",
    "shake64": "shakemid",
    "shake96": "shakebig",
    "shakeshake262x32d": "shakesmall",
    "shakeshake262x64d": "shakemid",
    "shakeshake262x96d": "shakebig",
}


@dataclass(frozen=True, kw_only=True)
class KnownNetwork:
    """Measured facts of one network. ``measured`` maps GPU name -> single-worker steps/s."""

    name: str
    family: str
    model_flops: float
    params: float
    tensors: int
    batch_size: int
    measured: dict[str, float] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()


def _squash(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def canonical_network_name(name: str) -> str:
    """Map a spelling ("ResNet-32", "Res32", "cus3", "Shake-Shake-small") to the catalog's key."""
    key = _squash(name)
    key = re.sub(r"^cus(\d+)", r"custom\1", key)
    return _ALIASES.get(key, key)


def spellings_of(key: str) -> set[str]:
    """The other spellings (squashed, as :func:`canonical_network_name` reads them) of catalog key ``key``."""
    return {alias for alias, canonical in _ALIASES.items() if canonical == key}


def family_of(name: str | None) -> str | None:
    """Architecture family guessed from a free name: "shake" (Shake-Shake), "resnet" or None."""
    if not name:
        return None
    key = _squash(name)
    if "shake" in key:
        return "shake"
    if re.search(r"res|custom|^cus\d", key):
        return "resnet"
    return None


def depth_of(name: str | None) -> int | None:
    """Depth from a ``_d32``-style suffix (CM-DARE's depth-32 variants), else None."""
    m = re.search(r"[_\-\s]d(\d+)$", (name or "").strip().lower())
    return int(m.group(1)) if m else None


def _parse(row: dict[str, str]) -> KnownNetwork:
    measured = {g: float(row[f"steps_per_sec_{g}"]) for g in MEASURED_GPUS if row.get(f"steps_per_sec_{g}")}
    return KnownNetwork(
        name=row["name"],
        family=row["family"],
        model_flops=float(row["model_flops"]),
        params=float(row["params"]),
        tensors=int(row["tensors"]),
        batch_size=int(row["batch_size"]),
        measured=measured,
        aliases=tuple(a for a in row["aliases"].split("|") if a),
    )


@functools.cache
def known_networks() -> dict[str, KnownNetwork]:
    """All shipped networks keyed by canonical name (empty if the table is not there yet)."""
    path = resources.files("cmdare.planner").joinpath("data/networks.csv")
    if not path.is_file():
        return {}
    rows = csv.DictReader(io.StringIO(path.read_text("utf-8")))
    return {r["name"]: _parse(r) for r in rows}


def lookup_network(name: str | None) -> KnownNetwork | None:
    """The shipped facts of a network by any spelling of its name, or None when unknown."""
    if not name:
        return None
    return known_networks().get(canonical_network_name(name))
