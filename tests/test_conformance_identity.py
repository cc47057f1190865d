"""Conformance: task identity is (job, role, task) with TF's per-role indices; two endpoints claiming
one identity are both shown and flagged; a target that has not answered yet is "pending" under its
URL and folded into the task it turns out to be (no phantom). Real exporters on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cmdare.collectors.clock import SystemClock
from cmdare.collectors.exporter import TrainingExporter
from cmdare.collectors.lifecycle import Lifecycle
from cmdare.collectors.observed import JobView, build_jobs
from cmdare.collectors.poller import Poller
from cmdare.collectors.samples import TaskInfo
from cmdare.collectors.scrape.source import ScrapeSource, ScrapeTarget
from cmdare.collectors.store import Store
from cmdare.tui.panes.cluster import node_row
from cmdare.tui.panes.cluster_rows import COLUMNS
from tests.prom_server import free_port


@pytest.fixture
def exporters() -> Iterator[list[TrainingExporter]]:
    made: list[TrainingExporter] = []
    yield made
    for e in made:
        e.stop()


def _exporter(made: list[TrainingExporter], role: str, task: str, port: int = 0) -> str:
    e = TrainingExporter("bert", role, task)
    made.append(e)
    e.step(0.01, examples=8)
    return f"http://127.0.0.1:{e.start(port)}/metrics"


def _target(url: str) -> ScrapeTarget:
    """As tui/sources.py builds a --target: an identity to fall back on when the page names none."""
    return ScrapeTarget(url, TaskInfo(job="job", task=url.split("/")[2], role="node"))


async def _watch(urls: list[str], polls: int = 2, between=None) -> tuple[list[JobView], Poller]:
    poller = Poller(
        [ScrapeSource([_target(u) for u in urls])],
        Store(),
        lifecycle=Lifecycle(silent_after=1),
        clock=SystemClock(),
        interval=1.0,
    )
    for i in range(polls):
        if between is not None:
            between(i)
        await poller.poll_once()
    jobs = build_jobs(poller.store, poller.lifecycle, SystemClock().now())
    await poller.aclose()
    return jobs, poller


async def test_worker_0_and_ps_0_are_two_tasks(exporters):
    urls = [
        _exporter(exporters, "worker", "0"),
        _exporter(exporters, "ps", "0"),
        _exporter(exporters, "chief", "0"),
    ]
    (job,), _ = await _watch(urls)
    assert {n.name: n.role for n in job.nodes} == {"chief-0": "chief", "ps-0": "ps", "worker-0": "worker"}
    assert all(n.status == "up" and not n.flags for n in job.nodes)


async def test_two_endpoints_claiming_one_identity_are_both_shown_and_flagged(exporters):
    urls = [_exporter(exporters, "worker", "worker-0"), _exporter(exporters, "worker", "worker-0")]
    (job,), _ = await _watch(urls, polls=3)
    assert len(job.nodes) == 2, "never merged"
    assert all(n.flags == ("duplicate-identity",) and n.status == "up" for n in job.nodes)
    second = urls[1].split("/")[2]
    assert {n.name for n in job.nodes} == {"worker-0", f"worker-0@{second}"}
    row = node_row(job, job.nodes[0], [], now=0.0)
    flag = [name for name, _ in COLUMNS].index("Flag")
    assert "duplicate-identity" in str(row.values()[flag])


async def test_the_duplicate_flag_clears_when_one_claimant_is_gone(exporters):
    urls = [_exporter(exporters, "worker", "worker-0"), _exporter(exporters, "worker", "worker-0")]
    poller = Poller(
        [ScrapeSource([_target(u) for u in urls])],
        Store(),
        lifecycle=Lifecycle(silent_after=2),
        clock=SystemClock(),
        interval=1.0,
    )
    for _ in range(2):
        await poller.poll_once()
    assert len(poller.lifecycle.duplicates) == 2
    exporters[1].stop()
    for _ in range(3):
        await poller.poll_once()
    await poller.aclose()
    nodes = {n.name: n for j in build_jobs(poller.store, poller.lifecycle, 0.0) for n in j.nodes}
    assert nodes["worker-0"].flags == () and nodes["worker-0"].status == "up"


async def test_a_target_not_up_yet_is_pending_then_folded_into_its_task(exporters):
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    seen: list[list[tuple[str, str, str]]] = []

    def between(i: int) -> None:
        if i == 2:
            _exporter(exporters, "worker", "0", port)

    poller = Poller(
        [ScrapeSource([_target(url)])],
        Store(),
        lifecycle=Lifecycle(silent_after=1),
        clock=SystemClock(),
        interval=1.0,
    )
    for i in range(4):
        between(i)
        await poller.poll_once()
        seen.append(
            [
                (j.name, n.name, n.status)
                for j in build_jobs(poller.store, poller.lifecycle, 0.0)
                for n in j.nodes
            ]
        )
    await poller.aclose()
    assert seen[0] == seen[1] == [("job", f"127.0.0.1:{port}", "pending")]  # under its URL, not "silent"
    assert seen[2] == seen[3] == [("bert", "worker-0", "up")]  # folded: no phantom, no job called "job"
    assert not [t for t in poller.lifecycle.nodes if "pending" in t]


async def test_host_detail_survives_record_and_replay(exporters, tmp_path):
    """A DCGM page (MOCK, see dcgm_page.py) given with --target joins the task on its host, live and
    in the replay of the recording (host detail is never a task of its own)."""
    from cmdare.collectors.clock import ManualClock
    from cmdare.collectors.recording.recorder import Recorder
    from cmdare.collectors.recording.replay import ReplaySource
    from tests.dcgm_page import DcgmServer, Gpu, page

    dcgm = DcgmServer(page([Gpu(0, "GPU-1", "Tesla T4", 70.0, 3000, 12000)]))
    try:
        urls = [_exporter(exporters, "worker", "0"), f"http://{dcgm.addr}/metrics"]
        lc = Lifecycle()
        rec = Recorder(tmp_path / "r.sqlite", lifecycle=lc, interval=1.0)
        live = Poller(
            [ScrapeSource([_target(u) for u in urls])],
            Store(),
            lifecycle=lc,
            clock=SystemClock(),
            interval=1.0,
            sinks=[rec],
        )
        for _ in range(2):
            await live.poll_once()
        rec.close()
        await live.aclose()
    finally:
        dcgm.close()
    clock = ManualClock()
    replay = ReplaySource(tmp_path / "r.sqlite", clock, speed=0)
    again = Poller([replay], Store(), lifecycle=Lifecycle(), clock=clock, interval=1.0)
    for _ in range(2):
        await again.poll_once()
    replay.close()
    for p in (live, again):
        (job,) = build_jobs(p.store, p.lifecycle, 0.0)
        (node,) = job.nodes
        assert (job.name, node.name, node.gpu_util, node.gpu_model, node.gpu_mem_used_mib) == (
            "bert",
            "worker-0",
            70.0,
            "Tesla T4",
            3000,
        )


async def test_host_detail_of_a_host_without_tasks_is_a_row_of_its_own(exporters):
    """A DCGM page (MOCK) alone: nothing to join it to, so its host is shown, never hidden."""
    from tests.dcgm_page import DcgmServer, Gpu, page

    dcgm = DcgmServer(page([Gpu(0, "GPU-1", "Tesla T4", 70.0, 3000, 12000)]))
    try:
        (job,), _ = await _watch([f"http://{dcgm.addr}/metrics"])
    finally:
        dcgm.close()
    (node,) = job.nodes
    assert (job.name, node.name, node.role, node.status, node.gpu_util, node.gpu_model) == (
        "hosts",
        "127.0.0.1",
        "node",
        "up",
        70.0,
        "Tesla T4",
    )
