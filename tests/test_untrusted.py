"""The one boundary for untrusted text (collectors/untrusted.py) and that every source crosses it:
scrape, Prometheus API, JSON lines, TensorBoard, TF_CONFIG, replay of a hostile recording, prices.
Each source runs for real on real files or a real HTTP server on 127.0.0.1 (tests/hostile_text_server.py)."""

from __future__ import annotations

import json
import re
import sqlite3
import struct
import sys
import unicodedata
from dataclasses import asdict
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cmdare.collectors.clock import ManualClock
from cmdare.collectors.logs.source import JsonlSource
from cmdare.collectors.poller import Poller
from cmdare.collectors.pricing.book import PriceBook
from cmdare.collectors.prometheus.source import PrometheusAPISource
from cmdare.collectors.recording.recorder import Recorder
from cmdare.collectors.recording.replay import ReplaySource
from cmdare.collectors.samples import JobFacts, ModelSpec, TaskInfo, TaskPoll
from cmdare.collectors.scrape.source import ScrapeSource, ScrapeTarget
from cmdare.collectors.store import Store
from cmdare.collectors.tensorboard.source import TensorBoardSource
from cmdare.collectors.tensorboard.tfrecord import frame
from cmdare.collectors.untrusted import LABEL_LIMIT, CleanLogFilter, clean_text
from tests.hostile_text_server import HOSTILE, INVALID_UTF8, HostileServer

UNSAFE_CATEGORIES = {"Cc", "Cf", "Zl", "Zp", "Cs"}


def assert_safe(text: str, limit: int = LABEL_LIMIT) -> None:
    assert len(text) <= limit
    bad = [hex(ord(c)) for c in text if unicodedata.category(c) in UNSAFE_CATEGORIES]
    assert not bad, f"unsafe characters {bad} in {text[:80]!r}"


def texts_of(poll: TaskPoll) -> list[str]:
    """Every text a poll carries: source, error, series keys, identity and job facts."""
    out = [poll.source, poll.error or "", *poll.values]
    facts = poll.job_facts
    for part in (poll.info, facts, facts and facts.model):
        if part is not None:
            out += [v for v in asdict(part).values() if isinstance(v, str)]
    return out


# --- the function ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_corpus_comes_out_visible_bounded_and_idempotent(name: str):
    clean = clean_text(HOSTILE[name])
    assert_safe(clean)
    assert clean_text(clean) == clean
    if "\x1b" in HOSTILE[name]:
        assert "␛" in clean  # shown, not silently dropped


def test_examples():
    assert clean_text("worker-0") == "worker-0"
    assert clean_text("\x1b]52;c;eA==\x07") == "␛]52;c;eA==␇"
    assert clean_text("oops[/]") == "oops[/]"  # markup is not escaped here: renderers use Text
    assert clean_text("a\u202eb\u200bc") == "a\ufffdb\ufffdc"
    assert clean_text("\u009b31m") == "\ufffd31m"
    assert clean_text(b"ok\xff") == "ok\ufffd" and clean_text(INVALID_UTF8).startswith("bad")
    assert clean_text("x" * 10_000, 10) == "x" * 9 + "…"
    assert clean_text(3.5) == "3.5" and clean_text("\ud800") == "\ufffd"


def test_the_table_covers_this_interpreters_unicode():
    unsafe = [c for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) in UNSAFE_CATEGORIES]
    missed = [hex(c) for c in unsafe if clean_text(chr(c)) == chr(c)]
    assert not missed


@settings(max_examples=300, deadline=None)
@given(st.text(), st.integers(min_value=1, max_value=300))
def test_any_text_is_safe_bounded_and_idempotent(text: str, limit: int):
    clean = clean_text(text, limit)
    assert_safe(clean, limit)
    assert clean_text(clean, limit) == clean


def test_log_lines_lose_their_control_characters():
    import logging

    rec = logging.LogRecord("x", logging.WARNING, __file__, 1, "poll %s: %s", ("t", "\x1b]0;x\x07"), None)
    CleanLogFilter().filter(rec)
    assert rec.getMessage() == "poll t: ␛]0;x␇"


# --- the value types are the choke point ----------------------------------------------------------
def test_value_types_clean_on_construction():
    info = TaskInfo(job=HOSTILE["title"], task=HOSTILE["long"], gpu=HOSTILE["bidi"], dc="\x07")
    facts = JobFacts(job=HOSTILE["osc52"], model=ModelSpec(name=HOSTILE["osc8"]))
    poll = TaskPoll(
        source=HOSTILE["csi"],
        t=0.0,
        ok=False,
        info=info,
        values={f"scalar{{tag={HOSTILE['dcs']}}}": 1.0},
        error=HOSTILE["c1"] * 100,
        job_facts=facts,
    )
    for text in texts_of(poll):
        assert_safe(text, 500)
    assert len(info.task) == LABEL_LIMIT and info.task.endswith("…")


# --- every source ---------------------------------------------------------------------------------
async def _poll(source) -> list[TaskPoll]:  # noqa: ANN001
    async with httpx.AsyncClient(timeout=5) as client:
        return await source.poll(client, ManualClock(1_700_000_000.0))


async def test_scrape_and_prometheus_sources_through_a_hostile_server():
    with HostileServer() as srv:
        targets = [ScrapeTarget(srv.target_url(i)) for i in range(len(HOSTILE))]
        polls = await _poll(
            ScrapeSource([*targets, ScrapeTarget(srv.garbage_url(), TaskInfo(job="j", task="g"))])
        )
        polls += await _poll(PrometheusAPISource(srv.prometheus_url()))
        polls += await _poll(PrometheusAPISource(srv.prometheus_error_url()))
    assert sum(p.ok for p in polls) == len(HOSTILE) + 3  # every hostile target still answered
    for p in polls:
        for text in texts_of(p):
            assert_safe(text, 500)
    assert any("␛]0;" in p.error for p in polls if p.error and "Prometheus" in p.error)


async def test_jsonl_source(tmp_path: Path):
    log = tmp_path / "train.jsonl"
    line = {"job": HOSTILE["title"], "task": HOSTILE["osc52"], "step": 5, HOSTILE["csi"]: 1.0}
    log.write_bytes(json.dumps(line).encode() + b"\n" + b'{"step": 6, "task": "' + INVALID_UTF8 + b'"}\n')
    polls = await _poll(JsonlSource(log))
    assert polls and all(p.ok for p in polls)
    for p in polls:
        for text in texts_of(p):
            assert_safe(text, 500)


def _event(wall: float, step: int, tag: bytes, value: float) -> bytes:
    """One TensorBoard Event (protobuf by hand): wall_time, step, one simple_value summary."""

    def field(num: int, wire: int, payload: bytes) -> bytes:
        return bytes([num << 3 | wire]) + (bytes([len(payload)]) + payload if wire == 2 else payload)

    summary = field(1, 2, field(1, 2, tag) + field(2, 5, struct.pack("<f", value)))
    return field(1, 1, struct.pack("<d", wall)) + field(2, 0, bytes([step])) + field(5, 2, summary)


async def test_tensorboard_source_run_names_and_tags(tmp_path: Path):
    run = tmp_path / ("run" + HOSTILE["bidi"] + "\x1b[31m")
    run.mkdir()
    tag = (HOSTILE["osc52"] + "[/]").encode() + b"\xff"
    (run / "events.out.tfevents.1.host").write_bytes(frame(_event(1.7e9, 3, tag, 1.5)))
    polls = await _poll(TensorBoardSource(tmp_path, job=HOSTILE["link"]))
    assert polls and polls[0].ok
    for text in texts_of(polls[0]):
        assert_safe(text, 500)


async def test_replay_of_a_hostile_recording(tmp_path: Path):
    rec = tmp_path / "rec.sqlite"
    store = Store()
    recorder = Recorder(rec)
    poller = Poller([], store, clock=ManualClock(1_700_000_000.0), sinks=[recorder])
    await poller.poll_once()
    recorder.close()
    with sqlite3.connect(rec) as db:  # an attacker edits the file: raw escapes in every text column
        cycle = db.execute("SELECT id FROM cycles").fetchone()[0]
        info = json.dumps({"job": HOSTILE["title"], "task": HOSTILE["osc52"], "gpu": HOSTILE["link"]})
        facts = json.dumps({"job": HOSTILE["title"], "model": HOSTILE["osc8"]})
        db.execute("INSERT INTO polls VALUES (?, 0, ?, 1.7e9, 1, ?, ?, ?, ?, 0.1)",
                   (cycle, HOSTILE["csi"], info, json.dumps({HOSTILE["dcs"]: 1.0}), HOSTILE["bel"], facts))  # fmt: skip
    src = ReplaySource(rec, ManualClock(), speed=0)
    try:
        polls = await _poll(src)
    finally:
        src.close()
    assert len(polls) == 1
    for text in texts_of(polls[0]):
        assert_safe(text, 500)


def test_price_book_cleans_catalog_text():
    book = PriceBook({("gpu", "V100", HOSTILE["osc52"], "spot"): 1.0}, source=HOSTILE["title"],
                     as_of=HOSTILE["csi"], reason=HOSTILE["link"] + HOSTILE["bel"], notes=(HOSTILE["dcs"],))  # fmt: skip
    for text in [*next(iter(book.rates)), book.source, book.as_of, book.reason or "", *book.notes]:
        assert_safe(text, 500)


def test_geo_plan_with_hostile_dc_names_prints_them_as_text(tmp_path: Path, capsys):
    from cmdare.tui.cli import main

    example = Path(__file__).resolve().parents[1] / "examples" / "geo-3dc.toml"
    geo = tmp_path / "geo.toml"
    geo.write_text(example.read_text().replace('"us-east"', '"us-east[/]\\u001b]0;PWNED\\u0007[link=x]"'))
    assert main(["plan", "--geo", str(geo)]) == 0
    out = capsys.readouterr()
    assert "\x1b" not in out.out + out.err and "\x07" not in out.out + out.err
    assert "us-east[/]␛]0;PWNED␇[link=x]" in out.out


async def test_a_source_raising_hostile_text_is_a_clean_status():
    class Raising:  # a source whose failure quotes what it read (no real source raises on demand)
        name = "raising"

        async def poll(self, client, clock):  # noqa: ANN001, ANN201
            raise ValueError(HOSTILE["title"] + HOSTILE["long"])

    poller = Poller([Raising()], Store(), clock=ManualClock(1_700_000_000.0))
    cycle = await poller.poll_once()
    await poller.aclose()
    assert_safe(cycle.source_errors["raising"], 500)
    assert "␛]0;" in cycle.source_errors["raising"]


def test_tf_config_refuses_a_hostile_endpoint_in_one_line():
    from cmdare.collectors.scrape import tf_config

    spec = '{"cluster": {"worker": ["10.0.0.1:2222", "h\\u001b]0;x\\u0007:2222"]}}'
    with pytest.raises(tf_config.TFConfigError) as err:
        tf_config.load(spec)
    assert "\x1b" not in str(err.value) and "\n" not in str(err.value)
    ok = tf_config.load('{"cluster": {"worker": ["[::1]:2222", "w-1.example.com:2222"]}}')
    assert [t.url for t in tf_config.targets(ok)] == [
        "http://[::1]:9400/metrics",
        "http://w-1.example.com:9400/metrics",
    ]


async def test_one_invalid_url_fails_alone():
    with HostileServer() as srv:
        targets = [
            ScrapeTarget(srv.target_url(0)),
            ScrapeTarget("http://h\x1b]0;x\x07:9/metrics", TaskInfo(job="j", task="t")),
        ]
        polls = await _poll(ScrapeSource(targets))
    assert [p.ok for p in polls] == [True, False] and "invalid" in (polls[1].error or "").lower()
    assert_safe(polls[1].source, 500)


MARKUPISH = st.lists(st.sampled_from([*"[]/=@:;!ab \x1b\x07\x9b\u202e\u200b", "[/]", "[link=", "]8;;", "[bold]"]),
                     max_size=12).map("".join)  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(st.lists(MARKUPISH, min_size=5, max_size=5))
def test_snapshot_text_renders_any_label_as_text(labels: list[str]):
    """Any label, through the real store, lifecycle and planner views, printed by ``snapshot``'s
    plain renderer on a colour terminal: no crash, no escape but colours, the text as it came."""
    import io

    from rich.console import Console

    from cmdare.collectors.lifecycle import Lifecycle
    from cmdare.collectors.observed import build_jobs
    from cmdare.tui.plain import print_overview
    from cmdare.tui.session import MonitorState, SourceStatus

    job, task, gpu, region, error = labels
    store, life = Store(), Lifecycle()
    polls = [
        TaskPoll(
            source="s",
            t=1.0,
            ok=True,
            info=TaskInfo(job=job or "j", task=task or "t", gpu=gpu, region=region),
            values={"cmdare_global_step": 1.0},
            job_facts=JobFacts(job or "j", ModelSpec(name=gpu)),
        ),
        TaskPoll(source="s2", t=1.0, ok=False, info=TaskInfo(job=job or "j", task="x" + task), error=error),
    ]
    for p in polls:
        store.add(p)
    life.observe(polls)
    state = MonitorState(
        t=2.0,
        cycles=1,
        jobs=build_jobs(store, life, 2.0),
        alerts=[],
        alert_history=[],
        sources=[SourceStatus("s2", False, error)],
        demo=False,
        read_only=True,
    )
    out = io.StringIO()
    print_overview(state, Console(file=out, force_terminal=True, color_system="truecolor", width=300))
    text = out.getvalue()
    assert "\x1b" not in re.sub("\x1b\\[[0-9;]*m", "", text)  # colours only: no OSC 8 link, no title
    assert clean_text(task or "t") in text.replace("\n", "") or len(clean_text(task)) > 20


def test_log_records_are_cleaned_as_made_and_secrets_still_redacted(caplog):
    import logging

    from cmdare.collectors.untrusted import install_log_cleaning

    install_log_cleaning()
    install_log_cleaning()  # idempotent
    with caplog.at_level(logging.WARNING):
        logging.getLogger("cmdare.test").warning("answer: %s", "\x1b]0;x\x07 Authorization: Bearer\tSECRET1")
    (rec,) = [r for r in caplog.records if r.name == "cmdare.test"]
    assert (
        "\x1b" not in rec.getMessage() and "SECRET1" not in rec.getMessage() and "␛]0;x␇" in rec.getMessage()
    )
