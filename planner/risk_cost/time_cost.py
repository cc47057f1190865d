"""Time and cost to train a number of steps on cluster shapes, with revocations (vectorised).

For each shape (``n`` one-GPU workers, ``ps`` parameter servers) at cluster speed ``v`` steps/s::

    T0      = steps / v                                   (s, no interruptions)
    T_ckpt  = steps / interval × (a + b·MB)   (checkpoint writes, overheads.json; interval in steps)
    P_w     = R × (1 − v_{n−1}/v) + (1/n) × (interval/2 / v + restart)   per worker revocation
    P_ps    = R_ps + interval/2 / v + restart                            per PS revocation (stall)
    E[T]    = T0 + T_ckpt + K_w(E[T]) × P_w + K_ps(E[T]) × P_ps           (fixed point, 4 passes)

where ``R`` is the study's request overhead (server start + join), a revoked worker is the chief with
probability 1/n (it then redoes on average half a checkpoint interval and restarts the framework),
and ``K`` are renewal expectations from :class:`~cmdare.planner.risk_cost.revocation.RevocationModel`.
P50/P90 treat the revocation count as Poisson with mean ``K`` (analytic, no sampling).
Cost = (workers × worker price + ps × PS price) × billed hours + egress, where billed hours add one
server start per node and the request overhead per replacement.
"""

from __future__ import annotations

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


def estimate(
    cols: ShapeColumns,
    run: RunSettings,
    overheads: Overheads,
    revocations: RevocationModel,
) -> TimeCost:
    """Expected / P50 / P90 time and cost for every shape in ``cols``."""
    v = np.maximum(cols.steps_per_sec, 1e-12)
    n = cols.workers.astype(float)
    ps = cols.ps.astype(float)
    worker_fn = revocation_curves(revocations, cols.gpu, cols.region, cols.provisioning)
    ps_prov = np.full(cols.gpu.shape, run.ps_provisioning)
    ps_fn = revocation_curves(revocations, np.full(cols.gpu.shape, "*"), cols.region, ps_prov)

    base = run.steps / v
    interval = run.checkpoint_interval_steps or run.checkpoint_interval_s * v  # steps between checkpoints
    # a column per shape, as the others (a fixed checkpoint interval in steps gives the same for each)
    ckpt = run.steps / interval * write_seconds(run, overheads) * np.ones_like(base)
    request = _request_overhead(overheads, cols.gpu, cols.provisioning)
    restart = overheads.framework_restart(run.warm_restart)
    redo = overheads.lost_work(interval / 2.0, v)
    pen_w = degraded_wait(request, v, cols.degraded_steps_per_sec) + (redo + restart) / n
    ps_request = overheads.server_start("*", run.ps_provisioning)
    pen_ps = ps_request + redo + restart

    total = base + ckpt
    for _ in range(FIXED_POINT_PASSES):
        hours = total / 3600.0
        _, m_w = worker_fn(hours)
        _, m_ps = ps_fn(hours)
        k_w, k_ps = n * m_w, ps * m_ps
        total = base + ckpt + k_w * pen_w + k_ps * pen_ps
    hours = total / 3600.0
    s_w, m_w = worker_fn(hours)
    s_ps, m_ps = ps_fn(hours)
    k_w, k_ps = n * m_w, ps * m_ps
    k = k_w + k_ps
    mean_pen = np.where(k > 0, (k_w * pen_w + k_ps * pen_ps) / np.maximum(k, 1e-12), 0.0)
    q50, q90 = (poisson_quantile(k, q) for q in QUANTILES)
    t50, t90 = base + ckpt + q50 * mean_pen, base + ckpt + q90 * mean_pen

    hourly = n * cols.worker_usd_per_hour + ps * cols.ps_usd_per_hour
    ps_start = overheads.server_start("*", run.ps_provisioning)
    start_usd = (
        n * _start_seconds(overheads, cols.gpu, cols.provisioning) * cols.worker_usd_per_hour
        + ps * ps_start * cols.ps_usd_per_hour
    ) / 3600.0
    if cols.started is not None:
        start_usd = start_usd * cols.started
    replace_usd = (
        k_w * request * cols.worker_usd_per_hour + k_ps * ps_request * cols.ps_usd_per_hour
    ) / 3600.0

    def cost(seconds: np.ndarray, revocation_scale: np.ndarray) -> np.ndarray:
        out: np.ndarray = (
            hourly * seconds / 3600.0 + start_usd + replace_usd * revocation_scale + cols.egress_usd
        )
        return out

    def ratio(q: np.ndarray) -> np.ndarray:
        out: np.ndarray = np.where(k > 0, q / np.maximum(k, 1e-12), 0.0)
        return out

    return TimeCost(
        seconds_base=base,
        seconds_checkpoint=ckpt,
        seconds_revocation=total - base - ckpt,
        seconds_expected=total,
        seconds_p50=t50,
        seconds_p90=t90,
        cost_expected=cost(total, np.ones_like(k)),
        cost_p50=cost(t50, ratio(q50)),
        cost_p90=cost(t90, ratio(q90)),
        expected_revocations=k,
        p_revocation=1.0 - s_w**n * s_ps**ps,
        per_node_risk=1.0 - s_w,
        penalty_worker_s=pen_w,
        penalty_ps_s=np.full_like(base, pen_ps),
        redo_events=k_w / n + k_ps,  # a worker revocation is the chief's one time in n
    )


def write_seconds(run: RunSettings, overheads: Overheads) -> float:
    """Seconds to write one checkpoint: measured when the run says, else the CM-DARE fit on its size."""
    if run.checkpoint_write_s is not None:
        return float(run.checkpoint_write_s)
    return float(overheads.checkpoint_cost(run.checkpoint_mb))


def _request_overhead(overheads: Overheads, gpu: np.ndarray, provisioning: np.ndarray) -> np.ndarray:
    return _per_pair(gpu, provisioning, overheads.request_overhead)


def _start_seconds(overheads: Overheads, gpu: np.ndarray, provisioning: np.ndarray) -> np.ndarray:
    return _per_pair(gpu, provisioning, overheads.server_start)


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
