"""The first refreshes through a Prometheus-API engine, and an engine that answers late, on Debian's real
``prometheus``, ``victoria-metrics`` and ``prometheus-node-exporter`` scraping real exporters every second:

* a large fleet (forced small: ``focus_from=3``) whose first refresh rates only the tasks whose history it
  could read (two of five here, as 200 of 2,200 in a real fleet) says how much its job figures cover, in the
  JSON, the snapshot text and the Job pane's basis, and holds its ETA; the next refresh has the engine's
  own per-task rates for every task (every column read at once), equal to the engine's own sum;
* a task already under a preemption notice is revoked from its first sample;
* VictoriaMetrics with a latency offset (every sample visible only that long after its time: late
  deterministically) has its lag said on the status line, and the "scraped since" reads lose no scrape
  (the look-back follows the lag; a fixed 0.5 s margin read nothing new between full reads);
* node_exporter's CPU and NIC rate from the first refresh (its previous scrape read at once).
"""

from __future__ import annotations

import asyncio
import io
import json
import re
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from rich.console import Console

from cmdare.collectors import metrics as M
from cmdare.collectors.clock import SystemClock
from cmdare.collectors.exporter import TrainingExporter
from cmdare.collectors.prometheus import source as prometheus_source
from cmdare.collectors.prometheus.fleet import FleetReader
from cmdare.collectors.prometheus.source import PrometheusAPISource
from cmdare.collectors.samples import Coverage, TaskState
from cmdare.collectors.store import Store
from tests.engines import VICTORIA, Process
from tests.prom_server import free_port, prometheus_server  # noqa: F401 (fixture)
from tests.test_conformance_prometheus import NODE_EXPORTER

pytestmark = pytest.mark.slow

SEL = 'job="cmdare-test"'
TASKS = [f"worker-{i}" for i in range(6)]
PREEMPTED = "worker-2"


@pytest.fixture
def fleet() -> Iterator[dict[str, TrainingExporter]]:
    """Six spot workers stepping every 20 ms in a thread, 32 examples a step; one under a preemption
    notice from the start."""
    exps = {t: TrainingExporter("resnet", "worker", t, gpu="K80", region="us-east1", provisioning="spot",
                                sync="async-ps", target_steps=10**9) for t in TASKS}  # fmt: skip
    for e in exps.values():
        e.start(0)
    exps[PREEMPTED].set_preempted(True)
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(0.02):
            for e in exps.values():
                e.step(0.01, examples=32)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield exps
    stop.set()
    thread.join()
    for e in exps.values():
        e.stop()


def _ask(url: str, promql: str, at: float) -> list[dict]:
    query = urllib.parse.urlencode({"query": promql, "time": f"{at:.3f}"})
    with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=10) as r:
        return json.load(r)["data"]["result"]


async def test_a_fleet_figure_over_part_of_the_tasks_says_how_much_then_is_whole(
    prometheus_server,  # noqa: F811
    fleet,
    monkeypatch,
):
    from cmdare.tui.options import SessionOptions
    from cmdare.tui.panes.job import summary_grid
    from cmdare.tui.plain import print_overview
    from cmdare.tui.session import MonitorSession

    prom = prometheus_server([f"127.0.0.1:{e.port}" for e in fleet.values()], scrape_interval="1s")
    await asyncio.to_thread(prom.wait_for_targets, len(fleet))
    await asyncio.sleep(2.5)  # a few scrapes: the history a first refresh rates from
    # the first refresh reads the history of two new targets (as of 200 of 2,200 in a real fleet)
    monkeypatch.setattr(prometheus_source, "MAX_BACKFILL_TARGETS", 2)
    src = PrometheusAPISource(prom.url, SEL, detail_tasks=1, focus_from=3, timeout=10.0)
    src.fleet_reader = FleetReader(src.selector, columns_every_s=1e9)  # no turn: only the first read
    opts = SessionOptions(refresh=0.5, read_only=True)
    session = MonitorSession(opts, extra_sources=[src])
    session.start()
    try:
        state = await session.refresh()
        node = session.lifecycle.nodes[f"resnet/{PREEMPTED}"]
        assert node.state is TaskState.REVOKED and node.cause == "preempted"  # from its first sample
        assert not session.lifecycle.lifetimes  # its start was never seen: no zero-hour lifetime learnt
        job = state.job("resnet")
        assert job is not None and job.steps_coverage is not None and job.steps_coverage.partial
        assert job.steps_coverage.tasks == 5 and job.steps_coverage.rated <= 2  # the five up workers
        assert job.eta_seconds is None  # a fraction of the speed gives no ETA
        exported = state.to_json()["jobs"][0]
        assert exported["coverage"]["steps_per_sec"] == {"tasks": job.steps_coverage.rated, "of": 5}
        text = io.StringIO()
        print_overview(state, Console(file=text, width=200, no_color=True))
        assert f"steps/s: {job.steps_coverage.rated:,} of 5 tasks so far" in text.getvalue()
        pane = io.StringIO()  # the Job pane's summary
        Console(file=pane, width=200, no_color=True).print(summary_grid(job, state, None))
        said = f"{job.steps_coverage.rated:,} of 5 tasks so far"
        assert (
            f"measured ({said})" in pane.getvalue()
            and f"waits for every task's rate ({said})" in pane.getvalue()
        )

        while src._columns_task is not None and not src._columns_task.done():  # every column, at once
            await asyncio.sleep(0.1)
        state = await session.refresh()
        job = state.job("resnet")
        got = src.fleet
        assert got is not None and job is not None
        [role] = got.roles
        assert (role.tasks, role.rated, role.examples_rated) == (6, 6, 6)
        assert job.coverage_note() == "" and state.to_json()["jobs"][0]["coverage"] is None
        assert job.steps_coverage == Coverage(6, 6) and job.eta_seconds is not None
        truth = _ask(prom.url, f"sum(rate({M.K_EXAMPLES}{{{SEL}}}[1m]))", got.t)
        assert job.examples_per_sec == pytest.approx(float(truth[0]["value"][1]), rel=1e-6)  # kept as float32
        assert job.rate_basis.startswith("Prometheus: sum of 6 tasks' rates")
    finally:
        await session.aclose()


async def test_a_lagging_engine_is_said_and_no_scrape_is_lost(tmp_path):
    """VictoriaMetrics answering 6 s behind (``-search.latencyOffset=6s``, its default is 30 s) over
    four exporters scraped every second, read in the large-cluster path (``detail_tasks=1``: "scraped
    since" between full reads). Its own record of the scrapes (the range of each ``cmdare_task_info``)
    is the reference: every scrape up to the last one handed on is handed on once."""
    if not Path(VICTORIA).exists():
        pytest.skip("victoria-metrics is not installed")
    exps = [TrainingExporter("resnet", "worker", f"worker-{i}") for i in range(4)]
    for e in exps:
        e.start(0)
    targets = [f"127.0.0.1:{e.port}" for e in exps]
    (tmp_path / "scrape.yml").write_text(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: cmdare-test\n"
        f"    static_configs:\n      - targets: [{', '.join(repr(t) for t in targets)}]\n"
    )
    port = free_port()
    argv = [VICTORIA, f"-promscrape.config={tmp_path / 'scrape.yml'}", f"-storageDataPath={tmp_path / 'data'}",
            f"-httpListenAddr=127.0.0.1:{port}", "-search.latencyOffset=6s", "-loggerLevel=WARN"]  # fmt: skip
    vm = Process(argv, port, tmp_path, "/health", "victoria-metrics").start()
    handed: dict[str, list[float]] = {}
    src = PrometheusAPISource(vm.url, SEL, detail_tasks=1, timeout=10.0)
    try:
        for _ in range(300):  # until the first samples are visible, 6 s after they were taken
            if len(_ask(vm.url, "cmdare_task_info", time.time())) == len(exps):
                break
            await asyncio.sleep(0.2)
        async with httpx.AsyncClient() as client:
            for _ in range(14):
                for e in exps:
                    e.step(0.01, examples=32)
                polls = await src.poll(client, SystemClock())
                for p in polls:
                    if p.ok and p.info is not None and not p.host_only:
                        handed.setdefault(p.info.task, []).append(p.t)
                await asyncio.sleep(0.5)
        lag, interval = src.engine_lag_s, src.scrape_interval_s
        note = src.status_note or ""
        truth = {
            r["metric"]["task"]: [float(t) for t, _ in r["values"]]
            for r in json.loads(_get(vm.url, "cmdare_task_info[120s]"))["data"]["result"]
        }
    finally:
        await src.aclose()
        vm.stop()
        for e in exps:
            e.stop()
    # no sample is visible younger than the offset (its clock read in whole seconds: up to 1 s less, and a few ms
    # more where a scrape's stamp and the evaluation instant fall either side of a second's turn: 4.99 seen)
    assert lag is not None and lag >= 4.9
    assert interval == pytest.approx(1.0, abs=0.5)  # its scrapes, read one after another
    assert f"engine lag {lag:.0f} s: every figure is that far behind" in note, note
    assert re.search(r"it evaluates queries [56] s back", note), note
    for task, times in handed.items():
        assert times == sorted(set(times)), task  # never the same scrape twice
        first = times[0]
        expected = [t for t in truth[task] if first <= t <= times[-1]]
        assert len(expected) >= 8, (task, expected)
        assert times == pytest.approx(expected, abs=1e-3), task  # none lost


def _get(url: str, promql: str) -> str:
    with urllib.request.urlopen(f"{url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}") as r:
        return r.read().decode()


async def test_host_cpu_and_nic_rate_from_the_first_refresh(prometheus_server):  # noqa: F811
    """A real node_exporter on the task's host, read by host through the selector: the first refresh
    already has two of its scrapes (the last and the one before), so CPU busy and NIC rates exist at once,
    equal to the increase between those two scrapes as the engine holds them."""
    if not Path(NODE_EXPORTER).exists():
        pytest.skip("prometheus-node-exporter is not installed")
    exp = TrainingExporter("resnet", "worker", "worker-0")
    exp.start(0)
    node = f"127.0.0.1:{free_port()}"
    node_proc = subprocess.Popen(
        [NODE_EXPORTER, f"--web.listen-address={node}", "--collector.disable-defaults", "--collector.cpu",
         "--collector.meminfo", "--collector.netdev"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        prom = prometheus_server([f"127.0.0.1:{exp.port}", node], scrape_interval="1s")
        await asyncio.to_thread(prom.wait_for_targets, 2)
        await asyncio.sleep(2.5)  # a few scrapes
        # the exporter's own label; a timeout for a machine this busy (the suite once saw the first poll fail
        # beside two CPU hogs at 10 s), not what the test is about
        src = PrometheusAPISource(prom.url, 'role="worker"', timeout=30.0)
        store = Store()
        async with httpx.AsyncClient(timeout=30.0) as client:
            polls = await src.poll(client, SystemClock())
            for p in polls:
                store.add(p)
        await src.aclose()
        assert "engine lag" not in (src.status_note or "")  # Prometheus answers up to date
        assert [p.error for p in polls if not p.ok] == []  # the first refresh answered
        [task] = store.tasks.values()
        host = store.host_of(task)
        assert host is not None
        t0, t1 = (float(t) for t in host.times.last(2))
        assert t1 > t0  # two scrapes
        busy = host.rate(M.K_CPU_BUSY, 10.0)
        assert busy is not None and host.rate(M.K_CPU_ALL, 10.0) and host.rate(M.K_NET_RX, 10.0) is not None
        own = f'sum(node_cpu_seconds_total{{mode!="idle",instance="{node}"}})'  # the engine's own values
        b0, b1 = (float(_ask(prom.url, own, t)[0]["value"][1]) for t in (t0, t1))
        assert busy == pytest.approx((b1 - b0) / (t1 - t0), rel=1e-9)
    finally:
        node_proc.kill()
        node_proc.wait(timeout=10)
        exp.stop()
