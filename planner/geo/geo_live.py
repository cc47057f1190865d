"""Live WAN-bound verdicts of a geo-distributed pipeline from its stage counters (issue 7, part 3).

Same rule as the model in :mod:`cmdare.planner.geo.geo_model`: a boundary is WAN-bound when its transfer
time per micro-batch (all D pipelines, ``D·A/B``) exceeds the slowest stage's compute per micro-batch.
Units: seconds, bytes, Gbit/s.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LiveBoundary", "wan_bound_from_live"]


@dataclass(frozen=True, kw_only=True)
class LiveBoundary:
    """A measured stage boundary: seconds per micro-batch on the wire vs the slowest stage's compute.

    ``measured_gbps`` is what the boundary sent on average (the pipeline's pace × bytes per micro-batch:
    about the same on every boundary of one pipeline, since the slowest one paces every stage);
    ``transfer_seconds`` is ``bytes_per_microbatch × 8 ÷ link_gbps``, the link's capacity when known, else
    ``None`` and the measured rate stands in (a lower bound on capacity: the transfer time is an upper bound).
    """

    from_stage: str
    to_stage: str
    measured_gbps: float
    bytes_per_microbatch: float
    transfer_seconds: float
    max_stage_compute_seconds: float
    wait_share: float | None
    wan_bound: bool
    link_gbps: float | None = None


def wan_bound_from_live(
    stage_compute_s_per_mb: dict[str, float],
    boundary_bytes_per_s: dict[tuple[str, str], float],
    microbatches_per_s: float,
    stage_wait_share: dict[str, float] | None = None,
    link_capacity_gbps: dict[tuple[str, str], float] | None = None,
    wait_share_threshold: float = 0.5,
) -> list[LiveBoundary]:
    """Boundary verdicts from live counters, the same rule as the model (``D·A/B > max c``).

    ``stage_compute_s_per_mb``: stage → rate(cmdare_stage_compute_seconds_total) ÷ micro-batch rate;
    ``boundary_bytes_per_s``: (stage, peer) → rate(cmdare_stage_bytes_sent_total{peer}), all D replicas
    summed; ``microbatches_per_s``: micro-batches per second of one pipeline; ``stage_wait_share``:
    stage → wait ÷ (wait + compute) seconds; ``link_capacity_gbps``: B_eff of the link when known (else
    the measured rate is used, a lower bound on capacity, so the transfer time is an upper bound).
    A boundary is WAN-bound when its transfer time per micro-batch exceeds the slowest stage's compute
    and, if wait shares are given, the receiving stage waits at least ``wait_share_threshold``.
    """
    cmax = max(stage_compute_s_per_mb.values(), default=0.0)
    out = []
    for (src, dst), rate in boundary_bytes_per_s.items():
        per_mb = rate / microbatches_per_s if microbatches_per_s > 0 else 0.0
        gbps = rate * 8 / 1e9
        known = (link_capacity_gbps or {}).get((src, dst))
        cap = gbps if known is None else known
        t = per_mb * 8 / (cap * 1e9) if cap > 0 else float("inf")
        share = (stage_wait_share or {}).get(dst)
        waits = share is None or share >= wait_share_threshold
        out.append(
            LiveBoundary(
                from_stage=src,
                to_stage=dst,
                measured_gbps=gbps,
                bytes_per_microbatch=per_mb,
                transfer_seconds=t,
                max_stage_compute_seconds=cmax,
                wait_share=share,
                wan_bound=bool(t > cmax and waits),
                link_gbps=known,
            )
        )
    return out
