"""Time and cost to train a number of steps on cluster shapes, with revocations (vectorised).

For each shape (``n`` one-GPU workers, ``ps`` parameter servers) at cluster speed ``v`` steps/s::

    T0      = steps / v                                   (s, no interruptions)
    T_ckpt  = steps / interval × (a + b·MB)   (checkpoint writes, overheads.json; interval in steps)
    P_w     = R × (1 − v_{n−1}/v) + (1/n) × (interval/2 / v + restart)   per worker revocation
    P_ps    = R_ps + interval/2 / v + restart                            per PS revocation (stall)
    E[T]    = T0 + T_ckpt + K_w(E[T]) × P_w + K_ps(E[T]) × P_ps           (fixed point, 4 passes)

Workers and parameter servers are two :class:`NodeKind` s of one estimate (:func:`estimate_nodes`), the
one a synchronous job's nodes go through too (:mod:`~cmdare.planner.risk_cost.sync_time_cost`: one kind).

where ``R`` is the study's request overhead (server start + join), a revoked worker is the chief with
probability 1/n (it then redoes on average half a checkpoint interval and restarts the framework),
and ``K`` are renewal expectations from :class:`~cmdare.planner.risk_cost.revocation.RevocationModel`.
P50/P90 treat the revocation count as Poisson with mean ``K`` (analytic, no sampling).
Cost = (workers × worker price + ps × PS price) × billed hours + egress, where billed hours add one
server start per node and the request overhead per replacement.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from cmdare.planner.risk_cost.overheads import Overheads, degraded_wait
from cmdare.planner.risk_cost.revocation import RevocationModel

if TYPE_CHECKING:
    from cmdare.collectors.pricing.book import PriceBook

FIXED_POINT_PASSES = 4
QUANTILES = (0.5, 0.9)


@dataclass(frozen=True, kw_only=True)
class ShapeColumns:
    """Per-shape inputs as parallel numpy arrays (one entry per shape)."""

    gpu: np.ndarray  # str
    region: np.ndarray  # str
    provisioning: np.ndarray  # str, workers' provisioning
    workers: np.ndarray  # int
    ps: np.ndarray  # int
    steps_per_sec: np.ndarray  # cluster speed, steps/s
    degraded_steps_per_sec: np.ndarray  # speed with one worker fewer (0 for a single worker)
    worker_usd_per_hour: np.ndarray  # price of one worker node
    ps_usd_per_hour: np.ndarray  # price of one PS node
    egress_usd: np.ndarray  # cross-region data transfer for the whole run
    started: np.ndarray | None = None  # server starts billed per shape (1, None = all; 0 = billed elsewhere)


@dataclass(frozen=True, kw_only=True)
class RunSettings:
    """Workload-level settings: target steps, checkpoint interval (steps, or seconds when steps is None)
    and size (MB), PS provisioning, warm framework restarts."""

    steps: float
    checkpoint_interval_steps: float | None
    checkpoint_mb: float
    checkpoint_interval_s: float = 600.0
    ps_provisioning: str = "standard"
    warm_restart: bool = False
    checkpoint_write_s: float | None = None  # measured seconds to write one (None: the fit on checkpoint_mb)
    # the interval may be an array (one per shape: the checkpointing module's optimum)


@dataclass(frozen=True, kw_only=True)
class TimeCost:
    """Per-shape results (arrays). Times in seconds, costs in USD."""

    seconds_base: np.ndarray  # steps / speed
    seconds_checkpoint: np.ndarray
    seconds_revocation: np.ndarray  # expected time lost to revocations
    seconds_expected: np.ndarray
    seconds_p50: np.ndarray
    seconds_p90: np.ndarray
    cost_expected: np.ndarray
    cost_p50: np.ndarray
    cost_p90: np.ndarray
    expected_revocations: np.ndarray
    p_revocation: np.ndarray  # P(at least one revocation during the expected run)
    per_node_risk: np.ndarray  # P(a given worker is revoked at least once)
    penalty_worker_s: np.ndarray
    penalty_ps_s: np.ndarray
    redo_events: np.ndarray | None = (
        None  # expected revocations that send the job back to its last checkpoint
    )


RiskFn = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


def revocation_curves(
    model: RevocationModel, gpu: np.ndarray, region: np.ndarray, provisioning: np.ndarray
) -> RiskFn:
    """A function hours[] → (survival[], renewals[]) evaluating each shape's own curve; groups shapes by
    (gpu, region, provisioning) so the model is consulted once per distinct combination."""
    keys = np.char.add(
        np.char.add(gpu.astype(str), "|"),
        np.char.add(np.char.add(region.astype(str), "|"), provisioning.astype(str)),
    )
    uniq, inverse = np.unique(keys, return_inverse=True)
    groups = [np.nonzero(inverse == i)[0] for i in range(uniq.size)]
    parts = [tuple(k.split("|")) for k in uniq]

    def evaluate(hours: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        surv, renew = np.ones_like(hours), np.zeros_like(hours)
        for (g, r, p), idx in zip(parts, groups, strict=True):
            surv[idx] = model.survival(g, r, p, hours[idx])
            renew[idx] = model.expected_revocations(g, r, p, hours[idx])
        return surv, renew

    return evaluate


@dataclass(frozen=True, kw_only=True)
class NodeKind:
    """One kind of node in every shape (PS workers, parameter servers, a synchronous job's nodes), as
    parallel arrays: how many, how each is revoked, and what one revocation costs the run."""

    count: np.ndarray  # nodes of this kind per shape
    curves: RiskFn  # hours[] -> (survival[], expected revocations[]) of one node
    penalty_s: np.ndarray  # seconds one revocation adds to the run
    usd_per_hour: np.ndarray  # price of one node
    request_s: np.ndarray | float  # seconds a replacement is billed before it joins
    start_s: np.ndarray | float  # seconds a node's first start is billed
    redo_share: np.ndarray | float  # share of its revocations that send the job back to its checkpoint


def estimate_nodes(
    kinds: tuple[NodeKind, ...],
    base: np.ndarray,
    ckpt: np.ndarray,
    egress_usd: np.ndarray,
    started: np.ndarray | None,
) -> TimeCost:
    """Expected / P50 / P90 time and cost of every shape made of ``kinds`` of nodes: the one estimate PS
    shapes (workers and parameter servers) and synchronous shapes (nodes) both go through. ``base``:
    seconds without interruptions; ``ckpt``: seconds writing checkpoints."""
    total = base + ckpt
    for _ in range(FIXED_POINT_PASSES):
        total = base + ckpt + _total([k.count * k.curves(total / 3600.0)[1] * k.penalty_s for k in kinds])
    hours = total / 3600.0
    at_end = [k.curves(hours) for k in kinds]  # (survival, expected revocations) of one node of each kind
    surv = [s for s, _ in at_end]
    revs = [k.count * m for k, (_, m) in zip(kinds, at_end, strict=True)]
    k_all = _total(revs)
    lost = _total([r * k.penalty_s for r, k in zip(revs, kinds, strict=True)])
    mean_pen = np.where(k_all > 0, lost / np.maximum(k_all, 1e-12), 0.0)
    q50, q90 = (poisson_quantile(k_all, q) for q in QUANTILES)
    t50, t90 = base + ckpt + q50 * mean_pen, base + ckpt + q90 * mean_pen

    hourly = _total([k.count * k.usd_per_hour for k in kinds])
    start_usd = _total([k.count * k.start_s * k.usd_per_hour for k in kinds]) / 3600.0
    if started is not None:
        start_usd = start_usd * started
    replace_usd = (
        _total([r * k.request_s * k.usd_per_hour for r, k in zip(revs, kinds, strict=True)]) / 3600.0
    )

    def cost(seconds: np.ndarray, revocation_scale: np.ndarray) -> np.ndarray:
        out: np.ndarray = hourly * seconds / 3600.0 + start_usd + replace_usd * revocation_scale + egress_usd
        return out

    def ratio(q: np.ndarray) -> np.ndarray:
        out: np.ndarray = np.where(k_all > 0, q / np.maximum(k_all, 1e-12), 0.0)
        return out

    p_none = functools.reduce(operator.mul, [s**k.count for s, k in zip(surv, kinds, strict=True)])
    return TimeCost(
        seconds_base=base,
        seconds_checkpoint=ckpt,
        seconds_revocation=total - base - ckpt,
        seconds_expected=total,
        seconds_p50=t50,
        seconds_p90=t90,
        cost_expected=cost(total, np.ones_like(k_all)),
        cost_p50=cost(t50, ratio(q50)),
        cost_p90=cost(t90, ratio(q90)),
        expected_revocations=k_all,
        p_revocation=1.0 - p_none,
        per_node_risk=1.0 - surv[0],
        penalty_worker_s=kinds[0].penalty_s,
        penalty_ps_s=np.full_like(base, kinds[1].penalty_s) if len(kinds) > 1 else np.zeros_like(base),
        redo_events=_total([r * k.redo_share for r, k in zip(revs, kinds, strict=True)]),
    )


def _total(parts: list[np.ndarray]) -> np.ndarray:
    """The element-wise sum of one array per kind of node (one kind: that array)."""
    return functools.reduce(operator.add, parts)


def run_seconds(
    steps_per_sec: np.ndarray, run: RunSettings, overheads: Overheads
) -> tuple[np.ndarray, np.ndarray | float, np.ndarray, np.ndarray]:
    """Per shape: its speed (floored above 0), its checkpoint interval in steps (one for all when the run
    fixes it), its seconds without interruptions and its seconds writing checkpoints."""
    v = np.maximum(steps_per_sec, 1e-12)
    interval = run.checkpoint_interval_steps or run.checkpoint_interval_s * v  # steps between checkpoints
    base = run.steps / v
    # a column per shape, as the others (a fixed checkpoint interval in steps gives the same for each)
    return v, interval, base, run.steps / interval * write_seconds(run, overheads) * np.ones_like(base)


def estimate(
    cols: ShapeColumns,
    run: RunSettings,
    overheads: Overheads,
    revocations: RevocationModel,
) -> TimeCost:
    """Expected / P50 / P90 time and cost for every PS shape in ``cols`` (workers and parameter servers)."""
    v, interval, base, ckpt = run_seconds(cols.steps_per_sec, run, overheads)
    n = cols.workers.astype(float)
    request, start = request_and_start_s(overheads, cols.gpu, cols.provisioning)
    restart = overheads.framework_restart(run.warm_restart)
    redo = overheads.lost_work(interval / 2.0, v)
    ps_request = overheads.server_start("*", run.ps_provisioning)
    ps_prov = np.full(cols.gpu.shape, run.ps_provisioning)
    workers = NodeKind(
        count=n,
        curves=revocation_curves(revocations, cols.gpu, cols.region, cols.provisioning),
        penalty_s=degraded_wait(request, v, cols.degraded_steps_per_sec) + (redo + restart) / n,
        usd_per_hour=cols.worker_usd_per_hour,
        request_s=request,
        start_s=start,
        redo_share=1.0 / n,  # a worker revocation is the chief's one time in n
    )
    ps = NodeKind(
        count=cols.ps.astype(float),
        curves=revocation_curves(revocations, np.full(cols.gpu.shape, "*"), cols.region, ps_prov),
        penalty_s=ps_request + redo + restart,
        usd_per_hour=cols.ps_usd_per_hour,
        request_s=ps_request,
        start_s=ps_request,
        redo_share=1.0,
    )
    return estimate_nodes((workers, ps), base, ckpt, cols.egress_usd, cols.started)


def write_seconds(run: RunSettings, overheads: Overheads) -> float:
    """Seconds to write one checkpoint: measured when the run says, else the CM-DARE fit on its size."""
    if run.checkpoint_write_s is not None:
        return float(run.checkpoint_write_s)
    return float(overheads.checkpoint_cost(run.checkpoint_mb))


def request_and_start_s(
    overheads: Overheads, gpu: np.ndarray, provisioning: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(request overhead s, server start s) per shape, one look-up per distinct (gpu, provisioning)."""
    return (
        _per_pair(gpu, provisioning, overheads.request_overhead),
        _per_pair(gpu, provisioning, overheads.server_start),
    )


def _per_pair(gpu: np.ndarray, provisioning: np.ndarray, fn: Callable[[str, str], float]) -> np.ndarray:
    keys = np.char.add(np.char.add(np.asarray(gpu).astype(str), "|"), np.asarray(provisioning).astype(str))
    uniq, inverse = np.unique(keys, return_inverse=True)
    values = np.array([fn(*k.rsplit("|", 1)) for k in uniq], dtype=float)
    return values[inverse]


def poisson_quantile(mean: np.ndarray, q: float, kmax: int = 64) -> np.ndarray:
    """Smallest k with P(N ≤ k) ≥ q for N ~ Poisson(mean), vectorised; normal approximation above kmax/2."""
    mean = np.asarray(mean, dtype=float)
    pmf = np.exp(-mean)
    cdf = pmf.copy()
    out = np.where(cdf >= q, 0.0, np.nan)
    for k in range(1, kmax + 1):
        pmf = pmf * mean / k
        cdf = cdf + pmf
        out = np.where(np.isnan(out) & (cdf >= q), float(k), out)
    from statistics import NormalDist

    z = NormalDist().inv_cdf(q)
    approx = np.ceil(mean + z * np.sqrt(mean) - 0.5)
    return np.where(np.isnan(out) | (mean > kmax / 2), np.maximum(approx, 0.0), out)


# Inter-region egress within a continent, GCP VPC network pricing (≈ $0.02/GB; background.md). Used when
# the price book carries no egress rate of its own.
DEFAULT_EGRESS_USD_PER_GB = 0.02


class PriceTable:
    """Vectorised node-price look-up over a price book (``node_price`` / ``ps_node_price``), one book call
    per distinct (gpu, region, provisioning); unpriced combinations come back as NaN."""

    def __init__(self, book: PriceBook) -> None:
        self.book = book
        self.source = book.source
        self.as_of = book.as_of
        self.egress_usd_per_gb = DEFAULT_EGRESS_USD_PER_GB  # the books carry node prices, no egress rate

    def lookup(
        self, gpu: np.ndarray, region: np.ndarray, provisioning: np.ndarray, ps_provisioning: str
    ) -> tuple[np.ndarray, np.ndarray]:
        """(worker node USD/h, PS node USD/h) per shape."""
        worker = _per_pair(
            np.char.add(np.char.add(gpu.astype(str), "|"), region.astype(str)), provisioning, self._node
        )
        ps = _per_pair(region, np.full(region.shape, ps_provisioning), self._ps)
        return worker, ps

    def _node(self, gpu_region: str, provisioning: str) -> float:
        gpu, region = gpu_region.split("|")
        try:
            return float(self.book.node_price(gpu, 1, region, provisioning).usd_per_hour)
        except KeyError:  # PriceNotFound
            return float("nan")

    def _ps(self, region: str, provisioning: str) -> float:
        try:
            return float(self.book.ps_node_price(region, provisioning).usd_per_hour)
        except KeyError:
            return float("nan")
