"""The Prometheus HTTP API source against Debian's real ``prometheus`` scraping real exporters, and
against a fake API for the faults a healthy server does not produce."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from cmdare.collectors import metrics as M
from cmdare.collectors.clock import SystemClock
from cmdare.collectors.exporter import TrainingExporter
from cmdare.collectors.lifecycle import Lifecycle
from cmdare.collectors.prometheus.auth import read_token
from cmdare.collectors.prometheus.source import PrometheusAPISource, values_query
from cmdare.collectors.samples import TaskState
from cmdare.collectors.store import Store
from tests.prom_server import FakePromAPI, free_port, prometheus_server, refused_port  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow

ROLES = {"ps-0": "ps", "worker-0": "chief", "worker-1": "worker"}


@pytest.fixture
def exporters() -> Iterator[dict[str, TrainingExporter]]:
    out = {}
    for task, role in ROLES.items():
        exp = TrainingExporter(
            "resnet",
            role,
            task,
            gpu="K80" if role != "ps" else "",
            region="us-east1",
            provisioning="preemptible",
            model="ResNet-32",
            params=0.46e6,
            batch_size=128,
        )
        exp.start(0)
        out[task] = exp
    yield out
    for exp in out.values():
        exp.stop()


async def _poll(src: PrometheusAPISource):
    async with httpx.AsyncClient() as client:
        return await src.poll(client, SystemClock())


async def test_real_prometheus_every_task_roles_rates_and_a_vanished_task(prometheus_server, exporters):  # noqa: F811
    prom = prometheus_server([f"127.0.0.1:{e.port}" for e in exporters.values()], scrape_interval="1s")
    await asyncio.to_thread(prom.wait_for_targets, 3)
    exporters["ps-0"].add_ps_bytes("in", 1000)
    src = PrometheusAPISource(prom.url, 'job="cmdare-test"')
    store, lc = Store(), Lifecycle(silent_after=3)
    truth: list[tuple[float, float]] = []
    for i in range(4):
        for task in ("worker-0", "worker-1"):
            exporters[task].step(0.01, examples=128, steps=10 * (i + 1))
        await asyncio.sleep(1.1)
        polls = await _poll(src)
        for p in polls:
            store.add(p)
        lc.observe(polls)
        truth.append((polls[0].t, 0.0))
    by_task = {p.info.task: p for p in polls}
    assert {t: p.info.role for t, p in by_task.items()} == ROLES
    assert all(p.ok and p.info.job == "resnet" and p.info.region == "us-east1" for p in polls)
    assert by_task["ps-0"].values[M.K_PS_IN] == 1000
    assert by_task["worker-0"].job_facts.model.name == "ResNet-32"
    # The rate over the whole run equals the counter's increase over the scrape timestamps.
    ts = store.tasks["resnet/worker-1"]
    t, v = ts.window(M.K_WORKER_STEPS, 1e9)
    assert v[-1] > v[0]
    assert ts.rate(M.K_WORKER_STEPS, 1e9) == pytest.approx((v[-1] - v[0]) / (t[-1] - t[0]))
    exporters["worker-1"].stop()  # the task dies: Prometheus' next scrape fails
    states = []
    for _ in range(3):
        await asyncio.sleep(1.1)
        polls = await _poll(src)
        lc.observe(polls)
        states.append(lc.nodes["resnet/worker-1"].state)
    assert states[-1] is TaskState.SILENT
    gone = next(p for p in polls if p.info and p.info.task == "worker-1")
    assert not gone.ok and "Prometheus" in gone.error


def _doc(status: str = "success", **kw) -> bytes:
    return json.dumps({"status": status, **kw}).encode()


@pytest.mark.parametrize(
    ("body", "ctype", "status", "expect"),
    [
        (
            _doc("error", errorType="bad_data", error="parse error at char 5"),
            "application/json",
            400,
            "bad_data",
        ),
        (b"<!DOCTYPE html><html><body>Sign in</body></html>", "text/html", 200, "HTML page"),
        (b"not json at all", "application/json", 502, "not JSON"),
        (_doc(data={"resultType": "matrix", "result": []}), "application/json", 200, "result type"),
    ],
)
async def test_api_faults_become_one_line_statuses(body, ctype, status, expect, caplog):
    with FakePromAPI(body, status=status, ctype=ctype) as fake, caplog.at_level(logging.WARNING):
        (p,) = await _poll(PrometheusAPISource(fake.url))
    assert not p.ok and expect in p.error and "\n" not in p.error
    assert any(expect in r.getMessage() for r in caplog.records)


async def test_api_timeout_and_refused():
    with FakePromAPI(_doc(data={"resultType": "vector", "result": []}), delay=2.0) as fake:
        (p,) = await _poll(PrometheusAPISource(fake.url, timeout=0.3))
    assert not p.ok and "timed out" in p.error
    with refused_port() as port:
        (p,) = await _poll(PrometheusAPISource(f"http://127.0.0.1:{port}"))
    assert not p.ok and "connect" in p.error


async def test_token_is_sent_but_never_shown(tmp_path, caplog, monkeypatch):
    secret = "s3cr3t-token-value"
    f = tmp_path / "token"
    f.write_text(secret + "\n")
    assert read_token(f) == secret
    monkeypatch.setenv("PROMETHEUS_TOKEN", "from-env")
    assert read_token(None) == "from-env"
    body = _doc("error", errorType="unauthorized", error="bad token")
    with FakePromAPI(body, status=401) as fake, caplog.at_level(logging.DEBUG):
        src = PrometheusAPISource(fake.url.replace("http://", "http://user:pw@"), token=read_token(f))
        (p,) = await _poll(src)
    assert all(h.get("Authorization") == f"Bearer {secret}" for h in fake.headers)
    shown = " ".join([repr(src), p.source, p.error or "", *(r.getMessage() for r in caplog.records)])
    assert secret not in shown and "pw@" not in shown


def test_values_query_is_one_expression_with_the_selector_everywhere():
    q = values_query('{job="resnet"}')
    assert q.count('job="resnet"') >= 14 and "cmdare_stage_bytes_sent_total{peer=$1}" in q
    assert 'timestamp(cmdare_task_info{job="resnet"})' in q  # same labels as the values, any selector


def test_node_detail_is_read_less_often_for_large_clusters():
    """Up to NODE_DETAIL_TASKS tasks every refresh; beyond, every k-th (the server's costly part)."""
    from cmdare.collectors.prometheus.hosts import host_query
    from cmdare.collectors.prometheus.source import NODE_DETAIL_TASKS

    src = PrometheusAPISource("http://127.0.0.1:9", '{job="x"}')
    src._known = {f"h{i}:9400": None for i in range(NODE_DETAIL_TASKS)}
    assert all(src._node_detail_due() for src._polls in range(5))
    src._known = {f"h{i}:9400": None for i in range(5 * NODE_DETAIL_TASKS)}
    due = [src._node_detail_due() for src._polls in range(10)]
    assert due == [True, False, False, False, False] * 2
    per_refresh = " ".join([src._always_query, *src._group_queries])
    assert "node_cpu_seconds_total" not in per_refresh and "node_cpu_seconds_total" in host_query(["h1"])


def _wait_scraped(prom: object, n: int) -> None:
    """Wait until ``n`` targets were each scraped up at least three times (a rate needs two samples;
    under load a single scrape is not enough)."""
    prom.wait_for("sum_over_time(up[30s]) >= 3", lambda r: len(r) >= n, 20.0)  # type: ignore[attr-defined]


async def test_large_cluster_path_reuses_identities_and_names_a_new_task_at_once(
    prometheus_server,  # noqa: F811
    exporters,
):
    """The path taken above ``detail_tasks`` tasks (1,000 nodes in the benchmark), forced here with
    ``detail_tasks=1`` on a real Prometheus: identities are re-read every k-th refresh only, and a
    task that appears in between is named in the very refresh its values arrive."""
    late = TrainingExporter("resnet", "worker", "worker-2", gpu="K80", region="us-east1")
    late_port = free_port()
    ports = [e.port for e in exporters.values()]
    prom = prometheus_server([f"127.0.0.1:{p}" for p in [*ports, late_port]], scrape_interval="1s")
    await asyncio.to_thread(prom.wait_for_targets, 3)
    # three scrapes of each, so the first refresh has a rate for every task (under load one scrape is not enough)
    await asyncio.to_thread(_wait_scraped, prom, 3)
    src = PrometheusAPISource(prom.url, 'job="cmdare-test"', detail_tasks=1)
    asked: list[list[str]] = []
    fetch = src._fetch

    async def spy(client: httpx.AsyncClient, promql: str, *args: Any, **kw: Any) -> Any:
        asked[-1].append(promql)
        return await fetch(client, promql, *args, **kw)

    src._fetch = spy  # type: ignore[method-assign]  (records every query sent; the server answers)
    seen: list[set[str]] = []
    async with httpx.AsyncClient() as client:
        for i in range(8):
            if i == 4:
                late.start(late_port)  # a replacement worker joins between two identity reads
                await asyncio.to_thread(_wait_scraped, prom, len(ports) + 1)  # Prometheus has its rate
            asked.append([])
            polls = await src.poll(client, SystemClock())
            seen.append({p.info.task for p in polls if p.ok})
            await asyncio.sleep(1.1)
    late.stop()
    await src.aclose()
    assert seen[0] == seen[3] == set(ROLES)
    assert seen[4] == seen[7] == {*ROLES, "worker-2"}
    reads = [any(q.startswith("cmdare_task_info{") for q in qs) for qs in asked]
    assert reads[0] and reads[4] and sum(reads) <= 5  # every 3rd-4th refresh, plus the newcomer's


async def test_large_cluster_node_detail_joins_from_between_refreshes(prometheus_server):  # noqa: F811
    """Node detail (node_exporter/DCGM: the server's costly query at scale) runs between refreshes,
    inside one only for hosts met for the first time (two instants, so that their counters rate at
    once), and its rates reach every task through its host (sampled less often, still known)."""
    from benchmarks.exporter_farm import Farm  # ~300 node_exporter/DCGM/job series per target, one process

    with Farm(3) as farm:
        targets = [u.removeprefix("http://").removesuffix("/metrics") for u in farm.urls]
        prom = prometheus_server(targets, scrape_interval="1s")
        await asyncio.to_thread(prom.wait_for_targets, 3)
        src = PrometheusAPISource(prom.url, 'job="cmdare-test"', detail_tasks=1)
        store = Store()
        in_poll, node_queries = [False], []
        query = src.query

        async def spy(client: httpx.AsyncClient, promql: str, *args: object, **kw: object) -> list[dict]:
            if "node_cpu_seconds_total" in promql:
                node_queries.append(in_poll[0])  # True: started inside a refresh
            return await query(client, promql, *args, **kw)

        src.query = spy  # type: ignore[method-assign]  (records when queries ran; the server answers)
        async with httpx.AsyncClient() as client:
            for _ in range(10):
                in_poll[0] = True
                polls = await src.poll(client, SystemClock())
                in_poll[0] = False
                for p in polls:
                    store.add(p)
                await asyncio.sleep(1.1)
        await src.aclose()
    assert node_queries[:2] == [True, True]  # the first refresh: the new hosts at two instants
    assert len(node_queries) >= 4 and not any(node_queries[2:])  # then between refreshes only
    rates = [store.host_of(ts).rate(M.K_NET_RX, 10.0) for ts in store.tasks.values()]  # joined by host
    assert len(rates) == 3 and all(r is not None and r >= 0 for r in rates)
    assert all(ts.latest(M.K_PROCESS_CPU) is not None for ts in store.tasks.values())
