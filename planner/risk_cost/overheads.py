"""Overheads of a revocation and of checkpointing, derived from the CM-DARE measurements.

Values come from ``planner/data/overheads.json`` (written by ``scripts/derive_overheads.py``, which cites
each source file). All times are seconds.

The study's estimator of the time to finish after a revocation (CM-DARE §VI, within 0.83% on 11 runs)::

    remaining_steps / restored_speed + request_overhead × (1 − degraded_speed / restored_speed)

where ``request_overhead`` is the time until the replacement worker trains again (server start +
join), during which the cluster runs at ``degraded_speed``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import numpy as np

ANY = "*"


@dataclass(frozen=True, kw_only=True)
class Overheads:
    """Revocation and checkpoint overheads (seconds); look-ups fall back to the pooled ``*`` value."""

    server_start_s: dict[str, dict[str, float]]
    replacement_join_s: dict[str, float]
    framework_restart_s: dict[str, float]
    chief_lost_s_per_step: float
    checkpoint_fixed_s: float
    checkpoint_s_per_mb: float
    checkpoint_mb_per_param: float
    provenance: dict[str, object] = field(default_factory=dict)

    @classmethod
    def load(cls) -> Overheads:
        """Load the shipped ``planner/data/overheads.json``."""
        text = resources.files("cmdare.planner").joinpath("data/overheads.json").read_text("utf-8")
        return cls.from_dict(json.loads(text))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Overheads:
        return cls(
            server_start_s=d["server_start_s"],
            replacement_join_s=d["replacement_join_s"],
            framework_restart_s=d["framework_restart_s"],
            chief_lost_s_per_step=d["chief_lost"]["s_per_step"],
            checkpoint_fixed_s=d["checkpoint"]["fixed_s"],
            checkpoint_s_per_mb=d["checkpoint"]["s_per_mb"],
            checkpoint_mb_per_param=d["checkpoint"]["mb_per_param"],
            provenance=d.get("provenance", {}),
        )

    def server_start(self, gpu: str, provisioning: str) -> float:
        """Seconds from request to a booted server; spot is taken as preemptible (same GCP mechanism)."""
        table = self.server_start_s["standard" if provisioning == "standard" else "preemptible"]
        return table.get(gpu, table[ANY])

    def replacement_join(self, gpu: str, cross_region: bool = False) -> float:
        """Seconds for a replacement worker to join training (immediate request)."""
        if cross_region and f"{gpu}-cross-region" in self.replacement_join_s:
            return self.replacement_join_s[f"{gpu}-cross-region"]
        if gpu in self.replacement_join_s:
            return self.replacement_join_s[gpu]
        same_region = [v for k, v in self.replacement_join_s.items() if "cross" not in k]
        return float(np.mean(same_region))

    def request_overhead(self, gpu: str, provisioning: str) -> float:
        """Seconds the cluster runs degraded after a worker revocation: server start + join."""
        return self.server_start(gpu, provisioning) + self.replacement_join(gpu)

    def framework_restart(self, warm: bool = False) -> float:
        """TensorFlow (re)start time, warm or cold."""
        return self.framework_restart_s["warm" if warm else "cold"]

    def checkpoint_mb(self, params: float) -> float:
        """Checkpoint size (MB) of a model with ``params`` parameters (fitted MB per parameter)."""
        return params * self.checkpoint_mb_per_param

    def checkpoint_cost(self, size_mb: float | np.ndarray) -> float | np.ndarray:
        """Seconds to write one checkpoint of ``size_mb`` MB to cloud storage."""
        return self.checkpoint_fixed_s + self.checkpoint_s_per_mb * np.asarray(size_mb)

    def lost_work(
        self, steps_since_checkpoint: float | np.ndarray, steps_per_sec: float | np.ndarray
    ) -> np.ndarray:
        """Seconds of training redone after the chief or a PS restarts from its last checkpoint.

        The study measured ≈58 s per 500 steps (``chief_lost_s_per_step``) at ≈8.6 steps/s; the time to
        redo the steps scales with the cluster speed, so this is steps / speed."""
        return np.asarray(steps_since_checkpoint, dtype=float) / np.maximum(steps_per_sec, 1e-12)


def degraded_wait(
    request_overhead_s: float | np.ndarray,
    restored_speed: float | np.ndarray,
    degraded_speed: float | np.ndarray,
) -> np.ndarray:
    """Seconds a worker revocation costs while its replacement is requested and joins: the cluster runs
    at ``degraded_speed`` instead of ``restored_speed`` (steps/s) for ``request_overhead_s`` (the study's
    time-to-finish estimator: remaining steps / restored speed + this); vectorised."""
    restored = np.maximum(np.asarray(restored_speed, dtype=float), 1e-12)
    out: np.ndarray = np.asarray(request_overhead_s) * (1 - np.asarray(degraded_speed) / restored)
    return out
