"""Fuzz every input parser: exposition text, Prometheus API JSON, JSON-lines logs, TFRecord event
files. Bad input is a status or an ExpositionError/PrometheusAPIError — never anything else. The
fast exposition scanner agrees with prometheus_client (the reference) on well-formed pages."""

from __future__ import annotations

import asyncio
import json
import math
import struct
from pathlib import Path

import httpx
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cmdare.collectors.clock import ManualClock
from cmdare.collectors.logs.source import JsonlSource
from cmdare.collectors.prometheus.answers import decode as _decode
from cmdare.collectors.prometheus.source import PrometheusAPIError, PrometheusAPISource
from cmdare.collectors.samples import TaskInfo
from cmdare.collectors.scrape import exposition as E
from cmdare.collectors.tensorboard.source import TensorBoardSource, decode_event
from cmdare.collectors.tensorboard.tfrecord import frame, read_records

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

NAMES = [
    "cmdare_worker_steps_total",
    "cmdare_global_step",
    "cmdare_examples_total",
    "node_cpu_seconds_total",
    "node_network_receive_bytes_total",
    "DCGM_FI_DEV_GPU_UTIL",
    "node_load1",
    "cmdare_ps_bytes_total",
    "process_cpu_seconds_total",
    "go_goroutines",
    "cmdare_stage_bytes_sent_total",
]
LABELS = ["cpu", "mode", "device", "direction", "peer", "gpu", "le"]
label_value = st.text(st.characters(codec="utf-8", exclude_characters="\r"), max_size=8)
number = st.one_of(
    st.integers(-(10**9), 10**12).map(float), st.floats(allow_nan=True, allow_infinity=True, width=32)
)


def _fmt(x: float) -> str:
    return "NaN" if math.isnan(x) else ("+Inf" if x == math.inf else ("-Inf" if x == -math.inf else repr(x)))


def _esc(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


@st.composite
def sample_line(draw) -> str:  # noqa: ANN001
    name = draw(st.sampled_from(NAMES))
    keys = sorted(draw(st.sets(st.sampled_from(LABELS), max_size=3)))
    body = ",".join(f'{k}="{_esc(draw(label_value))}"' for k in keys)
    ts = draw(st.sampled_from(["", " 1700000000000"]))
    return f"{name}{{{body}}} {_fmt(draw(number))}{ts}" if keys else f"{name} {_fmt(draw(number))}{ts}"


page = st.lists(st.one_of(sample_line(), st.just("# HELP x y"), st.just("")), max_size=30).map("\n".join)


def _same(a: E.Parsed, b: E.Parsed) -> bool:
    if a.values.keys() != b.values.keys() or a.notes != b.notes:
        return False
    return all(math.isclose(a.values[k], b.values[k], rel_tol=1e-9, abs_tol=1e-6) for k in a.values)


@FAST
@given(page)
def test_fast_scanner_agrees_with_reference_parser(text: str):
    info = TaskInfo(job="j", task="t")
    try:
        ref = E._fold_samples(E._samples_reference(text), info)
    except ValueError:
        return  # the reference refuses it; parse_exposition then raises ExpositionError
    try:
        fast = E._fold_samples(E._samples_fast(text), info)
    except E._Fallback:
        return  # the fast scanner hands such text to the reference
    assert _same(fast, ref), (fast, ref)


@FAST
@given(st.lists(st.one_of(sample_line(), st.text(max_size=40)), max_size=20).map("\n".join))
def test_exposition_never_raises_anything_but_exposition_error(text: str):
    try:
        p = E.parse_exposition(text, TaskInfo(job="j", task="t"))
    except E.ExpositionError as exc:
        assert "\n" not in str(exc)
        return
    assert all(math.isfinite(v) for v in p.values.values())


json_value = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=10)),
    lambda kids: st.one_of(
        st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=8), kids, max_size=4)
    ),
    max_leaves=20,
)
metric = st.dictionaries(
    st.sampled_from(["__name__", "job", "task", "instance", "role", "gpu", "zone"]),
    st.text(max_size=6),
    max_size=5,
)
result_row = st.fixed_dictionaries(
    {
        "metric": st.one_of(metric, json_value),
        "value": st.one_of(st.tuples(st.floats(0, 2e9), st.text(max_size=6)), json_value),
    }
)
api_doc = st.one_of(
    json_value,
    st.fixed_dictionaries(
        {
            "status": st.just("success"),
            "data": st.fixed_dictionaries(
                {"resultType": st.just("vector"), "result": st.lists(result_row, max_size=6)}
            ),
        }
    ),
)


@FAST
@given(
    st.one_of(api_doc.map(lambda d: json.dumps(d).encode()), st.binary(max_size=200)),
    st.sampled_from([200, 400, 500]),
    st.sampled_from(["application/json", "text/html"]),
)
def test_prometheus_api_json_is_a_result_or_one_error(body: bytes, status: int, ctype: str):
    try:
        rows = _decode(body, ctype, status)
    except PrometheusAPIError as exc:
        assert "\n" not in str(exc)
        return
    assert isinstance(rows, list)


well_formed_row = st.fixed_dictionaries(
    {
        "metric": st.dictionaries(
            st.sampled_from(["__name__", "job", "task", "instance", "role", "gpu"]),
            st.text(max_size=6),
            max_size=5,
        ),
        "value": st.tuples(st.floats(0, 2e9), st.sampled_from(["1", "NaN", "+Inf", "x", "", "1e400"])),
    }
)
well_formed_doc = st.fixed_dictionaries(
    {
        "status": st.just("success"),
        "data": st.fixed_dictionaries(
            {"resultType": st.just("vector"), "result": st.lists(well_formed_row, max_size=6)}
        ),
    }
)


def _source_polls(body: bytes) -> list:
    transport = httpx.MockTransport(
        lambda req: httpx.Response(200, content=body, headers={"content-type": "application/json"})
    )

    async def go() -> list:
        async with httpx.AsyncClient(transport=transport) as client:
            return await PrometheusAPISource("http://127.0.0.1:9", timeout=2).poll(client, ManualClock())

    return asyncio.run(go())


@settings(max_examples=60, deadline=None)
@given(well_formed_doc.map(lambda d: json.dumps(d).encode()))
def test_prometheus_source_turns_any_well_formed_answer_into_polls(body: bytes):
    assert isinstance(_source_polls(body), list)


@settings(max_examples=60, deadline=None)
@given(api_doc.map(lambda d: json.dumps(d).encode()))
def test_prometheus_source_turns_any_answer_into_polls(body: bytes):
    transport = httpx.MockTransport(
        lambda req: httpx.Response(200, content=body, headers={"content-type": "application/json"})
    )

    async def go() -> list:
        async with httpx.AsyncClient(transport=transport) as client:
            return await PrometheusAPISource("http://127.0.0.1:9", timeout=2).poll(client, ManualClock())

    polls = asyncio.run(go())
    assert isinstance(polls, list)


@FAST
@given(
    st.lists(
        st.one_of(json_value.map(json.dumps), st.text(max_size=30), st.binary(max_size=30).map(repr)),
        max_size=15,
    )
)
@example(["a\nb\nc", "{}"])  # one generated item holding newlines is several physical lines
def test_jsonl_lines_never_raise(lines: list[str]):
    src = JsonlSource(Path("/nonexistent/run.jsonl"))
    payload = "\n".join(lines).encode("utf-8", "replace") + b"\n"
    bad = src._consume(payload, 1.0)
    # the bound is the physical lines that hold anything, not the generated items (an item may hold "\n")
    physical = [raw for raw in payload.split(b"\n") if raw.strip()]
    assert 0 <= bad <= len(physical)
    assert src.offset == len(payload)


@FAST
@given(
    st.one_of(
        st.binary(max_size=300),
        st.lists(st.binary(max_size=40), max_size=5).map(lambda recs: b"".join(frame(r) for r in recs)),
    ),
    st.integers(0, 40),
)
def test_tfrecord_stream_never_raises(buf: bytes, cut: int):
    res = read_records(buf[: max(0, len(buf) - cut)])
    assert 0 <= res.consumed <= len(buf)
    for rec in res.records:
        try:
            decode_event(rec)
        except (ValueError, struct.error):
            pass


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=400))
def test_tensorboard_source_survives_any_event_file(tmp_path_factory, data: bytes):
    d = tmp_path_factory.mktemp("tb")
    (d / "events.out.tfevents.1.host").write_bytes(frame(b"\x09" + data[:8]) + data)
    polls = asyncio.run(TensorBoardSource(d).poll(None, ManualClock()))  # type: ignore[arg-type]
    assert all(isinstance(p.ok, bool) for p in polls)
