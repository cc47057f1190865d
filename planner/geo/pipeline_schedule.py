"""Time of one pipeline flush (GPipe or 1F1B) whose stage boundaries may be WAN links shared by D pipelines.

Units: seconds. p stages, m micro-batches; per micro-batch forward ``f_k`` / backward ``b_k`` with
``c_k = f_k + b_k``; boundary k has one-way latency ``l_k`` and one transfer at the full effective
bandwidth takes ``a_k = A / B_eff``. Activations (forward) and gradients (backward) are separate
transfers on a full-duplex link; each direction sends one transfer at a time, in order (FIFO).

Link sharing by the D pipelines (Atlas, arXiv 2411.14458): *spatial* splits a WAN link, so each
pipeline owns a server of ``D·a_k`` per transfer; *temporal* gives the whole link to the pipelines in
turn, so one transfer takes ``a_k`` but the link takes the next transfer of the same pipeline only
``D·a_k`` later (the other D−1 go in between), and the last pipeline trails the first by a one-off
stagger ``(D−1)·max a_k``. Intra-DC boundaries are not shared. Per boundary one pipeline therefore
sees a *transit* ``x_k`` (``D·a_k`` spatial, ``a_k`` temporal) and an *occupancy* ``o_k = D·a_k``.

GPipe (all forwards, then all backwards; exact for spatial sharing and for one pipeline)::

    fill = Σ c_k + 2·Σ (l_k + x_k)
    T    = fill + (m−1)·[max(max f, max o) + max(max b, max o)] + stagger

1F1B (PipeDream-Flush: stage k runs ``p−1−k`` warm-up forwards, then one forward + one backward per
round, then the cool-down backwards) has no exact closed form once stages, links and latencies differ.
It is evaluated round by round: round r runs forward ``r+p−1−k`` then backward r on stage k; forwards
only depend on the previous round and backwards are one sweep from the last stage up, so a round is
O(p). The steady rounds of a max-plus linear system become periodic; once the state repeats up to a
constant shift the remaining steady rounds are skipped (exact, so the cost stays ~O(p²) for large m).
The steady period is the maximum cycle mean ``τ = max(max c, max o, max_{k<k'} (Σ_{k..k'} c +
2·Σ_{k..k'−1}(l + x)) / (k'−k+1))``: a round trip over stages k..k' carries only ``k'−k+1``
micro-batches in flight. Exact for one pipeline and for spatial sharing; temporal sharing adds the
stagger to the first pipeline's time, capped by the spatial time (taking the link in turn is never
slower than splitting it), within 5% of the simulation in ``tests/test_geo_sim.py``.

Changes versus the background's ``T ≈ (m−1)·τ + Σc + 2Σ(l + A/B)``: (1) GPipe runs the forward and
the backward phase one after the other, so a WAN-bound link costs ``2·(m−1)·D·A/B``; (2) the fill uses
the transit one pipeline actually sees (``D·A/B`` when the link is split); (3) temporal sharing adds
the stagger; (4) 1F1B's in-flight limit over WAN round trips and its warm-up/cool-down transients are
computed, not approximated (the earlier ``fill + (m−1)·τ`` form was off by up to ~25% for m ≈ p).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = [
    "SCHEDULES",
    "SHARINGS",
    "PipelineTiming",
    "LinkView",
    "link_view",
    "steady_period",
    "pipeline_time",
]

SCHEDULES = ("gpipe", "1f1b")
SHARINGS = ("spatial", "temporal")


@dataclass(frozen=True, kw_only=True)
class PipelineTiming:
    """Timing of one pipeline flush, seconds."""

    total: float
    fill: float
    period: float  # mean time per extra micro-batch: (total − fill − stagger) / (m − 1)
    stagger: float
    bound: str  # "compute", "wan" or "round-trip" (1F1B in-flight limit over a WAN round trip)
    phase_periods: tuple[float, float] = (0.0, 0.0)  # GPipe (forward, backward); 1F1B (period, 0)


@dataclass(frozen=True)
class LinkView:
    """Boundaries as one pipeline sees them: seconds per transfer on the wire (``transit``), minimum
    spacing of its consecutive transfers (``occupancy``), one-way ``latency``; ``stagger`` = delay of
    the last pipeline behind the first (temporal sharing)."""

    latency: tuple[float, ...]
    transit: tuple[float, ...]
    occupancy: tuple[float, ...]
    stagger: float

    @property
    def hop(self) -> list[float]:
        """Latency + transit per boundary, seconds."""
        return [lk + xk for lk, xk in zip(self.latency, self.transit, strict=True)]


def link_view(
    latency: list[float], transfer: list[float], wan: list[bool], dp: int, sharing: str
) -> LinkView:
    """Per-pipeline transit/occupancy of each boundary for ``sharing`` (see the module docstring)."""
    occ = [dp * a if w else a for a, w in zip(transfer, wan, strict=True)]
    transit = occ if sharing == "spatial" else list(transfer)
    wan_a = [a for a, w in zip(transfer, wan, strict=True) if w]
    stagger = (dp - 1) * max(wan_a) if sharing == "temporal" and wan_a else 0.0
    return LinkView(tuple(latency), tuple(transit), tuple(occ), stagger)


def steady_period(c: list[float], view: LinkView) -> tuple[float, str]:
    """1F1B steady period τ (maximum cycle mean, seconds) and what binds it; O(p²)."""
    best, bound = max(c), "compute"
    if view.occupancy and max(view.occupancy) > best:
        best, bound = max(view.occupancy), "wan"
    p = len(c)
    if p > 1:
        cc = np.concatenate(([0.0], np.cumsum(c)))
        hh = np.concatenate(([0.0], np.cumsum(view.hop)))
        k, k2 = np.triu_indices(p, 1)
        cycle = (cc[k2 + 1] - cc[k] + 2.0 * (hh[k2] - hh[k])) / (k2 - k + 1)
        if float(cycle.max()) > best * (1 + 1e-12):
            best, bound = float(cycle.max()), "round-trip"
    return best, bound


def _gpipe(f: list[float], b: list[float], view: LinkView, m: int, fill: float) -> PipelineTiming:
    omax = max(view.occupancy, default=0.0)
    pf, pb = max(max(f), omax), max(max(b), omax)
    bound = "wan" if omax > min(max(f), max(b)) else "compute"
    total = fill + (m - 1) * (pf + pb) + view.stagger
    return PipelineTiming(
        total=total, fill=fill, period=pf + pb, stagger=view.stagger, bound=bound, phase_periods=(pf, pb)
    )


class _Rounds:
    """The 1F1B schedule of one pipeline executed round by round (see the module docstring)."""

    def __init__(self, f: list[float], b: list[float], hop: list[float], occ: list[float]) -> None:
        self.f, self.b, self.hop, self.occ, self.p = f, b, hop, occ, len(f)
        self.free = [0.0] * self.p  # end of each stage's last op
        self.arr = [0.0] * self.p  # arrival of the next forward input at each stage
        self.fl = [-math.inf] * (self.p - 1)  # start of the last activation send per boundary
        self.bl = [-math.inf] * (self.p - 1)  # start of the last gradient send per boundary

    def run(self, r: int, m: int) -> None:
        """Round r: forward ``r+p−1−k`` (if any) on every stage, then backward r (if r ≥ 0)."""
        f, occ, free, arr, fl = self.f, self.occ, self.free, self.arr, self.fl
        for k in range(self.p - 1, -1, -1):  # bottom-up: stage k consumes arr[k] before k−1 refreshes it
            if 0 <= r + self.p - 1 - k < m:
                t = free[k] = max(free[k], arr[k]) + f[k]
                if k < self.p - 1:
                    s = fl[k] = max(t, fl[k] + occ[k])
                    arr[k + 1] = s + self.hop[k]
        if r < 0:
            return
        up, bl = -math.inf, self.bl
        for k in range(self.p - 1, -1, -1):
            t = free[k] = max(free[k], up) + self.b[k]
            if k > 0:
                s = bl[k - 1] = max(t, bl[k - 1] + occ[k - 1])
                up = s + self.hop[k - 1]

    def state(self) -> list[float]:
        return self.free + self.fl + self.bl + self.arr[1:]

    def shift(self, delta: float) -> None:
        self.free = [t + delta for t in self.free]
        self.arr = self.arr[:1] + [t + delta for t in self.arr[1:]]
        self.fl = [t + delta for t in self.fl]
        self.bl = [t + delta for t in self.bl]


def _period_of(hist: list[list[float]], p: int) -> tuple[int, float] | None:
    """(c, shift) when the last state equals the one c rounds earlier plus a constant shift."""
    h = np.asarray(hist[-(p + 1) :])
    diff = h[-1] - h[-2::-1]  # row c−1: state(r) − state(r−c)
    spread = diff.max(axis=1) - diff.min(axis=1)
    tol = 1e-10 * max(1.0, float(np.abs(h[-1]).max()))
    hits = np.flatnonzero(spread <= tol)
    return (int(hits[0]) + 1, float(diff[hits[0]].mean())) if hits.size else None


def _one_f_one_b_end(f: list[float], b: list[float], view: LinkView, m: int) -> float:
    """End of the last backward on stage 0 for one pipeline (exact, no stagger)."""
    p = len(f)
    sched = _Rounds(f, b, view.hop, list(view.occupancy))
    last_steady = m - p  # rounds 0..m−p run a forward and a backward on every stage
    hist: list[list[float]] = []
    r = -(p - 1)
    while r < m:
        sched.run(r, m)
        if 0 <= r < last_steady:
            hist.append(sched.state())
            if len(hist) > p and len(hist) % p == 0 and last_steady - r > p:
                found = _period_of(hist, p)
                if found is not None:
                    c, delta = found
                    q = (last_steady - r) // c
                    sched.shift(q * delta)
                    r += q * c
                    hist.clear()
        r += 1
    return sched.free[0]


def pipeline_time(
    f: list[float],
    b: list[float],
    latency: list[float],
    transfer: list[float],
    wan: list[bool],
    dp: int,
    m: int,
    schedule: str = "1f1b",
    sharing: str = "temporal",
) -> PipelineTiming:
    """Time of one pipeline flush (no all-reduce), seconds.

    ``f``/``b``: forward/backward seconds per micro-batch per stage (p values); ``latency``: one-way
    seconds per boundary (p−1); ``transfer``: seconds to send one activation at the full effective link
    bandwidth (``A / B_eff``); ``wan``: whether the boundary is a WAN link shared by the ``dp`` pipelines
    (intra-DC boundaries are not shared). See the module docstring for the algebra.
    """
    if schedule not in SCHEDULES or sharing not in SHARINGS:
        raise ValueError(f"schedule/sharing must be in {SCHEDULES}/{SHARINGS}, got {schedule!r}/{sharing!r}")
    c = [fi + bi for fi, bi in zip(f, b, strict=True)]
    view = link_view(latency, transfer, wan, dp, sharing)
    fill = sum(c) + 2.0 * sum(view.hop)
    if schedule == "gpipe":
        return _gpipe(f, b, view, m, fill)
    tau, bound = steady_period(c, view)
    end = _one_f_one_b_end(f, b, view, m)
    stagger = view.stagger
    if stagger > 0:  # never slower than keeping a fixed D-way split of each link (spatial, exact)
        split = _one_f_one_b_end(f, b, link_view(latency, transfer, wan, dp, "spatial"), m)
        stagger = max(0.0, min(stagger, split - end))
    period = (end - fill) / (m - 1) if m > 1 else tau
    return PipelineTiming(
        total=end + stagger,
        fill=fill,
        period=period,
        stagger=stagger,
        bound=bound,
        phase_periods=(period, 0.0),
    )
