"""Training speed of asynchronous parameter-server (PS) clusters, fitted on the CM-DARE measurements.

Physical structure (all times in seconds per global step; fitted coefficients are non-negative):

* worker cycle ``Z = compute + latency`` with ``compute = smax_q(gpu, w_tensor·T/peak)`` (smooth
  maximum ``(x^q + y^q)^(1/q)``, ``q = overlap_q`` fitted) and
  ``gpu = a_flops·F/peak + a_mem·F·sqrt(T/P)/mem_bw + a_const/mem_bw``
  (F = model FLOPs per step, P = parameters, T = parameter tensors; peak in FLOP/s, mem_bw in B/s; the
  second term is activation traffic, which scales with FLOPs over layer width sqrt(P/T); the third is
  fixed per-step memory/launch-bound work). Every compute term scales with a catalog feature of the
  GPU (no per-GPU free parameter), so unmeasured GPUs are predicted from their spec sheet. The
  ``w_tensor`` floor is per-layer work that cannot go faster than a minimum time per parameter tensor
  (small kernels, send/recv per variable) and overlaps with the FLOP/byte-bound work: it binds only
  for many tiny tensors on a fast GPU (CM-DARE shake16 on P100, 0latency_p100_new2.csv). Scaled by
  1/peak (kernel floor ~ GPU clock); a GPU-independent floor was tried and made leave-one-GPU-out
  worse (K80 data alone then puts the floor too high for P100). ``latency = L_ms·(lat_const + lat_param·P)``: a fixed
  number of round trips per step (tensors travel in parallel) plus window-limited transfer of the
  parameters;
* PS tier (:mod:`cmdare.planner.speed.ps_tier`): the busiest server's service per step
  ``s = ps_const + ps_tensor·T/n_ps + ps_param·P·u`` with ``u`` its share of the bytes under TensorFlow's
  round-robin placement (not ``1/n_ps``: placement ignores tensor sizes); the worker's cycle waits
  ``s_w`` = the same plus the worker-side share ``ps_wire`` of the per-byte time, which more servers do
  not shorten; a given PS NIC caps ``ps_param`` at 4 B each way per parameter at line rate;
* cluster rate: the compute-bound rate ``R = Σ_i 1/(Z_i + s_w)`` and the PS capacity ``C = 1/s`` combine as
  ``X = (R^-p + C^-p)^(-1/p)`` (a smooth minimum; ``p`` fitted), so the P100 plateaus come from ``C``.

When a network's name is known (``networks.csv``) and it was measured on the GPU, its measured
single-worker speed fixes ``Z``; measured speed on another GPU rescales the feature prediction.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Any, TypedDict

import numpy as np
import numpy.typing as npt

from cmdare.collectors.samples import ModelSpec
from cmdare.planner.speed.gpu_catalog import get_gpu
from cmdare.planner.speed.network_catalog import (
    KnownNetwork,
    canonical_network_name,
    depth_of,
    family_of,
    lookup_network,
)
from cmdare.planner.speed.ps_tier import busiest_share, capacity_seconds, cycle_seconds, share_of
from cmdare.planner.speed.speed_fit import Observation, fit_params, fit_tensor_rule
from cmdare.planner.speed.speed_terms import Floats, blend, compute_time, latency_time, max_share_rule

__all__ = ["SpeedPrediction", "Observation", "SpeedModel"]

REF_LATENCY_MS = 0.3  # CM-DARE "Latency (ms)" of the baseline runs (speed_data/0latency_*.csv)
FITTED_SOURCE = "fitted model (CM-DARE, speed_model.json)"
MEASURED_SOURCE = "measured single-worker speed (networks.csv) + fitted PS/latency terms"


@dataclass(frozen=True, kw_only=True)
class SpeedPrediction:
    """Predicted cluster speed. Rates in global steps/s; ``terms`` in seconds per step."""

    steps_per_sec: float
    examples_per_sec: float
    bottleneck: str  # "compute" | "ps" | "network"
    ps_utilization: float
    worker_steps_per_sec: dict[str, float]
    compute_bound_steps_per_sec: float
    terms: dict[str, float]
    source: str


@dataclass(frozen=True, kw_only=True)
class _Net:
    """A network resolved to model features."""

    flops: float
    params: float
    tensors: float
    known: KnownNetwork | None
    max_share: float  # largest tensor's share of the parameters (placement imbalance)
    family: str | None = None  # "resnet" | "shake" | None (sets the round-robin period)


def _z_from_measured(speed: float, s: float, p: float) -> float:
    """Worker cycle Z that makes a single worker with PS time ``s`` run at ``speed`` steps/s."""
    inner = speed ** (-p) - s**p
    if inner <= 0:
        return 1e-6
    return max(float(inner ** (1.0 / p)) - s, 1e-6)


class MeasuredDomain(TypedDict, total=False):
    """What the model was fitted on (``domain`` in ``speed_model.json``): a shape past it extrapolates."""

    gpus: list[str]  # GPU types measured
    max_ps: dict[str, int]  # most parameter servers measured, by "GPU+GPU/network"
    default_max_ps: int  # for a GPU set and network not in max_ps
    max_workers: int  # most workers measured


@dataclass
class SpeedModel:
    """Estimator of cluster speed (scikit-learn style: ``fit`` returns self, fitted attrs end in ``_``).

    ``known`` overrides the shipped network table (``None`` = ``networks.csv``); ``compute_scale`` and
    ``ps_scale`` are per-job calibration factors (worker time × compute_scale, PS capacity × ps_scale).
    """

    known: Mapping[str, KnownNetwork] | None = None
    compute_scale: float = 1.0
    ps_scale: float = 1.0
    params_: dict[str, float] = field(default_factory=dict)
    tensor_rule_: dict[str, float] = field(default_factory=dict)
    provenance_: dict[str, object] = field(default_factory=dict)
    intervals_: dict[str, dict[str, float]] = field(default_factory=dict)  # log-residual P10/P90 by category
    domain_: MeasuredDomain = field(default_factory=lambda: MeasuredDomain())  # (speed_band.extrapolation)

    @classmethod
    def load(cls) -> SpeedModel:
        """The shipped model (``planner/data/speed_model.json``), cached."""
        return _load_shipped()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SpeedModel:
        """The model of a parsed ``speed_model.json`` document (:meth:`to_dict`'s layout)."""
        return cls(
            params_=dict(data["params"]),
            tensor_rule_=dict(data["tensor_rule"]),
            provenance_=dict(data.get("provenance", {})),
            intervals_=dict(data.get("intervals", {})),
            domain_=data.get("domain") or MeasuredDomain(),
        )

    def with_scales(self, compute_scale: float, ps_scale: float) -> SpeedModel:
        """A copy anchored on one job: worker time × ``compute_scale``, PS capacity × ``ps_scale``."""
        return replace(self, compute_scale=float(compute_scale), ps_scale=float(ps_scale))

    def fit(self, observations: Sequence[Observation]) -> SpeedModel:
        """Fit all coefficients on measured speeds (non-negative least squares on log speed)."""
        self.tensor_rule_ = fit_tensor_rule(observations)
        self.params_ = fit_params(observations)
        return self

    # ----------------------------------------------------------------- network resolution
    def _lookup(self, name: str | None) -> KnownNetwork | None:
        if self.known is None:
            return lookup_network(name)
        return self.known.get(canonical_network_name(name)) if name else None

    def estimate_tensors(self, name: str | None, params: float) -> float:
        """Parameter-tensor count from the family named in ``name`` (fitted rules in speed_model.json)."""
        rule = self.tensor_rule_
        if family_of(name) == "shake":
            depth = depth_of(name) or 26
            return rule["shake_tensors_d26"] * ((depth - 2) / 6.0) / 4.0  # blocks per stage scale
        return float(np.exp(rule["resnet_log_a"]) * params ** rule["resnet_b"])

    def _resolve(self, net: ModelSpec) -> _Net:
        known = self._lookup(net.name)
        usable = (
            known is not None
            and net.effective_batch_size == known.batch_size
            and abs(net.model_flops / known.model_flops - 1) < 0.05
            and abs(net.params / known.params - 1) < 0.05
        )
        if net.tensors is not None:
            tensors = float(net.tensors)
        elif known is not None:
            tensors = float(known.tensors)
        else:
            tensors = self.estimate_tensors(net.name, net.params)
        fam = family_of(net.name)
        share = float(max_share_rule(self.tensor_rule_, fam, net.params))
        return _Net(
            flops=float(net.model_flops),
            params=float(net.params),
            tensors=tensors,
            known=known if usable else None,
            max_share=share,
            family=fam,
        )

    # ----------------------------------------------------------------- per-GPU worker cycle
    def _worker_z(self, net: _Net, gpu_name: str, latency_ms: float) -> tuple[float, float, bool]:
        """(compute seconds, latency seconds, measured?) of one worker's cycle excluding PS service."""
        th = self.params_
        spec = get_gpu(gpu_name)
        f, p, t = net.flops, net.params, net.tensors
        comp = float(compute_time(th, f, p, t, spec.fp32_tflops, spec.mem_bw_gbs))
        lat = float(latency_time(th, p, t, latency_ms))
        measured = False
        if net.known is not None and net.known.measured:
            ratios = []
            s1 = float(cycle_seconds(th, p, t, 1, 1.0))
            for g, speed in net.known.measured.items():
                gs = get_gpu(g)
                z_meas = _z_from_measured(speed, s1, th["blend_p"])
                z_ref = float(latency_time(th, p, t, REF_LATENCY_MS))
                z_feat = float(compute_time(th, f, p, t, gs.fp32_tflops, gs.mem_bw_gbs))
                if gs.name == spec.name:
                    return max(z_meas - z_ref, 1e-6) * self.compute_scale, lat * self.compute_scale, True
                ratios.append(max(z_meas - z_ref, 1e-6) / z_feat)
            comp *= float(np.exp(np.mean(np.log(ratios))))
            measured = True
        return comp * self.compute_scale, lat * self.compute_scale, measured

    def _ps_seconds(
        self, net: _Net, ps: npt.ArrayLike, nic_gbps: float | None = None, placement: str = "round-robin"
    ) -> tuple[Floats, Floats]:
        """(busiest PS seconds per step, PS seconds in a worker's cycle), calibrated by ``ps_scale``."""
        share: float | Floats
        if np.ndim(ps) == 0:
            share = share_of(int(np.asarray(ps)), net.max_share, net.family, placement)
        else:
            share = busiest_share(ps, net.max_share, net.family, placement)
        args = (self.params_, net.params, net.tensors, ps, share, nic_gbps)
        return capacity_seconds(*args) / self.ps_scale, cycle_seconds(*args) / self.ps_scale

    # ----------------------------------------------------------------- public predictions
    def predict(
        self,
        network: ModelSpec,
        gpus: Mapping[str, int],
        ps: int = 1,
        latency_ms: float = REF_LATENCY_MS,
        ps_nic_gbps: float | None = None,
        placement: str = "round-robin",
    ) -> SpeedPrediction:
        """Cluster speed for workers ``gpus`` ({GPU name: count}, heterogeneous allowed) and ``ps`` PS.

        ``placement`` of the variables on the PS tasks: see :func:`cmdare.planner.speed.ps_tier.busiest_share`."""
        counts = {get_gpu(g).name: int(n) for g, n in gpus.items() if int(n) > 0}
        if not counts or ps < 1:
            raise ValueError("need at least one worker and one parameter server")
        net = self._resolve(network)
        s, s_w = (float(v) for v in self._ps_seconds(net, ps, ps_nic_gbps, placement))
        per_gpu, rate, comp_sum, lat_sum, any_measured, n = {}, 0.0, 0.0, 0.0, False, 0
        for g, count in counts.items():
            comp, lat, measured = self._worker_z(net, g, latency_ms)
            per_gpu[g] = 1.0 / (comp + lat + s_w)
            rate += count * per_gpu[g]
            comp_sum, lat_sum, n = comp_sum + count * comp, lat_sum + count * lat, n + count
            any_measured |= measured
        x = float(blend(rate, 1.0 / s, self.params_["blend_p"]))
        nic_bound = ps_nic_gbps is not None and 32.0 / (ps_nic_gbps * 1e9) > self.params_["ps_param"]
        comp_mean, lat_mean = comp_sum / n, lat_sum / n
        return SpeedPrediction(
            steps_per_sec=x,
            examples_per_sec=x * network.effective_batch_size,
            bottleneck=_bottleneck(rate, 1.0 / s, comp_mean, lat_mean, nic_bound),
            ps_utilization=min(x * s, 1.0),
            worker_steps_per_sec=per_gpu,
            compute_bound_steps_per_sec=rate,
            terms={"compute": comp_mean, "ps": s, "latency": lat_mean},
            source=MEASURED_SOURCE if any_measured else FITTED_SOURCE,
        )

    def predict_shapes(
        self,
        network: ModelSpec,
        gpu: np.ndarray,
        workers: np.ndarray,
        ps: np.ndarray,
        latency_ms: float = REF_LATENCY_MS,
        placement: str = "round-robin",
    ) -> dict[str, np.ndarray]:
        """Vectorised :meth:`predict` over homogeneous shapes (``gpu[i]`` × ``workers[i]``, ``ps[i]``)."""
        gpu = np.asarray(gpu).astype(str)
        workers = np.asarray(workers, dtype=float)
        ps_arr = np.asarray(ps, dtype=float)
        net = self._resolve(network)
        names, inverse = np.unique(gpu, return_inverse=True)
        zs = np.array([self._worker_z(net, g, latency_ms)[:2] for g in names]).reshape(-1, 2)
        comp, lat = zs[inverse, 0], zs[inverse, 1]
        s, s_w = self._ps_seconds(net, ps_arr, placement=placement)
        rate = workers / (comp + lat + s_w)
        cap = 1.0 / s
        x = blend(rate, cap, self.params_["blend_p"])
        bottleneck = np.where(rate >= cap, "ps", np.where(lat > comp, "network", "compute"))
        return {
            "steps_per_sec": x,
            "examples_per_sec": x * network.effective_batch_size,
            "ps_utilization": np.minimum(x * s, 1.0),
            "bottleneck": bottleneck,
            "compute_bound_steps_per_sec": rate,
        }

    def predict_mixes(
        self,
        network: ModelSpec,
        names: Sequence[str],
        gpu_at: np.ndarray,
        count_at: np.ndarray,
        ps: np.ndarray,
        latency_ms: float = REF_LATENCY_MS,
        placement: str = "round-robin",
    ) -> dict[str, np.ndarray]:
        """Vectorised :meth:`predict` over GPU mixes: row ``i`` has ``count_at[i, j]`` workers of
        ``names[gpu_at[i, j]]`` (a count of 0 pads a shorter mix) and ``ps[i]`` PS; each row's terms are
        summed in its own order, as :meth:`predict` sums them."""
        net = self._resolve(network)
        z = np.array([self._worker_z(net, g, latency_ms)[:2] for g in names]).reshape(-1, 2)
        gpu_at, count_at = np.asarray(gpu_at, dtype=int), np.asarray(count_at, dtype=float)
        s, s_w = self._ps_seconds(net, np.asarray(ps, dtype=float), placement=placement)
        rate = comp_sum = lat_sum = np.zeros(count_at.shape[0])
        for j in range(count_at.shape[1]):
            c, comp, lat = count_at[:, j], z[gpu_at[:, j], 0], z[gpu_at[:, j], 1]
            rate = rate + c * (1.0 / (comp + lat + s_w))
            comp_sum, lat_sum = comp_sum + c * comp, lat_sum + c * lat
        n = count_at.sum(axis=1)
        cap = 1.0 / s
        x = blend(rate, cap, self.params_["blend_p"])
        comp_mean, lat_mean = comp_sum / n, lat_sum / n
        return {
            "steps_per_sec": x,
            "examples_per_sec": x * network.effective_batch_size,
            "ps_utilization": np.minimum(x * s, 1.0),
            "bottleneck": np.where(rate >= cap, "ps", np.where(lat_mean > comp_mean, "network", "compute")),
            "compute_bound_steps_per_sec": rate,
        }

    def to_dict(self) -> dict[str, object]:
        return {
            "params": self.params_,
            "tensor_rule": self.tensor_rule_,
            "provenance": self.provenance_,
            "intervals": self.intervals_,
            "domain": self.domain_,
        }


def _bottleneck(rate: float, cap: float, comp: float, lat: float, nic_bound: bool) -> str:
    """ "ps" when the compute-bound rate exceeds PS capacity ("network" if the PS NIC is what binds),
    "network" when latency outweighs compute, else "compute"."""
    if rate >= cap:
        return "network" if nic_bound else "ps"
    return "network" if lat > comp else "compute"


@functools.cache
def _load_shipped() -> SpeedModel:
    text = resources.files("cmdare.planner").joinpath("data/speed_model.json").read_text("utf-8")
    return SpeedModel.from_dict(json.loads(text))
