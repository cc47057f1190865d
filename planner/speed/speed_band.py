"""Prediction bands (P10–P90) of the speed model and the domain of validity they depend on.

The band comes from the model's out-of-sample residuals by distance from the fitted domain (computed
by ``scripts/fit_speed_model.py`` with :mod:`cmdare.planner.speed.speed_cv`, stored in ``speed_model.json`` under
``intervals``): ``none`` (a measured network on a measured GPU), ``network`` (unseen network), ``gpu``
(unseen GPU), ``workers`` (more workers than measured) and ``ps`` (more parameter servers than measured).
When a shape is outside the domain in several ways the widest applicable band is used and the label names
it. For more parameter servers than measured the band also spans the variable placement, which the data
cannot pin down: from the least favourable layout (:func:`cmdare.planner.speed.ps_tier.busiest_share`,
``placement="worst"``; for two servers this is "the extra PS adds nothing") to a byte-balanced one.

Public API (used by ``predict``, the planner and the rules):

* :func:`speed_band` -> :class:`SpeedBand` (``steps_per_sec``, ``p10``, ``p90``, ``extrapolation``, ``basis``);
* :func:`ps_gain_band` -> :class:`GainBand` (relative gain P10/P50/P90 of a PS change, ``includes_no_gain``,
  ``describe()`` = "predicted +X% (P10–P90 a–b%)");
* :func:`shape_bands` — the band for arrays of homogeneous shapes (``steps_per_sec_p10``/``_p90``,
  ``extrapolation``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from cmdare.collectors.samples import ModelSpec
from cmdare.planner.speed.gpu_catalog import get_gpu
from cmdare.planner.speed.speed_model import REF_LATENCY_MS, SpeedModel, SpeedPrediction

__all__ = [
    "EXTRAPOLATIONS",
    "GainBand",
    "SpeedBand",
    "extrapolations",
    "mix_bands",
    "ps_gain_band",
    "shape_bands",
    "speed_band",
]

EXTRAPOLATIONS = ("none", "network", "gpu", "ps", "workers")
_LABELS = {
    "none": "measured network and GPU",
    "network": "unseen network",
    "gpu": "unseen GPU",
    "ps": "more parameter servers than measured",
    "workers": "more workers than measured",
}


@dataclass(frozen=True, kw_only=True)
class SpeedBand:
    """A predicted speed (global steps/s) with its P10–P90 band and how far it extrapolates."""

    steps_per_sec: float
    p10: float
    p90: float
    extrapolation: str  # one of EXTRAPOLATIONS: the one that sets the band's width
    extrapolations: tuple[str, ...]  # every way the shape is outside the measured domain
    basis: str  # which residuals (and how many) the band rests on


@dataclass(frozen=True)
class GainBand:
    """Relative change of speed (0.25 = +25 %) of a PS change: expected value and P10–P90."""

    p10: float
    p50: float
    p90: float
    includes_no_gain: bool
    basis: str


def _q(model: SpeedModel, category: str) -> tuple[float, float, int]:
    """(P10, P90, n) log residuals of ``category``; without residuals of it, the widest that has some."""
    iv = model.intervals_.get(category) or {}
    if not iv.get("n"):
        have = [v for v in model.intervals_.values() if v.get("n")]
        iv = max(have, key=lambda v: v["p90"] - v["p10"], default={})
    return float(iv.get("p10", 0.0)), float(iv.get("p90", 0.0)), int(iv.get("n", 0))


def extrapolations(
    model: SpeedModel, network: ModelSpec, gpus: Mapping[str, int], ps: int
) -> tuple[str, ...]:
    """Every way a shape lies outside the measured domain (empty = inside)."""
    dom = model.domain_
    known = model._resolve(network).known
    out = [] if known is not None else ["network"]
    names = {get_gpu(g).name for g, n in gpus.items() if int(n) > 0}
    if not names <= set(dom.get("gpus", ())):
        out.append("gpu")
    key = f"{'+'.join(sorted(names))}/{known.name if known is not None else '?'}"
    if ps > int(dict(dom.get("max_ps", {})).get(key, dom.get("default_max_ps", 1))):
        out.append("ps")
    if sum(int(n) for n in gpus.values()) > int(dom.get("max_workers", 8)):
        out.append("workers")
    return tuple(out)


def speed_band(
    model: SpeedModel,
    network: ModelSpec,
    gpus: Mapping[str, int],
    ps: int = 1,
    latency_ms: float = REF_LATENCY_MS,
    prediction: SpeedPrediction | None = None,
) -> SpeedBand:
    """The P10–P90 band of ``model.predict(network, gpus, ps, latency_ms)`` (pass it as ``prediction``)."""
    pred = prediction or model.predict(network, gpus, ps=ps, latency_ms=latency_ms)
    x = pred.steps_per_sec
    cats = extrapolations(model, network, gpus, ps)
    widths: dict[str, tuple[float, float, str]] = {}
    for c in [c for c in cats if c != "ps"] or ["none"]:
        q10, q90, n = _q(model, c)
        if c == "workers" and model.intervals_.get(c, {}).get("per_octave"):
            octaves = math.log2(sum(int(v) for v in gpus.values()) / int(model.domain_.get("max_workers", 8)))
            r10, r90, _ = _q(model, "none")
            q10, q90 = min(r10, q10 * octaves), max(r90, q90 * octaves)
        widths[c] = (x * math.exp(q10), x * math.exp(q90), f"{_LABELS[c]} (n={n})")
    if "ps" in cats:
        q10, q90, n = _q(model, "ps")
        r10, r90, _ = _q(model, "none")
        worst = model.predict(network, gpus, ps=ps, latency_ms=latency_ms, placement="worst").steps_per_sec
        best = model.predict(network, gpus, ps=ps, latency_ms=latency_ms, placement="balanced").steps_per_sec
        lo = min(x * math.exp(q10), worst * math.exp(r10))
        hi = max(x * math.exp(q90), best * math.exp(r90))
        widths["ps"] = (lo, hi, f"{_LABELS['ps']} (n={n}) and variable placement worst..balanced")
    label = max(widths, key=lambda c: math.log(widths[c][1] / widths[c][0]))
    lo, hi, basis = widths[label]
    lo, hi = min([w[0] for w in widths.values()] + [x]), max([w[1] for w in widths.values()] + [x])
    return SpeedBand(
        steps_per_sec=x,
        p10=lo,
        p90=hi,
        extrapolation=label,
        extrapolations=cats,
        basis="out-of-sample residuals: " + basis,
    )


def ps_gain_band(
    model: SpeedModel, network: ModelSpec, gpus: Mapping[str, int], ps_from: int, ps_to: int
) -> GainBand:
    """Relative speed change of going from ``ps_from`` to ``ps_to`` parameter servers, with its band."""
    base = model.predict(network, gpus, ps=ps_from).steps_per_sec
    mid = model.predict(network, gpus, ps=ps_to).steps_per_sec / base
    worst = model.predict(network, gpus, ps=ps_to, placement="worst").steps_per_sec / base
    best = model.predict(network, gpus, ps=ps_to, placement="balanced").steps_per_sec / base
    q10, q90, n = _q(model, "ps")
    lo, hi = min(mid, worst * math.exp(q10)), max(mid, best * math.exp(q90))
    basis = f"variable placement worst..balanced, 2-PS residuals (n={n})"
    return GainBand(lo - 1.0, mid - 1.0, hi - 1.0, lo <= 1.0, basis)


def shape_bands(
    model: SpeedModel,
    network: ModelSpec,
    gpu: np.ndarray,
    workers: np.ndarray,
    ps: np.ndarray,
    latency_ms: float = REF_LATENCY_MS,
    steps_per_sec: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Vectorised :func:`speed_band` over homogeneous shapes (``gpu[i]`` × ``workers[i]``, ``ps[i]``):
    the same categories, widths and label, computed on arrays (``steps_per_sec``: the shapes'
    :meth:`~SpeedModel.predict_shapes` speeds when already known)."""
    gpu = np.asarray(gpu).astype(str)
    workers, ps = np.asarray(workers, dtype=float), np.asarray(ps, dtype=float)
    if steps_per_sec is None:
        steps_per_sec = model.predict_shapes(network, gpu, workers, ps, latency_ms)["steps_per_sec"]
    names, inverse = np.unique(gpu, return_inverse=True)
    sets = [frozenset((get_gpu(g).name,)) for g in names]

    def at(rows: np.ndarray, placement: str) -> np.ndarray:
        args = (network, gpu[rows], workers[rows], ps[rows], latency_ms)
        return model.predict_shapes(*args, placement=placement)["steps_per_sec"]

    return _bands(model, network, np.asarray(steps_per_sec, dtype=float), sets, inverse, workers, ps, at)


def mix_bands(
    model: SpeedModel,
    network: ModelSpec,
    names: list[str],
    gpu_at: np.ndarray,
    count_at: np.ndarray,
    ps: np.ndarray,
    steps_per_sec: np.ndarray,
    latency_ms: float = REF_LATENCY_MS,
) -> dict[str, np.ndarray]:
    """Vectorised :func:`speed_band` over GPU mixes laid out as :meth:`SpeedModel.predict_mixes` takes
    them (``steps_per_sec``: its speeds)."""
    gpu_at, count_at = np.asarray(gpu_at, dtype=int), np.asarray(count_at, dtype=float)
    ps = np.asarray(ps, dtype=float)
    canonical = [get_gpu(g).name for g in names]
    keys = [frozenset(canonical[g] for g, c in zip(gs, cs, strict=True) if c > 0)
            for gs, cs in zip(gpu_at.tolist(), count_at.tolist(), strict=True)]  # fmt: skip
    sets = list(dict.fromkeys(keys))
    index = {k: i for i, k in enumerate(sets)}
    inverse = np.array([index[k] for k in keys], dtype=int)

    def at(rows: np.ndarray, placement: str) -> np.ndarray:
        args = (network, names, gpu_at[rows], count_at[rows], ps[rows], latency_ms)
        return model.predict_mixes(*args, placement=placement)["steps_per_sec"]

    workers = count_at.sum(axis=1)
    return _bands(model, network, np.asarray(steps_per_sec, dtype=float), sets, inverse, workers, ps, at)


def _bands(
    model: SpeedModel,
    network: ModelSpec,
    x: np.ndarray,
    sets: list[frozenset[str]],
    inverse: np.ndarray,
    workers: np.ndarray,
    ps: np.ndarray,
    at: Callable[[np.ndarray, str], np.ndarray],
) -> dict[str, np.ndarray]:
    """:func:`speed_band`'s categories, widths and label on arrays: row ``i`` runs the GPU types
    ``sets[inverse[i]]``; ``at(rows, placement)`` predicts those rows under another placement."""
    dom = model.domain_
    known = model._resolve(network).known
    measured_gpus = set(dom.get("gpus", ()))
    max_ps_by = dict(dom.get("max_ps", {}))
    net_name = known.name if known is not None else "?"
    default_max_ps = dom.get("default_max_ps", 1)
    max_ps = np.array(
        [int(max_ps_by.get(f"{'+'.join(sorted(k))}/{net_name}", default_max_ps)) for k in sets]
    )[inverse]
    max_workers = int(dom.get("max_workers", 8))
    present = {  # in speed_band's order: the first of equally wide bands names it
        "network": np.full(x.size, known is None),
        "gpu": ~np.array([k <= measured_gpus for k in sets])[inverse],
        "workers": workers > max_workers,
    }
    present = {"none": ~np.logical_or.reduce(list(present.values())), **present, "ps": ps > max_ps}
    lo, hi = np.full((5, x.size), np.nan), np.full((5, x.size), np.nan)
    for k, c in enumerate(present):
        rows = present[c]
        if not rows.any():
            continue
        q10, q90, _ = _q(model, c)
        xs = x[rows]
        if c == "workers" and model.intervals_.get(c, {}).get("per_octave"):
            octaves = np.log2(workers[rows] / max_workers)
            r10, r90, _ = _q(model, "none")
            lo[k, rows], hi[k, rows] = (
                xs * np.exp(np.minimum(r10, q10 * octaves)),
                xs * np.exp(np.maximum(r90, q90 * octaves)),
            )
        elif c == "ps":
            r10, r90, _ = _q(model, "none")
            worst, best = at(rows, "worst"), at(rows, "balanced")
            lo[k, rows] = np.minimum(xs * math.exp(q10), worst * math.exp(r10))
            hi[k, rows] = np.maximum(xs * math.exp(q90), best * math.exp(r90))
        else:
            lo[k, rows], hi[k, rows] = xs * math.exp(q10), xs * math.exp(q90)
    with np.errstate(invalid="ignore", divide="ignore"):
        width = np.where(np.isnan(lo), -np.inf, np.log(hi / lo))
    label = np.array(list(present))[np.argmax(width, axis=0)]
    return {
        "steps_per_sec_p10": np.fmin(np.nanmin(lo, axis=0), x),
        "steps_per_sec_p90": np.fmax(np.nanmax(hi, axis=0), x),
        "extrapolation": label,
    }
