"""What a ranked shape implies beyond time and cost, so a person can act on a row (issue 16 item 6):

* :func:`collapse_twins` — spot and preemptible rows of one shape are one row when their price and
  revocation risk are the same (GCP bills both from the same SKUs);
* :func:`fold_regions` — rows identical but for the region are one outcome: the best-ranked stands for the
  others and lists their regions (issue 30);
* :func:`region_notes` — a move to another region: the data egress it costs for the stated dataset size
  (``[options] dataset_gb``, ``data_region``), another continent, and capacity not guaranteed;
* :func:`price_date_label` — the date of the prices, not the day a book was derived;
* :func:`make_bander` — each shown row's P10–P90 speed band and extrapolation, from the speed model's band
  API when this build has it (else rows say "band: n/a").

Pure numpy / string work; no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from cmdare.planner.risk_cost.revocation import TRANSIENT

if TYPE_CHECKING:
    from cmdare.collectors.pricing.book import PriceBook
    from cmdare.collectors.samples import ModelSpec
    from cmdare.planner.speed.speed_model import SpeedModel

#: Relative tolerance under which two rows' P50 cost and P(≥1 revocation) count as the same.
TWIN_RTOL = 1e-6


def collapse_twins(cols: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(rows to keep, alias per row): of each spot / preemptible pair of one gpu × workers × ps × region
    whose P50 cost and P(≥1 revocation) agree, keep one (row 0, the current shape, wins); the kept row's
    alias names the provisioning it stands for too ("" when none).

    Sorting the transient rows by their shape key puts each pair side by side, so one comparison of
    neighbours finds every pair; row 0 sorts first within its key."""
    n = cols["gpu"].size
    keep, alias = np.ones(n, dtype=bool), np.full(n, "", dtype=object)
    idx = np.nonzero(np.isin(cols["provisioning"].astype(str), TRANSIENT))[0]
    if idx.size < 2:
        return keep, alias
    key = _shape_codes(cols, idx)
    order = np.lexsort((idx != 0, key))
    k, rows = key[order], idx[order]
    same = k[1:] == k[:-1]
    for name in ("cost_usd_p50", "p_revocation"):
        a, b = cols[name][rows[:-1]].astype(float), cols[name][rows[1:]].astype(float)
        same &= np.isclose(a, b, rtol=TWIN_RTOL, atol=1e-9) | (np.isnan(a) & np.isnan(b))
    keep[rows[1:][same]] = False
    alias[rows[:-1][same]] = cols["provisioning"][rows[1:][same]]
    return keep, alias


#: The figures two rows must share (to :data:`TWIN_RTOL`) to be one outcome in different regions.
OUTCOME_FIGURES = ("hours_p50", "hours_p90", "cost_usd_p50", "cost_usd_p90", "p_revocation", "switch_s")
OUTCOME_LABELS = ("gpu", "workers", "ps", "provisioning", "also_provisioning", "nodes", "gpus_per_node",
                  "switch_kind", "worth_switching", "feasible")  # fmt: skip


def fold_regions(cols: dict[str, np.ndarray], order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(representative per row, regions per row): rows whose shape and figures (:data:`OUTCOME_FIGURES`) are
    the same but for the region are one outcome. Each such group is represented by its best-ranked row (by
    ``order``; row 0, the current shape, always represents itself); ``representative[i]`` is ``i`` for a row
    that stands for itself or its group, else the row that stands for it, and a representative's ``regions``
    lists its group's regions, its own first, then in rank order (others: their own region only)."""
    n = cols["gpu"].size
    code = np.zeros(n, dtype=np.int64)
    parts: list[np.ndarray] = []
    for name in OUTCOME_LABELS:
        if name in cols:
            parts.append(np.unique(cols[name].astype(str), return_inverse=True)[1].ravel())
    for name in OUTCOME_FIGURES:
        x = cols[name].astype(float) if name in cols else np.zeros(n)
        q = np.where(np.isfinite(x), np.round(np.log(np.abs(x) + 1e-12) / TWIN_RTOL), np.iinfo(np.int32).min)
        parts.append(np.unique(q, return_inverse=True)[1].ravel())
    for inv in parts:
        code = code * (int(inv.max()) + 1) + inv
        code = np.unique(code, return_inverse=True)[1].ravel().astype(np.int64)  # keep the codes small
    code[0] = -1  # the current shape is never folded, nor folds another row
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    by = np.lexsort((rank, code))
    rep = np.arange(n)
    regions = np.empty(n, dtype=object)
    for i in range(n):
        regions[i] = (str(cols["region"][i]),)
    starts = np.flatnonzero(np.r_[True, code[by][1:] != code[by][:-1]])
    for a, b in zip(starts, np.r_[starts[1:], n], strict=True):
        if b - a < 2 or code[by[a]] == -1:
            continue
        group = by[a:b]
        rep[group] = group[0]
        regions[group[0]] = tuple(dict.fromkeys(str(cols["region"][j]) for j in group))
    return rep, regions


def _shape_codes(cols: dict[str, np.ndarray], idx: np.ndarray) -> np.ndarray:
    """One int64 per row of ``idx`` naming its gpu × workers × ps × region (equal iff the shape is)."""
    code = np.zeros(idx.size, dtype=np.int64)
    for name in ("gpu", "workers", "ps", "region"):
        col = cols[name][idx]
        if col.dtype.kind in "iu":  # counts: their own codes
            inv = col.astype(np.int64)
        else:
            _, inv = np.unique(col, return_inverse=True)
        code = code * (int(inv.max()) + 1) + inv.ravel()
    return code


def continent(region: str) -> str:
    """A GCP region's continent prefix: ``europe-west4`` → ``europe``; ``us`` and ``northamerica`` → ``na``."""
    head = region.split("-", 1)[0]
    return "na" if head in ("us", "northamerica") else head


def region_notes(region: np.ndarray, current: str, data_region: str | None, dataset_gb: float,
                 egress_usd: np.ndarray) -> np.ndarray:  # fmt: skip
    """Per row, what running in ``region`` implies: '' where it is the current region and the data's,
    else the egress for the stated dataset (or that none was stated), another continent, and
    "capacity not guaranteed" (a price is not an offer of free GPUs)."""
    home = data_region or current
    out = np.full(region.size, "", dtype=object)
    for r in np.unique(region.astype(str)):
        if r == current and r == home:
            continue
        parts = []
        if r != home:
            if dataset_gb > 0:
                usd = float(np.nanmax(egress_usd[region == r])) if np.any(region == r) else 0.0
                parts.append(f"data egress ≈${usd:.2f} for {dataset_gb:g} GB from {home}")
                if continent(r) != continent(home):
                    parts.append(
                        "another continent: egress priced at the intra-continent rate (a lower bound)"
                    )
            else:
                parts.append(f"data in {home}: egress not priced (set [options] dataset_gb)")
                if continent(r) != continent(home):
                    parts.append("another continent")
        if r != current:
            parts.append("capacity not guaranteed")
        out[region == r] = "; ".join(parts)
    return out


def price_date_label(book: PriceBook) -> str:
    """The date of the prices a book holds: a live or cached fetch time, a study-era price date, or for a
    derived offline book whose source rows carry no date, 'price date unknown (derived DATE from …)'."""
    as_of = book.as_of or "?"
    source = book.source
    notes = " ".join(book.notes)
    if "price date unknown" in notes:
        return notes
    if source in ("live", "cache"):
        return f"fetched {as_of}"
    return f"prices of {as_of}"


@dataclass(frozen=True)
class RowBand:
    """A shape's predicted steps/s band (P10–P90) and how far it lies outside the measured domain."""

    p10: float
    p90: float
    extrapolation: str  # none | network | gpu | ps | workers


Bander = Callable[[str, int, int], "RowBand | None"]


def make_bander(model: SpeedModel, network: ModelSpec, latency_ms: float) -> Bander:
    """A function (gpu, workers, ps) → :class:`RowBand` from the speed model's band API
    (:func:`cmdare.planner.speed.speed_band.speed_band`). Bands are computed per row shown (a handful of
    model calls each), not for every enumerated shape."""
    from cmdare.planner.speed.speed_band import speed_band

    def band(gpu: str, workers: int, ps: int) -> RowBand | None:
        try:
            b = speed_band(model, network, {gpu: workers}, ps=ps, latency_ms=latency_ms)
        except (ValueError, KeyError):
            return None
        return RowBand(float(b.p10), float(b.p90), str(b.extrapolation))

    return band
