"""Bounded work per input (issue 15): hostile targets and a hostile Prometheus on 127.0.0.1
(tests/hostile_server.py) end as one clear per-target status, quickly, in little memory; one bad
value drops that value with a note, never the task or the source; queries go as GET."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from cmdare.collectors import metrics as M
from cmdare.collectors import writes
from cmdare.collectors.clock import SystemClock
from cmdare.collectors.http_client import Budget
from cmdare.collectors.poller import Poller
from cmdare.collectors.prometheus.answers import decode as _decode
from cmdare.collectors.prometheus.source import MAX_GET_URL, PrometheusAPIError, PrometheusAPISource
from cmdare.collectors.scrape import source as scrape_mod
from cmdare.collectors.scrape.source import ScrapeSource, ScrapeTarget, scrape
from cmdare.collectors.store import Store
from tests.hostile_server import HostileProcess
from tests.prom_server import FakePromAPI

pytestmark = pytest.mark.slow

TIMEOUT_S = 1.0


def peak_rss_mb() -> float:
    """This process's peak resident set (VmHWM), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


@pytest.fixture(scope="module")
def hostile() -> Iterator[HostileProcess]:
    with HostileProcess() as srv:
        yield srv


async def _scrape(url: str, **kw: object):
    async with httpx.AsyncClient() as client:
        return await scrape(client, ScrapeTarget(url), timeout=TIMEOUT_S, **kw)  # type: ignore[arg-type]


async def test_stacked_gzip_bomb_is_one_clear_error_fast_and_small(hostile):
    before = peak_rss_mb()
    ticks = 0

    async def ticker() -> None:  # proves the loop keeps running while the bomb is handled
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    tick = asyncio.create_task(ticker())
    poll = await _scrape(hostile.url("/t/bomb2"))
    tick.cancel()
    assert not poll.ok and "stacked content codings (gzip, gzip)" in poll.error  # refused, not timed out
    assert peak_rss_mb() - before < 50
    assert ticks >= 1


async def test_a_page_slow_to_parse_never_stalls_the_loop_and_ends_at_the_timeout(hostile, monkeypatch):
    parsing, ticks_while_parsing = threading.Event(), [0]
    real = scrape_mod.parse_exposition

    def watched(text: str, info: object) -> object:
        parsing.set()
        try:
            return real(text, info)  # type: ignore[arg-type]
        finally:
            parsing.clear()

    async def ticker() -> None:  # counts the loop's turns while the parse runs
        while True:
            await asyncio.sleep(0.01)
            ticks_while_parsing[0] += parsing.is_set()

    monkeypatch.setattr(scrape_mod, "parse_exposition", watched)
    tick = asyncio.create_task(ticker())
    async with httpx.AsyncClient() as client:  # 3 MiB: ~1.5 s of parsing, 3 times the timeout
        poll = await scrape(client, ScrapeTarget(hostile.url("/t/slowparse3")), timeout=0.5)
    still_parsing = parsing.is_set()
    tick.cancel()
    assert not poll.ok and poll.error == "timed out"
    assert still_parsing  # the poll ended at its timeout, not when the parse did
    assert ticks_while_parsing[0] >= 2  # the parse ran beside the loop, which kept turning


async def test_slow_pages_polled_again_and_again_never_pile_up_parse_threads(hostile, monkeypatch):
    running, most, lock = [0], [0], threading.Lock()
    real = scrape_mod.parse_exposition

    def counted(text: str, info: object) -> object:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        try:
            return real(text, info)  # type: ignore[arg-type]
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(scrape_mod, "parse_exposition", counted)
    src = ScrapeSource(
        [ScrapeTarget(hostile.url("/t/slowparse2") + f"?n={i}") for i in range(4)], timeout=0.3
    )
    async with httpx.AsyncClient() as client:
        for _ in range(2):
            polls = await src.poll(client, SystemClock())
            assert all(p.error == "timed out" for p in polls)
    assert most[0] <= scrape_mod.PARSE_THREADS


async def test_one_gzip_bomb_stops_at_the_body_cap(hostile):
    before = peak_rss_mb()
    poll = await _scrape(hostile.url("/t/bomb1"), max_bytes=4 << 20)
    assert not poll.ok and "inflates past 4 MiB" in poll.error  # refused, not timed out
    assert peak_rss_mb() - before < 50  # 1 GiB inflated before the fix


async def test_honest_gzip_page_still_reads(hostile):
    poll = await _scrape(hostile.url("/t/gz"))
    assert poll.ok and poll.values[M.K_WORKER_STEPS] == 100


@pytest.mark.parametrize(
    ("coding", "expect"),
    [
        ("deflate", None),
        ("identity", None),
        ("gzip,%20identity", None),
        ("x-gzip", None),
        ("br", "unsupported content coding 'br'"),
        ("deflate,%20gzip", "stacked content codings (deflate, gzip)"),
    ],
)
async def test_content_codings_one_at_most(hostile, coding, expect):
    poll = await _scrape(hostile.url(f"/t/enc-{coding}"))
    if expect is None:
        assert poll.ok, poll.error
    else:
        assert not poll.ok and expect in poll.error


@pytest.mark.parametrize(("attack", "expect"), [("slowloris", "timed out"), ("huge", "larger than 8 MiB")])
async def test_slow_and_huge_targets_end_within_the_timeout(hostile, attack, expect):
    # slowloris drips its headers for ~500 s and huge streams 60 MB: "timed out" (the whole request's
    # timeout, not a read's) and the size refusal are each how the poll ended before the server did
    poll = await _scrape(hostile.url(f"/t/{attack}"))
    assert not poll.ok and expect in poll.error


async def test_bad_values_drop_the_value_never_the_task_or_the_source(hostile):
    """NaN / 1e400 / negative job facts and NaN / inf / 1e308 / negative counter values beside a
    healthy target: both tasks answer; the bad values are gone, with a note."""
    src = ScrapeSource(
        [ScrapeTarget(hostile.url("/t/ok")), ScrapeTarget(hostile.url("/t/nan"))], timeout=TIMEOUT_S
    )
    store = Store()
    cycle = await Poller([src], store, interval=0).poll_once()
    await src.aclose()
    assert cycle.answered == 2 and not cycle.source_errors
    bad = next(p for p in cycle.polls if p.source.endswith("/t/nan"))
    assert bad.values[M.K_WORKER_STEPS] == 100
    for key in (M.K_PROCESS_CPU, M.K_STAGE_WAIT, M.K_STAGE_COMPUTE, M.K_PS_IN):
        assert key not in bad.values
    assert (
        bad.job_facts is not None and bad.job_facts.model.batch_size == 0 and bad.job_facts.model.params == 0
    )
    assert "batch_size is not a plausible number" in bad.error
    assert "4 non-finite or implausible value(s) ignored" in bad.error


async def _prom_poll(url: str, **kw: object):
    src = PrometheusAPISource(url, **{"timeout": TIMEOUT_S, **kw})  # type: ignore[arg-type]
    async with httpx.AsyncClient() as client:
        polls = await src.poll(client, SystemClock())
    await src.aclose()
    return polls


async def test_prometheus_nan_rows_and_facts_drop_values_not_the_task(hostile):
    [poll] = await _prom_poll(hostile.url("/p/nanrows"))
    assert poll.ok, poll.error
    assert poll.values == {M.K_STEP_SECONDS_SUM: 12.0}
    assert "3 implausible value(s) ignored" in poll.error and "clock skew" not in poll.error
    assert "batch_size is not a plausible number" in poll.error
    assert poll.job_facts.model.batch_size == 0


@pytest.mark.parametrize(
    ("attack", "expect"),
    [
        ("rows", "refused"),  # 250,000 rows in every answer: over the rows, values or bytes cap
        ("bytes", "larger than 64 MiB"),
        ("badjson", "not JSON"),
        ("deep", "not JSON"),
        ("bomb2", "stacked content codings"),
    ],
)
async def test_hostile_prometheus_answers_are_one_line_statuses(hostile, attack, expect):
    before = peak_rss_mb()
    [poll] = await _prom_poll(hostile.url(f"/p/{attack}"), timeout=5.0)
    assert not poll.ok and expect in poll.error  # the refusal, not the timeout, ended the poll
    assert peak_rss_mb() - before < 250


async def test_prometheus_queries_are_get_only(hostile):
    writes.set_read_only(True)  # every refresh of a normal selector works in read-only mode
    [poll] = await _prom_poll(hostile.url("/p/ok"))
    methods = hostile.methods()
    assert poll.ok and "GET" in methods and set(methods) == {"GET"}


async def test_overlong_query_posts_when_writable_and_refuses_in_read_only():
    long_query = f'up{{job="{"j" * MAX_GET_URL}"}}'
    with FakePromAPI(b'{"status":"success","data":{"resultType":"vector","result":[]}}') as prom:
        src = PrometheusAPISource(prom.url, timeout=TIMEOUT_S)
        async with httpx.AsyncClient() as client:
            assert await src.query(client, src._always_query) == []
            assert prom.methods == ["GET"]
            await src.query(client, long_query)
            assert prom.methods == ["GET", "POST"]
            writes.set_read_only(True)
            with pytest.raises(PrometheusAPIError, match="read-only mode sends no POST"):
                await src.query(client, long_query)
            assert prom.methods == ["GET", "POST"]  # nothing was sent


def test_answers_are_refused_by_json_values_and_rows_before_they_cost_memory():
    from tests.hostile_server import rows_body

    body = rows_body(1000)  # 8 JSON values a row
    assert len(_decode(body, "application/json", 200, Budget(8100))) == 1000
    budget = Budget(8100)
    _decode(body, "application/json", 200, budget)
    with pytest.raises(PrometheusAPIError, match="JSON values together refused"):
        _decode(body, "application/json", 200, budget)  # the refresh's second answer: over
    cut: list[int] = []  # rows past [caps] rows_per_answer are dropped (counted), not the answer
    assert len(_decode(rows_body(200_001), "application/json", 200, Budget(10**9), cut=cut)) == 200_000
    assert cut == [1]


async def test_a_parser_fault_on_one_page_costs_that_target_only(hostile, monkeypatch):
    real = scrape_mod.parse_exposition

    def fussy(text: str, info: object) -> object:
        if "pwned" in text:  # the ESC page
            raise RecursionError("maximum recursion depth exceeded")
        return real(text, info)  # type: ignore[arg-type]

    monkeypatch.setattr(scrape_mod, "parse_exposition", fussy)
    src = ScrapeSource(
        [ScrapeTarget(hostile.url("/t/ok")), ScrapeTarget(hostile.url("/t/esc"))], timeout=TIMEOUT_S
    )
    cycle = await Poller([src], Store(), interval=0).poll_once()
    await src.aclose()
    ok, bad = cycle.polls
    assert ok.ok and not cycle.source_errors
    assert not bad.ok and bad.error == "page not parsed (RecursionError)"
