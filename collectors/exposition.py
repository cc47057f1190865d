"""Turn Prometheus exposition text into one task's values (a pure function over text).

Parsing is prometheus_client's; this module only picks the families of the metric contract and
folds standard exporters' many series (per CPU, per NIC, per GPU) into one value per task.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from cmdare.collectors import metrics as M
from cmdare.collectors.samples import JobFacts, TaskInfo


class ExpositionError(ValueError):
    """The text is not Prometheus exposition (the message says why, in one line)."""


@dataclass
class Parsed:
    info: TaskInfo | None = None
    facts: JobFacts | None = None
    values: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # degraded-but-usable remarks


def _num(text: str) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return 0.0


def _info_from_labels(labels: dict[str, str], default: TaskInfo | None) -> TaskInfo:
    base = default or TaskInfo(job=labels.get("job", "job"), task=labels.get("task", "task"))
    pick = {k: labels[k] for k in ("job", "role", "task", "gpu", "region", "zone", "provisioning", "dc", "stage")
            if labels.get(k)}
    return TaskInfo(**{**base.__dict__, **pick})


def _facts_from_labels(labels: dict[str, str]) -> JobFacts:
    return JobFacts(
        job=labels.get("job", ""),
        model=labels.get("model", ""),
        model_flops=_num(labels.get("model_flops", "0")),
        params=_num(labels.get("params", "0")),
        batch_size=int(_num(labels.get("batch_size", "0"))),
        target_steps=int(_num(labels.get("target_steps", "0"))),
    )


_SIMPLE = {
    "cmdare_global_step": M.K_GLOBAL_STEP,
    "cmdare_worker_steps_total": M.K_WORKER_STEPS,
    "cmdare_examples_total": M.K_EXAMPLES,
    "cmdare_step_seconds_sum": M.K_STEP_SECONDS_SUM,
    "cmdare_step_seconds_count": M.K_STEP_SECONDS_COUNT,
    "cmdare_instance_preempted": M.K_PREEMPTED,
    "cmdare_stage_compute_seconds_total": M.K_STAGE_COMPUTE,
    "cmdare_stage_wait_seconds_total": M.K_STAGE_WAIT,
    "cmdare_stage_microbatches_total": M.K_STAGE_MICROBATCHES,
    "process_cpu_seconds_total": M.K_PROCESS_CPU,
}


def _fold(sample_name: str, labels: dict[str, str], value: float, acc: dict[str, list[float]]) -> None:
    """Add one sample to the per-key accumulators (sums, or lists to average)."""
    if sample_name in _SIMPLE:
        acc.setdefault(_SIMPLE[sample_name], []).append(value)
    elif sample_name == "cmdare_ps_bytes_total":
        key = M.K_PS_IN if labels.get("direction") == "in" else M.K_PS_OUT
        acc.setdefault(key, []).append(value)
    elif sample_name == "cmdare_stage_bytes_sent_total":
        acc.setdefault(M.stage_bytes_key(labels.get("peer", "?")), []).append(value)
    elif sample_name == "node_network_receive_bytes_total" and labels.get("device") != "lo":
        acc.setdefault(M.K_NET_RX, []).append(value)
    elif sample_name == "node_network_transmit_bytes_total" and labels.get("device") != "lo":
        acc.setdefault(M.K_NET_TX, []).append(value)
    elif sample_name == "node_cpu_seconds_total" and labels.get("mode") != "idle":
        acc.setdefault(M.K_CPU_BUSY, []).append(value)
    elif sample_name == M.K_GPU_UTIL:
        acc.setdefault("__gpu_util", []).append(value)


def parse_exposition(text: str, default_info: TaskInfo | None = None) -> Parsed:
    """Parse exposition text. Raises :class:`ExpositionError` when it is not exposition at all;
    returns degraded-but-usable results with ``notes`` (NaN values dropped, duplicates, …)."""
    head = text.lstrip()[:200].lower()
    if head.startswith("<!doctype") or head.startswith("<html") or "<body" in head:
        raise ExpositionError("got an HTML page, not Prometheus metrics")
    out = Parsed()
    acc: dict[str, list[float]] = {}
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    dropped = dupes = 0
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name == "cmdare_task_info":
                    out.info = _info_from_labels(s.labels, default_info)
                    continue
                if s.name == "cmdare_job_info":
                    out.facts = _facts_from_labels(s.labels)
                    continue
                ident = (s.name, tuple(sorted(s.labels.items())))
                if ident in seen:
                    dupes += 1
                    continue
                seen.add(ident)
                if not math.isfinite(s.value):
                    dropped += 1
                    continue
                _fold(s.name, s.labels, s.value, acc)
    except ValueError as exc:  # prometheus_client raises bare ValueError on bad lines
        raise ExpositionError(f"malformed exposition: {str(exc)[:120]}") from None
    for key, vals in acc.items():
        if key == "__gpu_util":
            out.values[M.K_GPU_UTIL] = sum(vals) / len(vals)
        elif key in (M.K_GLOBAL_STEP, M.K_PREEMPTED):
            out.values[key] = max(vals)
        else:
            out.values[key] = sum(vals)
    if out.info is None and default_info is not None:
        out.info = default_info
    if dropped:
        out.notes.append(f"{dropped} non-finite value(s) ignored")
    if dupes:
        out.notes.append(f"{dupes} duplicate series ignored")
    return out
