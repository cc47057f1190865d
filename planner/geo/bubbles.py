"""BubbleTea: how much inference prefill fits in the idle time (bubbles) of a training pipeline.

BubbleTea (arXiv 2411.14458, background.md §2) runs LLM prefill on training GPUs while they wait:
prefill time is predictable from the prompt length, so requests are sized to fit a bubble; the KV cache
then moves to a decode GPU in the same DC. Here one prefill request runs on one TP group (a server of
``tp`` GPUs). Units: seconds, bytes, FLOPs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "PrefillSpec",
    "Bubble",
    "prefill_flops",
    "prefill_seconds",
    "requests_per_bubble",
    "stage_bubbles",
    "schedule_gaps",
]


@dataclass(frozen=True, kw_only=True)
class PrefillSpec:
    """The inference model served in the bubbles and its request size.

    ``efficiency`` is the fraction of the GPU's dense peak a prefill achieves (a named assumption:
    the default in the workload loader is the training MFU). ``memory_limit_gb`` is the memory per GPU
    left for inference while training holds its state; None = GPU memory − training state.
    """

    params: float
    layers: int
    hidden: int
    prompt_tokens: int
    efficiency: float
    precision_bytes: int = 2
    memory_limit_gb: float | None = None

    @property
    def weight_bytes(self) -> float:
        return self.params * self.precision_bytes

    @property
    def kv_bytes_per_request(self) -> float:
        """K and V for every layer and prompt token: ``2·layers·hidden·prompt·bytes``."""
        return 2.0 * self.layers * self.hidden * self.prompt_tokens * self.precision_bytes


@dataclass(frozen=True, kw_only=True)
class Bubble:
    """Idle time of one stage's GPUs in one iteration: ``count`` gaps of ``seconds`` each, per pipeline."""

    stage: int
    dc: str
    kind: str  # "warmup", "steady", "turnaround", "tail"
    seconds: float
    count: int
    requests_each: int  # prefill requests that fit in one such gap on one TP group


def prefill_flops(spec: PrefillSpec) -> float:
    """Forward FLOPs of one prompt: ``2·N·L + 2·layers·L²·hidden`` (Kaplan et al. 2020, Table 1)."""
    length = spec.prompt_tokens
    return 2.0 * spec.params * length + 2.0 * spec.layers * length * length * spec.hidden


def prefill_seconds(spec: PrefillSpec, peak_tflops: float, tp: int) -> float:
    """Seconds of one prefill on a TP group of ``tp`` GPUs: FLOPs ÷ (tp × peak × efficiency)."""
    return prefill_flops(spec) / (tp * peak_tflops * 1e12 * spec.efficiency)


def memory_cap(spec: PrefillSpec, free_gb_per_gpu: float, tp: int) -> int:
    """Requests whose KV caches fit at once in a TP group beside the inference weights (≥ 0).

    KV caches of the requests run in one bubble stay on the GPUs until the bubble ends (conservative:
    they are shipped to the decode GPU when the training link is idle again).
    """
    free = free_gb_per_gpu * 1e9 * tp - spec.weight_bytes
    if free <= 0:
        return 0
    return int(free // spec.kv_bytes_per_request)


def requests_per_bubble(seconds: float, request_s: float, cap: int) -> int:
    """Whole prefill requests of ``request_s`` seconds that fit in a gap, at most ``cap``."""
    if request_s <= 0 or seconds <= 0:
        return 0
    return max(0, min(cap, math.floor(seconds / request_s + 1e-9)))


def stage_bubbles(
    stage: int,
    dc: str,
    gaps: list[tuple[str, float, int]],
    request_s: float,
    cap: int,
) -> list[Bubble]:
    """Turn a stage's idle gaps ``(kind, seconds, count)`` into bubbles with their prefill fit."""
    out = []
    for kind, seconds, count in gaps:
        if seconds > 1e-12 and count > 0:
            out.append(
                Bubble(
                    stage=stage,
                    dc=dc,
                    kind=kind,
                    seconds=seconds,
                    count=count,
                    requests_each=requests_per_bubble(seconds, request_s, cap),
                )
            )
    return out


def schedule_gaps(
    k: int,
    f: list[float],
    b: list[float],
    hop: list[float],
    periods: tuple[float, float],
    m: int,
    idle: float,
    tail_extra: float,
) -> list[tuple[str, float, int]]:
    """Idle gaps ``(kind, seconds, count)`` of stage ``k`` in one iteration, per pipeline.

    ``hop[i]`` = latency + per-pipeline transfer of boundary i; ``periods`` = (forward, backward)
    steady periods for GPipe or (τ, 0) for 1F1B; ``idle`` = iteration − m·c_k − all-reduce_k;
    ``tail_extra`` = time the iteration runs past this stage's all-reduce. Warm-up waits for the first
    forward; steady gaps are period − own compute; tail is after the last backward; turnaround is the
    rest (GPipe: between the phases; 1F1B: spread over warm-up, counted as one gap — approximate).
    """
    warm = sum(f[i] + hop[i] for i in range(k))
    tail = sum(b[i] + hop[i] for i in range(k)) + tail_extra
    if periods[1] > 0:
        steady = [("steady", periods[0] - f[k], m - 1), ("steady", periods[1] - b[k], m - 1)]
    else:
        steady = [("steady", periods[0] - f[k] - b[k], m - 1)]
    steady = [(kind, max(0.0, sec), n) for kind, sec, n in steady]
    used = warm + tail + sum(sec * n for _, sec, n in steady)
    tail = max(0.0, tail)
    return [("warmup", warm, 1), *steady, ("turnaround", max(0.0, idle - used), 1), ("tail", tail, 1)]
