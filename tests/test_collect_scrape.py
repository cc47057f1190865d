"""Direct scrape against real endpoints: every fault becomes a status (TaskPoll.error) and a log
line, never a traceback, and a slow target never delays the others."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from cmdare.collectors import metrics as M
from cmdare.collectors.clock import SystemClock
from cmdare.collectors.exporter import TrainingExporter
from cmdare.collectors.poller import Poller
from cmdare.collectors.scrape.source import ScrapeSource, ScrapeTarget
from cmdare.collectors.store import Store
from tests.prom_server import refused_port

GOOD = b"# TYPE cmdare_worker_steps_total counter\ncmdare_worker_steps_total 5\n"
PAGES: dict[str, tuple[int, str, bytes, float]] = {  # path → status, content type, body, delay (s)
    "/slow": (200, "text/plain", GOOD, 5.0),
    "/huge": (200, "text/plain", b"# " + b"x" * (10 * 1024 * 1024) + b"\n", 0.0),
    "/html": (200, "text/html", b"<!DOCTYPE html><html><body>Login</body></html>", 0.0),
    "/html500": (500, "text/html", b"<html><body>Internal error</body></html>", 0.0),
    "/malformed": (200, "text/plain", b'cmdare_worker_steps_total{task="a" 12\n', 0.0),
    "/json": (200, "application/json", b'{"steps": 5}', 0.0),
    "/ok": (200, "text/plain", b'cmdare_task_info{job="j",task="w1",role="worker"} 1\n' + GOOD, 0.0),
}


SLOW_ASKED = threading.Event()  # /slow's request has reached the server
SLOW_RELEASE = threading.Event()  # /slow answers only once this is set (or after its 5 s)


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        if self.path == "/after-slow":  # answers once /slow is in flight: proves the two run together
            self.path = "/ok" if SLOW_ASKED.wait(30) else "/html500"
        status, ctype, body, delay = PAGES[self.path]
        if self.path == "/slow":
            SLOW_ASKED.set()
            SLOW_RELEASE.wait(delay)
        try:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            pass

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def faulty() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def exporter() -> Iterator[TrainingExporter]:
    exp = TrainingExporter("j", "worker", "w0", gpu="P100", provisioning="spot")
    exp.start(0)
    exp.step(0.05, examples=128, steps=7)
    yield exp
    exp.stop()


async def _poll(targets: list[ScrapeTarget], timeout: float = 1.0) -> tuple[list, float]:
    async with httpx.AsyncClient() as client:
        t0 = time.monotonic()
        polls = await ScrapeSource(targets, timeout=timeout).poll(client, SystemClock())
        return polls, time.monotonic() - t0


async def test_real_exporter_answers_with_identity_and_values(exporter):
    (p,), _ = await _poll([ScrapeTarget(f"http://127.0.0.1:{exporter.port}/metrics")])
    assert p.ok and p.info.task == "w0" and p.info.role == "worker" and p.info.provisioning == "spot"
    assert p.values[M.K_WORKER_STEPS] == 7 and p.values[M.K_EXAMPLES] == 128


@pytest.mark.parametrize(
    ("path", "expect"),
    [
        ("/huge", "larger than"),
        ("/html", "HTML"),
        ("/html500", "HTTP 500"),
        ("/malformed", "malformed"),
    ],
)
async def test_bad_endpoint_becomes_a_status(faulty, path, expect):
    (p,), _ = await _poll([ScrapeTarget(faulty + path)])
    assert not p.ok and expect in p.error


async def test_wrong_content_type_json_is_refused(faulty):
    (p,), _ = await _poll([ScrapeTarget(faulty + "/json")])
    assert not p.ok and p.error


async def test_connection_refused_and_dns_failure():
    with refused_port() as port:
        refused = ScrapeTarget(f"http://127.0.0.1:{port}/metrics")
        dns = ScrapeTarget("http://nonexistent.invalid/metrics")
        (a, b), _ = await _poll([refused, dns], timeout=3.0)
    assert not a.ok and a.error == "connection refused"
    assert not b.ok and b.error == "DNS lookup failed"


async def test_slow_target_does_not_delay_the_others(faulty):
    """/slow holds its answer until released; /after-slow answers only once /slow is in flight, so a
    scraper asking one target after the other would time out on it."""
    SLOW_ASKED.clear()
    SLOW_RELEASE.clear()
    try:
        targets = [ScrapeTarget(faulty + "/after-slow"), ScrapeTarget(faulty + "/slow")]
        (good, slow), _ = await _poll(targets, timeout=2.0)
        held = not SLOW_RELEASE.is_set()
    finally:
        SLOW_RELEASE.set()
    assert good.ok and good.values[M.K_WORKER_STEPS] == 5  # asked beside the slow one, not after it
    assert not slow.ok and slow.error == "timed out" and held  # the timeout ended the cycle, not the server


async def test_poller_logs_each_failure_and_never_raises(faulty, caplog):
    targets = [ScrapeTarget(faulty + p) for p in ("/html", "/malformed")]
    poller = Poller([ScrapeSource(targets, timeout=1.0)], Store())
    with caplog.at_level(logging.INFO, logger="cmdare.collectors.poller"):
        cycle = await poller.poll_once()
    await poller.aclose()
    assert cycle.answered == 0 and not cycle.source_errors
    lines = [r.getMessage() for r in caplog.records]
    assert any("/html" in m and "HTML" in m for m in lines)
    assert any("/malformed" in m and "malformed" in m for m in lines)
    assert not any(r.exc_info for r in caplog.records)
