"""The planner's workload file: a typed TOML schema that rejects unknown keys.

Schema (issue 6; keys marked * are extensions)::

    [model]    name, model_flops, params, batch_size (default: the study's 128), checkpoint_mb*, tensors*
               (read into :class:`cmdare.collectors.samples.ModelSpec`, which gives the units)
    [target]   steps | (epochs* and dataset_size*), deadline_hours, budget_usd
    [current]  gpu, workers, ps, region, provisioning (spot|preemptible|standard)
    [allowed]  gpus, regions, max_workers, max_ps, provisionings*, ps_provisioning* (default "standard")
    [options]* checkpoint_interval_steps (default: every checkpoint_interval_s = 600 s), start_hour (0-23, local hour the job starts),
               latency_ms (default 0.3), warm_restart (bool), data_region, dataset_gb, since_checkpoint_s
               (seconds since the job's last checkpoint: the work a switch redoes; default half an interval),
               checkpoint_write_s (measured seconds to write one; default the CM-DARE fit on its size)
    [parallel]* mode ("ps" default | "sync": synchronous all-reduce, DDP/Horovod | "fsdp": sharded data
               parallel, ZeRO-3), zero_stage (sync mode: 0 = DDP, 1 or 2 = ZeRO-1/2 optimizer/gradient
               sharding), precision ("fp32" | "tf32" | "fp16"/"bf16"), transport ("tcp" | "rdma"), hop_us
               (per-step NIC latency instead of the published one), activation_gb (per-GPU activation peak),
               recompute (bool: activation recomputation), gpus_per_node (current
               shape's, default 1), max_gpus_per_node (default: the current), nic_tier ("default" | "fast":
               gVNIC / Tier_1 where the GPU's VMs offer it), elastic (bool, default true: torchrun elastic
               shrink and re-grow allowed), bucket_mb (default 25, DDP's), compression (default 1)
               In sync mode ``[current] workers`` counts GPUs in all (nodes × gpus_per_node) and ps must be 0.

Errors are :class:`WorkloadError` naming the file, the line when it can be found, and the key.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cmdare.collectors.samples import ModelSpec
from cmdare.collectors.toml_lines import line_of
from cmdare.collectors.untrusted import MESSAGE_LIMIT, clean_text, clean_tree

PROVISIONINGS: tuple[str, ...] = ("spot", "preemptible", "standard")


class WorkloadError(ValueError):
    """A workload file is malformed; the message names file, line (when known) and key."""


@dataclass(frozen=True)
class Target:
    """What to train: ``steps`` (global steps); optional deadline (hours) and budget (USD)."""

    steps: int
    deadline_hours: float | None = None
    budget_usd: float | None = None
    epochs: float | None = None
    dataset_size: int | None = None


@dataclass(frozen=True)
class Shape:
    """One cluster shape: ``workers`` one-GPU workers of ``gpu`` plus ``ps`` parameter servers."""

    gpu: str
    workers: int
    ps: int
    region: str
    provisioning: str


@dataclass(frozen=True, kw_only=True)
class Allowed:
    """The space of alternatives to enumerate around the current shape."""

    gpus: tuple[str, ...]
    regions: tuple[str, ...]
    max_workers: int
    max_ps: int
    provisionings: tuple[str, ...] = PROVISIONINGS
    ps_provisioning: str = "standard"


@dataclass(frozen=True, kw_only=True)
class Options:
    """Planner options: checkpoint interval (steps, or seconds when steps is None), start hour of day (0–23 or None = any),
    network latency (ms), warm framework restarts, data region and dataset size (GB) for egress."""

    # None = every ``checkpoint_interval_s`` seconds: 600 s is TensorFlow 1.x MonitoredTrainingSession's
    # default ``save_checkpoint_secs`` (the study's TF 1.10 setup; its interval is not stated — assumption).
    checkpoint_interval_steps: int | None = None
    checkpoint_interval_s: float = 600.0
    start_hour: int | None = None
    latency_ms: float = 0.3
    warm_restart: bool = False
    data_region: str | None = None
    dataset_gb: float = 0.0
    # seconds since the job's last checkpoint (a live job's measurement); None = half an interval, expected
    since_checkpoint_s: float | None = None
    checkpoint_write_s: float | None = (
        None  # measured seconds to write one (None: the CM-DARE fit on its size)
    )


PARALLEL_MODES = ("ps", "sync", "fsdp")
MAX_GPUS_PER_NODE = 16  # the largest GCP GPU VMs (a2-megagpu-16g)
# The region a job is planned and priced in when its tasks name none (an assumption, said as one where
# it is used): the cost meter and the planner price one shape the same way.
ASSUMED_REGION = "us-central1"
# DDP's bucket_cap_mb is 25 by default; below ~10 kB a bucket holds a few hundred fp32 values and the
# model's per-bucket hop latencies only overflow (1e-300 MB gave 5.7e12 hours)
MIN_BUCKET_MB = 0.01


@dataclass(frozen=True, kw_only=True)
class Parallel:
    """How the job trains: asynchronous PS (``ps``) or synchronous all-reduce (``sync``), and for sync the
    GPUs per node (the current shape's and the most to consider), NIC tier, elasticity, DDP bucket and
    gradient compression ratio."""

    mode: str = "ps"
    gpus_per_node: int = 1
    max_gpus_per_node: int = 1
    nic_tier: str = "default"
    elastic: bool = True
    bucket_mb: float = 25.0
    compression: float = 1.0
    precision: str = "fp32"
    transport: str = "tcp"
    hop_us: float | None = None
    activation_gb: float | None = None
    recompute: bool = False
    zero_stage: int = 0

    @property
    def sync(self) -> bool:
        """Synchronous data parallel (all-reduce or sharded): every GPU takes every step."""
        return self.mode in ("sync", "fsdp")

    @property
    def sharding(self) -> str:
        """ddp | zero1 | zero2 | fsdp: how model states are divided over the GPUs."""
        return "fsdp" if self.mode == "fsdp" else ("ddp", "zero1", "zero2")[self.zero_stage]


@dataclass(frozen=True, kw_only=True)
class Workload:
    """A parsed workload file."""

    model: ModelSpec
    target: Target
    current: Shape
    allowed: Allowed
    options: Options = field(default_factory=Options)
    source: str = "<string>"
    parallel: Parallel = field(default_factory=Parallel)


_SCHEMA: dict[str, dict[str, tuple[type | tuple[type, ...], bool]]] = {
    "model": {
        "name": (str, True),
        "model_flops": ((int, float), True),
        "params": ((int, float), True),
        "batch_size": (int, False),
        "checkpoint_mb": ((int, float), False),
        "tensors": (int, False),
    },
    "target": {
        "steps": (int, False),
        "deadline_hours": ((int, float), False),
        "budget_usd": ((int, float), False),
        "epochs": ((int, float), False),
        "dataset_size": (int, False),
    },
    "current": {
        "gpu": (str, True),
        "workers": (int, True),
        "ps": (int, True),
        "region": (str, True),
        "provisioning": (str, True),
    },
    "allowed": {
        "gpus": (list, False),
        "regions": (list, False),
        "max_workers": (int, False),
        "max_ps": (int, False),
        "provisionings": (list, False),
        "ps_provisioning": (str, False),
    },
    "options": {
        "checkpoint_interval_steps": (int, False),
        "checkpoint_interval_s": ((int, float), False),
        "start_hour": (int, False),
        "latency_ms": ((int, float), False),
        "warm_restart": (bool, False),
        "data_region": (str, False),
        "dataset_gb": ((int, float), False),
        "since_checkpoint_s": ((int, float), False),
        "checkpoint_write_s": ((int, float), False),
    },
    "parallel": {
        "mode": (str, False),
        "gpus_per_node": (int, False),
        "max_gpus_per_node": (int, False),
        "nic_tier": (str, False),
        "elastic": (bool, False),
        "bucket_mb": ((int, float), False),
        "compression": ((int, float), False),
        "precision": (str, False),
        "transport": (str, False),
        "hop_us": ((int, float), False),
        "activation_gb": ((int, float), False),
        "recompute": (bool, False),
        "zero_stage": (int, False),
    },
}
_REQUIRED_TABLES = ("model", "target", "current")


class _Locator:
    """Finds the line of ``[table]`` / ``key =`` in the TOML text for error messages."""

    def __init__(self, text: str, source: str) -> None:
        self.lines = text.splitlines()
        self.source = source

    def line_of(self, table: str, key: str | None = None) -> int | None:
        return line_of(self.lines, table, key)

    def error(self, message: str, table: str, key: str | None = None) -> WorkloadError:
        line = self.line_of(table, key)
        where = f"{self.source}:{line}" if line else self.source
        name = f"{table}.{key}" if key else f"[{table}]"
        return WorkloadError(f"{where}: {name}: {message}")


def load_workload(path: str | Path) -> Workload:
    """Read and validate a workload TOML file."""
    p = Path(path)
    from cmdare.collectors.textfile import TextFileError, read_small_text

    try:
        text = read_small_text(p)
    except TextFileError as exc:
        raise WorkloadError(f"cannot read workload file: {exc}") from exc
    return parse_workload(text, source=str(p))


def parse_workload(text: str, source: str = "<string>") -> Workload:
    """Parse workload TOML ``text``; ``source`` names it in error messages."""
    source = clean_text(source, MESSAGE_LIMIT)
    try:
        data = clean_tree(tomllib.loads(text))  # every name shown on a terminal, cleaned where it enters
    except tomllib.TOMLDecodeError as exc:
        raise WorkloadError(f"{source}: invalid TOML: {exc}") from exc
    except RecursionError:
        raise WorkloadError(f"{source}: invalid TOML: nested too deeply") from None
    loc = _Locator(text, source)
    _check_keys(data, loc)
    model = _model(data["model"], loc)
    target = _target(data["target"], model, loc)
    parallel = _parallel(data.get("parallel", {}), loc)
    current = _current(data["current"], loc, parallel)
    allowed = _allowed(data.get("allowed", {}), current, loc)
    options = _options(data.get("options", {}), loc)
    return Workload(
        model=model,
        target=target,
        current=current,
        allowed=allowed,
        options=options,
        source=source,
        parallel=parallel,
    )


MAX_NODES = 4096  # [allowed] max_workers / max_ps
MAX_NUMBER = (
    1e16  # any number in a workload file (larger ones only overflow the models; predict's model_flops limit)
)


def _check_keys(data: dict[str, Any], loc: _Locator) -> None:
    for table in data:
        if table not in _SCHEMA:
            raise loc.error(f"unknown table (expected one of {', '.join(_SCHEMA)})", table)
        if not isinstance(data[table], dict):
            raise WorkloadError(f"{loc.source}: {table}: must be a table")
    for table in _REQUIRED_TABLES:
        if table not in data:
            raise WorkloadError(f"{loc.source}: [{table}]: missing required table")
    for table, values in data.items():
        spec = _SCHEMA[table]
        for key, value in values.items():
            if key not in spec:
                raise loc.error(f"unknown key (expected one of {', '.join(spec)})", table, key)
            kind, _ = spec[key]
            if isinstance(value, bool) and kind is not bool:
                raise loc.error("must be a number or string, not a boolean", table, key)
            if not isinstance(value, kind):
                raise loc.error(f"wrong type {type(value).__name__}", table, key)
            if (
                isinstance(value, int | float)
                and not isinstance(value, bool)
                and not abs(value) <= MAX_NUMBER
            ):
                raise loc.error(
                    f"implausible value {value!r} (a finite number up to {MAX_NUMBER:g})", table, key
                )
        for key, (_, required) in spec.items():
            if required and key not in values:
                raise loc.error("missing required key", table, key)


def _positive(values: dict[str, Any], key: str, table: str, loc: _Locator) -> None:
    if key in values and not values[key] > 0:
        raise loc.error("must be > 0", table, key)


def _model(v: dict[str, Any], loc: _Locator) -> ModelSpec:
    for key in ("model_flops", "params", "batch_size", "checkpoint_mb", "tensors"):
        _positive(v, key, "model", loc)
    if v["params"] < 1:  # a count: below one the speed model's terms reach 0 steps/s (and 0/0 in its band)
        raise loc.error("must be at least 1 (a parameter count)", "model", "params")
    ckpt = v.get("checkpoint_mb")
    return ModelSpec(
        name=v["name"],
        model_flops=float(v["model_flops"]),
        params=float(v["params"]),
        batch_size=int(v.get("batch_size", 0)),
        checkpoint_mb=None if ckpt is None else float(ckpt),
        tensors=None if v.get("tensors") is None else int(v["tensors"]),
    )


def _target(v: dict[str, Any], model: ModelSpec, loc: _Locator) -> Target:
    for key in ("steps", "deadline_hours", "budget_usd", "epochs", "dataset_size"):
        _positive(v, key, "target", loc)
    steps = v.get("steps")
    if steps is None:
        if "epochs" not in v or "dataset_size" not in v:
            raise loc.error("give steps, or both epochs and dataset_size", "target", "steps")
        # One global step consumes one worker batch (async PS training, CM-DARE setup).
        steps = int(round(v["epochs"] * v["dataset_size"] / model.effective_batch_size))
    return Target(
        int(steps), v.get("deadline_hours"), v.get("budget_usd"), v.get("epochs"), v.get("dataset_size")
    )


def _parallel(v: dict[str, Any], loc: _Locator) -> Parallel:
    mode = v.get("mode", "ps")
    if mode not in PARALLEL_MODES:
        raise loc.error(f"must be one of {', '.join(PARALLEL_MODES)}", "parallel", "mode")
    for key in ("gpus_per_node", "max_gpus_per_node", "bucket_mb", "compression"):
        _positive(v, key, "parallel", loc)
    for key in ("gpus_per_node", "max_gpus_per_node"):
        if v.get(key, 1) > MAX_GPUS_PER_NODE:
            raise loc.error(f"at most {MAX_GPUS_PER_NODE}", "parallel", key)
    if v.get("nic_tier", "default") not in ("default", "fast"):
        raise loc.error("must be default or fast", "parallel", "nic_tier")
    if v.get("compression", 1) < 1:
        raise loc.error("must be >= 1 (a compression ratio)", "parallel", "compression")
    if v.get("bucket_mb", MIN_BUCKET_MB) < MIN_BUCKET_MB:
        raise loc.error(f"must be at least {MIN_BUCKET_MB:g} (MB)", "parallel", "bucket_mb")
    from cmdare.planner.speed.sync_compute import canonical_precision

    try:
        precision = canonical_precision(str(v.get("precision", "fp32")))
    except ValueError:
        raise loc.error("must be fp32, tf32, fp16 or bf16", "parallel", "precision") from None
    if v.get("transport", "tcp") not in ("tcp", "rdma"):
        raise loc.error("must be tcp or rdma", "parallel", "transport")
    if v.get("zero_stage", 0) not in (0, 1, 2) or (mode == "fsdp" and v.get("zero_stage", 0)):
        raise loc.error("must be 0, 1 or 2 in sync mode (fsdp is ZeRO-3)", "parallel", "zero_stage")
    for key, high in (("hop_us", 1e6), ("activation_gb", 1e5)):
        if key in v and not 0 <= v[key] <= high:  # NaN fails too
            raise loc.error(f"must be 0..{high:g}", "parallel", key)
    g = int(v.get("gpus_per_node", 1))
    hop, act = v.get("hop_us"), v.get("activation_gb")
    return Parallel(
        mode=mode,
        gpus_per_node=g,
        max_gpus_per_node=max(int(v.get("max_gpus_per_node", g)), g),
        nic_tier=v.get("nic_tier", "default"),
        elastic=bool(v.get("elastic", True)),
        bucket_mb=float(v.get("bucket_mb", 25.0)),
        compression=float(v.get("compression", 1.0)),
        precision=precision,
        transport=v.get("transport", "tcp"),
        hop_us=None if hop is None else float(hop),
        activation_gb=None if act is None else float(act),
        recompute=bool(v.get("recompute", False)),
        zero_stage=int(v.get("zero_stage", 0)),
    )


def _current(v: dict[str, Any], loc: _Locator, parallel: Parallel | None = None) -> Shape:
    sync = parallel is not None and parallel.sync
    if sync and v["ps"] != 0:
        raise loc.error(
            "must be 0 in sync mode (all-reduce training has no parameter server)", "current", "ps"
        )
    for key in ("workers",) if sync else ("workers", "ps"):
        _positive(v, key, "current", loc)
        if v[key] > MAX_NODES:
            raise loc.error(f"at most {MAX_NODES}", "current", key)
    if v["provisioning"] not in PROVISIONINGS:
        raise loc.error(f"must be one of {', '.join(PROVISIONINGS)}", "current", "provisioning")
    if parallel is not None and parallel.sync and v["workers"] % parallel.gpus_per_node:
        raise loc.error(
            "sync mode: workers counts GPUs in all, a multiple of gpus_per_node", "current", "workers"
        )
    return Shape(v["gpu"], int(v["workers"]), int(v["ps"]), v["region"], v["provisioning"])


def _str_list(v: dict[str, Any], key: str, loc: _Locator) -> tuple[str, ...] | None:
    if key not in v:
        return None
    items = v[key]
    if not items or not all(isinstance(x, str) for x in items):
        raise loc.error("must be a non-empty list of strings", "allowed", key)
    return tuple(items)


def _allowed(v: dict[str, Any], current: Shape, loc: _Locator) -> Allowed:
    for key in ("max_workers", "max_ps"):
        _positive(v, key, "allowed", loc)
        if v.get(key, 0) > MAX_NODES:
            raise loc.error(f"at most {MAX_NODES} (the planner enumerates every count)", "allowed", key)
    provs = _str_list(v, "provisionings", loc) or PROVISIONINGS
    for p in (*provs, v.get("ps_provisioning", "standard")):
        if p not in PROVISIONINGS:
            raise loc.error(f"unknown provisioning {p!r}", "allowed", "provisionings")
    gpus = _str_list(v, "gpus", loc) or (current.gpu,)
    regions = _str_list(v, "regions", loc) or (current.region,)
    return Allowed(
        gpus=tuple(dict.fromkeys((current.gpu, *gpus))),
        regions=tuple(dict.fromkeys((current.region, *regions))),
        max_workers=max(int(v.get("max_workers", current.workers)), current.workers),
        max_ps=max(int(v.get("max_ps", current.ps)), current.ps),
        provisionings=tuple(dict.fromkeys((current.provisioning, *provs))),
        ps_provisioning=v.get("ps_provisioning", "standard"),
    )


def _options(v: dict[str, Any], loc: _Locator) -> Options:
    _positive(v, "checkpoint_interval_steps", "options", loc)
    _positive(v, "checkpoint_interval_s", "options", loc)
    _positive(v, "checkpoint_write_s", "options", loc)
    hour = v.get("start_hour")
    if hour is not None and not 0 <= hour <= 23:
        raise loc.error("must be an hour 0-23", "options", "start_hour")
    since = v.get("since_checkpoint_s")
    if since is not None and not 0 <= since < 1e9:
        raise loc.error("must be seconds >= 0", "options", "since_checkpoint_s")
    if v.get("dataset_gb", 0) < 0 or v.get("latency_ms", 0.3) < 0:
        raise loc.error(
            "must be >= 0", "options", "dataset_gb" if v.get("dataset_gb", 0) < 0 else "latency_ms"
        )
    return Options(
        checkpoint_interval_steps=v.get("checkpoint_interval_steps"),
        checkpoint_interval_s=float(v.get("checkpoint_interval_s", 600.0)),
        start_hour=hour,
        latency_ms=float(v.get("latency_ms", 0.3)),
        warm_restart=bool(v.get("warm_restart", False)),
        data_region=v.get("data_region"),
        dataset_gb=float(v.get("dataset_gb", 0.0)),
        since_checkpoint_s=None if since is None else float(since),
        checkpoint_write_s=None if v.get("checkpoint_write_s") is None else float(v["checkpoint_write_s"]),
    )
