"""Revocation risk of transient GPU servers: lifetime distribution, renewals, learning from history.

Model. For a transient server the *revocation* CDF over age ``t`` (hours) is the bathtub curve of
Kadupitiya et al. (HPDC 2020), shifted so ``F(0) = 0``::

    F(t) = A · (1 − e^(−t/τ1) + e^((t−b)/τ2) − e^(−b/τ2)),   0 ≤ t < 24 h

fitted per GPU × region to the CM-DARE lifetime CDFs (``scripts/fit_revocation_model.py`` →
``planner/data/revocation_params.json``), with GPU-level and provisioning-level fallbacks. Provisioning:

* ``preemptible`` (GCP): the curve, plus the hard kill at 24 h (every server is lost at 24 h);
* ``spot`` (GCP): the curve for t < 24 h, then a constant hazard equal to the curve's mean hazard over
  hours 1–23 (assumption: the study has no spot lifetimes; spot VMs have no 24 h limit);
* ``standard``: never revoked.

Time of day multiplies the hazard by a per-GPU hour-of-day factor (mean 1) when a start hour is given.
:meth:`RevocationModel.update` learns from observed lifetimes with a conjugate gamma update of a hazard
scale ``λ`` (prior Gamma(a0 = b0 = prior_weight × H(24 h)), i.e. ``prior_weight`` pseudo-days of exposure).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np

from cmdare.collectors.samples import Lifetime

LIMIT_H = 24.0  # GCP preemptible VMs run at most 24 h (GCP "Preemptible VM instances" docs).
GRID_H = 0.05  # grid step for cumulative hazard / renewal tables, hours (3 min).
HORIZON_H = 168.0  # renewal tables are computed to 7 days, extrapolated linearly beyond.
KILL_EPS_H = 0.25  # lifetimes ≥ 24 h − 15 min count as the forced 24 h kill, not a hazard event (assumption).
TRANSIENT = ("spot", "preemptible")
ANY = "*"


@dataclass(frozen=True)
class Bathtub:
    """Bathtub revocation CDF; ``a`` dimensionless, ``tau1``, ``b``, ``tau2`` in hours."""

    a: float
    tau1: float
    b: float
    tau2: float
    tau0: float | None = None  # within-first-hour shape (hours), fitted on exact lifetimes in seconds

    def cdf(self, hours: np.ndarray) -> np.ndarray:
        """Probability of revocation before age ``hours`` (t < 24 h), clipped to [0, 0.999].

        The hourly data cannot place revocations inside the first hour; with ``tau0`` set, F(t) for
        t < 1 h is F(1 h) spread as an exponential truncated to the first hour."""
        t = np.asarray(hours, dtype=float)
        f = self._raw(t)
        if self.tau0 is not None:
            first = self._raw(np.array(1.0)) * np.expm1(-t / self.tau0) / np.expm1(-1.0 / self.tau0)
            f = np.where(t < 1.0, first, f)
        out: np.ndarray = np.clip(f, 0.0, 0.999)
        return out

    def _raw(self, t: np.ndarray) -> np.ndarray:
        out: np.ndarray = self.a * (
            1 - np.exp(-t / self.tau1) + np.exp((t - self.b) / self.tau2) - np.exp(-self.b / self.tau2)
        )
        return out


@dataclass(frozen=True)
class Period:
    """One vendored lifetime period: its curves (fitted on its data alone, same keys as the main fit) and,
    per GPU × region cell, the servers seen ``n`` and revoked before 24 h ``k``."""

    name: str
    label: str
    source: str
    curves: dict[str, Bathtub]
    cells: dict[str, tuple[int, int]]


@dataclass(frozen=True)
class _Posterior:
    events: float  # observed revocations (hazard events)
    exposure: float  # Σ H_base(observed ages), dimensionless
    n: int  # lifetimes seen


class RevocationModel:
    """Lifetime model of transient servers (scikit-learn style: params in ``__init__``, fitted attrs ``_``).

    ``curves_`` maps ``"GPU/region"``, ``"GPU/*"`` and ``"*/*"`` to :class:`Bathtub`;
    ``hour_of_day_`` maps ``"GPU"`` and ``"*"`` to 24 hazard multipliers (mean 1).
    """

    def __init__(self, prior_weight: float = 20.0, start_hour: int | None = None) -> None:
        self.prior_weight = prior_weight
        self.start_hour = start_hour
        self.curves_: dict[str, Bathtub] = {}
        self.hour_of_day_: dict[str, np.ndarray] = {}
        self.provenance_: dict[str, object] = {}
        self.posteriors_: dict[str, _Posterior] = {}
        self.periods_: dict[str, Period] = {}  # each vendored lifetime period, fitted on its own data
        self.period_posteriors_: dict[str, dict[str, _Posterior]] = {}  # period → its own exposure sums
        self.period_ = ""  # the period ``curves_`` come from

    # ----------------------------------------------------------------- construction
    @classmethod
    def from_params(
        cls, params: Mapping[str, Any], prior_weight: float = 20.0, start_hour: int | None = None
    ) -> RevocationModel:
        """Build from the JSON structure written by ``scripts/fit_revocation_model.py``."""
        model = cls(prior_weight=prior_weight, start_hour=start_hour)
        tau0 = params.get("first_hour_tau_h")
        model.curves_ = {
            k: Bathtub(v["a"], v["tau1"], v["b"], v["tau2"], tau0) for k, v in params["curves"].items()
        }
        model.hour_of_day_ = {k: np.asarray(v, dtype=float) for k, v in params["hour_of_day"].items()}
        model.provenance_ = dict(params.get("provenance", {}))
        for name, p in params.get("periods", {}).items():
            curves = {k: Bathtub(v["a"], v["tau1"], v["b"], v["tau2"], tau0) for k, v in p["curves"].items()}
            cells = {k: (int(v["n"]), int(v["k"])) for k, v in p["curves"].items() if "n" in v}
            model.periods_[name] = Period(
                name, str(p.get("label", name)), str(p.get("source", "")), curves, cells
            )
        model.period_ = str(params.get("main_period", ""))
        return model

    def for_period(self, name: str) -> RevocationModel:
        """A copy whose curves are period ``name``'s (its own data alone), with the same start hour and the
        same learned history (the hazard scale is then learned against that period's curves)."""
        other = self.with_start_hour(self.start_hour)
        other.curves_, other.period_ = self.periods_[name].curves, name
        other.posteriors_ = dict(self.period_posteriors_.get(name, {}))
        return other

    def period_weights(self) -> dict[str, float]:
        """How well each period's hazard level explains the lifetimes learned so far: the revoked count
        Poisson with mean the period's cumulative hazard over the observed ages, normalised over the periods
        ({} before any lifetime). An approximation that pools every GPU and region (``*/*``)."""
        ll = {}
        for name, posts in self.period_posteriors_.items():
            p = posts.get(f"{ANY}/{ANY}")
            if p is None or p.n == 0:
                return {}
            ll[name] = p.events * np.log(max(p.exposure, 1e-12)) - p.exposure
        if not ll:
            return {}
        top = max(ll.values())
        w = {k: float(np.exp(v - top)) for k, v in ll.items()}
        total = sum(w.values())
        return {k: v / total for k, v in w.items()}

    def learned(self) -> int:
        """How many lifetimes of this cluster the model has learned from."""
        p = self.posteriors_.get(f"{ANY}/{ANY}")
        return p.n if p is not None else 0

    def period_label(self, name: str | None = None) -> str:
        """'CM-DARE (ICDCS 2020) lifetime CDFs' for a period name (default: the one this model's curves are)."""
        p = self.periods_.get(name or self.period_)
        return p.label if p is not None else "published fit"

    @classmethod
    def load(cls, prior_weight: float = 20.0, start_hour: int | None = None) -> RevocationModel:
        """Load the shipped fit (``planner/data/revocation_params.json``)."""
        text = resources.files("cmdare.planner").joinpath("data/revocation_params.json").read_text("utf-8")
        return cls.from_params(json.loads(text), prior_weight, start_hour)

    def with_start_hour(self, start_hour: int | None) -> RevocationModel:
        """A copy evaluated for jobs starting at ``start_hour`` (0–23, or None for any hour)."""
        other = RevocationModel(self.prior_weight, start_hour)
        other.curves_, other.hour_of_day_ = self.curves_, self.hour_of_day_
        other.provenance_, other.posteriors_ = self.provenance_, dict(self.posteriors_)
        other.periods_, other.period_ = self.periods_, self.period_
        other.period_posteriors_ = {k: dict(v) for k, v in self.period_posteriors_.items()}
        return other

    # ----------------------------------------------------------------- learning
    def update(self, lifetimes: Iterable[Lifetime], now: float | None = None) -> RevocationModel:
        """Add observed lifetimes of transient servers (with a GPU and a region) to the hazard-scale
        posteriors; a server still running counts as survived until ``now``. Returns self."""
        for lt in lifetimes:
            if lt.provisioning not in TRANSIENT or not (lt.gpu and lt.region):
                continue
            key, _ = self.resolve(lt.gpu, lt.region)
            hours = lt.hours(now)
            age = min(hours, LIMIT_H - KILL_EPS_H) if lt.provisioning == "preemptible" else hours
            event = lt.revoked and not (lt.provisioning == "preemptible" and hours >= LIMIT_H - KILL_EPS_H)
            exposure = float(_base_cumhaz(self.curves_[key], lt.provisioning, np.array([age]))[0])
            _add(self.posteriors_, lt, event, exposure)
            for name, period in self.periods_.items():  # each period's own exposure: its hazard scale, weight
                pkey = _resolve_in(period.curves, lt.gpu, lt.region)
                pexp = float(_base_cumhaz(period.curves[pkey], lt.provisioning, np.array([age]))[0])
                _add(self.period_posteriors_.setdefault(name, {}), lt, event, pexp)
        return self

    def hazard_scale(self, gpu: str, region: str) -> tuple[float, int]:
        """Posterior mean of the hazard multiplier λ for (gpu, region) and how many lifetimes informed it."""
        for post_key in (f"{gpu}/{region}", f"{gpu}/{ANY}"):
            post = self.posteriors_.get(post_key)
            if post is not None:
                key, _ = self.resolve(gpu, region)
                prior = self.prior_weight * float(
                    _base_cumhaz(self.curves_[key], "spot", np.array([LIMIT_H]))[0]
                )
                return (prior + post.events) / (prior + post.exposure), post.n
        return 1.0, 0

    # ----------------------------------------------------------------- prediction
    def resolve(self, gpu: str, region: str) -> tuple[str, str]:
        """The curve key used for (gpu, region) and a ``basis`` string saying which fallback applied."""
        if f"{gpu}/{region}" in self.curves_:
            return f"{gpu}/{region}", f"{gpu} in {region} (fitted)"
        if f"{gpu}/{ANY}" in self.curves_:
            return f"{gpu}/{ANY}", f"{gpu} all regions (no data for {region})"
        return f"{ANY}/{ANY}", f"all GPUs, all regions (no data for {gpu})"

    def basis(self, gpu: str, region: str, provisioning: str) -> str:
        """Human-readable data basis for one (gpu, region, provisioning)."""
        if provisioning not in TRANSIENT:
            return f"{provisioning}: never revoked"
        _, text = self.resolve(gpu, region)
        scale, n = self.hazard_scale(gpu, region)
        own = f"; own history n={n}, hazard ×{scale:.2f}" if n else ""
        return f"{provisioning}: {text}{own}"

    def survival(self, gpu: str, region: str, provisioning: str, hours: np.ndarray) -> np.ndarray:
        """P(a server started now is not yet revoked at age ``hours``)."""
        table = self._table(gpu, region, provisioning)
        return table.survival(np.asarray(hours, dtype=float))

    def expected_revocations(self, gpu: str, region: str, provisioning: str, hours: np.ndarray) -> np.ndarray:
        """Expected revocations of one node slot over ``hours`` when each loss is replaced (renewal)."""
        table = self._table(gpu, region, provisioning)
        return table.renewals(np.asarray(hours, dtype=float))

    def _table(self, gpu: str, region: str, provisioning: str) -> _HazardTable:
        if provisioning not in TRANSIENT:
            return _NEVER
        key, _ = self.resolve(gpu, region)
        scale, _ = self.hazard_scale(gpu, region)
        tod_key = gpu if gpu in self.hour_of_day_ else ANY
        tod = tuple(self.hour_of_day_[tod_key]) if self.start_hour is not None else None
        # 3 significant digits of the learned scale: finer changes move no figure on screen, but each
        # would build (and cache) a table of its own
        return _hazard_table(self.curves_[key], provisioning, float(f"{scale:.3g}"), self.start_hour, tod)


def _add(posts: dict[str, _Posterior], lt: Lifetime, event: bool, exposure: float) -> None:
    """One lifetime into the posteriors of its GPU × region, its GPU and the pool."""
    for post_key in (f"{lt.gpu}/{lt.region}", f"{lt.gpu}/{ANY}", f"{ANY}/{ANY}"):
        old = posts.get(post_key, _Posterior(0.0, 0.0, 0))
        posts[post_key] = _Posterior(old.events + event, old.exposure + exposure, old.n + 1)


def _resolve_in(curves: dict[str, Bathtub], gpu: str, region: str) -> str:
    for key in (f"{gpu}/{region}", f"{gpu}/{ANY}"):
        if key in curves:
            return key
    return f"{ANY}/{ANY}"


# --------------------------------------------------------------------- numerics
def _base_cumhaz(curve: Bathtub, provisioning: str, hours: np.ndarray) -> np.ndarray:
    """Cumulative revocation hazard H(t) = −ln(1 − F(t)) without the 24 h kill; spot extends beyond
    24 h with the mean hazard of hours 1–23."""
    t = np.asarray(hours, dtype=float)
    inside = -np.log1p(-curve.cdf(np.minimum(t, LIMIT_H)))
    h1, h23, h24 = -np.log1p(-curve.cdf(np.array([1.0, 23.0, LIMIT_H])))
    flat_rate = max((h23 - h1) / 22.0, 1e-9)
    out: np.ndarray = np.where(t > LIMIT_H, h24 + (t - LIMIT_H) * flat_rate, inside)
    return out


class _HazardTable:
    """Survival and renewal function of one node slot on a grid of ``GRID_H`` hours."""

    def __init__(self, cumhaz: np.ndarray, killed_at_limit: bool) -> None:
        self.grid = np.arange(cumhaz.size) * GRID_H
        surv = np.exp(-cumhaz)
        if killed_at_limit:
            surv = np.where(self.grid >= LIMIT_H, 0.0, surv)
        self.surv = surv
        self.renew = _renewal(surv)
        mean_life = float(np.sum(surv) * GRID_H)
        self.tail_rate = 1.0 / mean_life if mean_life > 0 else 0.0

    def survival(self, hours: np.ndarray) -> np.ndarray:
        out: np.ndarray = np.interp(hours, self.grid, self.surv, right=self.surv[-1])
        return out

    def renewals(self, hours: np.ndarray) -> np.ndarray:
        inside = np.interp(hours, self.grid, self.renew)
        beyond = self.renew[-1] + (hours - self.grid[-1]) * self.tail_rate
        out: np.ndarray = np.where(hours > self.grid[-1], beyond, inside)
        return out


class _Never(_HazardTable):
    def __init__(self) -> None:  # no revocations at all
        self.grid, self.surv, self.renew, self.tail_rate = np.array([0.0, 1.0]), np.ones(2), np.zeros(2), 0.0


_NEVER = _Never()


def _renewal(surv: np.ndarray) -> np.ndarray:
    """Discrete renewal function M_k = F_k + Σ_j f_j M_{k−j} (expected losses with replacement)."""
    f = -np.diff(surv, prepend=1.0)
    cdf = 1.0 - surv
    m = np.zeros_like(surv)
    for k in range(1, surv.size):
        m[k] = cdf[k] + np.dot(f[1 : k + 1], m[k - 1 :: -1][:k])
    return m


# ~80 KB a table (3 arrays over a 7-day grid). A ranking reads one table per GPU x region curve (16),
# transient kind and lifetime period (2); every learned lifetime makes a new hazard scale, so older tables
# must age out: 512 entries let a long session grow by ~41 MB (the soak's slow rise), 128 bound it at ~10 MB.
@lru_cache(maxsize=128)
def _hazard_table(
    curve: Bathtub, provisioning: str, scale: float, start_hour: int | None, tod: tuple[float, ...] | None
) -> _HazardTable:
    grid = np.arange(0.0, HORIZON_H + GRID_H / 2, GRID_H)
    base = _base_cumhaz(curve, provisioning, grid)
    d_h = np.diff(base, prepend=0.0) * scale
    if start_hour is not None and tod is not None:
        hour_idx = ((start_hour + grid - GRID_H / 2) % 24).astype(int) % 24
        d_h = d_h * np.asarray(tod)[hour_idx]
    return _HazardTable(np.cumsum(d_h), killed_at_limit=provisioning == "preemptible")
