"""Iteration-time model of a geo-distributed LM pipeline (Atlas, arXiv 2411.14458; background.md §2).

Layout: tensor parallelism (TP) inside a server, ``D`` data-parallel (DP) replicas of each pipeline stage
inside one DC, pipeline-parallel (PP) stages spread over DCs. Only stage-boundary activations (forward)
and their gradients (backward) cross the WAN; all D pipelines share each DC-pair link, either
*spatially* (each gets ``B_eff / D`` at once) or *temporally* (they take the whole link in turn).

Closed form (p stages, m micro-batches, per micro-batch forward ``f_k`` / backward ``b_k`` with
``c_k = f_k + b_k``; boundary k has one-way latency ``l_k``, one transfer at full ``B_eff`` takes
``a_k = A / B_eff``, the link is busy ``u_k = D·a_k`` per micro-batch round, and one pipeline's
transfer takes ``x_k = u_k`` (spatial) or ``a_k`` (temporal))::

    fill   = Σ c_k + 2·Σ (l_k + x_k)
    GPipe: T = fill + (m−1)·[max(max f, max u) + max(max b, max u)] + stagger
    1F1B : T = fill + (m−1)·τ + stagger,  τ = max(max c, max u, in-flight cycles)
    stagger = (D−1)·max a_k (temporal only: the last pipeline waits for the others once)

Changes versus the background's ``(m−1)·τ + Σc + 2Σ(l + A/B)``: (1) GPipe runs the forward and the
backward phase one after the other, so a WAN-bound link costs ``2·(m−1)·D·A/B`` (both phases), not
``(m−1)·D·A/B``; (2) the fill term uses the transfer time one pipeline actually sees (``D·A/B`` when
the link is split spatially); (3) temporal sharing adds a one-off stagger ``(D−1)·A/B``; (4) 1F1B keeps
at most ``p−k`` micro-batches in flight at stage k, so a long WAN round trip over stages k..k' bounds
the period by ``(Σ c + 2Σ(l + x)) / (w_k + 1 − w_k')`` (w = warm-up forwards). GPipe is exact against
the discrete-event simulation in ``tests/test_geo_sim.py``; 1F1B is within 5% for m ≥ 4p.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np
from cmdare.planner.bubbles import (
    Bubble,
    PrefillSpec,
    memory_cap,
    prefill_seconds,
    schedule_gaps,
    stage_bubbles,
)
from cmdare.planner.gpu_catalog import get_gpu
from cmdare.planner.wan import WanLink

__all__ = [
    "DEFAULT_MFU",
    "ZERO_BYTES_PER_PARAM",
    "LanguageModel",
    "DataCenter",
    "Layout",
    "PipelineTiming",
    "pipeline_time",
    "gpu_peak_tflops",
    "GeoJob",
    "Boundary",
    "GeoResult",
    "evaluate",
    "LiveBoundary",
    "wan_bound_from_live",
    "with_layout",
]

#: Model FLOPs utilisation of Megatron-Turing NLG 530B on A100 GPUs, 30.2% (Chowdhery et al., "PaLM",
#: 2022, Table 3). Used as the default training efficiency; an assumption for other models/GPUs.
DEFAULT_MFU = 0.302
#: Mixed-precision Adam keeps 16 bytes per parameter (fp16 weights + grads, fp32 master, m, v):
#: Rajbhandari et al., "ZeRO", SC 2020, §3.1 ("16Ψ"). Activations are not counted.
ZERO_BYTES_PER_PARAM = 16.0
SCHEDULES = ("gpipe", "1f1b")
SHARINGS = ("spatial", "temporal")


@dataclass(frozen=True)
class LanguageModel:
    """A decoder-only LM. ``params`` in parameters, ``precision_bytes`` per activation/weight value."""

    layers: int
    hidden: int
    seq_len: int
    micro_batch: int
    params: float
    precision_bytes: int = 2

    @property
    def tokens_per_microbatch(self) -> int:
        return self.micro_batch * self.seq_len

    @property
    def activation_bytes(self) -> float:
        """Bytes of one stage-boundary activation per micro-batch: ``micro_batch·seq·hidden·bytes``."""
        return float(self.micro_batch * self.seq_len * self.hidden * self.precision_bytes)

    def stage_layers(self, pp: int) -> list[int]:
        """Layers per stage: an even split, the remainder on the first stages."""
        q, r = divmod(self.layers, pp)
        return [q + (1 if k < r else 0) for k in range(pp)]


@dataclass(frozen=True)
class DataCenter:
    """A DC: GPU type (catalog name), GPU count, price $/GPU-hour, region, intra-DC NIC Gbit/s per server.

    ``intra_gbps`` None means the catalog's host NIC (``GpuSpec.host_nic_gbps``).
    """

    name: str
    gpu: str
    gpus: int
    usd_per_gpu_hour: float = 0.0
    region: str = ""
    intra_gbps: float | None = None


@dataclass(frozen=True)
class Layout:
    """PP/DP/TP degrees, stage→DC placement (one DC name per stage), micro-batches, schedule, sharing."""

    pp: int
    dp: int
    tp: int
    placement: tuple[str, ...]
    n_microbatches: int
    schedule: str = "1f1b"
    sharing: str = "temporal"

    def __post_init__(self) -> None:
        if len(self.placement) != self.pp:
            raise ValueError(f"placement names {len(self.placement)} DCs for pp={self.pp} stages")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if self.sharing not in SHARINGS:
            raise ValueError(f"sharing must be one of {SHARINGS}, got {self.sharing!r}")
        if min(self.pp, self.dp, self.tp, self.n_microbatches) < 1:
            raise ValueError("pp, dp, tp and n_microbatches must be >= 1")


@dataclass(frozen=True)
class PipelineTiming:
    """Closed-form timing of one pipeline flush, seconds."""

    total: float
    fill: float
    period: float
    stagger: float
    bound: str  # "compute", "wan" or "round-trip" (1F1B in-flight limit over a WAN round trip)
    phase_periods: tuple[float, float] = (0.0, 0.0)  # GPipe (forward, backward); 1F1B (τ, 0)


def _one_f_one_b(c: list[float], lat: list[float], x: list[float], m: int, base: float) -> tuple[float, str]:
    """Extra time after the fill for 1F1B: ``(m−1)·τ`` with the in-flight round-trip cycles.

    Segment k..k' (k' > k) forms a cycle of ``Σ c + 2·Σ(l + x)`` over ``w_k + 1 − w_k'`` micro-batches;
    a cycle that stops short of the last stage first binds after ``n − 1`` micro-batches.
    """
    p = len(c)
    warm = np.minimum(p - 1 - np.arange(p), m)
    cc = np.concatenate(([0.0], np.cumsum(c)))
    hh = np.concatenate(([0.0], np.cumsum(np.asarray(lat) + np.asarray(x))))
    k, k2 = np.triu_indices(p, 1)
    keep = warm[k] < m
    k, k2 = k[keep], k2[keep]
    cycle = cc[k2 + 1] - cc[k] + 2.0 * (hh[k2] - hh[k])
    n = warm[k] + 1 - warm[k2]
    skip = np.where(k2 == p - 1, 0, n - 1)
    gain = np.maximum(0, m - 1 - skip) * (cycle / n - base)
    best = float(gain.max()) if gain.size else 0.0
    if best > 1e-12:
        return (m - 1) * base + best, "round-trip"
    return (m - 1) * base, ""


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
    """Closed-form time of one pipeline flush (no all-reduce), seconds.

    ``f``/``b``: forward/backward seconds per micro-batch per stage (p values); ``latency``: one-way
    seconds per boundary (p−1); ``transfer``: seconds to send one activation at the full effective link
    bandwidth (``A / B_eff``); ``wan``: whether the boundary is a WAN link shared by the ``dp`` pipelines
    (intra-DC boundaries are not shared). See the module docstring for the algebra.
    """
    p = len(f)
    c = [fi + bi for fi, bi in zip(f, b, strict=True)]
    u = [dp * a if w else a for a, w in zip(transfer, wan, strict=True)]
    x = [uk if sharing == "spatial" else a for uk, a in zip(u, transfer, strict=True)]
    wan_a = [a for a, w in zip(transfer, wan, strict=True) if w]
    stagger = (dp - 1) * max(wan_a) if sharing == "temporal" and wan_a else 0.0
    umax = max(u, default=0.0)
    fill = sum(c) + 2.0 * sum(lk + xk for lk, xk in zip(latency, x, strict=True))
    if schedule == "gpipe":
        pf, pb = max(max(f), umax), max(max(b), umax)
        bound = "wan" if umax > min(max(f), max(b)) else "compute"
        return PipelineTiming(fill + (m - 1) * (pf + pb) + stagger, fill, pf + pb, stagger, bound, (pf, pb))
    base = max(max(c), umax)
    extra, bound = _one_f_one_b(c, list(latency), x, m, base) if p > 1 else ((m - 1) * base, "")
    if not bound:
        bound = "wan" if umax > max(c) else "compute"
    period = extra / (m - 1) if m > 1 else base
    return PipelineTiming(fill + extra + stagger, fill, period, stagger, bound, (period, 0.0))


def gpu_peak_tflops(spec: object, precision_bytes: int) -> float:
    """Dense peak TFLOPS of a catalog GPU for the precision: FP16/BF16 for 2 bytes, TF32 (or FP32) for 4."""
    if precision_bytes <= 2:
        return float(spec.fp16_tflops)  # type: ignore[attr-defined]
    tf32 = float(getattr(spec, "tf32_tflops", 0.0) or 0.0)
    return tf32 if tf32 > 0 else float(spec.fp32_tflops)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class GeoJob:
    """Everything one evaluation needs. ``stage_compute_s`` (fwd+bwd seconds per micro-batch per stage)
    overrides the FLOPs estimate; ``activation_bytes`` overrides ``micro_batch·seq·hidden·bytes``;
    ``n_conn`` overrides every link's connection count (used to show the multi-connection gain)."""

    model: LanguageModel
    dcs: tuple[DataCenter, ...]
    links: tuple[WanLink, ...]
    layout: Layout
    mfu: float = DEFAULT_MFU
    stage_compute_s: tuple[float, ...] | None = None
    activation_bytes: float | None = None
    prefill: PrefillSpec | None = None
    n_conn: int | None = None

    def dc(self, name: str) -> DataCenter:
        for dc in self.dcs:
            if dc.name == name:
                return dc
        raise ValueError(f"placement names unknown DC {name!r}")

    def link(self, a: str, b: str) -> WanLink:
        for link in self.links:
            if link.key == frozenset((a, b)):
                return link
        raise ValueError(f"no WAN link between {a!r} and {b!r}")


@dataclass(frozen=True)
class Boundary:
    """Stage k → k+1. ``transfer_seconds`` is what one pipeline waits per micro-batch (``D·A/B_eff``
    spatial, ``A/B_eff`` temporal); ``link_busy_seconds`` = ``D·A/B_eff``; WAN-bound when that exceeds
    the slowest stage's compute per micro-batch."""

    stage: int
    from_dc: str
    to_dc: str
    wan: bool
    bytes_per_microbatch: float
    link_gbps: float
    single_tcp_gbps: float
    n_conn: int
    effective_gbps: float
    latency_seconds: float
    transfer_seconds: float
    link_busy_seconds: float
    wan_bound: bool
    egress_gb_per_iteration: float
    egress_usd_per_iteration: float


@dataclass(frozen=True)
class GeoResult:
    """One iteration of the geo-distributed job. Seconds, fractions in [0, 1], $ per iteration."""

    iteration_seconds: float
    pipeline_seconds: float
    allreduce_seconds: float
    period_seconds: float
    bound: str
    bubble_fraction: float
    bubble_floor: float
    gpu_utilization: float
    gpu_utilization_with_prefill: float
    stage_dcs: tuple[str, ...]
    stage_compute_seconds: tuple[float, ...]
    boundaries: tuple[Boundary, ...]
    bubbles: tuple[Bubble, ...]
    prefill_request_seconds: float
    prefill_requests_per_iteration: int
    prefill_capacity: float
    idle_gpu_seconds: float
    fillable_gpu_seconds: float
    gpus_used: int
    tokens_per_iteration: int
    gpu_usd_per_iteration: float
    egress_usd_per_iteration: float

    @property
    def usd_per_iteration(self) -> float:
        return self.gpu_usd_per_iteration + self.egress_usd_per_iteration

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["usd_per_iteration"] = self.usd_per_iteration
        return d


def _stage_compute(job: GeoJob) -> list[float]:
    """fwd+bwd seconds per micro-batch per stage: ``6·params_k·tokens / (tp·peak·MFU)``."""
    lay, model = job.layout, job.model
    if job.stage_compute_s is not None:
        if len(job.stage_compute_s) != lay.pp:
            raise ValueError(f"stage_compute_s has {len(job.stage_compute_s)} values for pp={lay.pp}")
        return [float(c) for c in job.stage_compute_s]
    out = []
    for k, n_layers in enumerate(model.stage_layers(lay.pp)):
        peak = gpu_peak_tflops(get_gpu(job.dc(lay.placement[k]).gpu), model.precision_bytes)
        params_k = model.params * n_layers / model.layers
        out.append(6.0 * params_k * model.tokens_per_microbatch / (lay.tp * peak * 1e12 * job.mfu))
    return out


def _intra_gbps(dc: DataCenter) -> float:
    return dc.intra_gbps if dc.intra_gbps is not None else float(get_gpu(dc.gpu).host_nic_gbps)


def _boundaries(job: GeoJob, act: float, cmax: float) -> list[Boundary]:
    lay, m, d = job.layout, job.layout.n_microbatches, job.layout.dp
    out = []
    for k in range(lay.pp - 1):
        a_dc, b_dc = lay.placement[k], lay.placement[k + 1]
        if a_dc == b_dc:
            gbps = _intra_gbps(job.dc(a_dc))
            t = act * 8 / (gbps * 1e9)
            out.append(Boundary(k, a_dc, b_dc, False, act, gbps, gbps, 1, gbps, 0.0, t, t, False, 0.0, 0.0))
            continue
        link = job.link(a_dc, b_dc)
        n = job.n_conn or link.n_conn
        eff = link.effective_gbps(n)
        a = act * 8 / (eff * 1e9)
        x = d * a if lay.sharing == "spatial" else a
        gb = 2.0 * m * d * act / 1e9  # activations forward + gradients backward, all D pipelines
        out.append(
            Boundary(k, a_dc, b_dc, True, act, link.bandwidth_gbps, link.single_tcp_gbps(), n, eff,
                     link.latency_s, x, d * a, d * a > cmax, gb, gb * link.egress_usd_per_gb)
        )  # fmt: skip
    return out


def _allreduce(job: GeoJob, f: list[float], b: list[float], bnd: list[Boundary]) -> tuple[list[float], float]:
    """Ring all-reduce of each stage's gradients inside its DC and the time it adds past the pipeline."""
    lay, model = job.layout, job.model
    if lay.dp == 1:
        return [0.0] * lay.pp, 0.0
    ar, extra, slack = [], 0.0, 0.0
    for k, n_layers in enumerate(model.stage_layers(lay.pp)):
        grad_bytes = model.params * n_layers / model.layers * model.precision_bytes
        t = 2.0 * (lay.dp - 1) / lay.dp * grad_bytes * 8 / (_intra_gbps(job.dc(lay.placement[k])) * 1e9)
        ar.append(t)
        extra = max(extra, t - slack)  # stage k's backward ends `slack` before stage 0's
        slack += b[k] + (bnd[k].latency_seconds + bnd[k].transfer_seconds if k < len(bnd) else 0.0)
    return ar, extra


def evaluate(job: GeoJob) -> GeoResult:
    """Closed-form iteration time, WAN verdicts and prefill capacity of one layout."""
    lay, model = job.layout, job.model
    m, d = lay.n_microbatches, lay.dp
    c = _stage_compute(job)
    f, b = [ck / 3.0 for ck in c], [2.0 * ck / 3.0 for ck in c]  # backward ≈ 2 × forward
    act = job.activation_bytes if job.activation_bytes is not None else model.activation_bytes
    bnd = _boundaries(job, act, max(c))
    lat = [x.latency_seconds for x in bnd]
    full = [x.link_busy_seconds / (d if x.wan else 1) for x in bnd]
    timing = pipeline_time(f, b, lat, full, [x.wan for x in bnd], d, m, lay.schedule, lay.sharing)
    ar, extra = _allreduce(job, f, b, bnd)
    t_iter = timing.total + extra
    gpus = lay.pp * d * lay.tp
    busy = m * sum(c) * d * lay.tp
    bubbles, req_s = _bubbles(job, f, b, bnd, timing, ar, extra, t_iter)
    n_req = sum(x.count * x.requests_each for x in bubbles) * d
    fill_gs = n_req * req_s * lay.tp
    hours = t_iter / 3600.0
    gpu_usd = sum(job.dc(name).usd_per_gpu_hour * d * lay.tp * hours for name in lay.placement)
    return GeoResult(
        iteration_seconds=t_iter,
        pipeline_seconds=timing.total,
        allreduce_seconds=extra,
        period_seconds=timing.period,
        bound=timing.bound,
        bubble_fraction=max(0.0, 1.0 - m * sum(c) / (lay.pp * timing.total)),
        bubble_floor=(lay.pp - 1) / (m + lay.pp - 1),
        gpu_utilization=busy / (gpus * t_iter),
        gpu_utilization_with_prefill=min(1.0, (busy + fill_gs) / (gpus * t_iter)),
        stage_dcs=tuple(lay.placement),
        stage_compute_seconds=tuple(c),
        boundaries=tuple(bnd),
        bubbles=tuple(bubbles),
        prefill_request_seconds=req_s,
        prefill_requests_per_iteration=n_req,
        prefill_capacity=n_req / t_iter,
        idle_gpu_seconds=gpus * t_iter - busy - sum(ar) * d * lay.tp,
        fillable_gpu_seconds=fill_gs,
        gpus_used=gpus,
        tokens_per_iteration=d * m * model.tokens_per_microbatch,
        gpu_usd_per_iteration=gpu_usd,
        egress_usd_per_iteration=sum(x.egress_usd_per_iteration for x in bnd),
    )


def _free_gb_per_gpu(job: GeoJob, k: int) -> float:
    """GPU memory left for inference on stage k: the spec's limit, else memory − 16 B/param of training."""
    spec = job.prefill
    if spec is not None and spec.memory_limit_gb is not None:
        return spec.memory_limit_gb
    lay, model = job.layout, job.model
    params_k = model.params * model.stage_layers(lay.pp)[k] / model.layers
    return (
        float(get_gpu(job.dc(lay.placement[k]).gpu).mem_gb) - ZERO_BYTES_PER_PARAM * params_k / lay.tp / 1e9
    )


def _bubbles(
    job: GeoJob,
    f: list[float],
    b: list[float],
    bnd: list[Boundary],
    timing: PipelineTiming,
    ar: list[float],
    extra: float,
    t_iter: float,
) -> tuple[list[Bubble], float]:
    """Bubbles of every stage with the prefill requests that fit; also one request's seconds."""
    lay, spec = job.layout, job.prefill
    hop = [x.latency_seconds + x.transfer_seconds for x in bnd]
    out: list[Bubble] = []
    req_s = 0.0
    for k in range(lay.pp):
        ck = f[k] + b[k]
        idle = t_iter - lay.n_microbatches * ck - ar[k]
        gaps = schedule_gaps(k, f, b, hop, timing.phase_periods, lay.n_microbatches, idle, extra - ar[k])
        dc = lay.placement[k]
        if spec is None:
            out.extend(stage_bubbles(k, dc, gaps, 0.0, 0))
            continue
        peak = gpu_peak_tflops(get_gpu(job.dc(dc).gpu), spec.precision_bytes)
        rs = prefill_seconds(spec, peak, lay.tp)
        req_s = max(req_s, rs)
        out.extend(stage_bubbles(k, dc, gaps, rs, memory_cap(spec, _free_gb_per_gpu(job, k), lay.tp)))
    return out, req_s


def with_layout(job: GeoJob, **changes: object) -> GeoJob:
    """A copy of ``job`` with layout fields changed (e.g. ``sharing="spatial"``)."""
    return replace(job, layout=replace(job.layout, **changes))


@dataclass(frozen=True)
class LiveBoundary:
    """A measured stage boundary: seconds per micro-batch on the wire vs the slowest stage's compute."""

    from_stage: str
    to_stage: str
    measured_gbps: float
    bytes_per_microbatch: float
    transfer_seconds: float
    max_stage_compute_seconds: float
    wait_share: float | None
    wan_bound: bool


def wan_bound_from_live(
    stage_compute_s_per_mb: dict[str, float],
    boundary_bytes_per_s: dict[tuple[str, str], float],
    microbatches_per_s: float,
    stage_wait_share: dict[str, float] | None = None,
    link_capacity_gbps: dict[tuple[str, str], float] | None = None,
    wait_share_threshold: float = 0.5,
) -> list[LiveBoundary]:
    """Boundary verdicts from live counters, the same rule as the model (``D·A/B > max c``).

    ``stage_compute_s_per_mb``: stage → rate(cmdare_stage_compute_seconds_total) ÷ micro-batch rate;
    ``boundary_bytes_per_s``: (stage, peer) → rate(cmdare_stage_bytes_sent_total{peer}), all D replicas
    summed; ``microbatches_per_s``: micro-batches per second of one pipeline; ``stage_wait_share``:
    stage → wait ÷ (wait + compute) seconds; ``link_capacity_gbps``: B_eff of the link when known (else
    the measured rate is used, a lower bound on capacity, so the transfer time is an upper bound).
    A boundary is WAN-bound when its transfer time per micro-batch exceeds the slowest stage's compute
    and, if wait shares are given, the receiving stage waits at least ``wait_share_threshold``.
    """
    cmax = max(stage_compute_s_per_mb.values(), default=0.0)
    out = []
    for (src, dst), rate in boundary_bytes_per_s.items():
        per_mb = rate / microbatches_per_s if microbatches_per_s > 0 else 0.0
        gbps = rate * 8 / 1e9
        cap = (link_capacity_gbps or {}).get((src, dst), gbps)
        t = per_mb * 8 / (cap * 1e9) if cap > 0 else float("inf")
        share = (stage_wait_share or {}).get(dst)
        waits = share is None or share >= wait_share_threshold
        out.append(LiveBoundary(src, dst, gbps, per_mb, t, cmax, share, bool(t > cmax and waits)))
    return out
