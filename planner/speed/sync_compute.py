"""One GPU's compute seconds per step of a synchronous data-parallel job (DDP, FSDP, Horovod), without any
parameter-server term (no per-tensor send/recv, no PS round trip): all-reduce training pays neither.

Where the figure comes from, best first:

1. the live job's measured compute (``cmdare_step_seconds``), handled by the calibration
   (:func:`cmdare.planner.speed.allreduce.calibrate`), not here;
2. a network of the CM-DARE study (``networks.csv``, FLOPs in the study's units): the speed model's fitted
   GPU term (``a_flops·F/peak + a_mem·… + a_const/bw``), without its per-tensor PS floor and latency;
3. any other network: ``model_flops ÷ (peak(precision) × achieved efficiency)``, with ``model_flops`` read as
   the training FLOPs of one GPU's step (forward + backward on its batch: ≈ 3 × 2 × multiply-adds × batch for
   a CNN, 6 × parameters × tokens for a transformer) and the efficiency the median of the published single-GPU
   training throughputs of ``planner/data/gpu_efficiency.csv`` for that GPU and precision (each row cites its
   source; FLOPs per example = 6 × the network's forward multiply-adds). A GPU with no published row of the
   precision takes the median over all rows of that precision (else of all rows) and says so.

Forward multiply-adds used with the throughput rows (GMACs per 224×224 image): ResNet-50 3.8 and ResNet-152
11.3 (He et al., CVPR 2016, Table 1), ResNet-50 v1.5 4.1 (v1 plus the stride moved to the 3×3 convolution;
commonly quoted), VGG-16 15.5 and Inception-v3 5.7 (Canziani, Paszke, Culurciello, "An Analysis of Deep Neural
Network Models for Practical Applications", arXiv:1605.07678, 2016, Figure 2).
"""

from __future__ import annotations

import csv
import functools
import io
import statistics
from dataclasses import dataclass
from importlib import resources

from cmdare.collectors.samples import ModelSpec
from cmdare.planner.speed.gpu_catalog import GpuSpec, get_gpu
from cmdare.planner.speed.speed_model import SpeedModel
from cmdare.planner.speed.speed_terms import compute_features

__all__ = [
    "PRECISIONS",
    "ComputeEstimate",
    "Efficiency",
    "achieved_efficiency",
    "canonical_precision",
    "efficiency_rows",
    "peak_tflops",
    "sync_compute",
]

PRECISIONS = ("fp32", "tf32", "fp16")
_ALIASES = {"fp32": "fp32", "tf32": "tf32", "fp16": "fp16", "bf16": "fp16", "amp": "fp16", "mixed": "fp16"}
FLOPS_PER_MAC_TRAINING = 6.0  # forward 2 FLOPs per multiply-add, backward twice the forward


@dataclass(frozen=True, kw_only=True)
class Efficiency:
    """One published single-GPU training throughput and the share of peak it achieved."""

    gpu: str
    precision: str
    network: str
    examples_per_sec: float
    flops_per_example: float
    efficiency: float
    source: str


@dataclass(frozen=True)
class ComputeEstimate:
    """Seconds of one GPU's step and what the figure rests on."""

    seconds: float
    basis: str


def canonical_precision(text: str) -> str:
    """``fp32`` | ``tf32`` | ``fp16`` (``bf16``, ``amp``, ``mixed`` = mixed precision on tensor cores)."""
    key = (text or "fp32").strip().lower()
    if key not in _ALIASES:
        raise ValueError(f"precision={text!r} must be one of fp32, tf32, fp16, bf16 (amp)")
    return _ALIASES[key]


def peak_tflops(spec: GpuSpec, precision: str) -> float:
    """The GPU's dense peak for ``precision`` (``gpus.csv``)."""
    p = canonical_precision(precision)
    return {"fp32": spec.fp32_tflops, "tf32": spec.tf32_tflops, "fp16": spec.fp16_tflops}[p]


@functools.cache
def efficiency_rows() -> tuple[Efficiency, ...]:
    """Every row of ``gpu_efficiency.csv`` with its achieved share of peak."""
    text = resources.files("cmdare.planner").joinpath("data/gpu_efficiency.csv").read_text("utf-8")
    out = []
    for r in csv.DictReader(io.StringIO(text)):
        spec = get_gpu(r["gpu"])
        flops = FLOPS_PER_MAC_TRAINING * float(r["fwd_gmacs"]) * 1e9
        rate = float(r["examples_per_sec"])
        eff = rate * flops / (peak_tflops(spec, r["precision"]) * 1e12)
        out.append(
            Efficiency(
                gpu=spec.name,
                precision=r["precision"],
                network=r["network"],
                examples_per_sec=rate,
                flops_per_example=flops,
                efficiency=eff,
                source=r["source"],
            )
        )
    return tuple(out)


@functools.cache
def achieved_efficiency(gpu: str, precision: str = "fp32") -> tuple[float, str]:
    """(median achieved share of peak, basis) for ``gpu`` at ``precision``."""
    spec, p = get_gpu(gpu), canonical_precision(precision)
    if peak_tflops(spec, p) == spec.fp32_tflops:  # no TF32 / fast FP16 units: it runs as FP32 does
        p = "fp32"
    name, rows = spec.name, efficiency_rows()
    family = name.split("-")[0]  # A100 and A100-80GB: one chip
    own = [r.efficiency for r in rows if r.gpu.split("-")[0] == family and r.precision == p]
    if own:
        return statistics.median(own), f"{len(own)} published {name} {p} throughputs"
    same = [r.efficiency for r in rows if r.precision == p] or [r.efficiency for r in rows]
    return statistics.median(
        same
    ), f"no published {name} {p} throughput: median of {len(same)} other GPUs' rows"


def sync_compute(model: SpeedModel, network: ModelSpec, gpu: str, precision: str = "fp32") -> ComputeEstimate:
    """One GPU's compute seconds per step of ``network`` on ``gpu`` (see the module docstring); ``model`` (the
    fitted PS speed model) gives the study's networks their GPU term and carries a job's ``compute_scale``."""
    spec = get_gpu(gpu)
    net = model._resolve(network)
    if net.known is not None:
        feats = compute_features(net.flops, net.params, net.tensors, spec.fp32_tflops, spec.mem_bw_gbs)
        secs = sum(model.params_.get(k, 0.0) * float(v) for k, v in feats.items())
        return ComputeEstimate(secs * model.compute_scale, f"fitted CM-DARE GPU term ({net.known.name})")
    eff, basis = achieved_efficiency(spec.name, precision)
    secs = network.model_flops / (peak_tflops(spec, precision) * 1e12 * eff)
    return ComputeEstimate(secs * model.compute_scale, f"FLOPs / (peak × {eff:.2f}: {basis})")
