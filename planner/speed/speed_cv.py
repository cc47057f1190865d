"""Out-of-sample residuals of the speed model by distance from the fitted domain (used at fit time only).

Each scheme re-fits the model without a held-out group and predicts the group the way the planner would
(by name, FLOPs and parameters; the known-network table rebuilt from the training part only):

* ``none``: same networks and GPUs, other shapes — 5 folds over the observations;
* ``network``: an unseen network — leave one network out (its single-worker and cluster rows);
* ``gpu``: an unseen GPU — fit on one GPU's rows, predict the other's;
* ``workers``: more workers than measured — fit on clusters of up to ``WORKERS_CUT`` workers, predict more;
* ``ps``: more parameter servers than measured — fit on 1-PS rows, predict the 2-PS rows.

The residual is ``log(measured / predicted)`` of steps/s; its P10 and P90 make the prediction band of
:mod:`cmdare.planner.speed.speed_band`. For ``workers`` the band grows with the distance from the measured domain:
its residuals are divided by ``log2(workers / most workers in the training part)`` (per octave beyond the
measured domain; the band is the wider of the in-domain band and this times the distance). Deterministic.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

import numpy as np

from cmdare.collectors.samples import ModelSpec
from cmdare.planner.speed.network_catalog import KnownNetwork, family_of
from cmdare.planner.speed.speed_model import Observation, SpeedModel

__all__ = [
    "CATEGORIES",
    "SCHEMES",
    "fit_on",
    "interval_table",
    "known_from",
    "predict_obs",
    "quantiles",
    "residuals",
]

CATEGORIES = ("none", "network", "gpu", "ps", "workers")
WORKERS_CUT = 4  # the "more workers" split: fit on <= 4 workers, predict 5-8
FOLDS = 5

Split = tuple[list[Observation], list[Observation]]


def known_from(obs: Sequence[Observation]) -> dict[str, KnownNetwork]:
    """The known-network table (measured single-worker speeds at 0.3 ms) that ``obs`` would give."""
    groups: dict[tuple[str, str], list[float]] = {}
    facts: dict[str, Observation] = {}
    for o in obs:
        if o.workers == 1 and o.latency_ms < 1.0 and o.source == "0latency":
            groups.setdefault((o.name, o.gpu), []).append(o.steps_per_sec)
            facts.setdefault(o.name, o)
    out: dict[str, KnownNetwork] = {}
    for (name, gpu), speeds in sorted(groups.items()):
        o = facts[name]
        k = out.get(name) or KnownNetwork(
            name=name,
            family=family_of(name) or "",
            model_flops=o.model_flops,
            params=o.params,
            tensors=int(o.tensors),
            batch_size=128,
        )
        out[name] = replace(k, measured={**k.measured, gpu: float(np.mean(speeds))})
    return out


def fit_on(train: Sequence[Observation]) -> SpeedModel:
    """The model fitted on ``train`` with the known-network table of ``train`` only."""
    return SpeedModel(known=known_from(train)).fit(list(train))


def predict_obs(model: SpeedModel, o: Observation) -> float:
    """Predicted steps/s of an observation's shape, given as a user would (name, FLOPs, parameters)."""
    net = ModelSpec(name=o.name, model_flops=o.model_flops, params=o.params)
    return model.predict(net, {o.gpu: o.workers}, ps=o.ps, latency_ms=o.latency_ms).steps_per_sec


def _folds(obs: Sequence[Observation]) -> Iterator[Split]:
    for k in range(FOLDS):
        yield (
            [o for i, o in enumerate(obs) if i % FOLDS != k],
            [o for i, o in enumerate(obs) if i % FOLDS == k],
        )


def _networks(obs: Sequence[Observation]) -> Iterator[Split]:
    for name in sorted({o.name for o in obs}):
        yield [o for o in obs if o.name != name], [o for o in obs if o.name == name]


def _gpus(obs: Sequence[Observation]) -> Iterator[Split]:
    gpus = sorted({o.gpu for o in obs})
    for gpu in gpus if len(gpus) > 1 else []:
        yield [o for o in obs if o.gpu != gpu], [o for o in obs if o.gpu == gpu]


def _workers(obs: Sequence[Observation]) -> Iterator[Split]:
    cut = (
        WORKERS_CUT if max(o.workers for o in obs) > WORKERS_CUT else max(1, max(o.workers for o in obs) // 2)
    )
    far = [o for o in obs if o.workers > cut]
    if far:
        yield [o for o in obs if o.workers <= cut], far


def _ps(obs: Sequence[Observation]) -> Iterator[Split]:
    more = [o for o in obs if o.ps > 1]
    if more:
        yield [o for o in obs if o.ps == 1], more


SCHEMES: dict[str, Callable[[Sequence[Observation]], Iterator[Split]]] = {
    "none": _folds,
    "network": _networks,
    "gpu": _gpus,
    "workers": _workers,
    "ps": _ps,
}


def residuals(obs: Sequence[Observation], category: str) -> list[tuple[Observation, float, float]]:
    """(held-out observation, predicted steps/s, log residual) of every split of ``category``."""
    out = []
    for train, test in SCHEMES[category](obs):
        if not train or not any(o.workers == 1 for o in train):
            continue
        model = fit_on(train)
        for o in test:
            pred = predict_obs(model, o)
            out.append((o, pred, float(np.log(o.steps_per_sec / pred))))
    return out


def quantiles(logs: Sequence[float]) -> dict[str, float]:
    """P10/P90 of log residuals (``n`` = how many); empty input gives a zero-width band with n = 0."""
    if not logs:
        return {"p10": 0.0, "p90": 0.0, "n": 0}
    q10, q90 = np.quantile(np.asarray(logs, dtype=float), [0.1, 0.9])
    return {"p10": round(float(q10), 5), "p90": round(float(q90), 5), "n": len(logs)}


def interval_table(obs: Sequence[Observation]) -> dict[str, dict[str, float]]:
    """P10/P90 (and n) of the out-of-sample log residuals of every category; ``workers`` per octave."""
    table = {}
    for c in CATEGORIES:
        if c != "workers":
            table[c] = quantiles([r for _, _, r in residuals(obs, c)])
            continue
        per_octave = []
        for train, test in _workers(obs):
            top = max(o.workers for o in train)
            model = fit_on(train)
            for o in test:
                per_octave.append(
                    float(np.log(o.steps_per_sec / predict_obs(model, o))) / np.log2(o.workers / top)
                )
        table[c] = {**quantiles(per_octave), "per_octave": 1}
    return table
