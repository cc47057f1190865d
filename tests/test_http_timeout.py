"""Issue 27 (degraded list): the timeout asked for is the one used. httpx's client default (5 s for
connect, read, write and pool) capped a longer ``--timeout`` without a word: a target answering in
5.5 s failed with ``--timeout 60``. A scrape through the real Poller and its real client (the one the
Prometheus source's queries go through too) against an exporter on 127.0.0.1 that takes 5.5 s; the
per-host clients of a many-host scrape are given the timeout itself."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from cmdare.collectors.http_client import new_client
from cmdare.collectors.poller import Poller
from cmdare.collectors.scrape.source import ScrapeSource, ScrapeTarget
from cmdare.collectors.store import Store

pytestmark = pytest.mark.slow

DELAY_S = 5.5  # past httpx's default 5 s
PAGE = b'# TYPE cmdare_task_info gauge\ncmdare_task_info{job="j",task="worker-0",role="worker"} 1\n'


class SlowExporter:
    """A /metrics page that takes :data:`DELAY_S` to answer."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                time.sleep(DELAY_S)
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain; version=0.0.4")
                    self.send_header("Content-Length", str(len(PAGE)))
                    self.end_headers()
                    self.wfile.write(PAGE)
                except OSError:
                    pass

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/metrics"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_the_client_keeps_the_timeout_it_is_given():
    assert new_client(httpx.Limits(), 60.0).timeout.read == 60.0
    assert new_client(httpx.Limits()).timeout.read is None  # bounded by each request's caller


async def test_a_timeout_past_five_seconds_is_the_one_used():
    exporter = SlowExporter()
    try:
        poller = Poller([ScrapeSource([ScrapeTarget(exporter.url)], timeout=30.0)], Store(), interval=0)
        cycle = await poller.poll_once()
        await poller.aclose()
    finally:
        exporter.close()
    assert cycle.polls and all(p.ok for p in cycle.polls), [p.error for p in cycle.polls]
