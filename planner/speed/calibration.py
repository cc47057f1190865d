"""Online calibration: anchor the speed model on one running job's own measurements.

A running job reports per-worker step times (s), the cluster rate (global steps/s) at its current
shape, and PS traffic (bytes/s, both directions). :class:`Calibration` re-fits two scale factors of
that job — ``compute_scale`` (worker cycle time × factor) and ``ps_scale`` (PS capacity × factor) —
so predictions for *other* shapes of the same job start from what the job really does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from cmdare.collectors.samples import ModelSpec
from cmdare.planner.speed.gpu_catalog import get_gpu
from cmdare.planner.speed.speed_model import REF_LATENCY_MS, SpeedModel, SpeedPrediction

__all__ = ["Calibration"]

_SCALE_RANGE = (0.05, 20.0)  # plausible range of a job's factors; beyond it the samples are suspect


@dataclass
class Calibration:
    """Calibration state of one job at its current shape (``gpus`` {GPU: count}, ``ps`` servers)."""

    model: SpeedModel
    network: ModelSpec
    gpus: Mapping[str, int]
    ps: int = 1
    latency_ms: float = REF_LATENCY_MS
    step_times: dict[str, list[float]] = field(default_factory=dict)
    cluster_rates: list[float] = field(default_factory=list)
    compute_scale_: float = 1.0
    ps_scale_: float = 1.0

    def add_worker_step_time(self, gpu: str, seconds: float) -> None:
        """One worker's own time per step (s) excluding waiting on the PS (forward + backward on its GPU
        plus its side of the transfers). In a homogeneous cluster the time *between* a worker's steps is
        just workers / cluster rate, which carries no extra information; this sample separates the
        worker's compute from the PS."""
        if seconds > 0 and np.isfinite(seconds):
            self.step_times.setdefault(get_gpu(gpu).name, []).append(float(seconds))

    def add_cluster_rate(self, steps_per_sec: float) -> None:
        """Cluster-wide global steps/s at the current shape."""
        if steps_per_sec > 0 and np.isfinite(steps_per_sec):
            self.cluster_rates.append(float(steps_per_sec))

    def add_ps_bytes(self, bytes_per_sec: float) -> None:
        """PS traffic (push + pull, B/s); each step moves params × 4 B each way, so it implies a rate."""
        if bytes_per_sec > 0 and np.isfinite(bytes_per_sec):
            self.add_cluster_rate(bytes_per_sec / (8.0 * self.network.params))

    @property
    def samples(self) -> int:
        """Number of samples taken into account."""
        return sum(len(v) for v in self.step_times.values()) + len(self.cluster_rates)

    def _predict(self, compute_scale: float, ps_scale: float) -> SpeedPrediction:
        model = self.model.with_scales(compute_scale, ps_scale)
        return model.predict(self.network, self.gpus, self.ps, self.latency_ms)

    def _worker_step_time(self, pred: SpeedPrediction, gpu: str) -> float:
        """Predicted worker time per step without PS service: own cycle 1/rate minus PS time."""
        return float(1.0 / pred.worker_steps_per_sec[gpu] - pred.terms["ps"])

    def fit(self) -> Calibration:
        """Re-fit ``compute_scale_`` from worker step times, then ``ps_scale_`` from cluster rates
        (alternating: the PS share of the cluster rate depends on the compute scale)."""
        c, q = 1.0, 1.0
        for _ in range(30):  # the two factors interact through PS queueing; alternate until settled
            before = (c, q)
            if self.step_times:
                pred = self._predict(c, q)
                ratios = [
                    np.median(v) / self._worker_step_time(pred, g)
                    for g, v in self.step_times.items()
                    if g in pred.worker_steps_per_sec
                ]
                c = float(np.clip(c * np.exp(np.mean(np.log(ratios))), *_SCALE_RANGE)) if ratios else c
            if self.cluster_rates:
                q = self._solve_ps_scale(c, float(np.median(self.cluster_rates)))
            if abs(c / before[0] - 1) < 1e-7 and abs(q / before[1] - 1) < 1e-7:
                break
        self.compute_scale_, self.ps_scale_ = c, q
        return self

    def _solve_ps_scale(self, c: float, target: float) -> float:
        """PS scale that makes the predicted cluster rate equal ``target`` (bisection in log space)."""
        lo, hi = np.log(_SCALE_RANGE[0]), np.log(_SCALE_RANGE[1])
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            if self._predict(c, float(np.exp(mid))).steps_per_sec < target:
                lo = mid
            else:
                hi = mid
        return float(np.exp(0.5 * (lo + hi)))

    @property
    def residual(self) -> float:
        """Mean relative error of the calibrated model on the samples (0 when there are none)."""
        if not self.samples:
            return 0.0
        pred = self._predict(self.compute_scale_, self.ps_scale_)
        errs = [np.array([abs(pred.steps_per_sec / r - 1) for r in self.cluster_rates])]
        for g, v in self.step_times.items():
            if g in pred.worker_steps_per_sec:  # a 100,000-worker job: its step times as one array
                errs.append(np.abs(self._worker_step_time(pred, g) / np.array(v, dtype=float) - 1))
        every = np.concatenate(errs)
        return float(np.mean(every)) if len(every) else 0.0

    def calibrated_model(self) -> SpeedModel:
        """A predictor with the same ``predict``/``predict_shapes`` API, anchored on this job."""
        return self.model.with_scales(self.compute_scale_, self.ps_scale_)
