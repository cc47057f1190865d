"""Conformance: Prometheus conventions and host detail, with real parts.

One Debian ``prometheus`` server (shared by the module) scrapes three copies of one training job
under three scrape configs — plain (the exporter's ``job`` becomes ``exported_job``),
``honor_labels: true`` (the exporter's ``job`` wins), and a relabelled ``job`` — plus Debian's real
``prometheus-node-exporter`` and two DCGM exporter pages (MOCK, see tests/dcgm_page.py: no GPU
here): a non-MIG host with two V100s and a MIG host (A100, two instances, no GPU_UTIL).

Each job: chief 0 and worker 0 on host 127.0.0.1 owning GPU 0 (by index) and GPU 1 (by UUID), a
CPU-only ps 0 there too (TF's per-role indices: worker 0 and ps 0 are different tasks), worker 1 on
host 127.0.0.2 with no ``gpu`` label (the MIG host's GPU is its own). Every selector convention must
give the same four tasks with their host detail; figures are checked against Prometheus' own
answers and the pages' values."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from cmdare.collectors import metrics as M
from cmdare.collectors.clock import SystemClock
from cmdare.collectors.exporter import TrainingExporter
from cmdare.collectors.lifecycle import Lifecycle
from cmdare.collectors.observed import JobView, build_jobs
from cmdare.collectors.poller import Poller
from cmdare.collectors.prometheus.source import PrometheusAPISource
from cmdare.collectors.samples import TaskInfo
from cmdare.collectors.scrape.source import ScrapeSource, ScrapeTarget
from cmdare.collectors.store import Store
from tests.dcgm_page import DcgmServer, Gpu, page
from tests.prom_server import PROMETHEUS, PromServer, free_port

pytestmark = pytest.mark.slow

HOST_A, HOST_B = "127.0.0.1", "127.0.0.2"
NODE_EXPORTER = shutil.which("prometheus-node-exporter") or "/usr/bin/prometheus-node-exporter"
V100 = "Tesla V100-SXM2-16GB"
A100 = "NVIDIA A100-SXM4-40GB"
GPUS_A = [Gpu(0, "GPU-6c1f2a00", V100, 80.0, 12000, 4160), Gpu(1, "GPU-6c1f2a11", V100, 40.0, 6000, 10160)]
GPUS_B = [
    Gpu(
        0,
        "GPU-9e0d7b00",
        A100,
        0,
        0,
        0,
        mig=(("3g.20gb", 1, 0.5, 3000, 7240), ("3g.20gb", 2, 0.3, 1000, 9240)),
    )
]
ROLES = {"chief-0": "chief", "worker-0": "worker", "worker-1": "worker", "ps-0": "ps"}
SETS = {"plain": "us-central1", "honor": "europe-west4", "relabel": "asia-east1"}  # exporter job → region


class Job:
    """One copy of the training job (4 exporters) stepped by a thread: ~20 steps/s a worker."""

    def __init__(self, name: str, region: str) -> None:
        def exp(role: str, task: str, host: str, **kw: str) -> tuple[TrainingExporter, str]:
            e = TrainingExporter(name, role, task, region=region, provisioning="standard", **kw)
            return e, f"{host}:{e.start(0, addr=host)}"

        self.name = name
        self.tasks = {
            "chief-0": exp("chief", "0", HOST_A, gpu_ids="0"),
            "worker-0": exp("worker", "0", HOST_A, gpu_ids="GPU-6c1f2a11"),
            "worker-1": exp("worker", "1", HOST_B),
            "ps-0": exp("ps", "0", HOST_A),
        }
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @property
    def addrs(self) -> list[str]:
        return [a for _, a in self.tasks.values()]

    def _run(self) -> None:
        g = 0
        workers = [self.tasks[t][0] for t in ("chief-0", "worker-0", "worker-1")]
        ps = self.tasks["ps-0"][0]
        while not self._stop.wait(0.05):
            for w in workers:
                g += 1
                w.step(0.01, examples=32)
                w.set_global_step(g)
                ps.add_ps_bytes("in", 400_000)
            ps.set_global_step(g)

    def stop(self) -> None:
        self._stop.set()
        for e, _ in self.tasks.values():
            e.stop()


def _configs(jobs: dict[str, Job], node: str, dcgm: list[str]) -> str:
    def static(addrs: list[str]) -> str:
        return "    static_configs:\n      - targets: [" + ", ".join(f"'{a}'" for a in addrs) + "]\n"

    return (
        "  - job_name: 'plain'\n"
        + static(jobs["plain"].addrs)
        + "  - job_name: 'honor'\n    honor_labels: true\n"
        + static(jobs["honor"].addrs)
        + "  - job_name: 'raw'\n    relabel_configs:\n      - target_label: job\n        replacement: trainers\n"
        + static(jobs["relabel"].addrs)
        + "  - job_name: 'node'\n"
        + static([node])
        + "  - job_name: 'dcgm'\n"
        + static(dcgm)
    )


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    if not Path(NODE_EXPORTER).exists():
        pytest.skip("prometheus-node-exporter is not installed (apt-get install prometheus-node-exporter)")
    if not Path(PROMETHEUS).exists():
        pytest.skip("prometheus is not installed")
    jobs = {s: Job(f"resnet-{s}", region) for s, region in SETS.items()}
    node = f"{HOST_A}:{free_port()}"
    node_proc = subprocess.Popen(
        [
            NODE_EXPORTER,
            f"--web.listen-address={node}",
            "--collector.disable-defaults",
            "--collector.cpu",
            "--collector.meminfo",
            "--collector.netdev",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    dcgm = [DcgmServer(page(GPUS_A, "host-a"), HOST_A), DcgmServer(page(GPUS_B, "host-b"), HOST_B)]
    prom = PromServer(
        [], tmp_path_factory.mktemp("prom"), scrape_configs=_configs(jobs, node, [d.addr for d in dcgm])
    )
    prom.start()
    try:
        prom.wait_for_targets(3 * 4 + 3, timeout=40.0)
        time.sleep(2.5)  # a few scrapes: rates need two
        yield {"prom": prom, "jobs": jobs, "node": node, "dcgm": dcgm, "since": time.time()}
    finally:
        prom.stop()
        node_proc.kill()
        node_proc.wait(timeout=10)
        for d in dcgm:
            d.close()
        for j in jobs.values():
            j.stop()


async def _watch(sources: list, polls: int = 3) -> tuple[list[JobView], Store]:
    store, clock = Store(), SystemClock()
    poller = Poller(sources, store, lifecycle=Lifecycle(), clock=clock, interval=1.0)
    for i in range(polls):
        if i:
            await asyncio.sleep(1.1)
        await poller.poll_once()
    await asyncio.sleep(0.3)  # the background node query of the last refresh, then one more
    await poller.poll_once()
    jobs = build_jobs(store, poller.lifecycle, clock.now())
    await poller.aclose()
    return jobs, store


def _one_value(prom: PromServer, promql: str, at: float) -> float:
    data = urllib.parse.urlencode({"query": promql, "time": f"{at:.3f}"}).encode()
    with urllib.request.urlopen(f"{prom.url}/api/v1/query", data=data, timeout=5) as r:
        (row,) = json.load(r)["data"]["result"]
    return float(row["value"][1])


def _check(jobs: list[JobView], store: Store, prom: PromServer, name: str, mem_rel: float = 1e-9) -> None:
    assert [j.name for j in jobs] == [name], "no phantom job, no job per host"
    (job,) = jobs
    nodes = {n.name: n for n in job.nodes}
    assert {k: n.role for k, n in nodes.items()} == ROLES
    assert all(n.status == "up" and not n.flags for n in job.nodes)
    assert all(nodes[w].steps_per_sec for w in ("chief-0", "worker-0", "worker-1"))
    assert (job.sync, job.sync_how) == ("async-ps", "inferred")  # one global step, 3 workers adding to it
    # Prometheus' own answer at the host sample's time: the same sample through Prometheus, the
    # next one of the same page when scraped directly (memory moves a little within a second)
    at = store.hosts[HOST_A].last_seen
    total = _one_value(prom, "node_memory_MemTotal_bytes", at)
    used = _one_value(prom, "node_memory_MemTotal_bytes - node_memory_MemAvailable_bytes", at)
    for t in ("chief-0", "worker-0", "ps-0"):  # host A: node_exporter detail
        n = nodes[t]
        assert n.mem_total_bytes == total and n.mem_used_bytes == pytest.approx(used, rel=mem_rel)
        assert n.cpu_pct is not None and 0 <= n.cpu_pct <= 100
    assert nodes["worker-1"].cpu_pct is None  # host B has no node_exporter
    chief, w0, w1, ps = (nodes[t] for t in ("chief-0", "worker-0", "worker-1", "ps-0"))
    assert (chief.owns_gpu, chief.gpu_model, chief.gpu_util) == (True, V100, 80.0)  # GPU 0 by index
    assert (chief.gpu_mem_used_mib, chief.gpu_mem_total_mib) == (12000, 16160)
    assert (w0.gpu_util, w0.gpu_mem_used_mib) == (40.0, 6000)  # GPU 1 by UUID
    assert (w1.owns_gpu, w1.gpu_model) == (True, A100)  # MIG: GR_ENGINE_ACTIVE x 100, averaged
    assert w1.gpu_util == pytest.approx(40.0) and (w1.gpu_mem_used_mib, w1.gpu_mem_total_mib) == (4000, 20480)
    assert (ps.owns_gpu, ps.gpu_util, ps.gpu_mem_used_mib) == (False, None, None)  # CPU-only PS: no DCGM
    own = store.tasks[f"{name}/ps-0"].rate(M.K_PS_IN, 10.0)
    assert own and own > 1e6 and ps.net_in_bps == own  # the PS's own counter wins over its host NIC


@pytest.mark.parametrize(
    ("selector", "name"),
    [
        ('job="plain"', "resnet-plain"),
        ('exported_job="resnet-plain"', "resnet-plain"),  # the name cmdare-tui displays
        ('job="resnet-honor"', "resnet-honor"),  # honor_labels: true
        ('region="europe-west4"', "resnet-honor"),  # any exporter label, with honor_labels
        ('{job="trainers"}', "resnet-relabel"),  # a relabelled job
        ('exported_job="resnet-relabel"', "resnet-relabel"),
    ],
)
async def test_selectors_find_the_tasks_and_their_host_detail(world, selector, name):
    prom = world["prom"]
    jobs, store = await _watch([PrometheusAPISource(prom.url, selector)])
    _check(jobs, store, prom, name)


async def test_direct_scrape_joins_node_exporter_and_dcgm_targets_to_tasks_on_their_host(world):
    """node_exporter and DCGM pages given with --target (as tui/sources.py builds them) join the
    tasks on their hosts instead of becoming tasks of a job called ``job``."""
    urls = [
        f"http://{a}/metrics"
        for a in [*world["jobs"]["plain"].addrs, world["node"], *(d.addr for d in world["dcgm"])]
    ]
    targets = [ScrapeTarget(u, TaskInfo(job="job", task=u.split("/")[2], role="node")) for u in urls]
    jobs, store = await _watch([ScrapeSource(targets)])
    _check(jobs, store, world["prom"], "resnet-plain", mem_rel=0.05)
    assert set(store.hosts) == {HOST_A, HOST_B}


async def test_snapshot_json_carries_host_detail(world):
    prom = world["prom"]
    jobs, _ = await _watch([PrometheusAPISource(prom.url, 'job="plain"')], polls=2)
    node = next(n for n in jobs[0].to_json(time.time())["nodes"] if n["name"] == "chief-0")
    for key in (
        "cpu_pct",
        "mem_used_bytes",
        "mem_total_bytes",
        "gpu_mem_used_mib",
        "gpu_mem_total_mib",
        "gpu_model",
        "owns_gpu",
        "flags",
    ):
        assert key in node
    assert node["gpu_model"] == V100 and node["flags"] == []
    async with httpx.AsyncClient() as c:  # the mock page is what the store read
        assert (
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in (await c.get(f"http://{world['dcgm'][1].addr}/metrics")).text
        )


async def test_one_refresh_rates_over_the_newest_complete_scrape_intervals(world):
    """A task met for the first time brings its recent samples (Prometheus' own timestamps), so
    even ``snapshot --samples 1`` rates over every complete scrape interval of the 10 s window."""
    prom, addr = world["prom"], world["jobs"]["plain"].tasks["worker-1"][1]
    await asyncio.sleep(max(0.0, world["since"] + 8.0 - time.time()))  # Prometheus holds 10 s of samples
    store, clock = Store(), SystemClock()
    poller = Poller(
        [PrometheusAPISource(prom.url, 'job="plain"')],
        store,
        lifecycle=Lifecycle(),
        clock=clock,
        interval=2.0,
    )
    await poller.poll_once()
    ts = store.tasks["resnet-plain/worker-1"]
    t, _ = ts.window(M.K_WORKER_STEPS, 10.0)
    assert len(t) >= 6  # >= 5 intervals at a 1 s scrape interval, from one refresh
    data = urllib.parse.urlencode(
        {"query": f'cmdare_worker_steps_total{{instance="{addr}"}}[15s]', "time": f"{t[-1]:.3f}"}
    ).encode()
    with urllib.request.urlopen(f"{prom.url}/api/v1/query", data=data, timeout=5) as r:
        (row,) = json.load(r)["data"]["result"]
    own = {float(a): float(b) for a, b in row["values"]}  # Prometheus' own samples
    expect = (own[float(t[-1])] - own[float(t[0])]) / float(t[-1] - t[0])
    assert ts.rate(M.K_WORKER_STEPS, 10.0) == pytest.approx(expect, rel=0.01)
    (job,) = build_jobs(store, poller.lifecycle, clock.now())
    assert job.steps_per_sec and job.steps_per_sec > 0
    await poller.aclose()
