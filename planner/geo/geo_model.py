"""Iteration-time model of a geo-distributed LM pipeline (Atlas, arXiv 2411.14458; background.md §2).

Layout: tensor parallelism (TP) inside a server, ``D`` data-parallel (DP) replicas of each pipeline stage
inside one DC, pipeline-parallel (PP) stages spread over DCs. Only stage-boundary activations (forward)
and their gradients (backward) cross the WAN; all D pipelines share each DC-pair link, either
*spatially* (each gets ``B_eff / D`` at once) or *temporally* (they take the whole link in turn).

Iteration = one pipeline flush (:mod:`cmdare.planner.geo.pipeline_schedule`: GPipe closed form, 1F1B
executed round by round, link transit/occupancy per sharing mode, temporal stagger) + the intra-DC
ring all-reduce that sticks out past the pipeline. Changes versus the background's
``(m−1)·τ + Σc + 2Σ(l + A/B)`` are listed there; both schedules are exact against the
discrete-event simulation in ``tests/test_geo_sim.py`` for spatial sharing (and one pipeline), temporal
sharing is approximate. Bubbles and the prefill they can hold: :mod:`cmdare.planner.geo.bubbles`; live
verdicts: :mod:`cmdare.planner.geo.geo_live` (re-exported here).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from cmdare.planner.geo.bubbles import (
    Bubble,
    PrefillSpec,
    memory_cap,
    prefill_seconds,
    schedule_gaps,
    stage_bubbles,
)
from cmdare.planner.geo.geo_live import LiveBoundary, wan_bound_from_live
from cmdare.planner.geo.pipeline_schedule import SCHEDULES, SHARINGS, PipelineTiming, pipeline_time
from cmdare.planner.geo.wan import WanLink
from cmdare.planner.speed.gpu_catalog import get_gpu

if TYPE_CHECKING:
    from cmdare.planner.speed.gpu_catalog import GpuSpec

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


@dataclass(frozen=True, kw_only=True)
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


@dataclass(frozen=True, kw_only=True)
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


@dataclass(frozen=True, kw_only=True)
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


def gpu_peak_tflops(spec: GpuSpec, precision_bytes: int) -> float:
    """Dense peak TFLOPS of a catalog GPU for the precision: FP16/BF16 for 2 bytes, TF32 (or FP32) for 4."""
    if precision_bytes <= 2:
        return float(spec.fp16_tflops)
    tf32 = float(spec.tf32_tflops or 0.0)
    return tf32 if tf32 > 0 else float(spec.fp32_tflops)


@dataclass(frozen=True, kw_only=True)
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


@dataclass(frozen=True, kw_only=True)
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


@dataclass(frozen=True, kw_only=True)
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
            out.append(
                Boundary(
                    stage=k,
                    from_dc=a_dc,
                    to_dc=b_dc,
                    wan=False,
                    bytes_per_microbatch=act,
                    link_gbps=gbps,
                    single_tcp_gbps=gbps,
                    n_conn=1,
                    effective_gbps=gbps,
                    latency_seconds=0.0,
                    transfer_seconds=t,
                    link_busy_seconds=t,
                    wan_bound=False,
                    egress_gb_per_iteration=0.0,
                    egress_usd_per_iteration=0.0,
                )
            )
            continue
        link = job.link(a_dc, b_dc)
        n = job.n_conn or link.n_conn
        eff = link.effective_gbps(n)
        a = act * 8 / (eff * 1e9)
        x = d * a if lay.sharing == "spatial" else a
        gb = 2.0 * m * d * act / 1e9  # activations forward + gradients backward, all D pipelines
        out.append(
            Boundary(
                stage=k,
                from_dc=a_dc,
                to_dc=b_dc,
                wan=True,
                bytes_per_microbatch=act,
                link_gbps=link.bandwidth_gbps,
                single_tcp_gbps=link.single_tcp_gbps(),
                n_conn=n,
                effective_gbps=eff,
                latency_seconds=link.latency_s,
                transfer_seconds=x,
                link_busy_seconds=d * a,
                wan_bound=d * a > cmax,
                egress_gb_per_iteration=gb,
                egress_usd_per_iteration=gb * link.egress_usd_per_gb,
            )
        )
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


def with_layout(job: GeoJob, **changes: Any) -> GeoJob:
    """A copy of ``job`` with layout fields changed (e.g. ``sharing="spatial"``)."""
    return replace(job, layout=replace(job.layout, **changes))
