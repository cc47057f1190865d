"""The live Planner for a running synchronous all-reduce job: a sync workload for its remaining steps, and
its alternatives ranked by :func:`~cmdare.planner.risk_cost.sync_shapes.rank_sync_shapes` with the all-reduce
model calibrated on the job's own measured compute and exposed all-reduce (:mod:`cmdare.planner.live.sync_job`).
Pure computation."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from cmdare.collectors.observed import JobView
from cmdare.planner.live.outlook import owns_gpu
from cmdare.planner.live.sync_job import (
    MeasuredSplit,
    SyncShape,
    calibrated,
    measured_split,
    placement,
    refusal_note,
    sync_shape,
)
from cmdare.planner.risk_cost.revocation import RevocationModel
from cmdare.planner.risk_cost.sync_shapes import SyncShapeTable, compute_seconds, rank_sync_shapes
from cmdare.planner.risk_cost.workload import (
    ASSUMED_REGION,
    Allowed,
    Options,
    Parallel,
    Shape,
    Target,
    Workload,
)
from cmdare.planner.speed.allreduce import SyncParams
from cmdare.planner.speed.speed_model import SpeedModel

if TYPE_CHECKING:
    from cmdare.collectors.pricing.book import PriceBook

MAX_GPUS_PER_NODE = 8


def sync_workload_for_job(
    job: JobView, price_book: PriceBook
) -> tuple[Workload | None, SyncShape | None, str | None]:
    """(workload for the job's remaining steps, its shape, None) or (None, shape, why not)."""
    f, shape = job.facts, sync_shape(job)
    if shape is None:
        return None, None, "no ranks seen yet"
    if not f.model.predictable:
        return (
            None,
            shape,
            "the job does not say which network it trains (cmdare_job_info model_flops, params)",
        )
    if not owns_gpu(shape.gpu):
        return None, shape, f"the ranks name no GPU type (gpu={shape.gpu!r}): nothing to compare shapes on"
    if not f.target_steps:
        return None, shape, "no target step count (cmdare_job_info target_steps) to plan time and cost for"
    region, prov = placement(job)  # what most ranks declare (once per view)
    region, prov = region or ASSUMED_REGION, prov or "standard"
    gpus = tuple(sorted(set(price_book.gpus()) | {shape.gpu}))
    regions = tuple(sorted(set(price_book.regions()) | {region}))
    transient = prov if prov in ("spot", "preemptible") else "spot"
    w = Workload(
        model=f.model,
        target=Target(steps=max(1, int(f.target_steps - (job.global_step or 0)))),
        current=Shape(shape.gpu, shape.gpus, 0, region, prov),
        allowed=Allowed(
            gpus=gpus,
            regions=regions,
            max_workers=max(16, 2 * shape.gpus),
            max_ps=0,
            provisionings=("standard", transient),
        ),
        options=Options(),
        source=f"live job {job.name}",
        parallel=Parallel(
            mode="sync",
            gpus_per_node=shape.gpus_per_node,
            max_gpus_per_node=max(MAX_GPUS_PER_NODE, shape.gpus_per_node),
        ),
    )
    return w, shape, None


def live_sync_params(
    job: JobView, workload: Workload, shape: SyncShape, split: MeasuredSplit, model: SpeedModel
) -> SyncParams:
    """The all-reduce knobs with scales anchored on the job: its compute over the speed model's for its GPU,
    and the comm scale that reproduces its exposed all-reduce."""
    p = calibrated(job, shape, split)
    import numpy as np

    model_compute = float(compute_seconds(model, workload, np.array([shape.gpu]))[0][0])
    return replace(p, compute_scale=split.compute_s / model_compute)


def rank_live_sync(
    job: JobView,
    speed_model: SpeedModel,
    price_book: PriceBook,
    revocations: RevocationModel,
    objective: str = "balanced",
    options: Options | None = None,
) -> tuple[SyncShapeTable | None, Workload | None, MeasuredSplit | None, str | None]:
    """(ranked table, workload, the measured split it was calibrated on, note) for a live sync job;
    ``options``: the planner options (a live job's measured checkpoints) in place of the defaults."""
    w, shape, why = sync_workload_for_job(job, price_book)
    if w is None or shape is None:
        return None, None, None, why
    if options is not None:
        w = replace(w, options=options)
    split = measured_split(job)
    p = live_sync_params(job, w, shape, split, speed_model) if split else None
    table = rank_sync_shapes(w, speed_model, price_book, revocations, objective, calibrated=p,
                             calibration_ranks=split.ranks if split else 0)  # fmt: skip
    refused = refusal_note(job)  # ranks whose all-reduce is longer than their own steps
    if split is not None:
        note = refused
    elif refused:
        note = f"not calibrated: {refused} (link figures only)"
    else:
        note = "not calibrated yet: no rank reports cmdare_allreduce_seconds (link figures only)"
    return table, w, split, note


def live_scales(table: SyncShapeTable | None) -> tuple[float, float | None]:
    """(compute scale, comm scale) a live sync table was ranked with, for the pane's subtitle."""
    p = getattr(table, "params", None)
    return (p.compute_scale, p.comm_scale) if p is not None else (1.0, None)
