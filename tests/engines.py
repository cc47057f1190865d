"""Debian's alerting engines for the live rule tests: Prometheus with a rule file and an Alertmanager,
Alertmanager itself with a webhook receiver on 127.0.0.1, and VictoriaMetrics with vmalert. Each runs on
ephemeral ports with its own temporary folder and is killed at exit (a support module, not a test module)."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.prom_server import PromServer, free_port

ALERTMANAGER = shutil.which("prometheus-alertmanager") or "/usr/bin/prometheus-alertmanager"
VICTORIA = shutil.which("victoria-metrics") or "/usr/bin/victoria-metrics"
VMALERT = shutil.which("vmalert") or "/usr/bin/vmalert"


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.load(r)


class Process:
    """A server process on 127.0.0.1:``port``, ready when ``ready_path`` answers 200."""

    def __init__(self, argv: list[str], port: int, workdir: Path, ready_path: str, name: str) -> None:
        self.argv, self.port, self.workdir, self.ready_path, self.name = argv, port, workdir, ready_path, name
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 30.0) -> Process:
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = (self.workdir / f"{self.name}.log").open("wb")
        self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited: {self.log()[-2000:]}")
            try:
                with urllib.request.urlopen(self.url + self.ready_path, timeout=1) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{self.name} did not become ready")

    def log(self) -> str:
        return (self.workdir / f"{self.name}.log").read_text(errors="replace")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None


class Webhook:
    """Alertmanager's webhook receiver: keeps every alert it is sent (newest status per fingerprint)."""

    def __init__(self) -> None:
        self.alerts: dict[str, dict] = {}
        self.posts = 0
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                hook.posts += 1
                for a in body.get("alerts", []):
                    hook.alerts[a.get("fingerprint", json.dumps(a.get("labels"), sort_keys=True))] = a
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alerts"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def firing(self) -> list[dict]:
        return [a for a in self.alerts.values() if a.get("status") == "firing"]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def alertmanager(workdir: Path, webhook_url: str) -> Process:
    """Alertmanager routing every alert to ``webhook_url`` at once (group_wait 1 s)."""
    workdir.mkdir(parents=True, exist_ok=True)
    cfg = workdir / "alertmanager.yml"
    cfg.write_text(
        "route:\n  receiver: hook\n  group_by: [alertname, cmdare_job]\n  group_wait: 1s\n"
        "  group_interval: 1s\n  repeat_interval: 1h\n"
        f"receivers:\n  - name: hook\n    webhook_configs:\n      - url: '{webhook_url}'\n"
    )
    port = free_port()
    argv = [ALERTMANAGER, f"--config.file={cfg}", f"--storage.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=", "--log.level=warn"]  # fmt: skip
    return Process(argv, port, workdir, "/-/ready", "alertmanager")


class RulesPromServer(PromServer):
    """Prometheus loading ``rule_file``, evaluating every ``interval`` and sending alerts to ``alertmanager``."""

    def __init__(
        self, targets: list[str], workdir: Path, rule_file: Path, alertmanager: str, interval: str
    ) -> None:
        super().__init__(targets, workdir, scrape_interval=interval)
        self.rule_file, self.alertmanager, self.interval = rule_file, alertmanager, interval

    def config(self) -> str:
        return (
            super().config().replace("global:\n", f"global:\n  evaluation_interval: {self.interval}\n", 1)
            + f"rule_files: ['{self.rule_file}']\n"
            + f"alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: ['{self.alertmanager}']\n"
        )

    def firing(self) -> list[dict]:
        return [a for a in get_json(f"{self.url}/api/v1/alerts")["data"]["alerts"] if a["state"] == "firing"]


def victoria_metrics(workdir: Path, targets: list[str], interval: str) -> Process:
    """VictoriaMetrics scraping ``targets``, answering queries up to the last sample (no latency offset) and
    without its result cache (which would keep the empty answer of a recorded series not yet written)."""
    workdir.mkdir(parents=True, exist_ok=True)
    cfg = workdir / "scrape.yml"
    cfg.write_text(
        f"global:\n  scrape_interval: {interval}\nscrape_configs:\n  - job_name: cmdare-test\n"
        f"    static_configs:\n      - targets: [{', '.join(repr(t) for t in targets)}]\n"
    )
    port = free_port()
    argv = [VICTORIA, f"-promscrape.config={cfg}", f"-storageDataPath={workdir / 'data'}",
            f"-httpListenAddr=127.0.0.1:{port}", "-search.latencyOffset=0s", "-search.disableCache", "-loggerLevel=WARN"]  # fmt: skip
    return Process(argv, port, workdir, "/health", "victoria-metrics")


def vmalert(workdir: Path, rule_file: Path, vm_url: str, notifier: str, interval: str) -> Process:
    """vmalert evaluating ``rule_file`` against VictoriaMetrics, writing recorded series back to it."""
    port = free_port()
    argv = [VMALERT, f"-rule={rule_file}", f"-datasource.url={vm_url}", f"-remoteWrite.url={vm_url}",
            "-remoteWrite.flushInterval=200ms", f"-notifier.url={notifier}", f"-evaluationInterval={interval}",
            f"-httpListenAddr=127.0.0.1:{port}", "-loggerLevel=WARN"]  # fmt: skip
    return Process(argv, port, workdir, "/health", "vmalert")


def vmalert_firing(proc: Process) -> list[dict]:
    alerts = get_json(f"{proc.url}/api/v1/alerts")["data"]["alerts"] or []  # null when there are none
    return [a for a in alerts if a.get("state") == "firing"]
