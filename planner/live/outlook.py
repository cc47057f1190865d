"""What the Planner pane shows for a live job: its current shape read off the nodes, the speed
model's prediction for it, and the same prediction for nearby shapes. Pure computation."""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass

from cmdare.collectors.observed import JobView
from cmdare.collectors.samples import ModelSpec
from cmdare.planner.speed.speed_model import SpeedModel, SpeedPrediction


@dataclass(frozen=True)
class GpuMix:
    """A live job's workers by GPU type and its parameter servers (no region or provisioning: see
    :class:`cmdare.planner.risk_cost.workload.Shape` for a full plannable shape)."""

    gpus: tuple[tuple[str, int], ...]  # (GPU type, count), sorted
    ps: int

    @property
    def workers(self) -> int:
        return sum(n for _, n in self.gpus)

    @property
    def label(self) -> str:
        g = "+".join(f"{n}×{name}" for name, n in self.gpus)
        return f"{g} · {self.ps} PS"


@dataclass(frozen=True)
class ShapeOutlook:
    shape: GpuMix
    prediction: SpeedPrediction
    current: bool = False


#: GPU names that mean "this task has no GPU" (a CPU-only PS or worker reports "" or "CPU").
NO_GPU_NAMES = frozenset({"", "CPU", "NONE", "-"})


@functools.lru_cache(maxsize=1024)  # asked of every worker of a 10,000-task job each refresh: a few labels
def owns_gpu(gpu: str | None) -> bool:
    """True when a task's ``gpu`` label names a GPU (not "", "CPU" or "none")."""
    return bool(gpu) and str(gpu).strip().upper() not in NO_GPU_NAMES


def network_of(job: JobView) -> ModelSpec | None:
    """What the job trains, when the speed model can predict it (FLOPs and parameters declared)."""
    return job.facts.model if job.facts.model.predictable else None


def current_shape(job: JobView, *, include_down: bool = True) -> GpuMix | None:
    """The job's shape: its workers by GPU type and its parameter servers. Revoked or silent
    workers count when ``include_down`` (the shape the user pays for and will get back)."""
    gpus: Counter[str] = Counter()
    ps = 0
    for (role, gpu, up), count in job.census.items():  # one pass over the nodes, made once per view
        if not (include_down or up):
            continue
        if role in ("worker", "chief") and owns_gpu(gpu):
            gpus[gpu] += count
        ps += count if role == "ps" else 0
    if not gpus or not ps:
        return None
    return GpuMix(tuple(sorted(gpus.items())), ps)


def outlook(job: JobView, model: SpeedModel, max_workers: int = 16, max_ps: int = 4) -> list[ShapeOutlook]:
    """Predictions for the current shape (first) and for ± workers and ± parameter servers of the
    same GPU mix, sorted by predicted steps/s."""
    net, shape = network_of(job), current_shape(job)
    if net is None or shape is None:
        return []
    rows = [ShapeOutlook(shape, model.predict(net, dict(shape.gpus), ps=shape.ps), current=True)]
    main_gpu = max(shape.gpus, key=lambda g: g[1])[0]
    seen = {shape}
    for workers in sorted({1, 2, 4, shape.workers // 2, shape.workers, shape.workers * 2, max_workers}):
        for ps in range(1, max_ps + 1):
            if not 1 <= workers <= max_workers:
                continue
            s = GpuMix(((main_gpu, workers),), ps)
            if s in seen:
                continue
            seen.add(s)
            rows.append(ShapeOutlook(s, model.predict(net, {main_gpu: workers}, ps=ps)))
    cur, rest = rows[0], rows[1:]
    rest.sort(key=lambda r: -r.prediction.steps_per_sec)
    return [cur, *rest]
