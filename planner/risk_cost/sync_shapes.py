"""Rank synchronous all-reduce shapes: nodes × GPUs per node × GPU × region × provisioning (vectorised).

Same table, columns, bands and Pareto front as PS shapes (:mod:`~cmdare.planner.risk_cost.shapes`):
``workers`` is the number of GPUs in all, ``ps`` is 0, and three columns are added: ``nodes``,
``gpus_per_node``, ``comm_share`` (the exposed all-reduce's share of a step), ``policy`` (restart |
elastic, the cheaper per revocation: :mod:`~cmdare.planner.risk_cost.sync_time_cost`) and ``nic_gbps``.
``[target] steps`` are global steps of the current shape (a global batch of ``workers × batch_size``): a shape
of N GPUs trains the same examples in proportionally fewer (N > N_cur) or more of its own steps.
Speed: per-GPU compute without parameter-server terms (:mod:`cmdare.planner.speed.sync_compute`) plus the
wait for the slowest GPU and the exposed collective (:mod:`cmdare.planner.speed.allreduce`: DDP all-reduce,
ZeRO-1/2, or FSDP's all-gathers and reduce-scatter), calibrated by ``SyncParams`` when a live job measured it.
Memory: a shape whose per-GPU model states and activations exceed the GPU's memory
(:mod:`cmdare.planner.speed.memory_fit`) is never ranked; the current shape stays, marked infeasible, and
``memory_note`` says "does not fit: needs X GB a GPU, has Y".
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, Self

import numpy as np

from cmdare.planner.risk_cost.overheads import Overheads
from cmdare.planner.risk_cost.ranking_notes import Bander, RowBand
from cmdare.planner.risk_cost.revocation import RevocationModel
from cmdare.planner.risk_cost.shapes import (
    Explanation,
    ShapeTable,
    egress_usd,
    finished_table,
    kept_rows,
    outcome_columns,
    ranked_outcome,
    ranking_models,
    run_settings,
    worker_counts,
)
from cmdare.planner.risk_cost.sync_time_cost import SyncColumns, estimate_sync
from cmdare.planner.risk_cost.time_cost import PriceTable, TimeCost
from cmdare.planner.risk_cost.workload import Workload
from cmdare.planner.speed.allreduce import SyncParams, SyncTerms, sync_step
from cmdare.planner.speed.interconnect import NODE_SIZES, node_links
from cmdare.planner.speed.memory_fit import memory_need
from cmdare.planner.speed.speed_model import SpeedModel
from cmdare.planner.speed.sync_band import compute_spread, sync_band
from cmdare.planner.speed.sync_compute import sync_compute

if TYPE_CHECKING:
    from cmdare.collectors.pricing.book import PriceBook

GPUS_PER_NODE = NODE_SIZES


def sync_params(workload: Workload, calibrated: SyncParams | None = None) -> SyncParams:
    """The collective's knobs of a workload (bucket, compression, sharding, hop latency), with a live job's
    calibration scales."""
    par = workload.parallel
    base = calibrated or SyncParams()
    mixed_fsdp = par.sharding != "ddp" and par.precision == "fp16"  # ZeRO/FSDP move fp16/bf16: 2 B a value
    return replace(base, bucket_bytes=par.bucket_mb * 2**20, compression=par.compression, mode=par.sharding,
                   bytes_per_param=2.0 if mixed_fsdp else base.bytes_per_param,
                   hop_s=None if par.hop_us is None else par.hop_us * 1e-6)  # fmt: skip


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
    names = ("gpu", "gpus_per_node", "nodes", "region", "provisioning")
    return {name: np.asarray(c) for name, c in zip(names, zip(*rows, strict=True), strict=True)}


def compute_seconds(model: SpeedModel, workload: Workload, gpus: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(one GPU's compute seconds per step without PS terms, :func:`~cmdare.planner.speed.sync_compute.sync_compute`;
    the one-worker PS-shape steps/s the study networks' compute band is quoted around) per row."""
    net = workload.model
    names, inverse = np.unique(gpus.astype(str), return_inverse=True)
    lat = workload.options.latency_ms
    prec = workload.parallel.precision
    per = np.asarray([sync_compute(model, net, g, prec).seconds for g in names], dtype=float)
    ref = np.asarray([model.predict(net, {g: 1}, 1, lat).steps_per_sec for g in names], dtype=float)
    return per[inverse], ref[inverse]


def _anchored_on_running(
    workload: Workload, cols: dict[str, np.ndarray], live: bool
) -> tuple[Workload, str | None]:
    """A running job's shape fits (it runs): when the activation estimate says otherwise, its activations are
    capped at what the current shape has room for; when the model states alone exceed the GPU (the job shards in
    a way the workload does not say), (workload, note) with memory left unchecked."""
    par, m = workload.parallel, workload.model
    if not live or par.activation_gb is not None:
        return workload, None
    gpu, n = str(cols["gpu"][0]), int(cols["nodes"][0] * cols["gpus_per_node"][0])
    need = memory_need(m.params, gpu, n, par.sharding, par.precision, m.model_flops, None, par.recompute)
    if need.fits:
        return workload, None
    room = need.has_gb - need.states_gb
    if room <= 0:
        return (
            workload,
            f"not checked: the running job holds more than {par.sharding}'s states estimate allows",
        )
    return replace(workload, parallel=replace(par, activation_gb=room)), None


def memory_columns(workload: Workload, cols: dict[str, np.ndarray]) -> tuple[np.ndarray, list[str]]:
    """(fits?, verdict) per row: per-GPU model states and activations against the GPU's memory."""
    par, m = workload.parallel, workload.model
    cache: dict[tuple[str, int], tuple[bool, str]] = {}
    fits, words = [], []
    for gpu, n in zip(cols["gpu"].tolist(), (cols["nodes"] * cols["gpus_per_node"]).tolist(), strict=True):
        key = (str(gpu), int(n))
        if key not in cache:
            need = memory_need(m.params, key[0], key[1], par.sharding, par.precision, m.model_flops,
                               par.activation_gb, par.recompute)  # fmt: skip
            cache[key] = (need.fits, need.verdict())
        fits.append(cache[key][0])
        words.append(cache[key][1])
    return np.asarray(fits, dtype=bool), words


def sync_terms(
    workload: Workload, compute: np.ndarray, cols: dict[str, np.ndarray], p: SyncParams, nodes: np.ndarray
) -> SyncTerms:
    """All-reduce terms of each row's shape with ``nodes`` nodes (the links of its GPU and node size)."""
    tier = workload.parallel.nic_tier
    keys = sorted({(str(a), int(b)) for a, b in zip(cols["gpu"], cols["gpus_per_node"], strict=True)})
    table = {k: node_links(k[0], k[1], tier, transport=workload.parallel.transport) for k in keys}
    pick = [table[(str(a), int(b))] for a, b in zip(cols["gpu"], cols["gpus_per_node"], strict=True)]
    return sync_step(
        compute,
        workload.model.params,
        nodes,
        cols["gpus_per_node"],
        np.array([x.intra_bus_gbps for x in pick], dtype=float),
        np.array([x.nic_bus_gbps for x in pick], dtype=float),
        np.array([x.intra_latency_s for x in pick], dtype=float),
        np.array([x.nic_latency_s for x in pick], dtype=float),
        p,
    )


def node_prices(book: PriceBook, cols: dict[str, np.ndarray]) -> np.ndarray:
    """USD/h of one node (its GPUs together) per row; NaN where the book has no such node."""
    out = np.full(cols["gpu"].size, math.nan)
    cache: dict[tuple[str, int, str, str], float] = {}
    for i, key in enumerate(
        zip(cols["gpu"], cols["gpus_per_node"], cols["region"], cols["provisioning"], strict=True)
    ):
        k = (str(key[0]), int(key[1]), str(key[2]), str(key[3]))
        if k not in cache:
            try:
                cache[k] = float(book.node_price(*k).usd_per_hour)
            except KeyError:  # PriceNotFound: no such node in this book
                cache[k] = math.nan
        out[i] = cache[k]
    return out


class SyncShapeTable(ShapeTable):
    """A :class:`ShapeTable` of synchronous shapes: explained by compute vs the all-reduce call (exposed
    collective + wait for the slowest GPU); a row's band covers compute and scaling (:meth:`band`);
    ``allreduce`` marks a study network's row, ``network`` a FLOPs-based one. ``params``: the collective's knobs
    and calibration the rows were predicted with."""

    params: SyncParams | None = None
    memory_note: str = ""  # "current shape does not fit: …" / "N shapes left out: …"
    known_network: bool = False  # a network of the study: its compute band is the speed model's
    calibration_ranks: int = 0  # measuring ranks the live calibration rests on (0 = none: not calibrated)

    def filter(self, mask: np.ndarray) -> Self:
        """A view keeping rows where ``mask`` is true (with the all-reduce knobs)."""
        out = super().filter(mask)
        for name in ("params", "memory_note", "known_network", "calibration_ranks"):
            setattr(out, name, getattr(self, name))
        return out

    def explain(self, i: int) -> Explanation:
        c, t = self.columns, self.terms
        base, step = float(t["base"][i]), float(c["step_s"][i])
        seconds = {
            "compute": base * float(c["compute_s"][i]) / step,
            "ps": 0.0,
            "network": base * (float(c["exposed_s"][i]) + float(c["wait_s"][i])) / step,  # all-reduce call
            "checkpoint": float(t["checkpoint"][i]),
            "revocation": float(t["revocation"][i]),
            "switch": float(t["switch"][i]) if "switch" in t else 0.0,
        }
        total = sum(seconds.values()) or 1.0
        shares = {k: v / total for k, v in seconds.items()}
        row = self.row(i)
        return Explanation(row, seconds, shares, max(shares, key=lambda k: shares[k]), str(row["bottleneck"]))

    def band(self, i: int) -> RowBand | None:
        """Compute spread (the speed model's one-worker band for a study network, the published efficiencies'
        spread otherwise; none on the GPU a live job measured its compute on) plus the scaling residuals of
        published results (:func:`~cmdare.planner.speed.sync_band.sync_band`), narrowed by the live ranks."""
        c = self.columns
        x, gpus = float(c["steps_per_sec"][i]), int(c["workers"][i])
        # a live job measured its own GPU's compute; another GPU's is the model's ratio to it (its spread stays)
        measured = self.calibration_ranks > 0 and str(c["gpu"][i]) == str(c["gpu"][0])
        extra, c_band = "allreduce", None
        if not measured and self.known_network:
            b = self.bander(str(c["gpu"][i]), 1, 1) if self.bander is not None else None
            if b is None:
                return None
            one = float(c["band_ref_sps"][i])
            c_band = (math.log(b.p10 / one), math.log(b.p90 / one))
            extra = "allreduce" if b.extrapolation == "none" else b.extrapolation
        elif not measured:
            c_band, extra = compute_spread()[:2], "network"
        band = sync_band(c_band, gpus, self.calibration_ranks)
        return RowBand(x * band.low, x * band.high, extra)


def rank_sync_shapes(
    workload: Workload,
    speed_model: SpeedModel,
    price_book: PriceBook,
    revocation_model: RevocationModel,
    objective: str = "balanced",
    overheads: Overheads | None = None,
    calibrated: SyncParams | None = None,
    calibration_ranks: int = 0,
) -> SyncShapeTable:
    """Enumerate, estimate and rank synchronous shapes (see the module docstring): the ranking path of PS
    shapes (:func:`~cmdare.planner.risk_cost.shapes.ranked_outcome`), with nodes for workers and PSs."""
    overheads, rev = ranking_models(workload, revocation_model, objective, overheads)
    cols = enumerate_sync(workload)
    workload, live_memory = _anchored_on_running(workload, cols, calibrated is not None)
    fits, verdicts = memory_columns(workload, cols)
    if live_memory is not None:  # a running job's states alone exceed the estimate: its scheme is not DDP's
        fits[:] = True
    memory_note = live_memory or ("" if fits[0] else f"current shape {verdicts[0]}")
    left_out = int((~fits[1:]).sum())
    if left_out:
        memory_note = "; ".join(x for x in (memory_note, f"{left_out} shapes left out: the model does not fit "
                                            f"their GPUs ({verdicts[1:][int(np.argmin(fits[1:]))]})") if x)  # fmt: skip
    usd = node_prices(price_book, cols)
    cur = workload.current
    keep = kept_rows(rev, cols, priced=np.isfinite(usd), fits=fits,
                     unpriced=f"the price book prices neither {cur.gpu} nodes in {cur.region} nor any alternative")  # fmt: skip
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
        gpu=cols["gpu"],
        region=cols["region"],
        provisioning=cols["provisioning"],
        nodes=cols["nodes"],
        steps_per_sec=v_cur,
        degraded_steps_per_sec=np.where(cols["nodes"] > 1, fewer.steps_per_sec * fewer_per_cur, 0.0),
        node_usd_per_hour=usd,
        egress_usd=egress,
        started=np.zeros(usd.size),
    )  # fmt: skip  (server starts: in the switching terms)
    run = run_settings(workload, overheads)
    elastic = workload.parallel.elastic
    stc = estimate_sync(sc, run, overheads, rev, elastic)
    outcome = ranked_outcome(
        workload, cols, steps_per_sec=v_cur, hourly_usd=cols["nodes"] * usd, node_usd=usd,
        estimate_with=lambda other: estimate_sync(sc, other, overheads, rev, elastic).figures, run=run,
        overheads=overheads, rev=rev, units=cols["nodes"], figures=stc.figures,
    )  # fmt: skip
    columns = {
        **_columns(workload, cols, full, outcome.figures, stc.policy, prices, egress),
        **outcome.columns,
    }
    columns["band_ref_sps"] = band_ref
    columns["memory"] = np.asarray(verdicts, dtype=object)[keep].astype(str)
    table = finished_table(SyncShapeTable, workload, columns, outcome, prices=prices, rev=rev, objective=objective,
                           fits=fits[keep], bander=_bander(workload, speed_model))  # fmt: skip
    table.params = p
    table.memory_note = memory_note
    table.known_network = speed_model._resolve(workload.model).known is not None
    table.calibration_ranks = calibration_ranks
    return table


def _bander(workload: Workload, model: SpeedModel) -> Bander | None:
    from cmdare.planner.risk_cost.ranking_notes import make_bander

    return make_bander(model, workload.model, workload.options.latency_ms)


def _columns(workload: Workload, cols: dict[str, np.ndarray], t: SyncTerms, tc: TimeCost, policy: np.ndarray,
             prices: PriceTable, egress: np.ndarray) -> dict[str, np.ndarray]:  # fmt: skip
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
        "wait_s": t.straggler if t.straggler is not None else np.zeros(n),
        "step_s": t.step,
        "policy": policy,
        **outcome_columns(workload, cols, tc, prices, egress),
    }
