"""Whether a model fits on a GPU: per-GPU bytes of parameters, gradients, optimizer state and activations
against the GPU's memory (``gpus.csv`` ``mem_gb``).

Model states with Adam (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter
Models", SC 2020, §3.1): mixed precision keeps fp16/bf16 parameters (2 B) and gradients (2 B) plus fp32 master
weights, momentum and variance (12 B) = 16 B a parameter; fp32/tf32 training keeps fp32 parameters and
gradients (8 B) plus momentum and variance (8 B) = 16 B as well. Sharding divides them over the ``N`` GPUs:
ZeRO-1 the optimizer state, ZeRO-2 also the gradients, ZeRO-3 / FSDP everything; DDP divides nothing.

Activations: ``activation_gb`` when the user gives it (a measured peak is best); else the transformer estimate
of Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models" (2022), eq. 1 without
recomputation and with flash attention (the ``5as/h`` term gone): ``34 × tokens × hidden × layers`` bytes, with
``tokens = model_flops / (6 × params)`` (a step's FLOPs ≈ 6 × parameters × tokens) and ``hidden × layers =
params / (12 × hidden)`` (a layer holds ≈ 12·hidden² parameters), ``hidden = (params × 128 / 12)^(1/3)`` — the
aspect ratio hidden/layers ≈ 128 of the GPT-3 and Llama families (an assumption, said on screen). With full
activation recomputation (``recompute``) only each layer's input stays: ``2 × tokens × hidden × layers`` (same
paper, §4). It is an estimate for transformers; for CNNs give ``activation_gb``.
"""

from __future__ import annotations

from dataclasses import dataclass

from cmdare.planner.speed.gpu_catalog import get_gpu

__all__ = ["MemoryNeed", "memory_need", "STATE_BYTES", "SHARDINGS"]

STATE_BYTES = 16.0  # bytes a parameter of Adam training, mixed or fp32 (ZeRO §3.1)
SHARDINGS = ("ddp", "zero1", "zero2", "fsdp")
_SPLIT = {"mixed": (2.0, 2.0, 12.0), "fp32": (4.0, 4.0, 8.0)}  # params, grads, optimizer state
ASPECT = 128.0  # hidden / layers of GPT-3 / Llama-family transformers (assumption)
ACT_BYTES_PER_TOKEN_HIDDEN_LAYER = 34.0  # Korthikanti et al. 2022, eq. 1 (fp16, no recomputation)
ACT_BYTES_RECOMPUTE = 2.0  # the same with full recomputation: each layer's fp16 input only


@dataclass(frozen=True)
class MemoryNeed:
    """Per-GPU bytes of one shape and whether they fit."""

    states_gb: float
    activations_gb: float
    has_gb: float
    activation_basis: str

    @property
    def needs_gb(self) -> float:
        return self.states_gb + self.activations_gb

    @property
    def fits(self) -> bool:
        return self.needs_gb <= self.has_gb

    def verdict(self) -> str:
        """``fits: needs X GB a GPU, has Y`` or ``does not fit: needs X GB a GPU, has Y``."""
        word = "fits" if self.fits else "does not fit"
        return f"{word}: needs {self.needs_gb:.1f} GB a GPU, has {self.has_gb:g}"


def activation_estimate_gb(model_flops: float, params: float, recompute: bool = False) -> float:
    """The transformer activation estimate (module docstring), GB, for one GPU's step."""
    if params <= 0 or model_flops <= 0:
        return 0.0
    tokens = model_flops / (6.0 * params)
    hidden = (params * ASPECT / 12.0) ** (1.0 / 3.0)
    per = ACT_BYTES_RECOMPUTE if recompute else ACT_BYTES_PER_TOKEN_HIDDEN_LAYER
    return float(per * tokens * params / (12.0 * hidden) / 1e9)


def memory_need(
    params: float,
    gpu: str,
    gpus: int,
    sharding: str = "ddp",
    precision: str = "fp32",
    model_flops: float = 0.0,
    activation_gb: float | None = None,
    recompute: bool = False,
) -> MemoryNeed:
    """Per-GPU memory of training ``params`` parameters on ``gpus`` GPUs of ``gpu`` with ``sharding``."""
    if sharding not in SHARDINGS:
        raise ValueError(f"sharding={sharding!r} must be one of {', '.join(SHARDINGS)}")
    n = max(1, int(gpus))
    p_b, g_b, o_b = _SPLIT["fp32" if precision in ("fp32", "tf32") else "mixed"]
    if sharding == "zero1":
        o_b /= n
    elif sharding == "zero2":
        g_b, o_b = g_b / n, o_b / n
    elif sharding == "fsdp":
        p_b, g_b, o_b = p_b / n, g_b / n, o_b / n
    states = params * (p_b + g_b + o_b) / 1e9
    if activation_gb is not None:
        act, basis = float(activation_gb), "activation_gb as given"
    else:
        act = activation_estimate_gb(model_flops, params, recompute)
        how = "with recomputation" if recompute else "no recomputation"
        basis = (
            f"activations estimated ({how}; transformer rule, Korthikanti et al. 2022; give activation_gb)"
        )
    return MemoryNeed(states, act, get_gpu(gpu).mem_gb, basis)
