"""Turn Prometheus exposition text into one task's values (a pure function over text).

A fast scanner reads well-formed pages; anything it does not fully understand goes to
prometheus_client's parser (the reference). This module picks the families of the metric contract
and folds standard exporters' many series (per CPU, per NIC, per GPU) into one value per task.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from cmdare.collectors import metrics as M
from cmdare.collectors.hostdetail import DCGM_NAMES, DcgmFold, device_id, forget_memory
from cmdare.collectors.redaction import redact_cut
from cmdare.collectors.samples import JobFacts, ModelSpec, TaskInfo
from cmdare.collectors.untrusted import label_limit

TASK_LABELS = M.TASK_INFO.labels  # every identity label a page may give


class ExpositionError(ValueError):
    """The text is not Prometheus exposition (the message says why, in one line)."""


@dataclass
class Parsed:
    info: TaskInfo | None = None
    facts: JobFacts | None = None
    values: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # degraded-but-usable remarks
    own_info: bool = False  # the page names its task (cmdare_task_info); else it is host detail
    gpu_model: str = ""  # DCGM ``modelName``
    sample_time: float | None = None  # the newest timestamp the exporter gave its task samples (epoch s)


_FACT_LIMITS = {
    "model_flops": M.MAX_ABS_VALUE,
    "params": M.MAX_ABS_VALUE,
    "batch_size": 2.0**53,
    "target_steps": 2.0**53,
}
_FACT_MINIMUMS = {"params": 1.0}  # a count (0 = not given): below one the speed model's terms reach 0 steps/s


def _fact(labels: dict[str, str], name: str, notes: list[str] | None) -> float:
    """A numeric job fact: 0 when absent; 0 and a note when it is not a plausible count."""
    text = labels.get(name)
    if text is None or text == "":
        return 0.0
    try:
        x = float(text[:64])
    except ValueError:
        x = math.nan
    if not 0 <= x <= _FACT_LIMITS[name] or 0 < x < _FACT_MINIMUMS.get(name, 0.0):  # NaN fails too
        if notes is not None:
            notes.append(f"job info: {name} is not a plausible number, ignored")
        return 0.0
    return x


def _info_from_labels(labels: dict[str, str], default: TaskInfo | None) -> TaskInfo:
    base = default or TaskInfo(job=labels.get("job", "job"), task=labels.get("task", "task"))
    pick = {k: labels[k] for k in TASK_LABELS if labels.get(k)}
    return replace(base, **pick)


def facts_from_labels(labels: dict[str, str], notes: list[str] | None = None) -> JobFacts:
    """What a job trains, from ``cmdare_job_info`` labels; an implausible number (NaN, negative,
    huge) is dropped (with a line in ``notes``), never the facts or the poll. The same labels come
    with every poll, so short ones are parsed once (bounded cache)."""
    key = tuple(labels.get(k) or "" for k in M.JOB_INFO.labels)
    facts, found = (_cached_facts if sum(map(len, key)) <= FACTS_CACHE_CHARS else _facts_of)(key)
    if notes is not None:
        notes.extend(found)
    return facts


FACTS_CACHE_CHARS = 512  # longer label sets are parsed each time: a hostile page cannot fill the cache


def _facts_of(key: tuple[str, ...]) -> tuple[JobFacts, tuple[str, ...]]:
    """The facts of the ``cmdare_job_info`` label values ``key`` (in ``M.JOB_INFO.labels`` order), and notes."""
    labels = dict(zip(M.JOB_INFO.labels, key, strict=True))
    notes: list[str] = []
    spec = ModelSpec(
        name=labels["model"],
        model_flops=_fact(labels, "model_flops", notes),
        params=_fact(labels, "params", notes),
        batch_size=int(_fact(labels, "batch_size", notes)),
        sync=labels["sync"] if labels["sync"] in M.SYNC_MODES else "",
    )
    target = int(_fact(labels, "target_steps", notes))
    return JobFacts(job=labels["job"], model=spec, target_steps=target), tuple(notes)


_cached_facts = functools.lru_cache(maxsize=256)(_facts_of)


#: Families whose sample name is its own series key (summed over a page's series of it).
_SIMPLE = {
    key: key
    for key in (
        M.K_GLOBAL_STEP,
        *M.STEP_COUNTER_KEYS,
        M.K_PREEMPTED,
        M.K_CHECKPOINT_SECONDS_SUM,
        M.K_CHECKPOINT_SECONDS_COUNT,
        M.K_LAST_CHECKPOINT,
        M.K_STAGE_COMPUTE,
        M.K_STAGE_WAIT,
        M.K_STAGE_MICROBATCHES,
        M.K_PROCESS_CPU,
        M.K_MEM_TOTAL,
        M.K_MEM_AVAIL,
        M.K_PROCESS_START,
    )
}


def _fold(sample_name: str, labels: dict[str, str], value: float, acc: dict[str, list[float]]) -> None:
    """Add one sample to the per-key accumulators (sums, or lists to average)."""
    if sample_name in _SIMPLE:
        acc.setdefault(_SIMPLE[sample_name], []).append(value)
    elif sample_name == M.PS_BYTES_SAMPLE:
        key = M.K_PS_IN if labels.get("direction") == "in" else M.K_PS_OUT
        acc.setdefault(key, []).append(value)
    elif sample_name == M.STAGE_BYTES_SAMPLE:
        acc.setdefault(M.stage_bytes_key(labels.get("peer", "?")), []).append(value)
    elif sample_name == M.K_NET_RX and labels.get("device") != "lo":
        acc.setdefault(M.K_NET_RX, []).append(value)
    elif sample_name == M.K_NET_TX and labels.get("device") != "lo":
        acc.setdefault(M.K_NET_TX, []).append(value)
    elif sample_name == M.NODE_CPU_SAMPLE:
        acc.setdefault(M.K_CPU_ALL, []).append(value)
        if labels.get("mode") != "idle":
            acc.setdefault(M.K_CPU_BUSY, []).append(value)


# --- fast path -------------------------------------------------------------------------------------
# A node_exporter page has hundreds of series of which we fold a few dozen. Three C-level regex
# passes classify every line (sample, comment, blank); labels are read only for the families we
# fold. When any line is not one of the three (or a value is odd), the whole text goes to
# prometheus_client, the reference parser, instead. Series identity here is the raw label text.
_LABELLED = frozenset(
    {
        M.TASK_INFO.name,
        M.JOB_INFO.name,
        M.PS_BYTES_SAMPLE,
        M.STAGE_BYTES_SAMPLE,
        M.K_NET_RX,
        M.K_NET_TX,
        *DCGM_NAMES,
    }
)
_WANTED = frozenset({*_SIMPLE, *_LABELLED, M.NODE_CPU_SAMPLE})
_VALUE_TEXT = r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"'
_PAIR = rf"[ \t]*[a-zA-Z_][a-zA-Z0-9_]*[ \t]*=[ \t]*{_VALUE_TEXT}[ \t]*"
_LINE = re.compile(  # a sample (name, label text, value), or a comment or blank line (empty groups)
    rf"^(?:([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{{((?:{_PAIR}(?:,{_PAIR})*,?)?)\}})?"
    r"[ \t]+([0-9a-zA-Z.+-]+)(?:[ \t]+(-?[0-9]+))?[ \t\r]*|[^\S\n]*(?:#[^\n]*)?)$",
    re.M,
)
_LABEL = re.compile(rf"([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*({_VALUE_TEXT})")
_MODE = re.compile(rf"(?:^|,)[ \t]*mode[ \t]*=[ \t]*({_VALUE_TEXT})")
_ESCAPES = {"\\\\": "\\", "\\n": "\n", '\\"': '"'}


class _Fallback(Exception):
    """The fast scanner met text it does not fully understand."""


def _unquote(quoted: str) -> str:
    v = quoted[1:-1]
    return re.sub(r"\\[\\n\"]", lambda e: _ESCAPES[e.group(0)], v) if "\\" in v else v


def _labels(name: str, body: str) -> dict[str, str]:
    if name == M.NODE_CPU_SAMPLE:  # 8 modes x every CPU, and only "is it idle" matters
        m = _MODE.search(body) if '"idle"' in body else None
        return {"mode": _unquote(m.group(1))} if m else {}
    return {k: _unquote(v) for k, v in _LABEL.findall(body)}


def _pieces(text: str, size: int = 1 << 18) -> Iterator[str]:
    """``text`` in pieces of about ``size`` characters, cut at (and without) a newline."""
    start = 0
    while start < len(text):
        end = text.find("\n", start + size)
        end = len(text) if end < 0 else end
        yield text[start:end]
        start = end + 1


def _samples_fast(text: str) -> list[tuple[str, dict[str, str] | None, str, float, float | None]]:
    """(name, labels, raw label text, value, timestamp s) per sample; labels only for the families we fold."""
    lines = []
    for piece in _pieces(text):  # the regex holds the GIL: a piece at a time, so other threads run
        found = _LINE.findall(piece)
        if len(found) != piece.count("\n") + 1:  # some line is neither a sample, a comment nor blank
            raise _Fallback
        lines += found
    out = []
    labelled = _LABELLED | {M.NODE_CPU_SAMPLE}
    try:
        for name, body, raw, stamp in lines:
            if not name:
                continue
            if "_" in raw:
                raise _Fallback
            out.append(
                (
                    name,
                    _labels(name, body) if name in labelled else None,
                    body,
                    float(raw),
                    int(stamp) / 1000 if stamp else None,
                )
            )
    except ValueError:
        raise _Fallback from None
    return out


def _samples_reference(text: str) -> list[tuple[str, dict[str, str], None, float, float | None]]:
    from prometheus_client.parser import text_string_to_metric_families  # only on the slow path

    return [
        (s.name, s.labels, None, s.value, float(s.timestamp) if s.timestamp is not None else None)
        for f in text_string_to_metric_families(text)
        for s in f.samples
    ]


def parse_exposition(text: str, default_info: TaskInfo | None = None) -> Parsed:
    """Parse exposition text. Raises :class:`ExpositionError` when it is not exposition at all;
    returns degraded-but-usable results with ``notes`` (NaN values dropped, duplicates, …)."""
    head = text[:1024].lstrip()[:200].lower()
    if head.startswith("<!doctype") or head.startswith("<html") or "<body" in head:
        raise ExpositionError("got an HTML page, not Prometheus metrics")
    try:
        return _fold_samples(_samples_fast(text), default_info)
    except _Fallback:
        pass
    try:
        samples = _samples_reference(text)
    except ValueError as exc:  # prometheus_client raises bare ValueError on bad lines
        raise ExpositionError(f"malformed exposition: {redact_cut(str(exc), 120)}") from None
    return _fold_samples(samples, default_info)


def _fold_samples(samples: list[Any], default_info: TaskInfo | None) -> Parsed:
    out = Parsed()
    acc: dict[str, list[float]] = {}
    dcgm = DcgmFold()
    seen: set[tuple[str, object]] = set()
    dropped = dupes = long = 0
    why: str | None = None  # the first refusal with a range to name
    bad_memory: set[str] = set()  # DCGM devices with a memory value refused: their memory left out whole
    limit = label_limit()
    for name, labels, raw, value, stamp in samples:
        if len(raw or "") > limit or (raw is None and labels and max(map(len, labels.values())) > limit):
            long += _over_limit(raw, labels, limit)
        if stamp is not None and name in _SIMPLE and name.startswith("cmdare_"):
            out.sample_time = max(out.sample_time or 0.0, stamp)  # the exporter's own sample time
        if name == M.TASK_INFO.name:
            out.info, out.own_info = _info_from_labels(labels, default_info), True
            continue
        if name == M.JOB_INFO.name:
            out.facts = facts_from_labels(labels, out.notes)
            continue
        ident = (name, raw if raw is not None else tuple(sorted(labels.items())))
        if ident in seen:
            dupes += 1
            continue
        seen.add(ident)
        if not math.isfinite(value) or abs(value) > M.MAX_ABS_VALUE:
            dropped += 1
            continue
        if name in DCGM_NAMES:
            if M.valid_value(M.device_key(name), value):  # one device's: refused before it is folded
                dcgm.add(name, labels or {}, value)
            else:
                dropped += 1
                why = why or M.value_refusal(M.device_key(name), value)
                if name in (M.GPU_FB_USED.name, M.GPU_FB_FREE.name):
                    bad_memory.add(device_id(labels or {}))
        elif name in _WANTED:
            _fold(name, labels or {}, value, acc)
    forget_memory(dcgm, bad_memory)
    for key, vals in acc.items():
        if key in (M.K_GLOBAL_STEP, M.K_PREEMPTED, M.K_MEM_TOTAL, M.K_MEM_AVAIL):
            value = max(vals)
        else:
            value = sum(vals)
            value = min(vals) if key == M.K_PROCESS_START else value  # the oldest start, never a sum
        if M.valid_value(key, value):
            out.values[key] = value
        else:
            dropped += 1
            why = why or M.value_refusal(key, value)
    for k, v in dcgm.values().items():
        if M.valid_value(k, v):
            out.values[k] = v
        else:
            dropped += 1
            why = why or M.value_refusal(k, v)
    out.gpu_model = dcgm.model
    if dcgm.note:
        out.notes.append(dcgm.note)
    if out.info is None and default_info is not None:
        out.info = default_info
    if dropped:
        out.notes.append(
            f"{dropped} non-finite or implausible value(s) ignored" + (f", e.g. {why}" if why else "")
        )
    if dupes:
        out.notes.append(f"{dupes} duplicate series ignored")
    if long:
        out.notes.append(
            f"{long} series with a label value over {limit} characters: cut ([caps] label_length)"
        )
    return out


def _over_limit(raw: str | None, labels: dict[str, str] | None, limit: int) -> int:
    """1 when a label value of this sample is longer than ``limit`` characters (its text gets cut)."""
    values = [v for _, v in _LABEL.findall(raw)] if raw is not None else list((labels or {}).values())
    return int(any(len(v) > limit + 2 for v in values))  # the raw values still carry their quotes
