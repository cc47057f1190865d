"""A large fleet's node detail is read a slice a refresh, never every host at once: the slices of a pass
cover every host once in the period one whole read had (every k-th refresh), each query's URL fits a
GET (read-only mode sends no POST). Against the benchmarks' synthetic Prometheus API (a real Prometheus
cannot hold 200 distinct hosts on this machine): each of its tasks is on a host of its own; its node
detail answers are empty, so what is checked is what the source asks, and that every read succeeds."""

from __future__ import annotations

import math
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from cmdare.collectors import writes
from cmdare.collectors.clock import SystemClock
from cmdare.collectors.prometheus.hosts import fits_one_query, host_queries, host_query
from cmdare.collectors.prometheus.query_url import query_url
from cmdare.collectors.prometheus.source import MAX_GET_URL, PrometheusAPISource

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from fake_prometheus import FakePrometheus  # noqa: E402

TASKS = 200
DETAIL_TASKS = 20  # every 10th refresh: a pass of 10 slices of 20 hosts
_HOSTS = re.compile(r'instance=~"\(([^"]*)\)\(:\[0-9\]\+\)\?"')


def _hosts_of(promql: str) -> list[str]:
    """The hosts a node detail query names (its first selector's; every selector names the same), a
    subnet's group (``10.0.3.(7|12)``) expanded."""
    m = _HOSTS.search(promql)
    assert m is not None, promql[:200]
    out = []
    for alt in re.findall(r"[^|(]+\([^)]*\)|[^|]+", m.group(1)):
        prefix, _, tails = alt.partition("(")
        out += [prefix + t for t in tails.rstrip(")").split("|")] if tails else [prefix]
    return [h.replace("\\\\", "") for h in out]


def test_host_queries_split_a_slice_into_gets_and_keep_every_host_once() -> None:
    hosts = [f"10.0.{i // 250}.{i % 250}" for i in range(300)]
    queries = host_queries(hosts)
    assert len(queries) > 1 and not fits_one_query(hosts)
    assert sorted(h for q in queries for h in _hosts_of(q)) == sorted(hosts)
    url = "http://127.0.0.1:9090/api/v1/query"
    assert all(len(query_url(url, {"query": q, "time": "1700000000.000"})) <= MAX_GET_URL for q in queries)
    assert _hosts_of(host_query(["10.0.1.2", "10.0.1.30", "n-1.x", "10.0.2.5"])) == [
        "10.0.1.2",
        "10.0.1.30",
        "10.0.2.5",
        "n-1.x",
    ]
    few = hosts[:3]
    assert fits_one_query(few) and host_queries(few) == [host_query(few)]  # a small fleet: one read


async def test_a_large_fleets_node_detail_is_read_in_slices_covering_every_host_once_a_period() -> None:
    writes.set_read_only(True)  # a query too long for a GET would fail the read
    with FakePrometheus(TASKS, 15.0) as prom:
        src = PrometheusAPISource(prom.url, 'job="bench"', detail_tasks=DETAIL_TASKS, timeout=30.0)
        reads: list[list[str]] = []  # the node detail queries of each refresh's background read
        first: list[str] = []  # those of the first read of hosts met for the first time (at an instant)
        query = src.query

        async def spy(client: httpx.AsyncClient, promql: str, *args: Any, **kw: Any) -> Any:
            if promql.startswith("label_replace(sum by (instance) (node_"):
                (reads[-1] if kw.get("at") is None else first).append(promql)
            return await query(client, promql, *args, **kw)

        src.query = spy  # type: ignore[method-assign]  (records what is asked; the server answers)
        every = math.ceil(TASKS / DETAIL_TASKS)
        async with httpx.AsyncClient() as client:
            for _ in range(1 + 3 * every):
                reads.append([])
                await src.poll(client, SystemClock())
                if src._node_task is not None:
                    await src._node_task  # it joins the next refresh: done before it here
                assert src._detail_note is None  # every read succeeded (as GETs)
        await src.aclose()
    hosts = {f"10.0.{i // 250}.{i % 250}" for i in range(TASKS)}
    url = f"{prom.url}/api/v1/query"
    stamp = {"time": "1700000000.000"}
    assert all(len(query_url(url, {"query": q, **stamp})) <= MAX_GET_URL for r in [*reads, first] for q in r)
    assert {h for q in first for h in _hosts_of(q)} == hosts  # met at the first refresh: read at once
    per_refresh = [[h for q in r for h in _hosts_of(q)] for r in reads]
    assert max(len(r) for r in per_refresh) == math.ceil(len(hosts) / every)  # never every host at once
    first = next(i for i, r in enumerate(per_refresh) if r)
    for start in (first, first + every):  # two whole passes, each in the period of one whole read
        counts = Counter(h for r in per_refresh[start : start + every] for h in r)
        assert set(counts) == hosts and set(counts.values()) == {1}
