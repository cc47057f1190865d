"""Placement search for a geo-distributed pipeline: PP/DP splits and stage → DC assignments.

Rules (Atlas, background.md §2): a stage needs DP × TP GPUs in one DC; whole stages go to a DC; the
largest DCs are filled first and a DC too small for one stage is skipped. Consecutive stages stay in
one DC (contiguous blocks), and every order of the DCs used along the pipeline is tried (up to
``max_orders``). Candidates are ranked by throughput (tokens/s) and by cost ($ per million tokens:
GPU-hours at each DC's $/GPU-h plus WAN egress per GB).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass, replace

from cmdare.planner.geo.geo_model import GeoJob, GeoResult, Layout, evaluate, with_layout

__all__ = [
    "Placement",
    "Gains",
    "SearchResult",
    "candidate_layouts",
    "search",
    "gains",
    "saturating_connections",
]


@dataclass(frozen=True)
class Placement:
    """One evaluated layout with its throughput and cost."""

    layout: Layout
    result: GeoResult

    @property
    def tokens_per_second(self) -> float:
        return self.result.tokens_per_iteration / self.result.iteration_seconds

    @property
    def usd_per_million_tokens(self) -> float:
        return self.result.usd_per_iteration / self.result.tokens_per_iteration * 1e6

    def to_dict(self) -> dict[str, object]:
        lay, r = self.layout, self.result
        return {
            "pp": lay.pp,
            "dp": lay.dp,
            "tp": lay.tp,
            "n_microbatches": lay.n_microbatches,
            "stage_dcs": list(lay.placement),
            "iteration_seconds": r.iteration_seconds,
            "bubble_fraction": r.bubble_fraction,
            "gpu_utilization": r.gpu_utilization,
            "gpus": r.gpus_used,
            "wan_bound_boundaries": sum(b.wan_bound for b in r.boundaries),
            "tokens_per_second": self.tokens_per_second,
            "usd_per_iteration": r.usd_per_iteration,
            "usd_per_million_tokens": self.usd_per_million_tokens,
            "prefill_capacity": r.prefill_capacity,
        }


@dataclass(frozen=True)
class Gains:
    """Speed-ups of one layout: many TCP connections vs one, temporal vs spatial link sharing."""

    single_tcp_seconds: float
    multi_connection_seconds: float
    spatial_seconds: float
    temporal_seconds: float

    @property
    def multi_connection_speedup(self) -> float:
        return self.single_tcp_seconds / self.multi_connection_seconds

    @property
    def temporal_speedup(self) -> float:
        return self.spatial_seconds / self.temporal_seconds

    def to_dict(self) -> dict[str, float]:
        return {
            "single_tcp_seconds": self.single_tcp_seconds,
            "multi_connection_seconds": self.multi_connection_seconds,
            "multi_connection_speedup": self.multi_connection_speedup,
            "spatial_seconds": self.spatial_seconds,
            "temporal_seconds": self.temporal_seconds,
            "temporal_speedup": self.temporal_speedup,
        }


@dataclass(frozen=True)
class SearchResult:
    by_time: tuple[Placement, ...]
    by_cost: tuple[Placement, ...]
    evaluated: int


def _divisors(n: int, limit: int) -> list[int]:
    return [d for d in range(1, min(n, limit) + 1) if n % d == 0]


def _blocks(job: GeoJob, pp: int, stage_gpus: int) -> list[tuple[str, int]] | None:
    """(DC, stages) blocks filling the largest DCs first; None if all DCs together are too small."""
    blocks, left = [], pp
    for dc in sorted(job.dcs, key=lambda d: (-d.gpus, d.name)):
        fits = dc.gpus // stage_gpus
        if fits == 0 or left == 0:
            continue
        take = min(fits, left)
        blocks.append((dc.name, take))
        left -= take
    return blocks if left == 0 else None


def _orders(job: GeoJob, blocks: list[tuple[str, int]], max_orders: int) -> Iterator[tuple[str, ...]]:
    """Stage → DC tuples for every order of the blocks whose consecutive DCs have a link."""
    linked = {link.key for link in job.links}
    for perm in itertools.islice(itertools.permutations(blocks), max_orders):
        names = [name for name, _ in perm]
        if all(frozenset(pair) in linked for pair in itertools.pairwise(names)):
            yield tuple(name for name, n in perm for _ in range(n))


def candidate_layouts(
    job: GeoJob,
    global_batch: int | None = None,
    max_pp: int = 32,
    max_orders: int = 720,
) -> Iterator[Layout]:
    """Layouts to try: pp divides the layers (≤ max_pp), dp a power of two; TP, schedule and sharing
    from ``job.layout``. With ``global_batch`` (sequences per iteration) the micro-batch count is
    ``global_batch / (dp × micro_batch)`` (dp must divide it); otherwise ``job.layout.n_microbatches``."""
    base, mb = job.layout, job.model.micro_batch
    biggest = max(dc.gpus for dc in job.dcs)
    for pp in _divisors(job.model.layers, max_pp):
        dp = 1
        while dp * base.tp <= biggest:
            m = base.n_microbatches
            if global_batch is not None:
                m = global_batch // (dp * mb) if global_batch % (dp * mb) == 0 else 0
            blocks = _blocks(job, pp, dp * base.tp) if m >= 1 else None
            for order in _orders(job, blocks, max_orders) if blocks else ():
                yield replace(base, pp=pp, dp=dp, placement=order, n_microbatches=m)
            dp *= 2


def search(
    job: GeoJob,
    global_batch: int | None = None,
    top: int = 5,
    max_pp: int = 32,
    max_orders: int = 720,
) -> SearchResult:
    """Evaluate every candidate layout; the ``top`` fastest (tokens/s) and cheapest ($/M tokens)."""
    placed = []
    for layout in candidate_layouts(job, global_batch, max_pp, max_orders):
        trial = replace(job, layout=layout, stage_compute_s=None)
        placed.append(Placement(layout, evaluate(trial)))
    by_time = sorted(placed, key=lambda p: (-p.tokens_per_second, p.usd_per_million_tokens))
    by_cost = sorted(placed, key=lambda p: (p.usd_per_million_tokens, -p.tokens_per_second))
    return SearchResult(tuple(by_time[:top]), tuple(by_cost[:top]), len(placed))


def saturating_connections(job: GeoJob) -> int:
    """Parallel TCP connections that let every link of ``job`` reach its bandwidth (Atlas)."""
    return max((math.ceil(link.bandwidth_gbps / link.single_tcp_gbps()) for link in job.links), default=1)


def gains(job: GeoJob) -> Gains:
    """Iteration seconds with one TCP connection per link vs enough to fill each link; spatial vs
    temporal sharing (both with the file's connection counts)."""
    return Gains(
        single_tcp_seconds=evaluate(replace(job, n_conn=1)).iteration_seconds,
        multi_connection_seconds=evaluate(replace(job, n_conn=saturating_connections(job))).iteration_seconds,
        spatial_seconds=evaluate(with_layout(job, sharing="spatial")).iteration_seconds,
        temporal_seconds=evaluate(with_layout(job, sharing="temporal")).iteration_seconds,
    )
