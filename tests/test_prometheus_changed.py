"""Above ``detail_tasks`` tasks a refresh reads only the targets Prometheus scraped since the last
one: checked on Debian's real ``prometheus`` scraping real exporters every 2 s while the source
refreshes every 0.5 s (forced with ``detail_tasks=1``). Prometheus' own record of the scrapes (the
range vector of each target's ``cmdare_task_info``) is the reference: no scrape is lost, none is
handed on twice, and every task is accounted for on every refresh (answered or unchanged)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from cmdare.collectors.clock import SystemClock
from cmdare.collectors.exporter import TrainingExporter
from cmdare.collectors.poller import Cycle
from cmdare.collectors.prometheus.source import PrometheusAPISource
from cmdare.tui.options import SessionOptions
from cmdare.tui.session import MonitorSession
from tests.prom_server import prometheus_server  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow

TASKS = ("worker-0", "worker-1", "worker-2")


@pytest.fixture
def workers() -> Iterator[list[TrainingExporter]]:
    """Three workers and a parameter server (which ``role="worker"`` must leave out)."""
    out = [TrainingExporter("resnet", "worker", t, gpu="K80", region="us-east1") for t in TASKS]
    out.append(TrainingExporter("resnet", "ps", "ps-0", region="us-east1"))
    for e in out:
        e.start(0)
    yield out
    for e in out:
        e.stop()


@pytest.mark.parametrize(
    ("selector", "tasks"),
    [('job="cmdare-test"', (*TASKS, "ps-0")), ('role="worker"', TASKS)],  # a scrape label; the exporter's own
)
async def test_a_refresh_reads_only_what_was_scraped_since_the_last(
    prometheus_server,  # noqa: F811
    workers,
    selector,
    tasks,
):
    prom = prometheus_server([f"127.0.0.1:{e.port}" for e in workers], scrape_interval="2s")
    await asyncio.to_thread(prom.wait_for_targets, len(workers))
    # a 30 s timeout: what is held here is which tasks each refresh reads; a query that times out on a busy
    # machine (seen once beside a CPU hog at the default) would count a refresh with no task
    src = PrometheusAPISource(prom.url, selector, detail_tasks=1, timeout=30.0)
    read: list[list[int]] = []  # per refresh: [a "scraped since" read?, tasks whose scrape time came]
    query = src.query

    async def spy(client: httpx.AsyncClient, promql: str, *args: object, **kw: object) -> list[dict]:
        got = await query(client, promql, *args, **kw)
        if "__scrape_time" in promql and "DCGM" not in promql:  # a value query (not node detail)
            read[-1] = [int(") > " in promql), sum(r["metric"]["cmdare_key"] == "__scrape_time" for r in got)]
        return got

    src.query = spy  # type: ignore[method-assign]  (counts the rows read; the server answers)
    handed: dict[str, list[float]] = {t: [] for t in tasks}
    accounted: list[int] = []
    async with httpx.AsyncClient(timeout=30.0) as client:
        for _ in range(24):
            for e in workers[: len(TASKS)]:
                e.step(0.05, examples=32)
            read.append([0, 0])
            polls = await src.poll(client, SystemClock())
            ok = [p for p in polls if p.ok and p.info is not None]
            for p in ok:
                handed[p.info.task].append(p.t)
            accounted.append(len(ok) + src.unchanged)
            await asyncio.sleep(0.5)
        first = min(ts[0] for ts in handed.values())
    await src.aclose()
    assert accounted[1:] == [len(tasks)] * 23, accounted  # every task, every refresh: new or unchanged
    since = [n for changed, n in read if changed]
    # a scrape that fails marks its target's series stale, and a full read then rightly leaves that task out; on a
    # starved machine the in-process exporters can miss the 2 s scrape timeout, so Prometheus' own ``up`` says
    # how many tasks a full read may lack (none when every scrape succeeded, which is the usual case)
    ports = {f"127.0.0.1:{e.port}" for t, e in zip((*TASKS, "ps-0"), workers, strict=True) if t in tasks}
    ups = prom.query('up{job="cmdare-test"}[120s]')
    down = {u["metric"]["instance"] for u in ups if any(v[1] == "0" for v in u["values"])} & ports
    assert len(since) >= 12 and all(n >= len(tasks) - len(down) for changed, n in read[1:] if not changed), (
        read,
        down,
    )
    # how many tasks a "scraped since" read returns is not held here: the look-back reaches from the last
    # refresh's newest sample, up to a scrape interval old with three targets (so on a busy machine every read may
    # return all three), a few ms in a fleet of thousands (benchmarks/prometheus_scale.py measures that)
    for task, times in handed.items():
        assert times == sorted(set(times)), task  # never the same scrape twice
        truth = prom.query(f'cmdare_task_info{{task="{task}"}}[60s]')  # a range: every sample
        scrapes = [float(v[0]) for v in truth[0]["values"]] if truth else []
        expected = [t for t in scrapes if first < t <= times[-1]]
        assert [t for t in times if t > first] == pytest.approx(expected, abs=1e-3), task  # none lost


def test_the_status_line_counts_unchanged_tasks_as_answered():
    """No poll for a task that has nothing new is not a failure: the status line says so."""
    session = MonitorSession(SessionOptions(job="x"))
    status = session._source_status(Cycle(t=0.0, elapsed=0.1, polls=[], transitions=[], unchanged=9_000))
    assert (
        status[0].ok
        and status[0].message == "9,000/9,000 targets answered, 9,000 unchanged since the last refresh"
    )
