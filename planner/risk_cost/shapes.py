"""Enumerate and rank alternative cluster shapes (vectorised), with the Pareto front of (time, cost, risk).

Public API (what the CLI and the TUI Planner pane call)::

    table = rank_shapes(workload, speed_model, price_book, revocation_model, objective="balanced")
    table.current          # dict: the workload's current shape (reference row)
    table.top(10)          # list of row dicts, best first (feasible rows before infeasible ones)
    table.col("pareto")    # bool array over all rows: on the (time, cost, risk) Pareto front
    table.filter(table.col("p_revocation") < 0.1).top(5)
    table.delta(i)         # "−38% time, +12% cost, P(≥1 revocation) 0.21 → 0.05" against the current shape
    table.explain(i)       # Explanation: which terms dominate one row
    table.top()            # every row of the view as a dict (JSON-ready)
    table.ranked_row(i)    # RankedRow: row i typed, what the panes and reports render

Each row: gpu, workers, ps, region, provisioning, steps_per_sec, bottleneck, hours_expected, hours_p50,
hours_p90, cost_usd_expected, cost_usd_p50, cost_usd_p90, p_revocation, expected_revocations,
per_node_risk, pareto, feasible, score, price_source, price_as_of, price_date (the date of the prices, or
"price date unknown (derived …)"), also_provisioning (the spot/preemptible twin this row stands for),
egress_usd, region_note (what a region move implies).

A current shape the book cannot price stays in the table as row 0 with NaN costs ("price unknown");
the alternatives are still ranked (the objectives' reference cost is then the median priced row, which
leaves the ranking of every objective unchanged).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Self, TypeVar

import numpy as np

from cmdare.planner.risk_cost.checkpointing import interval_columns
from cmdare.planner.risk_cost.overheads import Overheads
from cmdare.planner.risk_cost.ranking_notes import (
    Bander,
    RowBand,
    collapse_twins,
    fold_regions,
    make_bander,
    price_date_label,
    region_notes,
)
from cmdare.planner.risk_cost.revocation import RevocationModel
from cmdare.planner.risk_cost.risk_periods import band_columns, period_risks
from cmdare.planner.risk_cost.switching import Switching, switching, with_switching, worth_switching
from cmdare.planner.risk_cost.time_cost import (
    PriceTable,
    RunSettings,
    ShapeColumns,
    TimeCost,
    estimate,
    write_seconds,
)
from cmdare.planner.risk_cost.workload import Workload
from cmdare.planner.speed.speed_model import SpeedModel

if TYPE_CHECKING:
    from cmdare.collectors.pricing.book import PriceBook

# One ranked shape as a JSON-ready dict: column name -> a number, a text or None (ShapeTable.row).
Row = dict[str, Any]

OBJECTIVES = ("time", "cost", "balanced")


class UnpricedShapeError(ValueError):
    """The price book prices neither the workload's current shape nor any alternative (an unpriced current
    shape alone is kept as "price unknown")."""


PARETO_CHUNK = 512


def pareto_mask(points: np.ndarray) -> np.ndarray:
    """Rows of ``points`` (n × d, all minimised; NaN = worst) not dominated by any other row.

    Duplicates are merged and the distinct rows sorted lexicographically (``np.unique``), so no later
    row can dominate an earlier one and "≤ in every column" already means "dominates"; one chunked
    pass then compares each chunk with the front found so far and with its own earlier rows."""
    pts = np.where(np.isnan(points), np.inf, np.asarray(points, dtype=float))
    uniq, inverse = np.unique(pts, axis=0, return_inverse=True)
    front = np.empty((0, uniq.shape[1]))
    on_front = np.zeros(len(uniq), dtype=bool)
    for start in range(0, len(uniq), PARETO_CHUNK):
        c = uniq[start : start + PARETO_CHUNK]
        inner = _le_all(c, c)
        inner &= np.tri(len(c), k=-1, dtype=bool)  # only earlier rows of the chunk
        dominated = inner.any(axis=1) | _le_all(c, front).any(axis=1)
        on_front[start : start + len(c)] = ~dominated
        front = np.vstack([front, c[~dominated]])
    return on_front[inverse.ravel()]


def _le_all(c: np.ndarray, f: np.ndarray) -> np.ndarray:
    """Matrix [i, j]: row j of ``f`` is ≤ row i of ``c`` in every column."""
    out = np.ones((len(c), len(f)), dtype=bool)
    for k in range(c.shape[1]):
        out &= f[None, :, k] <= c[:, None, k]
    return out


EVERY_WORKER_UP_TO = 32  # every worker count up to here; beyond it, steps of ~WORKER_STEP
WORKER_STEP = 1.1


def worker_counts(max_workers: int, current: int) -> np.ndarray:
    """1..32 every count, then about 10% apart up to ``max_workers`` (and the current count): a
    200-worker job gets ~60 candidate sizes instead of 400, with the same resolution near now."""
    dense = np.arange(1, min(max_workers, EVERY_WORKER_UP_TO) + 1)
    sparse: list[int] = []
    n = float(EVERY_WORKER_UP_TO)
    while n < max_workers:
        n *= WORKER_STEP
        sparse.append(min(int(round(n)), max_workers))
    extra = [current] if 1 <= current <= max_workers else []
    return np.unique(np.concatenate([dense, np.array(sparse + extra, dtype=int)])).astype(int)


EVERY_PS_UP_TO = 16  # every PS count up to here; beyond it, steps of ~PS_STEP
PS_STEP = 1.25


def ps_counts(max_ps: int, current: int) -> np.ndarray:
    """1..16 every count, then about 25% apart up to ``max_ps`` (and the current count): the PS counts the
    planner tries. A source that announces 2,500 parameter servers gets 40 candidate counts, not 2,500
    (each count multiplies every GPU × workers × region × provisioning row)."""
    dense = np.arange(1, min(max_ps, EVERY_PS_UP_TO) + 1)
    sparse: list[int] = []
    n = float(EVERY_PS_UP_TO)
    while n < max_ps:
        n *= PS_STEP
        sparse.append(min(int(round(n)), max_ps))
    extra = [current] if 1 <= current <= max_ps else []
    return np.unique(np.concatenate([dense, np.array(sparse + extra, dtype=int)])).astype(int)


def ps_search_note(max_ps: int) -> str:
    """What :func:`ps_counts` left out, in words ("" when it tried every count up to ``max_ps``)."""
    if max_ps <= EVERY_PS_UP_TO:
        return ""
    return (
        f"PS counts tried: 1–{EVERY_PS_UP_TO}, then about {PS_STEP - 1:.0%} apart up to {max_ps:,} "
        f"and the current count (not every count)"
    )


def enumerate_shapes(workload: Workload) -> dict[str, np.ndarray]:
    """All gpu × workers (see :func:`worker_counts`) × ps (see :func:`ps_counts`) × region × provisioning,
    current shape first."""
    a, cur = workload.allowed, workload.current
    g, w, p, r, v = np.meshgrid(
        np.arange(len(a.gpus)), worker_counts(a.max_workers, cur.workers), ps_counts(a.max_ps, cur.ps),
        np.arange(len(a.regions)), np.arange(len(a.provisionings)), indexing="ij",
    )  # fmt: skip
    cols = {
        "gpu": np.asarray(a.gpus)[g.ravel()],
        "workers": w.ravel(),
        "ps": p.ravel(),
        "region": np.asarray(a.regions)[r.ravel()],
        "provisioning": np.asarray(a.provisionings)[v.ravel()],
    }
    is_cur = (
        (cols["gpu"] == cur.gpu) & (cols["workers"] == cur.workers) & (cols["ps"] == cur.ps)
        & (cols["region"] == cur.region) & (cols["provisioning"] == cur.provisioning)
    )  # fmt: skip
    order = np.concatenate([np.nonzero(is_cur)[0], np.nonzero(~is_cur)[0]])
    return {k: c[order] for k, c in cols.items()}


@dataclass(frozen=True)
class Explanation:
    """Where one row's time goes (seconds per run) and its dominant term."""

    row: Row
    seconds: dict[str, float]  # compute, ps, network, checkpoint, revocation
    shares: dict[str, float]  # fraction of expected time
    dominant: str
    bottleneck: str

    def text(self) -> str:
        """One consistent statement: the largest time share when it is also what limits the speed, else
        what limits the speed (the speed model's regime) followed by where the time goes."""
        parts = ", ".join(
            f"{k} {self.shares[k]:.0%}"
            for k in sorted(self.shares, key=lambda k: self.shares[k], reverse=True)
        )
        if self.bottleneck in ("", self.dominant):
            return f"bottleneck: {self.dominant} (time: {parts})"
        return f"speed limited by {self.bottleneck} (speed model); time: {parts}"


@dataclass(frozen=True, kw_only=True)
class RankedRow:
    """One ranked shape, typed: what the panes, ``snapshot`` and the export render of a row (the columns of
    the same names, rounded as :meth:`ShapeTable.row`). Time in hours, cost in USD (None: the book has no
    price for it), speed in steps/s. ``region_note`` says what a move to another region implies ("" when
    the shape stays); ``also_provisioning`` the spot/preemptible twin the row stands for. A synchronous
    (all-reduce) shape has ``nodes`` × ``gpus_per_node``, ``comm_share`` and ``policy``; a PS shape None."""

    gpu: str
    workers: int
    ps: int
    region: str
    provisioning: str
    steps_per_sec: float
    bottleneck: str
    hours_p50: float
    hours_p90: float
    cost_usd_p50: float | None
    cost_usd_p90: float | None
    p_revocation: float
    expected_revocations: float
    price_source: str
    price_as_of: str
    price_date: str
    region_note: str
    also_provisioning: str
    pareto: bool
    nodes: int | None = None
    gpus_per_node: int | None = None
    comm_share: float | None = None
    policy: str | None = None

    @property
    def sync(self) -> bool:
        """True for a synchronous all-reduce shape (nodes × GPUs per node, no PS)."""
        return self.nodes is not None

    @property
    def shape(self) -> str:
        """``8×P100·1PS``; a synchronous shape: nodes × GPUs per node × GPU, ``4×2×T4``."""
        if self.sync:
            return f"{self.nodes}×{self.gpus_per_node}×{self.gpu}"
        return f"{self.workers}×{self.gpu}·{self.ps}PS"


_RANKED_REQUIRED = tuple(f.name for f in fields(RankedRow) if f.default is not None)
_RANKED_SYNC = tuple(f.name for f in fields(RankedRow) if f.default is None)


class ShapeTable:
    """Ranked shapes as numpy columns; row 0 of the underlying arrays is the current shape.

    ``order`` is the ranking (indices into the columns); ``view`` the rows currently shown (after
    :meth:`filter`)."""

    def __init__(self, columns: dict[str, np.ndarray], order: np.ndarray, objective: str,
                 terms: dict[str, np.ndarray], view: np.ndarray | None = None,
                 explainer: Callable[[Row], dict[str, float]] | None = None,
                 bander: Bander | None = None) -> None:  # fmt: skip
        self.columns = columns
        self.explainer = explainer
        self.bander = bander
        self.switch_basis: dict[str, str] = {}  # where the switching terms come from (rank_shapes sets it)
        self.risk_period_name = ""  # the lifetime period the headline P(≥1 revocation) comes from
        self.risk_period = "published fit"  # … in words
        self.risk_labels: dict[str, str] = {}  # every period's name → its words
        self.risk_weights: dict[str, float] = {}  # period → how well it explains the cluster's own lifetimes
        self.risk_learned = 0  # lifetimes of this cluster learned from
        self.order = order
        self.objective = objective
        self.terms = terms
        self.view = order if view is None else view

    def __len__(self) -> int:
        return int(self.view.size)

    def col(self, name: str) -> np.ndarray:
        """A column over all rows (index with :attr:`view` for the shown order)."""
        return self.columns[name]

    @property
    def current(self) -> Row:
        return self.row(0)

    def row(self, i: int) -> Row:
        """Row ``i`` (index into the columns) as a JSON-ready dict."""
        out: Row = {}
        for k, c in self.columns.items():
            v = c[i]
            out[k] = v.item() if hasattr(v, "item") else v
        for k in ("hours_expected", "hours_p50", "hours_p90"):
            out[k] = round(float(out[k]), 4)
        for k in ("cost_usd_expected", "cost_usd_p50", "cost_usd_p90", "steps_per_sec", "score"):
            out[k] = round(float(out[k]), 4)
        for k in ("p_revocation", "expected_revocations", "per_node_risk", "egress_usd", "p_revocation_low",
                  "p_revocation_high", "switch_usd", "ckpt_saves_usd"):  # fmt: skip
            if k in out:
                out[k] = round(float(out[k]), 4)
        for k in ("switch_s", "switch_start_s", "switch_restart_s", "switch_redo_s", "switch_copy_s",
                  "ckpt_interval_s", "ckpt_optimal_s", "ckpt_mtbf_s", "ckpt_write_s", "ckpt_saves_s"):  # fmt: skip
            if k in out:
                out[k] = round(float(out[k]), 2)
        for k, v in out.items():  # an unpriced current shape: "price unknown", not NaN (invalid JSON)
            if isinstance(v, float) and not np.isfinite(v):
                out[k] = None
        return out

    def ranked_row(self, i: int) -> RankedRow:
        """Row ``i`` typed (a column renamed without its reader fails here, in the planner)."""
        r = self.row(i)
        sync: Row = {k: r.get(k) for k in _RANKED_SYNC}  # None on a PS shape's row
        return RankedRow(**{k: r[k] for k in _RANKED_REQUIRED}, **sync)

    def top(self, n: int | None = None) -> list[Row]:
        """The first ``n`` rows of the current view (all when ``n`` is None)."""
        idx = self.view if n is None else self.view[:n]
        return [self.row(int(i)) for i in idx]

    def filter(self, mask: np.ndarray) -> Self:
        """A view keeping rows where ``mask`` (over all rows) is true."""
        out = type(self)(
            self.columns,
            self.order,
            self.objective,
            self.terms,
            self.view[mask[self.view]],
            self.explainer,
            self.bander,
        )
        out.switch_basis = self.switch_basis
        out.risk_period_name, out.risk_period = self.risk_period_name, self.risk_period
        out.risk_labels, out.risk_weights, out.risk_learned = (
            self.risk_labels,
            self.risk_weights,
            self.risk_learned,
        )
        return out

    def members(self, i: int) -> list[int]:
        """Rows folded into row ``i`` (identical but for the region), best-ranked first; [] when none."""
        rep = self.columns.get("folded_into")
        if rep is None:
            return []
        idx = np.flatnonzero((rep == i) & (np.arange(rep.size) != i))
        return [int(x) for x in idx]

    def switch_terms(self, i: int) -> list[tuple[str, float, str]]:
        """Row ``i``'s switching terms: (name, seconds, source) — what moving the job there costs in time (a
        region move's dataset copy runs while the servers start: ∥)."""
        c = self.columns
        if "switch_s" not in c or i == 0:
            return []
        b = self.switch_basis
        kind = str(c["switch_kind"][i])
        copy = float(c["switch_copy_s"][i]) > 0
        start = (
            "request (start + join)" if kind == "scale" else "server start" + (" ∥ data copy" if copy else "")
        )
        out = [
            (start, float(c["switch_start_s"][i]), b.get("request" if kind == "scale" else "start", "")),
            ("restart, " + ("warm (elastic)" if kind == "elastic" else "cold"), float(c["switch_restart_s"][i]),
             b.get("restart", "")),
            ("redo since checkpoint", float(c["switch_redo_s"][i]), b.get("redo", "")),
        ]  # fmt: skip
        if copy:
            out.append(("dataset copy", float(c["switch_copy_s"][i]), b.get("copy", "")))
        return out

    def risk_cell(self, i: int) -> str:
        """Row ``i``'s P(≥1 revocation) as a band across the lifetime periods, ``0.20–0.53`` (9 characters), or
        one figure when the periods agree (to 0.01) or the table has no periods."""
        c = self.columns
        if "p_revocation_low" not in c:
            return f"{float(c['p_revocation'][i]):.2f}"
        lo, hi = float(c["p_revocation_low"][i]), float(c["p_revocation_high"][i])
        return f"{lo:.2f}" if round(hi, 2) == round(lo, 2) else f"{lo:.2f}–{hi:.2f}"

    def risk_words(self, i: int) -> str:
        """'P(≥1 revocation) 0.53 (CM-DARE (ICDCS 2020)); fitted on other periods: Feb 2019 (…) 0.20' — which
        period the headline figure comes from, the others', and the period the cluster's own lifetimes favour."""
        c = self.columns
        main = f"P(≥1 revocation) {float(c['p_revocation'][i]):.2f} ({self.risk_period})"
        per = c["p_revocation_periods"][i] if "p_revocation_periods" in c else {}
        others = [
            f"{self.risk_labels.get(k, k)} {v:.2f}" for k, v in per.items() if k != self.risk_period_name
        ]
        words = main + ("; fitted on other periods: " + ", ".join(others) if others else "")
        if self.risk_weights:  # the cluster's own lifetimes: which period they resemble
            best = max(self.risk_weights, key=lambda k: self.risk_weights[k])
            words += (f"; this cluster's {self.risk_learned} lifetimes favour {self.risk_labels.get(best, best)} "
                      f"({self.risk_weights[best]:.0%}) and scale every period's hazard")  # fmt: skip
        return words

    def checkpoint_words(self, i: int) -> str:
        """'checkpoint every 4m45s (optimum): saves 14s, $0.01 against every 10m00s' — the interval that
        minimises row ``i``'s expected time (:mod:`~cmdare.planner.risk_cost.checkpointing`); '' without it."""
        c = self.columns
        if "ckpt_optimal_s" not in c:
            return ""
        tau, now = float(c["ckpt_optimal_s"][i]), float(c["ckpt_interval_s"][i])
        if not np.isfinite(tau):
            return "checkpoints: never revoked (no optimum from revocations)"
        saves_s, saves_usd = float(c["ckpt_saves_s"][i]), float(c["ckpt_saves_usd"][i])
        money = f", ${saves_usd:.2f}" if np.isfinite(saves_usd) else ""
        return (
            f"checkpoint every {_dur(tau)} (optimum): saves {_dur(saves_s)}{money} against every {_dur(now)}"
        )

    def egress_words(self, i: int) -> str:
        """'$3.00 for the dataset's copy at $0.02/GB (…)' for a region move with a stated dataset, else ''."""
        usd = float(self.columns["egress_usd"][i]) if "egress_usd" in self.columns else 0.0
        if not usd > 0 or i == 0:
            return ""
        return f"${usd:.2f} for the dataset's copy at {self.switch_basis.get('egress', 'the egress rate')}"

    def switch_words(self, i: int) -> str:
        """'switch 4m10s, $0.31 (restart)' or, for a row below "stay", 'not worth switching: saves …,
        switching costs …'; 'stay' for the current shape."""
        c = self.columns
        if i == 0:
            return "stay (the current shape)"
        if "switch_s" not in c:
            return ""
        sw_s, sw_usd = float(c["switch_s"][i]), float(c["switch_usd"][i])
        money = f", ${sw_usd:.2f}" if np.isfinite(sw_usd) else ""
        cost = f"switch {_dur(sw_s)}{money} ({c['switch_kind'][i]})"
        if bool(c["worth_switching"][i]):
            return cost
        saved_s = (float(c["hours_p50"][0]) - float(c["hours_p50"][i])) * 3600.0 + sw_s
        c0, c1 = float(c["cost_usd_p50"][0]), float(c["cost_usd_p50"][i])
        priced = np.isfinite(c0) and np.isfinite(c1)
        if self.objective == "cost" and priced:
            saved = f"saves ${max(c0 - c1 + sw_usd, 0.0):.2f} of training"
        elif self.objective == "balanced" and priced:
            saved = f"time × cost {float(c['score'][i]) / float(c['score'][0]):.2f} of staying's with it"
        else:
            saved = f"saves {_dur(max(saved_s, 0.0))} of training"
        return f"not worth switching: {saved}; {cost}"

    def band(self, i: int) -> RowBand | None:
        """Row ``i``'s P10–P90 steps/s and extrapolation, or None without the speed model's band API."""
        if self.bander is None:
            return None
        c = self.columns
        return self.bander(str(c["gpu"][i]), int(c["workers"][i]), int(c["ps"][i]))

    @property
    def search_note(self) -> str:
        """Which PS counts the ranking tried, when not every one up to the largest (a job with many PSs)."""
        ps = self.columns.get("ps")
        return "" if ps is None or not ps.size else ps_search_note(int(np.max(ps)))

    @property
    def current_priced(self) -> bool:
        """False when the price book has no price for the current shape (row 0: "price unknown")."""
        return bool(np.isfinite(self.columns["cost_usd_p50"][0]))

    def delta(self, i: int) -> str:
        """Change of row ``i`` against the current shape, e.g. "−38% time, +12% cost,
        P(≥1 revocation) 0.21 → 0.05"; "cost vs current n/a" when the current shape has no price."""
        c = self.columns
        dt = c["hours_p50"][i] / max(c["hours_p50"][0], 1e-12) - 1

        def sign(x: float) -> str:
            return ("+" if x >= 0 else "−") + f"{abs(x):.0%}"

        if self.current_priced and np.isfinite(c["cost_usd_p50"][i]):
            cost = f"{sign(c['cost_usd_p50'][i] / max(c['cost_usd_p50'][0], 1e-12) - 1)} cost"
        else:
            cost = "cost n/a (current price unknown)"
        p0, p1 = c["p_revocation"][0], c["p_revocation"][i]
        return f"{sign(dt)} time, {cost}, P(≥1 revocation) {p0:.2f} → {p1:.2f}"

    def explain(self, i: int) -> Explanation:
        """Which terms dominate row ``i``: compute, PS, network (the speed model's per-step terms,
        scaled to the run's base time; PS saturation counted as PS), checkpointing, revocation overhead."""
        if self.explainer is None:
            raise ValueError("this table has no speed model to explain rows with")
        row = self.row(i)
        terms = self.explainer(row)
        rate = float(self.columns["workers"][i]) / sum(terms.values())  # unsaturated cluster steps/s
        base = float(self.terms["base"][i])
        unsaturated = base * float(self.columns["steps_per_sec"][i]) / rate
        step = sum(terms.values())
        seconds = {
            k: unsaturated * terms[src] / step
            for k, src in (("compute", "compute"), ("ps", "ps"), ("network", "latency"))
        }
        seconds["ps"] += max(base - unsaturated, 0.0)
        seconds["checkpoint"] = float(self.terms["checkpoint"][i])
        seconds["revocation"] = float(self.terms["revocation"][i])
        seconds["switch"] = float(self.terms["switch"][i]) if "switch" in self.terms else 0.0
        total = sum(seconds.values()) or 1.0
        shares = {k: v / total for k, v in seconds.items()}
        return Explanation(row, seconds, shares, max(shares, key=lambda k: shares[k]), str(row["bottleneck"]))


def rank_shapes(
    workload: Workload,
    speed_model: SpeedModel,
    price_book: PriceBook,
    revocation_model: RevocationModel,
    objective: str = "balanced",
    overheads: Overheads | None = None,
    shapes: dict[str, np.ndarray] | None = None,
) -> ShapeTable:
    """Enumerate (or take ``shapes``), estimate and rank every shape. ``objective``: time | cost | balanced
    (product of P50 time and P50 cost). Shapes without a price are dropped, except the current shape:
    it stays as row 0 with NaN costs ("price unknown") and the alternatives are still ranked. Spot and
    preemptible twins of equal price and risk are one row (:func:`collapse_twins`)."""
    overheads, rev = ranking_models(workload, revocation_model, objective, overheads)
    cols = shapes if shapes is not None else enumerate_shapes(workload)
    prices = PriceTable(price_book)
    w_usd, ps_usd = prices.lookup(
        cols["gpu"], cols["region"], cols["provisioning"], workload.allowed.ps_provisioning
    )
    cur = workload.current
    keep = kept_rows(rev, cols, priced=np.isfinite(w_usd) & np.isfinite(ps_usd),
                     unpriced=f"the {prices.source} price book ({prices.as_of}) prices neither the current shape "
                     f"{cur.gpu} in {cur.region} ({cur.provisioning}) nor any alternative")  # fmt: skip
    cols = {k: v[keep] for k, v in cols.items()}
    w_usd, ps_usd = w_usd[keep], ps_usd[keep]
    speed = _speeds(workload, speed_model, cols)
    shape_cols = _shape_columns(workload, cols, speed, w_usd, ps_usd, prices)
    run = run_settings(workload, overheads)
    outcome = ranked_outcome(
        workload, cols, steps_per_sec=speed["steps_per_sec"], hourly_usd=cols["workers"] * w_usd + cols["ps"] * ps_usd,
        node_usd=w_usd, estimate_with=lambda other: estimate(shape_cols, other, overheads, rev), run=run,
        overheads=overheads, rev=rev, units=cols["workers"], ps=cols["ps"],
    )  # fmt: skip
    columns = {**_result_columns(workload, cols, speed, outcome.figures, prices), **outcome.columns}
    bander = make_bander(speed_model, workload.model, workload.options.latency_ms)
    return finished_table(ShapeTable, workload, columns, outcome, prices=prices, rev=rev, objective=objective,
                          explainer=_explainer(workload, speed_model), bander=bander)  # fmt: skip


def ranking_models(
    workload: Workload, revocation_model: RevocationModel, objective: str, overheads: Overheads | None
) -> tuple[Overheads, RevocationModel]:
    """What every ranking (PS or synchronous) estimates with: the measured overheads, and the revocation
    model from the workload's start hour. Raises ValueError for an objective it does not know."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}")
    return overheads or Overheads.load(), revocation_model.with_start_hour(workload.options.start_hour)


def kept_rows(
    rev: RevocationModel, cols: dict[str, np.ndarray], *, priced: np.ndarray, unpriced: str,
    fits: np.ndarray | None = None,
) -> np.ndarray:  # fmt: skip
    """The rows a ranking keeps: priced, or with a fitted risk curve (ranked with "price unknown"), and
    fitting (``fits``: None, all); the current shape (row 0) always, priced or not (its costs are then NaN).
    Raises :class:`UnpricedShapeError` (``unpriced``) when the book prices no row at all."""
    keep: np.ndarray = (priced | has_risk_curve(rev, cols["gpu"], cols["region"])) & (
        True if fits is None else fits
    )
    keep[0] = True
    if not np.any(priced):
        raise UnpricedShapeError(unpriced)
    return keep


@dataclass(frozen=True)
class RankedOutcome:
    """A ranking's figures once estimated: time and cost with switching in, the switching terms, and the
    columns they add (switching, checkpoint interval, risk by period)."""

    figures: TimeCost
    switching: Switching
    columns: dict[str, np.ndarray]


def ranked_outcome(
    workload: Workload,
    cols: dict[str, np.ndarray],
    *,
    steps_per_sec: np.ndarray,
    hourly_usd: np.ndarray,
    node_usd: np.ndarray,
    estimate_with: Callable[[RunSettings], TimeCost],
    run: RunSettings,
    overheads: Overheads,
    rev: RevocationModel,
    units: np.ndarray,
    ps: np.ndarray | None = None,
    figures: TimeCost | None = None,
) -> RankedOutcome:
    """The one path from shapes to figures, PS or synchronous: estimate (``figures`` when already made
    with ``run``), the checkpoint interval's columns, the switching terms, and the risk by period of
    ``units`` (workers of a PS shape, with its ``ps``; nodes of a synchronous one)."""
    tc = figures if figures is not None else estimate_with(run)
    ckpt = interval_columns(tc, run, write_seconds(run, overheads), steps_per_sec, estimate_with)
    sw = switching(workload, cols, steps_per_sec, hourly_usd, node_usd, overheads)
    tc = with_switching(tc, sw)
    risks = period_risks(rev, cols, tc.seconds_expected / 3600.0, units, ps, workload.allowed.ps_provisioning)
    return RankedOutcome(tc, sw, {**sw.columns(), **ckpt, **band_columns(tc.p_revocation, risks)})


TableT = TypeVar("TableT", bound="ShapeTable")


def finished_table(
    table_type: type[TableT], workload: Workload, columns: dict[str, np.ndarray], outcome: RankedOutcome,
    *, prices: PriceTable, rev: RevocationModel, objective: str, fits: np.ndarray | None = None,
    explainer: Callable[[dict[str, object]], dict[str, float]] | None = None, bander: Bander | None = None,
) -> TableT:  # fmt: skip
    """The ranked table of ``table_type`` (:class:`ShapeTable` or a synchronous one) over ``columns``, ordered
    by :func:`finish_table`, with where its switching terms and risk periods come from."""
    tc = outcome.figures
    terms = {
        "base": tc.seconds_base,
        "checkpoint": tc.seconds_checkpoint,
        "revocation": tc.seconds_revocation,
        "switch": outcome.switching.seconds,
    }
    columns, terms, order = finish_table(workload, columns, terms, objective, fits)
    table = table_type(columns, order, objective, terms, explainer=explainer, bander=bander)
    table.switch_basis = switch_basis(outcome.switching, prices)
    table.risk_period_name, table.risk_period = rev.period_, rev.period_label()
    table.risk_labels = {name: p.label for name, p in rev.periods_.items()}
    table.risk_weights, table.risk_learned = rev.period_weights(), rev.learned()
    return table


def _dur(seconds: float) -> str:
    s = max(int(round(seconds)), 0)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def has_risk_curve(rev: RevocationModel, gpu: np.ndarray, region: np.ndarray) -> np.ndarray:
    """Per row: the revocation model has a curve fitted for this GPU in this region (such a shape is ranked
    with "price unknown" when the book has no price for it, never dropped)."""
    keys = np.char.add(np.char.add(gpu.astype(str), "/"), region.astype(str))
    uniq, inverse = np.unique(keys, return_inverse=True)
    return np.array([k in rev.curves_ for k in uniq], dtype=bool)[inverse.ravel()]


def switch_basis(sw: Switching, prices: PriceTable) -> dict[str, str]:
    """Where the switching terms come from, for the explanation (``egress``: the rate a move's dataset copy
    is priced at; the price books carry node prices only, so it is the cited default)."""
    rate = f"${prices.egress_usd_per_gb:g}/GB (GCP inter-region within a continent, background.md §2)"
    return {
        "egress": rate,
        "redo": sw.redo_basis,
        "copy": f"{sw.copy.gbps:g} Gbit/s, {sw.copy.source}",
        "start": "CM-DARE server start-up, overheads.json server_start_s (data/processed_data/startup_time)",
        "restart": "CM-DARE TensorFlow restart, overheads.json framework_restart_s (tf_restart_cold_warm_seconds.csv)",
        "request": "CM-DARE server start + replacement join, overheads.json (startup_time, "
        "replacement_worker_join_time_seconds.csv); the study's time-to-finish estimator",
    }


def finish_table(workload: Workload, columns: dict[str, np.ndarray], terms: dict[str, np.ndarray],
                 objective: str, fits: np.ndarray | None = None,
                 ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], np.ndarray]:  # fmt: skip
    """What every ranked table (PS or synchronous) does once its figures are in: feasibility, score, whether a
    switch pays, spot/preemptible twins collapsed, the Pareto front, the order, and rows identical but for the
    region folded into one (the others stay in the columns, out of the order). Returns (columns, terms,
    order). ``fits``: rows whose model fits the GPUs' memory (others are infeasible; None: all fit)."""
    columns["feasible"] = feasible_rows(workload, columns) & (True if fits is None else fits)
    columns["score"] = score_rows(columns, objective)
    columns["worth_switching"] = worth_switching(columns)
    twins, alias = collapse_twins(columns)
    columns["also_provisioning"] = alias
    columns = {k: v[twins] for k, v in columns.items()}
    terms = {k: v[twins] for k, v in terms.items()}
    columns["pareto"] = pareto_mask(
        np.column_stack([columns["hours_p50"], columns["cost_usd_p50"], columns["p_revocation"]])
    )
    unpriced = ~np.isfinite(columns["cost_usd_p50"].astype(float))
    later = unpriced if objective != "time" else np.zeros_like(unpriced)
    order = np.lexsort((columns["score"], later, ~columns["feasible"]))
    rep, regions = fold_regions(columns, order)
    columns["folded_into"] = rep
    columns["regions"] = regions
    order = order[rep[order] == order]
    return columns, terms, order


def _explainer(workload: Workload, model: SpeedModel) -> Callable[[Row], dict[str, float]]:
    net = workload.model

    def terms(row: Row) -> dict[str, float]:
        pred = model.predict(
            net, {str(row["gpu"]): int(row["workers"])}, int(row["ps"]), workload.options.latency_ms
        )
        return {k: float(pred.terms.get(k, 0.0)) for k in ("compute", "ps", "latency")}

    return terms


def _speeds(workload: Workload, model: SpeedModel, cols: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    net = workload.model
    lat = workload.options.latency_ms
    full = model.predict_shapes(net, cols["gpu"], cols["workers"], cols["ps"], latency_ms=lat)
    fewer = np.maximum(cols["workers"] - 1, 1)
    degraded = model.predict_shapes(net, cols["gpu"], fewer, cols["ps"], latency_ms=lat)["steps_per_sec"]
    degraded = np.where(cols["workers"] > 1, degraded, 0.0)
    return {"steps_per_sec": full["steps_per_sec"], "degraded": degraded, "bottleneck": full["bottleneck"]}


def run_settings(workload: Workload, overheads: Overheads) -> RunSettings:
    """The run settings of a workload: its checkpoint size (given, or estimated from its parameters) and
    the measured recovery overheads."""
    ckpt = workload.model.checkpoint_mb or overheads.checkpoint_mb(workload.model.params)
    return RunSettings(
        steps=float(workload.target.steps),
        checkpoint_interval_steps=workload.options.checkpoint_interval_steps,
        checkpoint_interval_s=workload.options.checkpoint_interval_s,
        checkpoint_mb=ckpt,
        ps_provisioning=workload.allowed.ps_provisioning,
        warm_restart=workload.options.warm_restart,
        checkpoint_write_s=workload.options.checkpoint_write_s,
    )


def egress_usd(workload: Workload, cols: dict[str, np.ndarray], prices: PriceTable) -> np.ndarray:
    """USD of copying the dataset (``dataset_gb``, once: a move copies it before training there,
    :mod:`~cmdare.planner.risk_cost.switching`) from ``data_region`` — by default the current shape's region,
    where the data lives now — into each shape's region."""
    o = workload.options
    cross = cols["region"] != (o.data_region or workload.current.region)
    return np.where(cross, o.dataset_gb * prices.egress_usd_per_gb, 0.0)


def _shape_columns(workload: Workload, cols: dict[str, np.ndarray], speed: dict[str, np.ndarray],
                   w_usd: np.ndarray, ps_usd: np.ndarray, prices: PriceTable) -> ShapeColumns:  # fmt: skip
    egress = egress_usd(workload, cols, prices)
    return ShapeColumns(
        gpu=cols["gpu"],
        region=cols["region"],
        provisioning=cols["provisioning"],
        workers=cols["workers"],
        ps=cols["ps"],
        steps_per_sec=speed["steps_per_sec"],
        degraded_steps_per_sec=speed["degraded"],
        worker_usd_per_hour=w_usd,
        ps_usd_per_hour=ps_usd,
        egress_usd=egress,
        started=np.zeros(cols["gpu"].size),
    )  # fmt: skip  (server starts: in the switching terms)


def _result_columns(workload: Workload, cols: dict[str, np.ndarray], speed: dict[str, np.ndarray],
                    tc: TimeCost, prices: PriceTable) -> dict[str, np.ndarray]:  # fmt: skip
    return {
        **cols,
        "steps_per_sec": speed["steps_per_sec"],
        "bottleneck": speed["bottleneck"],
        **outcome_columns(workload, cols, tc, prices, egress_usd(workload, cols, prices)),
    }


def outcome_columns(workload: Workload, cols: dict[str, np.ndarray], tc: TimeCost, prices: PriceTable,
                    egress: np.ndarray) -> dict[str, np.ndarray]:  # fmt: skip
    """The time, cost, risk and price columns every ranked table (PS or synchronous) carries."""
    n = cols["gpu"].size
    return {
        "hours_expected": tc.seconds_expected / 3600.0,
        "hours_p50": tc.seconds_p50 / 3600.0,
        "hours_p90": tc.seconds_p90 / 3600.0,
        "cost_usd_expected": tc.cost_expected,
        "cost_usd_p50": tc.cost_p50,
        "cost_usd_p90": tc.cost_p90,
        "p_revocation": tc.p_revocation,
        "expected_revocations": tc.expected_revocations,
        "per_node_risk": tc.per_node_risk,
        "price_source": np.full(n, prices.source),
        "price_as_of": np.full(n, prices.as_of),
        "price_date": np.full(n, price_date_label(prices.book), dtype=object),
        "egress_usd": egress,
        "region_note": region_notes(
            cols["region"],
            workload.current.region,
            workload.options.data_region,
            workload.options.dataset_gb,
            egress,
        ),
    }


def feasible_rows(workload: Workload, c: dict[str, np.ndarray]) -> np.ndarray:
    ok = np.ones(c["gpu"].size, dtype=bool)
    if workload.target.deadline_hours is not None:
        ok &= c["hours_p90"] <= workload.target.deadline_hours
    if workload.target.budget_usd is not None:
        ok &= c["cost_usd_p90"] <= workload.target.budget_usd
    return ok


def score_rows(c: dict[str, np.ndarray], objective: str) -> np.ndarray:
    """Lower is better: P50 hours, P50 cost, or their product (balanced), relative to the current shape
    (to the median priced row when the current shape has no price: a constant factor, so the same
    order); ties broken by expected revocations. Unpriced rows score NaN (ranked last)."""
    t = c["hours_p50"] / max(float(c["hours_p50"][0]), 1e-12)
    ref = float(c["cost_usd_p50"][0])
    if not np.isfinite(ref):
        ref = float(np.nanmedian(c["cost_usd_p50"]))
    k = c["cost_usd_p50"] / max(ref, 1e-12)
    base = {"time": t, "cost": k, "balanced": t * k}[objective]
    base = np.where(np.isfinite(base), base, t)  # price unknown: ranked by time (after the priced rows)
    return base + 1e-6 * c["expected_revocations"]
