"""The generated rules on the real engines, against the app on the same data: the simulated clusters of
the alert scenarios (PS-saturated, healthy, straggler, sync all-reduce-bound, revoked) served as exporter
pages; Debian's Prometheus loads the file and sends its alerts to Debian's Alertmanager, which posts them to
a local webhook; vmalert evaluates its variant of the file against VictoriaMetrics scraping the same pages; the
app scrapes them with its own scrape source and raises its verdicts. Each scenario: Prometheus', Alertmanager's
and vmalert's alerts are the app's (same kind, same subject), none of them ever raises one the app does not
hold, and each engine holds an alert pending for the app's hysteresis (its ``for:``, as the engine reports it).
How far each engine's first firing lies from the app's is printed (a measurement, not asserted)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from cmdare.collectors.clock import SystemClock
from cmdare.collectors.http_client import new_client
from cmdare.collectors.prometheus.source import PrometheusAPISource
from cmdare.collectors.scrape.source import ScrapeSource, ScrapeTarget
from cmdare.planner.rules.engine_alerts import merge_engine_alerts
from cmdare.planner.rules.engine_rules import ALERT_KINDS, RuleOptions, for_seconds, render
from cmdare.tui.options import SessionOptions
from cmdare.tui.session import MonitorSession
from tests.alert_sim import Harness, SimCluster, load_curves
from tests.engines import (
    VMALERT,
    RulesPromServer,
    Webhook,
    alertmanager,
    get_json,
    victoria_metrics,
    vmalert,
    vmalert_firing,
)
from tests.prom_server import PROMETHEUS
from tests.sim_exporter import SimExporters, SimSync

pytestmark = pytest.mark.slow

INTERVAL = 1.0  # scrape, evaluation and the app's refresh (s)
PER_TASK = {"node-revoked", "node-silent", "straggler"}  # the other verdicts' subject is the job
WARM = {("ps-saturation", "psat", ""), ("allreduce-bound", "sync", "")}  # before the onset
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


def sent_by(alert: dict, port: int) -> bool:
    """Whether Alertmanager's ``alert`` came from the engine on ``port`` (its generator URL names it)."""
    return urlsplit(alert.get("generatorURL", "")).port == port


def engine_for(url: str) -> dict[str, float]:
    """Each alerting rule's ``for:`` in seconds, as the engine reports it (Prometheus and vmalert alike)."""
    groups = get_json(f"{url}/api/v1/rules")["data"]["groups"]
    return {
        r["name"]: float(r["duration"]) for g in groups for r in g["rules"] if r.get("type") == "alerting"
    }


def onset(clusters: list) -> None:
    """The faults that begin once every party is warm: worker-3 of strag slows down, worker-2 of rev is
    told it is being preempted."""
    by_job = {c.job: c for c in clusters}
    by_job["strag"].workers[3].slow = 1.5
    by_job["rev"].workers[2].preempted = True


def scenarios() -> list:
    curves = load_curves()

    def gpus(model: str) -> dict:
        return {g: curves[(g, model)] for g in ("K80", "P100")}

    psat = SimCluster("ResNet-32", gpus("ResNet-32"), ["P100"] * 8, seed=2, job="psat")
    healthy = SimCluster("ResNet-32", gpus("ResNet-32"), ["K80"] * 8, seed=1, job="healthy")
    strag = SimCluster("ResNet-32", gpus("ResNet-32"), ["K80"] * 6, seed=3, job="strag")
    rev = SimCluster("ResNet-32", gpus("ResNet-32"), ["K80"] * 4, seed=8, job="rev")
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
    clusters = scenarios()
    with SimExporters(*clusters) as farm:
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
            first: dict[str, dict[tuple[str, str, str], float]] = {}
            last: list = []

            async def watch(want: set, seconds: float) -> None:
                """Refresh the app and read every engine each interval until all hold ``want``; none may
                ever hold a verdict outside it."""
                nonlocal last
                deadline = time.monotonic() + seconds
                while time.monotonic() < deadline:
                    t0 = time.monotonic()
                    last = await app.refresh()
                    seen["app"] = app_set(last)
                    seen["prometheus"] = engine_set(await asyncio.to_thread(prom.firing))
                    seen["vmalert"] = engine_set(await asyncio.to_thread(vmalert_firing, vma))
                    hooked = hook.firing()  # both engines notify the one Alertmanager: told apart by sender
                    seen["alertmanager←prometheus"] = engine_set([a for a in hooked if sent_by(a, prom.port)])
                    seen["alertmanager←vmalert"] = engine_set([a for a in hooked if sent_by(a, vma.port)])
                    for name, got in seen.items():
                        assert got <= want, (name, got - want)
                        for subject in got:
                            first.setdefault(name, {}).setdefault(subject, t0)
                    if all(s == want for s in seen.values()):
                        return
                    await asyncio.sleep(max(0.0, INTERVAL - (time.monotonic() - t0)))

            await watch(WARM, 60)  # the warm-up: the faults present from the start
            assert all(got == WARM for got in seen.values()), seen
            t_onset = time.monotonic()
            onset(clusters)
            await watch(EXPECTED, 40)
            lags = {  # intervals from the onset to the first poll that saw each new verdict
                name: {k[0]: round((t - t_onset) / INTERVAL, 1) for k, t in got.items() if k not in WARM}
                for name, got in first.items()
            }
            print(f"\nfirst seen after the onset, in intervals of {INTERVAL:g} s: {lags}")
            for name, got in seen.items():
                assert got == EXPECTED, (name, got, seen, lags)
            # each engine holds an alert pending for the app's hysteresis: for: = (raise_after - 1) intervals
            th = RuleOptions().thresholds
            want = {name: for_seconds(th, kind, INTERVAL) for name, kind in ALERT_KINDS.items()}
            want["CmdareNodeSilent"] += 2 * INTERVAL  # the lifecycle's 3 failed scrapes
            assert engine_for(prom.url) == want
            assert engine_for(vma.url) == want
            # --prometheus pointed at VictoriaMetrics reads vmalert's ALERTS series (written back by remote write)
            vm_src, vm_rows = PrometheusAPISource(vm.url, ""), []
            for _ in range(30):
                vm_rows = await vm_src.engine_alerts(client)
                if engine_set([{"labels": r} for r in vm_rows]) == EXPECTED:
                    break
                await asyncio.sleep(INTERVAL)
            assert engine_set([{"labels": r} for r in vm_rows]) == EXPECTED, vm_rows
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
            # the webhook's alerts carry the evidence and the fix
            strag = next(
                a
                for a in hook.firing()
                if a["labels"]["alertname"] == "CmdareStraggler" and sent_by(a, prom.port)
            )
            assert "slower than the median" in strag["annotations"]["summary"] and strag["annotations"]["fix"]
        finally:
            for p in reversed(started):
                p.stop()
            hook.close()
