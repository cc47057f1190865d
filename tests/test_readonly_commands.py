"""Issue 15 item 5: every command honours read-only, however it is asked for (``--read-only`` before
or after the command, ``CMDARE_READ_ONLY=1``, ``read_only = true`` in the config). Each runs as a real
process with a fresh HOME (and XDG dirs, and cwd) that must stay byte for byte the same, against a
capture server on 127.0.0.1 that records every request's method: only GETs may arrive.

The full-screen app is covered by test_readonly_mode.py (Pilot) and test_tmux_readonly.py (tmux)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.test_readonly_mode import fresh_env, tree

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
EXE = str(Path(sys.executable).with_name("cmdare-tui"))
METRICS = "# TYPE up gauge\nup 1\n"
PROM = {"status": "success", "data": {"resultType": "vector", "result": []}}


class Capture:
    """An HTTP server that answers anything and records (method, path) of every request."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []
        capture = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                capture.requests.append((self.command, self.path))
                if "/metrics" in self.path:
                    body, kind = METRICS.encode(), "text/plain; version=0.0.4"
                else:
                    body, kind = (
                        json.dumps(PROM if "/api/v1/" in self.path else {}).encode(),
                        "application/json",
                    )
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _answer  # noqa: N815

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def capture() -> Iterator[Capture]:
    c = Capture()
    yield c
    c.server.shutdown()


def commands(url: str) -> dict[str, list[str]]:
    ex = REPO / "examples"
    return {
        "snapshot": ["snapshot", "--target", f"{url}/metrics", "--prometheus", url, "--samples", "2",
                     "--interval", "0.1", "--json"],
        "prices": ["prices", "--billing-endpoint", url, "--gpu", "V100", "--json"],
        "predict": ["predict", "--input", str(ex / "predict.csv")],
        "plan": ["plan", "--workload", str(ex / "workload-resnet32.toml"), "--top", "2"],
        "plan-geo": ["plan", "--geo", str(ex / "geo-3dc.toml"), "--top", "2"],
        "serve": ["serve", "--dry-run", "--target", f"{url}/metrics"],
    }  # fmt: skip


def _argv(way: str, argv: list[str], home: Path) -> list[str]:
    if way == "flag-before":
        return ["--read-only", *argv]
    if way == "flag-after":
        return [*argv, "--read-only"]
    if way == "config":
        return [*argv, "--config", str(home / "ro.toml")]
    return argv


# every command once, every way several times (each run is a real process: keep the count modest)
CASES = [("snapshot", "config"), ("snapshot", "flag-before"), ("prices", "env"), ("prices", "flag-after"),
         ("prices", "config"), ("predict", "flag-before"), ("plan", "env"), ("plan-geo", "config"),
         ("serve", "flag-after")]  # fmt: skip


@pytest.mark.parametrize(("name", "way"), CASES)
def test_command_writes_nothing_and_only_gets(tmp_path: Path, capture: Capture, name: str, way: str):
    home = tmp_path / "home"
    home.mkdir()
    (home / "ro.toml").write_text("read_only = true\n")
    env = fresh_env(home)
    env.pop("CMDARE_READ_ONLY", None)
    if way == "env":
        env["CMDARE_READ_ONLY"] = "1"
    before = tree(home)
    start = len(capture.requests)
    out = subprocess.run([EXE, *_argv(way, commands(capture.url)[name], home)], cwd=home, env=env,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    assert tree(home) == before, f"{name} wrote under read-only ({way})"
    methods = {m for m, _ in capture.requests[start:]}
    assert methods <= {"GET"}, capture.requests[start:]
    if name == "serve":
        assert "--read-only" in out.stdout


def test_predict_output_is_refused_under_read_only(tmp_path: Path):
    env = fresh_env(tmp_path)
    env["CMDARE_READ_ONLY"] = "1"
    out = subprocess.run([EXE, "predict", "--input", str(REPO / "examples" / "predict.csv"), "--output",
                          str(tmp_path / "out.csv")], env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "read-only" in out.stderr
    assert not (tmp_path / "out.csv").exists()


def test_prices_caches_only_when_writable(tmp_path: Path):
    """Against a Catalog API that answers real SKUs, `prices` writes its cache when allowed and
    nothing under read-only: the read-only runs prove a refusal, not a lack of anything to write."""
    from tests.catalog_server import CatalogServer, gpu_sku, host_sku

    skus = [gpu_sku("V100", 2.48, ["us-central1"]), host_sku("n1", "Core", 0.031611, ["us-central1"]),
            host_sku("n1", "Ram", 0.004237, ["us-central1"])]  # fmt: skip
    with CatalogServer(skus) as server:
        for read_only in (True, False):
            home = tmp_path / f"home-{read_only}"
            home.mkdir()
            env = fresh_env(home)
            env.pop("CMDARE_READ_ONLY", None)
            env.update({"CMDARE_READ_ONLY": "1"} if read_only else {})
            out = subprocess.run([EXE, "prices", "--billing-endpoint", server.endpoint, "--json"], cwd=home,
                                 env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
            assert out.returncode == 0 and json.loads(out.stdout)[0]["source"] == "live", out.stderr
            cached = list((home / "xdg_cache_home").rglob("*.json"))
            assert (cached == []) if read_only else cached, (read_only, cached)
