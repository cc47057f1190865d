"""Rank synchronous all-reduce shapes: nodes × GPUs per node × GPU × region × provisioning (vectorised).

Same table, columns, bands and Pareto front as PS shapes (:mod:`~cmdare.planner.risk_cost.shapes`):
``workers`` is the number of GPUs in all, ``ps`` is 0, and three columns are added: ``nodes``,
``gpus_per_node``, ``comm_share`` (the exposed all-reduce's share of a step), ``policy`` (restart |
elastic, the cheaper per revocation: :mod:`~cmdare.planner.risk_cost.sync_time_cost`) and ``nic_gbps``.
``[target] steps`` are global steps of the current shape (a global batch of ``workers × batch_size``): a shape
of N GPUs trains the same examples in proportionally fewer (N > N_cur) or more of its own steps.
Speed: per-GPU compute from the speed model (one worker's ``compute`` term) plus the exposed all-reduce
(:mod:`cmdare.planner.speed.allreduce`), calibrated by ``SyncParams`` when a live job measured it.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from cmdare.planner.risk_cost.checkpointing import interval_columns
from cmdare.planner.risk_cost.overheads import Overheads
from cmdare.planner.risk_cost.ranking_notes import Bander, RowBand
from cmdare.planner.risk_cost.revocation import RevocationModel
from cmdare.planner.risk_cost.risk_periods import band_columns, period_risks
from cmdare.planner.risk_cost.shapes import (
    OBJECTIVES,
    Explanation,
    ShapeTable,
    UnpricedShapeError,
    egress_usd,
    finish_table,
    has_risk_curve,
    outcome_columns,
    run_settings,
    switch_basis,
    worker_counts,
)
from cmdare.planner.risk_cost.switching import switching, with_switching
from cmdare.planner.risk_cost.sync_time_cost import SyncColumns, estimate_sync
from cmdare.planner.risk_cost.time_cost import PriceTable, write_seconds
from cmdare.planner.risk_cost.workload import Workload
from cmdare.planner.speed.allreduce import SyncParams, SyncTerms, sync_step
from cmdare.planner.speed.interconnect import NODE_SIZES, node_links
from cmdare.planner.speed.speed_model import SpeedModel

GPUS_PER_NODE = NODE_SIZES


def sync_params(workload: Workload, calibrated: SyncParams | None = None) -> SyncParams:
    """The all-reduce knobs of a workload (bucket, compression), with a live job's calibration scales."""
    par = workload.parallel
    base = calibrated or SyncParams()
    return SyncParams(par.bucket_mb * 2**20, base.backward_share, base.bytes_per_param, par.compression,
                      base.compute_scale, base.comm_scale)  # fmt: skip


def enumerate_sync(workload: Workload) -> dict[str, np.ndarray]:
    """gpu × gpus per node (1, 2, 4, 8, 16 up to the allowed most, and the current) × nodes × region ×
    provisioning, with at most ``max_workers`` GPUs in all; the current shape first."""
    a, cur, par = workload.allowed, workload.current, workload.parallel
    per_node = sorted({g for g in GPUS_PER_NODE if g <= par.max_gpus_per_node} | {par.gpus_per_node})
    rows = []
    for g in per_node:
        nodes = worker_counts(max(a.max_workers // g, 1), cur.workers // par.gpus_per_node)
        rows += [(gpu, g, int(n), r, p) for gpu in a.gpus for n in nodes if n * g <= max(a.max_workers, g)
                 for r in a.regions for p in a.provisionings]  # fmt: skip
    cur_key = (cur.gpu, par.gpus_per_node, cur.workers // par.gpus_per_node, cur.region, cur.provisioning)
    rows.sort(key=lambda row: row != cur_key)
    if not rows or rows[0] != cur_key:
        rows.insert(0, cur_key)
    gpu, g, n, r, p = (np.asarray(c) for c in zip(*rows, strict=True))
    return {"gpu": gpu, "gpus_per_node": g, "nodes": n, "region": r, "provisioning": p}


def compute_seconds(model: SpeedModel, workload: Workload, gpus: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(one GPU's compute seconds per step — the speed model's one-worker ``compute`` term —, the one-worker
    PS-shape steps/s its band is quoted around) per row."""
    net = workload.model
    names, inverse = np.unique(gpus.astype(str), return_inverse=True)
    lat = workload.options.latency_ms
    preds = [model.predict(net, {g: 1}, 1, lat) for g in names]
    per = np.asarray([p.terms["compute"] for p in preds], dtype=float)
    ref = np.asarray([p.steps_per_sec for p in preds], dtype=float)
    return per[inverse], ref[inverse]


def sync_terms(
    workload: Workload, compute: np.ndarray, cols: dict[str, np.ndarray], p: SyncParams, nodes: np.ndarray
) -> SyncTerms:
    """All-reduce terms of each row's shape with ``nodes`` nodes (the links of its GPU and node size)."""
    tier = workload.parallel.nic_tier
    keys = sorted({(str(a), int(b)) for a, b in zip(cols["gpu"], cols["gpus_per_node"], strict=True)})
    table = {k: node_links(k[0], k[1], tier) for k in keys}
    pick = [table[(str(a), int(b))] for a, b in zip(cols["gpu"], cols["gpus_per_node"], strict=True)]
    arr = lambda name: np.array([getattr(x, name) for x in pick], dtype=float)  # noqa: E731
    return sync_step(compute, workload.model.params, nodes, cols["gpus_per_node"], arr("intra_gbps"),
                     arr("nic_gbps"), arr("intra_latency_s"), arr("nic_latency_s"), p)  # fmt: skip


def node_prices(book: object, cols: dict[str, np.ndarray]) -> np.ndarray:
    """USD/h of one node (its GPUs together) per row; NaN where the book has no such node."""
    out = np.full(cols["gpu"].size, math.nan)
    cache: dict[tuple[str, int, str, str], float] = {}
    for i, key in enumerate(
        zip(cols["gpu"], cols["gpus_per_node"], cols["region"], cols["provisioning"], strict=True)
    ):
        k = (str(key[0]), int(key[1]), str(key[2]), str(key[3]))
        if k not in cache:
            try:
                cache[k] = float(book.node_price(*k).usd_per_hour)  # type: ignore[attr-defined]
            except KeyError:  # PriceNotFound: no such node in this book
                cache[k] = math.nan
        out[i] = cache[k]
    return out


class SyncShapeTable(ShapeTable):
    """A :class:`ShapeTable` of synchronous shapes: explained by compute vs exposed all-reduce; a row's band
    is the speed model's relative P10–P90 band of one worker of its GPU (the compute it rests on), applied to
    its steps/s; ``allreduce`` marks the all-reduce term as resting on link figures, not measurements.
    ``params``: the all-reduce knobs and calibration the rows were predicted with."""

    params: SyncParams | None = None

    def filter(self, mask: np.ndarray) -> SyncShapeTable:
        """A view keeping rows where ``mask`` is true (with the all-reduce knobs)."""
        out = super().filter(mask)
        out.params = self.params  # type: ignore[attr-defined]
        return out  # type: ignore[return-value]

    def explain(self, i: int) -> Explanation:
        c, t = self.columns, self.terms
        base, step = float(t["base"][i]), float(c["step_s"][i])
        seconds = {
            "compute": base * float(c["compute_s"][i]) / step,
            "ps": 0.0,
            "network": base * float(c["exposed_s"][i]) / step,
            "checkpoint": float(t["checkpoint"][i]),
            "revocation": float(t["revocation"][i]),
            "switch": float(t["switch"][i]) if "switch" in t else 0.0,
        }
        total = sum(seconds.values()) or 1.0
        shares = {k: v / total for k, v in seconds.items()}
        row = self.row(i)
        return Explanation(row, seconds, shares, max(shares, key=shares.get), str(row["bottleneck"]))

    def band(self, i: int) -> RowBand | None:
        if self.bander is None:
            return None
        b = self.bander(str(self.columns["gpu"][i]), 1, 1)
        if b is None:
            return None
        x, one = float(self.columns["steps_per_sec"][i]), float(self.columns["band_ref_sps"][i])
        extra = "allreduce" if b.extrapolation == "none" else b.extrapolation
        return RowBand(x * b.p10 / one, x * b.p90 / one, extra)


def rank_sync_shapes(
    workload: Workload,
    speed_model: SpeedModel,
    price_book: object,
    revocation_model: RevocationModel,
    objective: str = "balanced",
    overheads: Overheads | None = None,
    calibrated: SyncParams | None = None,
) -> SyncShapeTable:
    """Enumerate, estimate and rank synchronous shapes (see the module docstring)."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}")
    overheads = overheads or Overheads.load()
    rev = revocation_model.with_start_hour(workload.options.start_hour)
    cols = enumerate_sync(workload)
    usd = node_prices(price_book, cols)
    keep = np.isfinite(usd) | has_risk_curve(rev, cols["gpu"], cols["region"])
    keep[0] = True
    if not np.any(np.isfinite(usd)):
        cur = workload.current
        raise UnpricedShapeError(
            f"the price book prices neither {cur.gpu} nodes in {cur.region} nor any alternative"
        )
    cols, usd = {k: v[keep] for k, v in cols.items()}, usd[keep]
    p = sync_params(workload, calibrated)
    compute, band_ref = compute_seconds(speed_model, workload, cols["gpu"])
    full = sync_terms(workload, compute, cols, p, cols["nodes"])
    fewer = sync_terms(workload, compute, cols, p, np.maximum(cols["nodes"] - 1, 1))
    prices = PriceTable(price_book)
    egress = egress_usd(workload, cols, prices)
    # the target counts global steps of the current shape (its global batch): a shape of N GPUs trains the
    # same examples in N_cur / N as many of its own steps, so its speed in current-shape steps is v × N / N_cur
    gpus = (cols["nodes"] * cols["gpus_per_node"]).astype(float)
    per_cur = gpus / float(workload.current.workers)
    fewer_per_cur = np.maximum(gpus - cols["gpus_per_node"], 0) / float(workload.current.workers)
    v_cur = full.steps_per_sec * per_cur
    sc = SyncColumns(
        cols["gpu"],
        cols["region"],
        cols["provisioning"],
        cols["nodes"],
        v_cur,
        np.where(cols["nodes"] > 1, fewer.steps_per_sec * fewer_per_cur, 0.0),
        usd,
        egress,
        np.zeros(usd.size),
    )  # fmt: skip  (server starts: in the switching terms)
    run = run_settings(workload, overheads)
    stc = estimate_sync(sc, run, overheads, rev, workload.parallel.elastic)
    ckpt = interval_columns(stc.figures, run, write_seconds(run, overheads), v_cur,
                            lambda other: estimate_sync(sc, other, overheads, rev, workload.parallel.elastic).figures)  # fmt: skip
    sw = switching(workload, cols, v_cur, cols["nodes"] * usd, usd, overheads)
    stc = replace(stc, figures=with_switching(stc.figures, sw))
    risks = period_risks(rev, cols, stc.figures.seconds_expected / 3600.0, cols["nodes"])
    columns = {**_columns(workload, cols, full, stc, prices, egress), **sw.columns(), **ckpt,
               **band_columns(stc.figures.p_revocation, risks)}  # fmt: skip
    columns["band_ref_sps"] = band_ref
    tc = stc.figures
    terms = {
        "base": tc.seconds_base,
        "checkpoint": tc.seconds_checkpoint,
        "revocation": tc.seconds_revocation,
        "switch": sw.seconds,
    }
    columns, terms, order = finish_table(workload, columns, terms, objective)
    table = SyncShapeTable(columns, order, objective, terms, bander=_bander(workload, speed_model))
    table.params = p
    table.switch_basis = switch_basis(sw)
    table.risk_period_name, table.risk_period = rev.period_, rev.period_label()
    table.risk_labels = {name: p.label for name, p in rev.periods_.items()}
    table.risk_weights, table.risk_learned = rev.period_weights(), rev.learned()
    return table


def _bander(workload: Workload, model: SpeedModel) -> Bander | None:
    from cmdare.planner.risk_cost.ranking_notes import make_bander

    return make_bander(model, workload.model, workload.options.latency_ms)


def _columns(workload: Workload, cols: dict[str, np.ndarray], t: SyncTerms, stc: object, prices: PriceTable,
             egress: np.ndarray) -> dict[str, np.ndarray]:  # fmt: skip
    tc = stc.figures  # type: ignore[attr-defined]
    n = cols["gpu"].size
    bottleneck = np.where(
        t.comm_share >= 0.5, np.where(t.link == "nic", "network", "interconnect"), "compute"
    )
    return {
        "gpu": cols["gpu"],
        "workers": cols["nodes"] * cols["gpus_per_node"],
        "ps": np.zeros(n, dtype=int),
        "region": cols["region"],
        "provisioning": cols["provisioning"],
        "nodes": cols["nodes"],
        "gpus_per_node": cols["gpus_per_node"],
        "steps_per_sec": t.steps_per_sec,
        "bottleneck": bottleneck,
        "comm_share": t.comm_share,
        "compute_s": t.compute,
        "exposed_s": t.exposed,
        "step_s": t.step,
        "policy": stc.policy,  # type: ignore[attr-defined]
        **outcome_columns(workload, cols, tc, prices, egress),
    }
