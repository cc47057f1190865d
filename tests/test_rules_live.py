"""The generated rules on the real engines, against the app on the same data: the simulated clusters of
the alert scenarios (PS-saturated, healthy, straggler, sync all-reduce-bound, revoked) served as exporter
pages; Debian's Prometheus loads the file and sends its alerts to Debian's Alertmanager, which posts them to
a local webhook; the app scrapes them with its own scrape source and raises its verdicts. Each scenario: Prometheus' and
Alertmanager's alerts are the app's (same kind, same subject); vmalert, on the same file against
VictoriaMetrics scraping the same pages, raises none the app does not."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest

from cmdare.collectors.clock import SystemClock
from cmdare.collectors.http_client import new_client
from cmdare.collectors.prometheus.source import PrometheusAPISource
from cmdare.collectors.scrape.source import ScrapeSource, ScrapeTarget
from cmdare.planner.rules.engine_alerts import merge_engine_alerts
from cmdare.planner.rules.engine_rules import ALERT_KINDS, RuleOptions, render
from cmdare.tui.options import SessionOptions
from cmdare.tui.session import MonitorSession
from tests.alert_sim import Harness, SimCluster, load_curves
from tests.engines import (
    VMALERT,
    RulesPromServer,
    Webhook,
    alertmanager,
    victoria_metrics,
    vmalert,
    vmalert_firing,
)
from tests.prom_server import PROMETHEUS
from tests.sim_exporter import SimExporters, SimSync

pytestmark = pytest.mark.slow

INTERVAL = 1.0  # scrape, evaluation and the app's refresh (s)
PER_TASK = {"node-revoked", "node-silent", "straggler"}  # the other verdicts' subject is the job
EXPECTED = {
    ("ps-saturation", "psat", ""),
    ("straggler", "strag", "worker-3"),
    ("allreduce-bound", "sync", ""),
    ("node-revoked", "rev", "worker-2"),
}


def _subject(kind: str, job: str, task: str) -> tuple[str, str, str]:
    return kind, job, task if kind in PER_TASK else ""


def engine_set(alerts: list[dict]) -> set[tuple[str, str, str]]:
    return {
        _subject(a["labels"]["kind"], a["labels"]["cmdare_job"], a["labels"].get("task", "")) for a in alerts
    }


def app_set(active: list) -> set[tuple[str, str, str]]:
    kinds = set(ALERT_KINDS.values())
    return {_subject(a.kind, *(a.subject.split("/", 1) + [""])[:2]) for a in active if a.kind in kinds}


def scenarios() -> list:
    curves = load_curves()

    def gpus(model: str) -> dict:
        return {g: curves[(g, model)] for g in ("K80", "P100")}

    psat = SimCluster("ResNet-32", gpus("ResNet-32"), ["P100"] * 8, seed=2, job="psat")
    healthy = SimCluster("ResNet-32", gpus("ResNet-32"), ["K80"] * 8, seed=1, job="healthy")
    strag = SimCluster("ResNet-32", gpus("ResNet-32"), ["K80"] * 6, seed=3, job="strag")
    strag.workers[3].slow = 1.5
    rev = SimCluster("ResNet-32", gpus("ResNet-32"), ["K80"] * 4, seed=8, job="rev")
    rev.workers[2].preempted = True
    sync = SimSync(4, compute_s=0.10, allreduce_s=0.06, job="sync")  # exposed all-reduce 37.5% of a step
    return [psat, healthy, strag, rev, sync]


@pytest.mark.skipif(
    not all(Path(p).exists() for p in (PROMETHEUS, VMALERT, "/usr/bin/prometheus-alertmanager")),
    reason="needs Debian's prometheus, prometheus-alertmanager and victoria-metrics (scripts/test.sh)",
)
async def test_engines_agree_with_the_app_on_every_scenario(tmp_path):
    rules = tmp_path / "cmdare-rules.yml"
    rules.write_text(render(RuleOptions(interval_s=INTERVAL, window_s=4 * INTERVAL)))
    rules_vm = tmp_path / "cmdare-rules-vmalert.yml"
    rules_vm.write_text(render(RuleOptions(interval_s=INTERVAL, window_s=4 * INTERVAL, engine="vmalert")))
    hook = Webhook()
    started = []
    with SimExporters(*scenarios()) as farm:
        try:
            am = alertmanager(tmp_path / "am", hook.url)
            started.append(await asyncio.to_thread(am.start))
            prom = RulesPromServer(farm.targets, tmp_path / "prom", rules, f"127.0.0.1:{am.port}", "1s")
            started.append(await asyncio.to_thread(prom.start))
            vm = victoria_metrics(tmp_path / "vm", farm.targets, "1s")
            started.append(await asyncio.to_thread(vm.start))
            vma = vmalert(tmp_path / "vmalert", rules_vm, vm.url, am.url, "1s")
            started.append(await asyncio.to_thread(vma.start))

            client = new_client(httpx.Limits(max_connections=64))
            app = Harness(
                source=ScrapeSource([ScrapeTarget(u) for u in farm.urls], timeout=2.0),
                clock=SystemClock(),
                client=client,
                interval=INTERVAL,
            )
            seen: dict[str, set] = {}
            last: list = []
            deadline = time.monotonic() + 45
            while time.monotonic() < deadline:
                t0 = time.monotonic()
                last = await app.refresh()
                seen["app"] = app_set(last)
                seen["prometheus"] = engine_set(await asyncio.to_thread(prom.firing))
                seen["alertmanager"] = engine_set(hook.firing())
                if all(s == EXPECTED for s in seen.values()):
                    break
                await asyncio.sleep(max(0.0, INTERVAL - (time.monotonic() - t0)))
            # the app reads the engine's alerts (--prometheus): each shown once, marked as raised by both
            src = PrometheusAPISource(prom.url, "")
            rows = await src.engine_alerts(client)
            merged = merge_engine_alerts(last, rows, {j.name for j in app.jobs}, time.time())
            await client.aclose()
            assert app_set(merged) == EXPECTED and len(merged) == len(last)
            assert {a.origin for a in merged if a.kind in ALERT_KINDS.values()} == {"app+engine"}
            for name, got in seen.items():
                assert got == EXPECTED, (name, got, seen)
            # the app's own session with --prometheus: the engine's alerts in its state, marked by origin
            session = MonitorSession(SessionOptions(prometheus=prom.url, refresh=INTERVAL, read_only=True))
            session.start()
            try:
                for _ in range(3):
                    state = await session.refresh()
                    await asyncio.sleep(INTERVAL)
            finally:
                await session.aclose()
            engine_marked = {
                (a.kind, a.subject) for a in state.alerts if a.origin in ("engine", "app+engine")
            }
            assert app_set([a for a in state.alerts if (a.kind, a.subject) in engine_marked]) == EXPECTED
            # vmalert evaluates the same file, but its recording rules are read back through VictoriaMetrics:
            # a verdict resting on a chain of them (straggler, ps-saturation) may not have fired yet. What it
            # raises is one of the app's verdicts, never a false alarm.
            vm_alerts = engine_set(await asyncio.to_thread(vmalert_firing, vma))
            assert vm_alerts <= EXPECTED, vm_alerts
            # the webhook's alerts carry the evidence and the fix
            strag = next(a for a in hook.firing() if a["labels"]["alertname"] == "CmdareStraggler")
            assert "slower than the median" in strag["annotations"]["summary"] and strag["annotations"]["fix"]
        finally:
            for p in reversed(started):
                p.stop()
            hook.close()
