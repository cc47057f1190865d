"""Polls back off on targets whose page does not change (issue 34): the real poller and ScrapeSource against real
HTTP pages (tests/page_server.py), counting the requests each page receives. A page answering the same bytes
again and again is asked every 2nd, then every 4th refresh (a bounded back-off), said on the status line; a
changed page, a failure or the refresh key (``Poller.poke``) polls it every refresh again."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator

import pytest
from prometheus_client import generate_latest

from cmdare.collectors.exporter import TrainingExporter
from cmdare.collectors.poller import Poller
from cmdare.collectors.samples import TaskState
from cmdare.collectors.scrape.source import MAX_BACKOFF, UNCHANGED_BEFORE_BACKOFF, ScrapeSource, ScrapeTarget
from cmdare.collectors.store import Store
from tests.page_server import close_server, serve_pages


def page(task: str, steps: int) -> bytes:
    exp = TrainingExporter("backoff", "worker", task, region="us-central1")
    for _ in range(steps):
        exp.step(0.25, examples=32)
    exp.set_global_step(steps)
    return generate_latest(exp.registry)


class Pages:
    """Each path's page (a test changes them) and how many GETs each path received."""

    def __init__(self) -> None:
        self.body = {"/static/metrics": page("w0", 100), "/moving/metrics": page("w1", 100)}
        self.asked: Counter[str] = Counter()
        self.moving_steps = 100
        self.failing = False

    def __call__(self, path: str) -> bytes | None:
        self.asked[path] += 1
        if path == "/moving/metrics":  # a training worker: a new step every scrape
            self.moving_steps += 1
            return page("w1", self.moving_steps)
        return None if self.failing else self.body.get(path)


@pytest.fixture
def served() -> Iterator[tuple[Pages, str]]:
    pages = Pages()
    srv = serve_pages(pages, missing_status=503)
    yield pages, f"http://127.0.0.1:{srv.server_address[1]}"
    close_server(srv)


def poller_for(base: str) -> tuple[Poller, ScrapeSource]:
    src = ScrapeSource([ScrapeTarget(f"{base}/static/metrics"), ScrapeTarget(f"{base}/moving/metrics")],
                       timeout=5.0, interval_s=2.0)  # fmt: skip
    return Poller([src], Store()), src


def run(poller: Poller, cycles: int) -> list:
    async def go() -> list:
        out = [await poller.poll_once() for _ in range(cycles)]
        await poller.aclose()
        return out

    return asyncio.run(go())


def test_an_unchanged_page_is_polled_less_often_bounded_and_said(served):
    pages, base = served
    poller, src = poller_for(base)
    cycles = run(poller, 16)
    # refreshes 1-4 every refresh (the 4th is the 3rd identical answer), then every 2nd (6), then every 4th
    assert UNCHANGED_BEFORE_BACKOFF == 3 and MAX_BACKOFF == 4
    assert pages.asked["/moving/metrics"] == 16  # a changing page: every refresh
    assert pages.asked["/static/metrics"] == 7  # asked at refreshes 1-4, 6, 10 and 14
    skipped = [c.waiting for c in cycles]
    assert sum(skipped) == 16 - pages.asked["/static/metrics"]
    last = cycles[-1]
    assert (
        last.notes["scrape"] == "1 target answering the same page: polled every 8 s while it stays the same"
    )
    # the task is still up and its figures kept: nothing was lost by not asking
    node = next(n for n in poller.lifecycle.nodes.values() if n.info.task == "w0")
    assert node.state is TaskState.UP and node.failures == 0
    assert src.status_note is not None


def test_a_change_a_failure_and_the_refresh_key_poll_every_refresh_again(served):
    pages, base = served
    poller, src = poller_for(base)

    async def go() -> None:
        for _ in range(8):  # backed off to every 2nd, then every 4th refresh
            await poller.poll_once()
        assert src.status_note is not None
        poller.poke()  # the refresh key: every target asked at the next refresh
        before = pages.asked["/static/metrics"]
        cycle = await poller.poll_once()
        assert pages.asked["/static/metrics"] == before + 1 and cycle.waiting == 0
        assert src.status_note is None
        for _ in range(8):  # backed off again
            await poller.poll_once()
        pages.body["/static/metrics"] = page("w0", 200)  # the job moved on: seen at its next turn...
        seen = pages.asked["/static/metrics"]
        while pages.asked["/static/metrics"] == seen:
            await poller.poll_once()
        before = pages.asked["/static/metrics"]
        for _ in range(3):  # ...and from then on asked every refresh
            await poller.poll_once()
        assert pages.asked["/static/metrics"] == before + 3
        for _ in range(8):
            await poller.poll_once()
        pages.failing = True  # a failure while backed off: asked every refresh, silent after 3 failures
        failed = 0
        for _ in range(MAX_BACKOFF + 3):
            cycle = await poller.poll_once()
            failed += sum(1 for p in cycle.polls if not p.ok)
        assert failed >= 3
        node = next(n for n in poller.lifecycle.nodes.values() if n.info.task == "w0")
        assert node.state is TaskState.SILENT
        await poller.aclose()

    asyncio.run(go())


def test_without_backoff_every_target_is_asked_every_refresh(served):
    pages, base = served
    src = ScrapeSource([ScrapeTarget(f"{base}/static/metrics")], max_backoff=1)
    run(Poller([src], Store()), 10)
    assert pages.asked["/static/metrics"] == 10 and src.status_note is None
