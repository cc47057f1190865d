"""Rules for synchronous all-reduce jobs (``sync-allreduce``): ``allreduce-bound`` and the sync ``straggler``.

* ``allreduce-bound``: the exposed all-reduce (``cmdare_allreduce_seconds``, the wait backward does not hide)
  takes at least ``Thresholds.allreduce_share_max`` of a step (median over up ranks). Fixes, each predicted
  by the all-reduce model calibrated on this job's own compute and all-reduce times
  (:mod:`cmdare.planner.live.sync_job`): fewer, larger nodes (the same GPUs, up to twice as many a node, at a
  node size the price book offers for the GPU: the ring leaves a node less often), gradient compression 2×
  (fp16 gradients: DDP's ``fp16_compress_hook``), a
  larger bucket (4×, when the gradients span several), the faster NIC tier (gVNIC) where the GPU's VMs offer
  one and the ring crosses nodes.
* ``straggler`` (sync): every rank waits for the slowest at each all-reduce, so one rank computing
  ``straggler_ratio`` × slower than its peers' median paces all. Its own all-reduce wait is the irreducible
  tail (it waits for nobody), so replacing it with a median rank turns a step of ``c_slow + e_slow`` into
  ``c_median + e_slow``: that ratio is the predicted gain. (The PS straggler rule skips sync jobs.)
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from cmdare.collectors.observed import JobView
from cmdare.planner.live.sync_job import (
    MeasuredSplit,
    SyncShape,
    calibrated,
    is_sync,
    measured_split,
    placement,
    shape_terms,
    split_ranks,
    sync_shape,
)
from cmdare.planner.rules.alerts import AlertContext, Finding
from cmdare.planner.rules.rule_support import basis, columns_of, signed_pct, thresholds_of
from cmdare.planner.rules.worker_columns import median_of
from cmdare.planner.speed.allreduce import SyncParams
from cmdare.planner.speed.interconnect import NODE_SIZES, tiers_of

if TYPE_CHECKING:
    from cmdare.collectors.pricing.book import PriceBook

MEASURED = ["rank compute time (cmdare_step_seconds)", "rank exposed all-reduce (cmdare_allreduce_seconds)"]
MODEL = [
    "synchronous model (NCCL ring or hierarchical tree at published achieved bus bandwidth, bucket overlap, the"
    " wait for the slowest rank) calibrated on this job's measured split"
]
NOT_MEASURED = [
    "link speed (the calibration stands in for it)",
    "how the exposed time splits into bandwidth and per-message latency (the calibration puts it on bandwidth)",
]


def _step(shape: SyncShape, params: float, p: SyncParams, tier: str = "default") -> float:
    return float(shape_terms(shape, params, 1.0, p, tier).step[0])


def node_sizes(book: PriceBook | None, gpu: str, region: str, provisioning: str) -> tuple[int, ...]:
    """GPUs a node of ``gpu`` may have: the sizes the price book prices in the job's region (any region when
    the job names none), or every GCP size when there is no book or it prices no node of the GPU there."""
    if book is None:
        return NODE_SIZES
    regions = [region] if region else list(book.regions())
    priced = tuple(g for g in NODE_SIZES if any(_priced(book, gpu, g, r, provisioning) for r in regions))
    return priced or NODE_SIZES


def _priced(book: PriceBook, gpu: str, g: int, region: str, provisioning: str) -> bool:
    try:
        book.node_price(gpu, g, region, provisioning or "standard")
    except (KeyError, ValueError):  # PriceNotFound, an unknown GPU
        return False
    return True


def allreduce_fixes(
    job: JobView, shape: SyncShape, split: MeasuredSplit, sizes: tuple[int, ...] = NODE_SIZES
) -> list[tuple[str, float]]:
    """(fix, predicted steps/s gain) for the job, best first; gains ≤ 1% are left out. ``sizes``: the GPUs
    a node may have (:func:`node_sizes`)."""
    params = job.facts.model.params
    p = calibrated(job, shape, split)
    now = _step(shape, params, p)
    out: list[tuple[str, float]] = []
    larger = [s for s in sizes if shape.gpus_per_node < s <= min(2 * shape.gpus_per_node, shape.gpus)]
    if shape.nodes > 1 and larger:
        g = max(larger)
        bigger = SyncShape(shape.gpu, math.ceil(shape.gpus / g), g)
        out.append((f"fewer, larger nodes ({bigger.nodes} × {g} GPUs)", now / _step(bigger, params, p) - 1))
    out.append(("gradient compression 2× (fp16 gradients, DDP fp16_compress_hook)",
                now / _step(shape, params, replace(p, compression=p.compression * 2)) - 1))  # fmt: skip
    if params * p.bytes_per_param > p.bucket_bytes:
        bucket = replace(p, bucket_bytes=p.bucket_bytes * 4)
        out.append(
            (
                f"a larger bucket ({bucket.bucket_bytes / 2**20:.0f} MB)",
                now / _step(shape, params, bucket) - 1,
            )
        )
    if shape.nodes > 1 and "fast" in tiers_of(shape.gpu):
        out.append(
            ("the faster NIC tier (gVNIC, up to 100 Gbit/s)", now / _step(shape, params, p, "fast") - 1)
        )
    return sorted([f for f in out if f[1] > 0.01], key=lambda f: -f[1])


def allreduce_bound_rule(ctx: AlertContext) -> list[Finding]:
    """A sync job whose exposed all-reduce share of a step is at or above the threshold."""
    th, out = thresholds_of(ctx), []
    for job in ctx.jobs:
        if not is_sync(job):  # first: the split and the shape are passes over every rank
            continue
        split, shape = measured_split(job), sync_shape(job)
        if split is None or shape is None or split.share < th.allreduce_share_max:
            continue
        sizes = node_sizes(ctx.inputs.price_book, shape.gpu, *placement(job))
        fixes = allreduce_fixes(job, shape, split, sizes) if job.facts.model.params else []
        fix = "; ".join(f"{what}: predicted {signed_pct(g)} steps/s" for what, g in fixes) or None
        if fix:
            fix += " (all-reduce model calibrated on this job; band: n/a)"
        evidence = {
            **basis(
                MEASURED,
                MODEL if fixes else [],
                NOT_MEASURED + ([] if job.facts.model.params else ["params"]),
            ),
            "allreduce_share": round(split.share, 3),
            "compute_seconds": round(split.compute_s, 5),
            "allreduce_seconds": round(split.exposed_s, 5),
            "ranks": split.ranks,
            "nodes": shape.nodes,
            "gpus_per_node": shape.gpus_per_node,
            "threshold": th.allreduce_share_max,
            "predicted_gains": {what: round(g, 3) for what, g in fixes},
        }
        msg = (f"all-reduce takes {split.share:.0%} of each step (exposed, median of {split.ranks} ranks): "
               "communication, not compute, paces training")  # fmt: skip
        out.append(
            Finding(
                kind="allreduce-bound",
                subject=job.name,
                severity="warning",
                message=msg,
                evidence=evidence,
                fix=fix,
            )
        )
    return out


def sync_straggler_rule(ctx: AlertContext) -> list[Finding]:
    """The slowest rank of a sync job, when its compute is ≥ ``straggler_ratio`` × its peers' median;
    raised, it holds until below ``straggler_clear_ratio`` (the band the PS straggler has too)."""
    th, out = thresholds_of(ctx), []
    for job in ctx.jobs:
        if not is_sync(job):
            continue
        cols = columns_of(ctx, job)  # the ranks with both times, as columns, in the nodes' order
        at = np.flatnonzero(split_ranks(cols))
        if len(at) < max(th.straggler_min_workers, 2):
            continue
        steps = cols.step[at]
        k = int(np.argmax(steps))  # the first slowest, as max() finds it
        slow, c, e = cols.nodes[at[k]], float(steps[k]), float(cols.allreduce[at[k]])
        med = median_of(np.delete(steps, k))
        ratio = c / med
        if ratio < min(th.straggler_clear_ratio, th.straggler_ratio):  # in the band, a raised flag holds
            continue
        gain = (c + e) / (med + e) - 1
        evidence = {
            **basis(MEASURED, [], []),
            "rank": slow.rank or slow.name,
            "step_seconds": round(c, 5),
            "peer_median_step_seconds": round(med, 5),
            "own_allreduce_seconds": round(e, 5),
            "ratio": round(ratio, 3),
            "predicted_gain": round(gain, 3),
            "ranks": len(at),
        }
        msg = (f"{slow.name} (rank {slow.rank or '?'}) computes {ratio:.2f}× slower than its peers' median: "
               "every rank waits for it at each all-reduce")  # fmt: skip
        fix = (f"replace {slow.name} (or the node it runs on): predicted {signed_pct(gain)} steps/s "
               "(measured step split; band: n/a)")  # fmt: skip
        out.append(
            Finding(
                kind="straggler",
                subject=f"{job.name}/{slow.name}",
                severity="warning",
                message=msg,
                evidence=evidence,
                fix=fix,
                holds=ratio < th.straggler_ratio,
            )
        )
    return out
