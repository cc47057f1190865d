"""The answers of a Prometheus server's HTTP API, read as untrusted: one answer's result vector
(:func:`decode`: an HTML page, a non-JSON or error body, a wrong result type becomes one line; the
JSON values are counted against the refresh's budget before parsing; rows past ``[caps]
rows_per_answer`` are dropped and counted), numbers and job facts from its rows.

A large fleet's per-task columns (100,000 rows of one label each) are read by :func:`read_pairs`
a chunk of rows at a time (each chunk's instances and values as text, no object a row) by whoever
lays them out (the fleet's columns: an array over the known tasks): parsed as JSON objects, such an
answer cost ~0.4 s (dicts, lists, the rows' checks) and its 300,000 containers set off the garbage
collector's full passes over the session's millions of objects (~1 s each at 100,000 tasks); read
whole as two lists of text, ~13 MiB held until the next refresh and ~22 MiB at its peak (tracemalloc;
~3 MiB a chunk at a time). Its detail and every task's identity are read likewise by
:func:`decode_labelled` (each row's labels and value as text, parsed one row at a time by whoever
reads them). Both read only answers of the shape engines write, checked whole; any other answer goes
through :func:`decode`: the same rows, errors and caps."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from itertools import chain
from typing import Any, TypeVar

import orjson

from cmdare.collectors import caps
from cmdare.collectors.http_client import Budget
from cmdare.collectors.redaction import redact_cut
from cmdare.collectors.samples import JobFacts
from cmdare.collectors.scrape.exposition import facts_from_labels

# JSON values (about: commas + objects + arrays) the answers of one refresh may hold together, counted
# before parsing: ~6 a value row, ~20 an identity row (~0.9 M in the busiest refresh at 10k tasks, whose
# queries take turns). Parsed, a value costs ~90 bytes, and orjson needs ~2.7x that while it parses:
# an answer at this cap peaks near 290 MB RSS (measured: benchmarks/adversarial.py, prom_rows100000).
MAX_JSON_VALUES = 1_000_000


class PrometheusAPIError(Exception):
    """One query failed; the message is one line and free of secrets."""


def number(text: object) -> float | None:
    """``text`` as a finite float, or None."""
    try:
        x = float(text)  # type: ignore[arg-type]  # any value: what float() refuses raises TypeError, caught below
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def job_facts(jobs: list[dict[str, Any]]) -> tuple[dict[str, JobFacts], dict[str, str]]:
    """Each job's facts, and per job a note on the implausible facts dropped (never the poll)."""
    facts: dict[str, JobFacts] = {}
    notes: dict[str, str] = {}
    for r in jobs:
        bad: list[str] = []
        f = facts_from_labels(job_labels(r["metric"]), bad)
        facts[f.job] = f
        if bad:
            notes[f.job] = "; ".join(bad)
    return facts, notes


def job_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """A job-info row's labels, ``job`` being the exporter's own (``exported_job``) when it was renamed."""
    out = dict(labels)
    if labels.get("exported_job"):
        out["job"] = labels["exported_job"]
    return out


def server_time(results: list[dict[str, Any]]) -> float:
    """The evaluation time of a ``vector(time())`` answer."""
    return float(results[0].get("value", [0.0])[0])


def evaluation_offset(results: list[dict[str, Any]]) -> float:
    """How far before the instant it answers for the engine evaluated a ``vector(time())`` answer (s):
    the answer's time less the ``time()`` it computed, 0 for Prometheus; an engine with a latency
    offset (VictoriaMetrics' ``-search.latencyOffset``, 30 s by default) evaluates that far back and
    stamps the answer with the time asked. 0 when the answer is not two numbers, negative or past a day."""
    try:
        t, v = results[0]["value"]
        off = float(t) - float(v)
    except (KeyError, IndexError, TypeError, ValueError):
        return 0.0
    return off if math.isfinite(off) and 0.0 < off <= 86_400.0 else 0.0


def decode(
    body: bytes | bytearray,
    ctype: str,
    status: int,
    values: Budget | None = None,
    result_type: str = "vector",
    cut: list[int] | None = None,
) -> list[dict[str, Any]]:
    """The result vector of one answer; raises :class:`PrometheusAPIError` (one line). ``values``:
    the JSON-value budget it counts against (shared by a refresh's answers; its own when None).
    Rows past ``[caps] rows_per_answer`` are dropped; how many is appended to ``cut``."""
    _admit(body, ctype, status, values or Budget(MAX_JSON_VALUES))
    return _parse(body, status, result_type, cut)


def _admit(body: bytes | bytearray, ctype: str, status: int, values: Budget) -> None:
    """Refuse an HTML page, and an answer past the JSON-value budget (counted before parsing)."""
    head = body[:1024].lstrip()[:200].lower()
    if "html" in ctype or head.startswith((b"<!doctype", b"<html")):
        raise PrometheusAPIError(f"HTTP {status}: got an HTML page, not the Prometheus API")
    if not values.take(body.count(b",") + body.count(b"{") + body.count(b"[")):  # before parsing it
        raise PrometheusAPIError(
            f"answers of more than {values.limit:,} JSON values together refused; narrow the selector"
        )


def _parse(
    body: bytes | bytearray, status: int, result_type: str, cut: list[int] | None
) -> list[dict[str, Any]]:
    """:func:`decode` once the answer is admitted (:func:`_admit`)."""
    try:
        doc = orjson.loads(body)
    except ValueError:  # orjson.JSONDecodeError is a ValueError (also: nesting over 1024 levels)
        raise PrometheusAPIError(f"HTTP {status}: response is not JSON") from None
    if not isinstance(doc, dict):
        raise PrometheusAPIError(f"HTTP {status}: unexpected JSON")
    if doc.get("status") != "success":
        kind, err = str(doc.get("errorType", "error")), str(doc.get("error", "no message"))
        raise PrometheusAPIError(
            f"{redact_cut(kind, 40)}: {err}"
        )  # the rest cut after redaction, by the caller
    data = doc.get("data") or {}
    if (
        not isinstance(data, dict)
        or data.get("resultType") != result_type
        or not isinstance(data.get("result"), list)
    ):
        got = data.get("resultType") if isinstance(data, dict) else type(data).__name__
        raise PrometheusAPIError(f"unexpected result type {redact_cut(str(got), 20)!r}")
    result = data["result"]
    limit = caps.current().rows_per_answer
    if len(result) > limit:
        if cut is not None:
            cut.append(len(result) - limit)
        del result[limit:]
    if result_type == "matrix":  # range vectors (backfill): checked row by row where they are read
        return [r for r in data["result"] if type(r) is dict]
    return well_formed_rows(data["result"])


@dataclass(frozen=True, slots=True)
class Pairs:
    """A vector answer whose rows carry one label each (a per-task column), as two lists in the rows'
    order: each row's value of that label, and its sample value as the server wrote it (text from an
    engine; a hostile one may put any JSON value there: whoever reads them converts and checks each)."""

    keys: list[str]
    values: list[Any]


# a row of a one-label answer exactly as Prometheus and VictoriaMetrics write it: the label, the
# evaluation time (a plain decimal: always finite) and the value's text, no escapes (no backslash) and no
# raw control character (not JSON: decode refuses such an answer, so the quick readers leave it to decode)
_TIME = r"-?[0-9]{1,12}(?:\.[0-9]{1,9})?"
_TEXT = r'"[^"\\\x00-\x1f]*+"'
_MARK = b'["\\u0001"]'  # JSON for ["\x01"]: an escape, so in no answer read_pairs reads
_VALUE_TEXT = re.compile(r',"([^"]*)"\]\}')  # a checked answer's rows end in ,"text"]} and nothing else does


R = TypeVar("R")
CHUNK_BYTES = 1 << 19  # bytes of an answer's rows read into text at a time (~6,000 rows of a column)
_NEXT_ROW = b'},{"metric":'  # in a checked array only between two rows: no text in it holds a quote


@functools.cache
def _one_label(label: str) -> tuple[re.Pattern[bytes], re.Pattern[str]]:
    """The patterns of a one-label answer's result array (whole, over the answer's bytes: one C-level
    pass; possessive, so it never backtracks) and of each row's label value (over its text)."""
    row = rf'\{{"metric":\{{"{re.escape(label)}":{_TEXT}\}},"value":\[{_TIME},{_TEXT}\]\}}'
    return re.compile(rf"\[(?>{row},)*+{row}\]".encode()), re.compile(
        rf'\{{"metric":\{{"{re.escape(label)}":"([^"]*)"'
    )


def decode_pairs(
    body: bytes | bytearray,
    ctype: str,
    status: int,
    label: str,
    values: Budget | None = None,
    cut: list[int] | None = None,
) -> Pairs:
    """A vector answer whose rows each carry the one label ``label`` (``max by (instance) (…)``), as
    :class:`Pairs`: what :func:`decode` would give, read without an object a row (:func:`read_pairs`,
    its chunks joined)."""
    return read_pairs(body, ctype, status, label, _joined, values, cut)


def read_pairs(
    body: bytes | bytearray,
    ctype: str,
    status: int,
    label: str,
    read: Callable[[Iterator[Pairs]], R],
    values: Budget | None = None,
    cut: list[int] | None = None,
) -> R:
    """What ``read`` makes of a vector answer whose rows each carry the one label ``label``, handed to it
    as :class:`Pairs` of at most ~:data:`CHUNK_BYTES` bytes of rows each, in the rows' order: the
    same rows as :func:`decode`, read without an object a row, and no list of text as long as the answer
    (a 100,000-row column as two lists of 100,000 strings cost ~13 MiB, on top of its text). The result
    array is checked whole against the shape engines write (each row
    ``{"metric":{label:"…"},"value":[t,"…"]}``, no escapes); the envelope around it is parsed with the
    array taken out. Any other answer (other labels, escapes, another layout, an error) is read by
    :func:`decode` and its rows taken apart (one chunk): the same rows, the same errors, slower. Budget
    and rows cap as :func:`decode`. ``read`` must consume every chunk and may be called twice (the
    second time with :func:`decode`'s rows) should a chunk's labels and values not pair up."""
    _admit(body, ctype, status, values or Budget(MAX_JSON_VALUES))
    whole, _ = _one_label(label)
    span = _checked_array(body, whole)
    if span is not None:
        try:
            return read(_pair_chunks(span, label, cut))
        except _Unpaired:
            pass
    rows = _parse(body, status, "vector", cut)
    return read(iter((Pairs([r["metric"].get(label, "") for r in rows], [r["value"][1] for r in rows]),)))


class _Unpaired(Exception):
    """A chunk's labels and values did not pair up (never for a checked array: read it as JSON)."""


def _joined(chunks: Iterator[Pairs]) -> Pairs:
    """The chunks of :func:`read_pairs` as one :class:`Pairs`."""
    out = Pairs([], [])
    for chunk in chunks:
        out.keys.extend(chunk.keys)
        out.values.extend(chunk.values)
    return out


def _pair_chunks(span: Span, label: str, cut: list[int] | None) -> Iterator[Pairs]:
    """A checked one-label array's rows (``span``: the answer, where the array starts and ends) as
    :class:`Pairs` a chunk at a time, each chunk's bytes made text on their own (the answer never whole:
    ~8 MiB at 100,000 rows); past ``[caps] rows_per_answer`` rows the rest is counted in ``cut``."""
    body, start, end = span
    _, keys = _one_label(label)
    left = caps.current().rows_per_answer
    pos = start
    while pos < end and left > 0:
        stop = body.find(_NEXT_ROW, min(pos + CHUNK_BYTES, end), end)
        stop = end if stop < 0 else stop + 1  # the chunk ends with its last row's closing brace
        try:
            text = body[pos:stop].decode()
        except UnicodeDecodeError:
            raise _Unpaired from None  # not UTF-8: decode says so
        chunk = Pairs(keys.findall(text), _VALUE_TEXT.findall(text))
        if len(chunk.keys) != len(chunk.values):
            raise _Unpaired
        if len(chunk.keys) > left:
            if cut is not None:
                cut.append(len(chunk.keys) - left + body.count(b'{"metric":', stop, end))
            del chunk.keys[left:], chunk.values[left:]
            stop = end
        left -= len(chunk.keys)
        pos = stop
        yield chunk
    if pos < end and cut is not None:  # the cap reached at a chunk's end: the rows after it
        cut.append(body.count(b'{"metric":', pos, end))


# an answer, and where its result array starts and ends in it (_checked_array)
Span = tuple[bytes | bytearray, int, int]


def _checked_array(body: bytes | bytearray, whole: re.Pattern[bytes]) -> Span | None:
    """Where the answer's result array is (no copy of it), when ``whole`` matches it from end to end
    and the answer around it is a successful vector answer whose ``data.result`` is that array; else
    None (read it as JSON). The envelope is checked as UTF-8 here (orjson), the array by its readers
    as they make it text (any byte not UTF-8: read as JSON, which refuses the answer)."""
    if b"\\" in body:  # an escape anywhere: the patterns assume none
        return None
    start = body.find(b'"result":[') + len(b'"result":')
    if start < len(b'"result":'):
        return None
    m = whole.match(body, start)
    if m is None:
        return None
    try:  # the envelope: the array replaced by a mark no answer without escapes can hold, which
        # must come back as data.result (not a key of another object, nor a "result" named twice)
        doc = orjson.loads(b"".join((body[:start], _MARK, body[m.end() :])))
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    data = doc.get("data")
    if (
        doc.get("status") != "success"
        or not isinstance(data, dict)
        or data.get("resultType") != "vector"
        or data.get("result") != ["\x01"]
    ):
        return None
    return body, m.start(), m.end()


class LabelledQuery(str):
    """A query whose answer is read by :func:`decode_labelled` (answers of many rows: every task's
    identity, a large fleet's detail)."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class LabelledRows:
    """A vector answer's rows as text, in order: each row's labels as the server wrote them (the inside
    of its ``metric`` object, no escapes: :func:`labels_of` reads them) and its value's text."""

    labels: list[str]
    values: list[str]


_PAIR = rf"{_TEXT}:{_TEXT}"
_ROW = rf'\{{"metric":\{{(?:{_PAIR}(?:,{_PAIR})*+)?\}},"value":\[{_TIME},{_TEXT}\]\}}'
_ROWS = re.compile(rf"\[(?>{_ROW},)*+{_ROW}\]".encode())
_LABELS_TEXT = re.compile(r'\{"metric":\{((?:"[^"]*":"[^"]*",?)*)\}')


def decode_labelled(
    body: bytes | bytearray,
    ctype: str,
    status: int,
    values: Budget | None = None,
    cut: list[int] | None = None,
) -> list[dict[str, Any]] | LabelledRows:
    """A vector answer read without an object a row when it has the shape engines write (as
    :func:`decode_pairs`, any labels): :class:`LabelledRows`; else :func:`decode`'s rows. The same
    rows, errors, budget and rows cap as :func:`decode` (a large fleet's detail: ~10,000 rows a refresh
    whose dicts and lists, alive together, set off the garbage collector's full passes)."""
    _admit(body, ctype, status, values or Budget(MAX_JSON_VALUES))
    span = _checked_array(body, _ROWS)
    if span is None:
        return _parse(body, status, "vector", cut)
    answer, start, end = span
    labels: list[str] = []
    values_text: list[str] = []
    pos = start
    while pos < end:  # a chunk of whole rows at a time made text (never the array whole: 18 MB at 100,000
        # identities), each chunk's rows found in it as in the whole (no row spans two chunks)
        stop = answer.find(_NEXT_ROW, min(pos + CHUNK_BYTES, end), end)
        stop = end if stop < 0 else stop + 1  # the chunk ends with its last row's closing brace
        try:
            text = answer[pos:stop].decode()
        except UnicodeDecodeError:  # not UTF-8 (a chunk ends between rows: never inside a character)
            return _parse(body, status, "vector", cut)
        labels.extend(_LABELS_TEXT.findall(text))
        values_text.extend(_VALUE_TEXT.findall(text))
        pos = stop
    if len(labels) != len(values_text):
        return _parse(body, status, "vector", cut)
    _cap_rows(labels, values_text, cut)
    return LabelledRows(labels, values_text)


def _cap_rows(first: list[str], second: list[Any], cut: list[int] | None) -> None:
    """Both lists cut to the rows cap (``[caps] rows_per_answer``), what was left out counted in ``cut``."""
    limit = caps.current().rows_per_answer
    if len(first) > limit:
        if cut is not None:
            cut.append(len(first) - limit)
        del first[limit:], second[limit:]


def labels_of(text: str) -> dict[str, str]:
    """A row's labels from :class:`LabelledRows` text (``"k":"v","k2":"v2"``, no escapes: a quote
    only ever delimits a name or a value)."""
    parts = text.split('"')  # "", name, ":", value, ",", name, ":", value, … , ""
    return dict(zip(parts[1::4], parts[3::4], strict=True))


def well_formed_rows(rows: list[Any]) -> list[dict[str, Any]]:
    """The rows that are :func:`well_formed`, in order. Checked in bulk (a few C-level passes over
    the whole answer: row types, label value types, value pairs, finite times); only an answer
    holding a bad row is checked row by row."""
    if not rows:
        return []
    try:
        if set(map(type, rows)) == {dict}:
            metrics = [r.get("metric") for r in rows]
            values = [r.get("value") for r in rows]
            if (
                set(map(type, metrics)) == {dict}
                and set(map(type, values)) == {list}
                and set(map(len, values)) == {2}
                and set(map(type, chain.from_iterable(map(dict.values, metrics)))) <= {str}
            ):
                times = [v[0] for v in values]
                if set(map(type, times)) <= {float, int} and math.isfinite(sum(times)):
                    return rows  # every row well formed (a sum overflowing to inf: checked below)
    except (TypeError, OverflowError):
        pass
    return [r for r in rows if well_formed(r)]


def well_formed(row: object) -> bool:
    """A vector sample: {"metric": {str: str}, "value": [time, "number"]}; anything else is dropped.
    (JSON object keys are always strings: only the label values need a check.)"""
    if type(row) is not dict:
        return False
    metric, value = row.get("metric"), row.get("value")
    return (
        type(metric) is dict
        and all(map(_is_str, metric.values()))
        and type(value) is list
        and len(value) == 2
        and number(value[0]) is not None
    )


_is_str = str.__instancecheck__
