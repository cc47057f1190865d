"""Debian's real Prometheus server (``/usr/bin/prometheus``) for tests and benchmarks.

    with PromServer(["127.0.0.1:9401", "127.0.0.1:9402"], tmp_path) as prom:
        prom.wait_for_targets(2)
        print(prom.url)                     # http://127.0.0.1:<ephemeral port>

Started on 127.0.0.1 with an ephemeral port, a temporary config (scrape interval 1 s by default)
and a temporary storage dir; killed at exit. ``prometheus_server`` is a pytest fixture factory.
Also a small fake API server (:class:`FakePromAPI`) for faults a real server will not produce.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"


def free_port() -> int:
    """A port on 127.0.0.1 free a moment ago, for a server started next (another process could take it in
    between: a server that binds port 0 itself and says which it got is safer; see :func:`refused_port`
    for a port nothing must answer on)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def refused_port() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses connections for the block: bound and not listening, so no other
    process can take it meanwhile (a port found free and closed could be taken before it is used)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


class PromServer:
    def __init__(
        self,
        targets: Sequence[str],
        workdir: Path,
        *,
        scrape_interval: str = "1s",
        job: str = "cmdare-test",
        honor_labels: bool = False,
        port: int | None = None,
        scrape_configs: str | None = None,
    ) -> None:
        self.targets = list(targets)
        self.workdir = Path(workdir)
        self.scrape_interval = scrape_interval
        self.job = job
        self.honor_labels = honor_labels
        self.scrape_configs = scrape_configs  # raw YAML list items replacing the single default job
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def config(self) -> str:
        targets = ", ".join(f"'{t}'" for t in self.targets)
        if self.scrape_configs is not None:
            return (
                "global:\n"
                f"  scrape_interval: {self.scrape_interval}\n"
                f"  scrape_timeout: {self.scrape_interval}\n"
                f"scrape_configs:\n{self.scrape_configs}"
            )
        return (
            "global:\n"
            f"  scrape_interval: {self.scrape_interval}\n"
            f"  scrape_timeout: {self.scrape_interval}\n"
            "scrape_configs:\n"
            f"  - job_name: '{self.job}'\n"
            f"    honor_labels: {str(self.honor_labels).lower()}\n"
            f"    static_configs:\n      - targets: [{targets}]\n"
        )

    def start(self, timeout: float = 20.0) -> PromServer:
        self.workdir.mkdir(parents=True, exist_ok=True)
        cfg = self.workdir / "prometheus.yml"
        cfg.write_text(self.config())
        log = (self.workdir / "prometheus.log").open("wb")
        self.proc = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={cfg}",
                f"--storage.tsdb.path={self.workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"prometheus exited: {(self.workdir / 'prometheus.log').read_text()[-2000:]}"
                )
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("prometheus did not become ready")

    def query(self, promql: str) -> list[dict]:
        data = urllib.parse.urlencode({"query": promql}).encode()
        with urllib.request.urlopen(f"{self.url}/api/v1/query", data=data, timeout=5) as r:
            return json.load(r)["data"]["result"]

    def wait_for(self, promql: str, ok: Callable[[list[dict]], bool], timeout: float = 20.0) -> list[dict]:
        deadline = time.monotonic() + timeout
        while True:
            res = self.query(promql)
            if ok(res) or time.monotonic() > deadline:
                return res
            time.sleep(0.2)

    def wait_for_targets(self, n: int, timeout: float = 20.0) -> None:
        res = self.wait_for("up == 1", lambda r: len(r) >= n, timeout)
        if len(res) < n:
            raise RuntimeError(f"only {len(res)}/{n} targets up in prometheus")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None

    def __enter__(self) -> PromServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture
def prometheus_server(tmp_path: Path) -> Iterator[Callable[..., PromServer]]:
    """Factory: ``prometheus_server(["127.0.0.1:PORT", ...], scrape_interval="1s")`` → a started server."""
    if not Path(PROMETHEUS).exists():
        pytest.skip("prometheus is not installed (apt-get install prometheus)")
    started: list[PromServer] = []

    def make(targets: Sequence[str], **kw: object) -> PromServer:
        srv = PromServer(targets, tmp_path / f"prom{len(started)}", **kw)  # type: ignore[arg-type]
        started.append(srv)
        return srv.start()

    yield make
    for srv in started:
        srv.stop()


class FakePromAPI:
    """A stand-in answering ``/api/v1/query`` with a fixed body, status, content type and delay."""

    def __init__(
        self, body: bytes = b"", *, status: int = 200, ctype: str = "application/json", delay: float = 0.0
    ) -> None:
        self.body, self.status, self.ctype, self.delay = body, status, ctype, delay
        self.headers: list[dict[str, str]] = []
        self.methods: list[str] = []  # the method of every request, in order
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                self.do_POST()

            def do_POST(self) -> None:  # noqa: N802
                fake.headers.append(dict(self.headers))
                fake.methods.append(self.command)
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                time.sleep(fake.delay)
                try:
                    self.send_response(fake.status)
                    self.send_header("Content-Type", fake.ctype)
                    self.send_header("Content-Length", str(len(fake.body)))
                    self.end_headers()
                    self.wfile.write(fake.body)
                except OSError:  # the client gave up (timeout tests)
                    pass

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakePromAPI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
