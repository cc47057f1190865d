"""The metric contract: one declarative catalogue shared by the exporter, the collectors, the store,
the recorder and the panes. Names here are the only place metric names are spelled.

A *series key* is the catalogue name, plus ``{label=value}`` for the few labelled series we keep
(e.g. ``cmdare_ps_bytes_total{direction=in}``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

Kind = Literal["counter", "gauge", "histogram", "info"]


@dataclass(frozen=True)
class MetricDef:
    name: str
    kind: Kind
    unit: str
    help: str
    labels: tuple[str, ...] = ()


TASK_INFO = MetricDef(
    "cmdare_task_info",
    "info",
    "",
    "Identity of a training task (value is always 1).",
    (
        "job",
        "role",
        "task",
        "gpu",
        "region",
        "zone",
        "provisioning",
        "dc",
        "stage",
        "gpu_ids",
        "rank",
        "local_rank",
    ),
)
JOB_INFO = MetricDef(
    "cmdare_job_info",
    "info",
    "",
    "Facts about the network a job trains (value is always 1).",
    ("job", "model", "model_flops", "params", "batch_size", "target_steps", "sync"),
)
SYNC_MODES = ("async-ps", "sync-allreduce", "pipeline")  # how a job trains (cmdare_job_info{sync=…})
GLOBAL_STEP = MetricDef("cmdare_global_step", "gauge", "steps", "Cluster-wide global step seen by this task.")
WORKER_STEPS = MetricDef("cmdare_worker_steps", "counter", "steps", "Local training steps this task ran.")
EXAMPLES = MetricDef("cmdare_examples", "counter", "examples", "Training examples this task processed.")
STEP_SECONDS = MetricDef(
    "cmdare_step_seconds", "histogram", "s", "Compute time of one local training step (excludes PS wait)."
)
ALLREDUCE_SECONDS = MetricDef(
    "cmdare_allreduce_seconds",
    "histogram",
    "s",
    "Exposed all-reduce time of one synchronous step: the wait for gradients not hidden behind backward.",
)
PS_BYTES = MetricDef(
    "cmdare_ps_bytes",
    "counter",
    "bytes",
    "Bytes a parameter server received (in) or sent (out).",
    ("direction",),
)
CHECKPOINT_SECONDS = MetricDef(
    "cmdare_checkpoint_seconds",
    "histogram",
    "s",
    "Time to write one checkpoint (its count is the checkpoints written).",
)
LAST_CHECKPOINT = MetricDef(
    "cmdare_last_checkpoint_timestamp_seconds",
    "gauge",
    "s",
    "Unix time the task's last checkpoint was written (the work since it is at risk).",
)
PREEMPTED = MetricDef(
    "cmdare_instance_preempted", "gauge", "", "1 when the cloud says this instance is being preempted."
)
STAGE_COMPUTE = MetricDef(
    "cmdare_stage_compute_seconds", "counter", "s", "Seconds a pipeline stage spent computing."
)
STAGE_WAIT = MetricDef(
    "cmdare_stage_wait_seconds", "counter", "s", "Seconds a pipeline stage spent waiting for its peers."
)
STAGE_BYTES_SENT = MetricDef(
    "cmdare_stage_bytes_sent", "counter", "bytes", "Bytes a pipeline stage sent to a peer stage.", ("peer",)
)
STAGE_MICROBATCHES = MetricDef(
    "cmdare_stage_microbatches", "counter", "", "Micro-batches a pipeline stage processed."
)
# Standard names from node_exporter, DCGM exporter and the process collector (kept when present).
NODE_NET_RX = MetricDef("node_network_receive_bytes", "counter", "bytes", "node_exporter: bytes received.")
NODE_NET_TX = MetricDef("node_network_transmit_bytes", "counter", "bytes", "node_exporter: bytes sent.")
NODE_CPU = MetricDef("node_cpu_seconds", "counter", "s", "node_exporter: CPU seconds by mode.")
NODE_MEM_TOTAL = MetricDef("node_memory_MemTotal_bytes", "gauge", "bytes", "node_exporter: memory size.")
NODE_MEM_AVAIL = MetricDef(
    "node_memory_MemAvailable_bytes", "gauge", "bytes", "node_exporter: memory available."
)
GPU_UTIL = MetricDef("DCGM_FI_DEV_GPU_UTIL", "gauge", "%", "DCGM exporter: GPU utilisation.")
GPU_GR_ACTIVE = MetricDef(
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "gauge",
    "ratio",
    "DCGM exporter: graphics engine active (MIG instances have no GPU_UTIL).",
)
GPU_FB_USED = MetricDef("DCGM_FI_DEV_FB_USED", "gauge", "MiB", "DCGM exporter: GPU memory used.")
GPU_FB_FREE = MetricDef("DCGM_FI_DEV_FB_FREE", "gauge", "MiB", "DCGM exporter: GPU memory free.")
PROCESS_CPU = MetricDef("process_cpu_seconds", "counter", "s", "Process CPU seconds.")
PROCESS_START = MetricDef(
    "process_start_time_seconds", "gauge", "s", "Start time of the task's process (Unix seconds): its uptime."
)
# Training figures read from logs (TensorBoard scalars) under the tag names people use (see log_scalar_kind).
LOSS = MetricDef("cmdare_loss", "gauge", "", "Training loss, as the job logs it.")
LEARNING_RATE = MetricDef("cmdare_learning_rate", "gauge", "", "Learning rate, as the job logs it.")
EXAMPLES_RATE = MetricDef(
    "cmdare_examples_per_second", "gauge", "examples/s", "Examples per second, as the job logs it."
)
LOG_RESTARTS = MetricDef(
    "cmdare_log_restarts",
    "gauge",
    "",
    "Restarts from a checkpoint seen in a task's logs (its step went back in a new event file or line).",
)

# Sample names of the labelled counters (one series key per label value, below) and of node_exporter's CPU.
PS_BYTES_SAMPLE = f"{PS_BYTES.name}_total"
STAGE_BYTES_SAMPLE = f"{STAGE_BYTES_SENT.name}_total"
NODE_CPU_SAMPLE = f"{NODE_CPU.name}_total"

# Series keys the store keeps per task (derived from the families above by the collectors): a family's
# sample name as exposed (``_total`` of a counter, ``_sum``/``_count`` of a histogram), plus the few labels
# kept. Recordings store these keys: they never change.
K_GLOBAL_STEP = GLOBAL_STEP.name
K_WORKER_STEPS = f"{WORKER_STEPS.name}_total"
K_EXAMPLES = f"{EXAMPLES.name}_total"
K_STEP_SECONDS_SUM = f"{STEP_SECONDS.name}_sum"
K_STEP_SECONDS_COUNT = f"{STEP_SECONDS.name}_count"
K_ALLREDUCE_SECONDS_SUM = f"{ALLREDUCE_SECONDS.name}_sum"
K_ALLREDUCE_SECONDS_COUNT = f"{ALLREDUCE_SECONDS.name}_count"
K_PS_IN = f"{PS_BYTES_SAMPLE}{{direction=in}}"
K_PS_OUT = f"{PS_BYTES_SAMPLE}{{direction=out}}"
K_PREEMPTED = PREEMPTED.name
K_CHECKPOINT_SECONDS_SUM = f"{CHECKPOINT_SECONDS.name}_sum"
K_CHECKPOINT_SECONDS_COUNT = f"{CHECKPOINT_SECONDS.name}_count"
K_LAST_CHECKPOINT = LAST_CHECKPOINT.name
K_STAGE_COMPUTE = f"{STAGE_COMPUTE.name}_total"
K_STAGE_WAIT = f"{STAGE_WAIT.name}_total"
K_STAGE_MICROBATCHES = f"{STAGE_MICROBATCHES.name}_total"
K_STAGE_BYTES_PREFIX = f"{STAGE_BYTES_SAMPLE}{{peer="
K_NET_RX = f"{NODE_NET_RX.name}_total"
K_NET_TX = f"{NODE_NET_TX.name}_total"
K_CPU_BUSY = f"{NODE_CPU_SAMPLE}{{mode!=idle}}"
K_CPU_ALL = NODE_CPU_SAMPLE  # every mode (busy share = busy / all)
K_MEM_TOTAL = NODE_MEM_TOTAL.name
K_MEM_AVAIL = NODE_MEM_AVAIL.name
K_GPU_UTIL = GPU_UTIL.name  # % (a task's GPUs averaged; GR_ENGINE_ACTIVE x 100 on MIG pages)
K_GPU_FB_USED = GPU_FB_USED.name  # MiB, summed over a task's GPUs
K_GPU_FB_FREE = GPU_FB_FREE.name
K_GPU_COUNT = "dcgm_gpus"  # how many GPUs (or MIG instances) the detail covers
HOST_KEYS = (K_NET_RX, K_NET_TX, K_CPU_BUSY, K_CPU_ALL, K_MEM_TOTAL, K_MEM_AVAIL)
GPU_KEYS = (K_GPU_UTIL, K_GPU_FB_USED, K_GPU_FB_FREE, K_GPU_COUNT)
K_PROCESS_CPU = f"{PROCESS_CPU.name}_total"
K_PROCESS_START = PROCESS_START.name
K_LOSS = LOSS.name
K_LEARNING_RATE = LEARNING_RATE.name
K_EXAMPLES_RATE = EXAMPLES_RATE.name
K_LOG_RESTARTS = LOG_RESTARTS.name

#: The counters every training step moves: a job's steps/s, examples/s, compute and exposed all-reduce per
#: step are made of their rates. Every reader of a task's page, log or server reads them (one list, here).
STEP_COUNTER_KEYS = (
    K_WORKER_STEPS,
    K_EXAMPLES,
    K_STEP_SECONDS_SUM,
    K_STEP_SECONDS_COUNT,
    K_ALLREDUCE_SECONDS_SUM,
    K_ALLREDUCE_SECONDS_COUNT,
)
COUNTER_KEYS = frozenset(
    {
        *STEP_COUNTER_KEYS,
        K_CHECKPOINT_SECONDS_SUM,
        K_CHECKPOINT_SECONDS_COUNT,
        K_PS_IN,
        K_PS_OUT,
        K_STAGE_COMPUTE,
        K_STAGE_WAIT,
        K_STAGE_MICROBATCHES,
        K_NET_RX,
        K_NET_TX,
        K_CPU_BUSY,
        K_CPU_ALL,
        K_PROCESS_CPU,
    }
)


def stage_bytes_key(peer: str) -> str:
    return f"{K_STAGE_BYTES_PREFIX}{peer}}}"


def is_counter_key(key: str) -> bool:
    return key in COUNTER_KEYS or key.startswith(K_STAGE_BYTES_PREFIX)


# assumption: no training figure comes near this (the store's float32 rings hold up to 3.4e38)
MAX_ABS_VALUE = 1e30


def valid_value(key: str, x: float) -> bool:
    """Whether a value from outside may enter the store: finite, within ±:data:`MAX_ABS_VALUE`, not
    negative for a counter, and within its kind's range (:data:`VALUE_BOUNDS`). Sources drop any
    other value (with a note), never the whole poll."""
    if not (math.isfinite(x) and abs(x) <= MAX_ABS_VALUE) or (x < 0 and is_counter_key(key)):
        return False
    bound = value_bound(key)
    return bound is None or bound.low <= x <= bound.high


def value_range(key: str) -> tuple[float, float]:
    """The closed range ``(low, high)`` :func:`valid_value` accepts for ``key``: ``low <= x <= high``
    is ``valid_value(key, x)`` for every float ``x`` (NaN and the infinities fall outside), so a source
    checking many values of a few keys reads each key's bounds once."""
    low, high = -MAX_ABS_VALUE, MAX_ABS_VALUE
    if is_counter_key(key):
        low = 0.0
    bound = value_bound(key)
    if bound is not None:
        low, high = max(low, bound.low), min(high, bound.high)
    return low, high


# --- plausible ranges per metric kind -------------------------------------------------------------
# A value outside its kind's range is refused where it enters, with a note naming it (never the poll).
# Bounds are definitions where the metric has one (a percentage, a ratio, memory available <= the
# memory there is) and otherwise physical bounds set well above the largest machines rented today.
GPU_MEMORY_MAX_MIB = (
    1024 * 1024
)  # assumption: 1 TiB a GPU, over 3x the largest GPU memory sold (288 GB HBM3E)
GPUS_PER_HOST_MAX = 64  # assumption: devices one DCGM exporter reports (8 GPUs x 7 MIG instances, rounded up)
# assumption: 64 TiB, twice the largest cloud VMs' memory (32 TB: GCP X4 and EC2 U7in-32tb High Memory)
HOST_MEMORY_MAX_BYTES = 64 * 2**40
# assumption: 1.6 TB/s = 4 x 3,200 Gbit/s, the fastest NIC bandwidth of a cloud GPU VM (EC2 P5's 3,200 Gbps
# EFA; GCP A3 High 1,000 Gbps: planner/data/interconnect.csv); x4 because node_exporter's sum over
# devices counts one byte on each of a physical NIC, a bond, a bridge and a veth
NIC_MAX_BYTES_PER_S = 4 * 3200e9 / 8
# assumption: CPU seconds per second, twice the most vCPUs of a cloud VM (1,920: GCP X4)
CPU_MAX_SECONDS_PER_S = 4096.0
DEVICE_KEY_PREFIX = "dcgm{dev="  # a DCGM device's own keys: ``dcgm{dev=<id>}<name>`` (hostdetail.DEV_PREFIX)


@dataclass(frozen=True)
class Bound:
    """The plausible range of one kind of value: ``low`` ≤ x ≤ ``high`` (in ``unit``), and why."""

    what: str
    low: float
    high: float
    unit: str
    why: str

    def refusal(self, x: float, prefix: str = "") -> str:
        """One line naming a value this bound refuses."""
        unit = f" {self.unit}" if self.unit else ""
        return f"{prefix}{self.what} {x:.3g}{unit} refused (outside {self.low:g}–{self.high:.3g}{unit}: {self.why})"


_PERCENT = Bound("GPU utilisation", 0.0, 100.0, "%", "a percentage")
_GPU_MIB = Bound("GPU memory", 0.0, GPU_MEMORY_MAX_MIB, "MiB", "over 3x the largest GPU memory sold")
_HOST_BYTES = Bound("host memory", 0.0, HOST_MEMORY_MAX_BYTES, "B", "twice the largest cloud VM's")
VALUE_BOUNDS: dict[str, Bound] = {
    K_GPU_UTIL: _PERCENT,
    GPU_GR_ACTIVE.name: Bound("GPU engine activity", 0.0, 1.0, "", "a ratio"),
    K_GPU_FB_USED: _GPU_MIB,
    K_GPU_FB_FREE: _GPU_MIB,
    K_MEM_TOTAL: _HOST_BYTES,
    K_MEM_AVAIL: _HOST_BYTES,
    K_GPU_COUNT: Bound("GPU count", 0.0, GPUS_PER_HOST_MAX, "", "devices one exporter reports"),
}
# the host-wide sums over a host's devices (hostdetail.fold_devices): as many GPUs' worth
_FOLDED_BOUNDS = {
    k: Bound(b.what, b.low, b.high * GPUS_PER_HOST_MAX, b.unit, f"{GPUS_PER_HOST_MAX} GPUs' worth")
    for k, b in VALUE_BOUNDS.items()
    if k in (K_GPU_FB_USED, K_GPU_FB_FREE)
}
_NIC = Bound("traffic", 0.0, NIC_MAX_BYTES_PER_S, "B/s", "4x the fastest cloud VM NIC, 3,200 Gbit/s")
_CPU = Bound("CPU", 0.0, CPU_MAX_SECONDS_PER_S, "CPU-s/s", "twice the most vCPUs of a cloud VM")
RATE_BOUNDS: dict[str, Bound] = {
    K_NET_RX: _NIC,
    K_NET_TX: _NIC,
    K_PS_IN: _NIC,
    K_PS_OUT: _NIC,
    K_CPU_BUSY: _CPU,
    K_CPU_ALL: _CPU,
    K_PROCESS_CPU: _CPU,
}


def value_bound(key: str) -> Bound | None:
    """The plausible range of the values of series ``key`` (None: only finiteness and sign)."""
    if key.startswith(DEVICE_KEY_PREFIX):  # one device's value: the name follows the device id
        return VALUE_BOUNDS.get(key.rpartition("}")[2])
    return _FOLDED_BOUNDS.get(key) or VALUE_BOUNDS.get(key)


def rate_bound(key: str) -> Bound | None:
    """The physical bound of the per-second rate of counter ``key`` (None: unbounded)."""
    return _NIC if key.startswith(K_STAGE_BYTES_PREFIX) else RATE_BOUNDS.get(key)


def device_key(name: str, device: str = "") -> str:
    """The series key of one DCGM device's value ``name`` (``dcgm{dev=<id>}<name>``)."""
    return f"{DEVICE_KEY_PREFIX}{device}}}{name}"


def value_refusal(key: str, x: float) -> str | None:
    """Why value ``x`` of ``key`` is refused (one line), or None when it is plausible."""
    if not math.isfinite(x) or abs(x) > MAX_ABS_VALUE:
        return f"{key} {x:.3g} refused (not a finite number up to {MAX_ABS_VALUE:g})"
    if x < 0 and is_counter_key(key):
        return f"{key} {x:.3g} refused (a counter is never negative)"
    bound = value_bound(key)
    if bound is not None and not bound.low <= x <= bound.high:
        return bound.refusal(x)
    return None


# --- log scalar tags -> training figures --------------------------------------------------------
_EVAL_WORDS = frozenset({"val", "valid", "validation", "eval", "evaluation", "test", "dev"})
_EXAMPLE_WORDS = frozenset({"examples", "example", "samples", "sample", "images", "sequences", "instances"})
_PER_SECOND_WORDS = frozenset({"sec", "s", "second", "seconds", "per"})
_LOSS_WORDS = frozenset({"loss", "train", "training", "total", "epoch", "step", "avg", "mean", "overall"})
_KIND_KEYS = {"loss": K_LOSS, "learning_rate": K_LEARNING_RATE, "examples_per_sec": K_EXAMPLES_RATE}


def _words(tag: str) -> list[str]:
    out, word = [], []
    for ch in tag.lower():
        if ch.isalnum():
            word.append(ch)
        elif word:
            out.append("".join(word))
            word = []
    if word:
        out.append("".join(word))
    return out


def log_scalar_kind(tag: str) -> tuple[str, int] | None:
    """What a logged scalar's tag names, with a rank (lower is a better match), or None.

    Kinds: ``loss`` (training loss: ``loss``, ``train/loss``, ``Loss/train``, ``epoch_loss``,
    ``train_loss``…; evaluation losses such as ``val_loss`` or ``validation/epoch_loss`` are not it),
    ``learning_rate`` (``lr``, ``learning_rate``, ``lr-Adam``, ``optimizer/lr``, ``epoch_learning_rate``…)
    and ``examples_per_sec`` (``examples/sec``, ``samples_per_second``, ``images/s``…).
    """
    words = _words(tag)
    if not words or any(w in _EVAL_WORDS or w.startswith("val") and w != "value" for w in words):
        return None
    if "loss" in words:
        # the total before its components: ``total_loss``/``loss`` first, then ``train/loss``, ``Loss/train``,
        # ``epoch_loss``, then a component (``loss_cls``, ``train/loss_box_reg``)
        component = bool(set(words) - _LOSS_WORDS)
        total = words == ["loss"] or ("total" in words and not component)
        return "loss", (0 if total else 2 if component else 1) * 100 + len(words)
    if "lr" in words or ("learning" in words and "rate" in words) or "learningrate" in words:
        return "learning_rate", len(words)
    if _EXAMPLE_WORDS & set(words) and (_PER_SECOND_WORDS & set(words) or "throughput" in words):
        return "examples_per_sec", len(words)
    return None


_CHECKPOINT_WORDS = frozenset({"checkpoint", "checkpoints", "ckpt", "checkpointed", "saved_checkpoint"})


def is_checkpoint_tag(tag: str) -> bool:
    """Whether a logged field or scalar tag marks a checkpoint written at the line's (event's) time:
    ``checkpoint``, ``ckpt``, ``checkpoint_seconds``, ``train/checkpoint``… (an evaluation tag is not)."""
    words = _words(tag)
    return bool(_CHECKPOINT_WORDS & set(words)) and not any(w in _EVAL_WORDS for w in words)


def training_keys(tags: dict[str, float]) -> dict[str, float]:
    """The training-figure keys (``K_LOSS``, ``K_LEARNING_RATE``, ``K_EXAMPLES_RATE``) for a set of
    logged scalars: for each kind, the value of the best-ranked tag (ties: the first tag in name order)."""
    best: dict[str, tuple[int, str]] = {}
    for tag in tags:
        hit = log_scalar_kind(tag)
        if hit is not None and (hit[0] not in best or (hit[1], tag) < best[hit[0]]):
            best[hit[0]] = (hit[1], tag)
    return {_KIND_KEYS[kind]: tags[tag] for kind, (_, tag) in best.items()}
