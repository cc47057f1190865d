"""Every fault of the fault server becomes a status on the poll — never an exception — and a mixed
run of faults through the real poller and recorder crashes nothing and loses no record."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import httpx
import pytest

from cmdare.collectors import metrics as M
from cmdare.collectors.clock import SystemClock
from cmdare.collectors.poller import Poller
from cmdare.collectors.recording.recorder import Recorder
from cmdare.collectors.scrape.source import DEFAULT_MAX_BYTES, ScrapeSource, ScrapeTarget
from cmdare.collectors.store import Store
from tests.fault_server import EXPECT, FaultServer

TIMEOUT_S = 0.5


def outcome(poll) -> str:  # noqa: ANN001
    if not poll.ok:
        return "failed"
    return "noted" if poll.error else "ok"


@pytest.fixture
def only() -> Iterator:
    servers: list[FaultServer] = []

    def make(fault: str) -> FaultServer:
        srv = FaultServer(seed=3, faults={fault: 1.0}).start()
        servers.append(srv)
        return srv

    yield make
    for s in servers:
        s.stop()


async def _scrape(urls: list[str], n: int = 1) -> list[list]:
    out = []
    async with httpx.AsyncClient() as client:
        src = ScrapeSource([ScrapeTarget(u) for u in urls], timeout=TIMEOUT_S)
        for _ in range(n):
            out.append(await src.poll(client, SystemClock()))
        await src.aclose()
    return out


@pytest.mark.parametrize("fault", sorted(EXPECT))
async def test_each_fault_is_a_status(only, fault):
    srv = only(fault)
    [[poll]] = await _scrape([srv.url(0)])
    assert outcome(poll) == EXPECT[fault], (fault, poll.error)
    if fault in ("timeout", "drip"):  # stalled for STALL_S: the poll's own timeout ended it, not the server
        assert poll.error == "timed out", poll.error
    if EXPECT[fault] == "failed":
        assert poll.error and "\n" not in poll.error


async def test_huge_body_is_capped_not_read_whole(only):
    srv = only("huge")
    [[poll]] = await _scrape([srv.url(0)])
    assert not poll.ok and "larger than" in poll.error
    assert DEFAULT_MAX_BYTES < 50 * 1024 * 1024


async def test_flapping_identity_is_seen_as_two_tasks(only):
    srv = only("flap")
    rounds = await _scrape([srv.url(0)], n=2)
    tasks = {r[0].info.task for r in rounds}
    assert tasks == {"worker-0", "worker-0-b"}


async def test_counter_going_backwards_gives_no_negative_rate(only):
    srv = only("ok")
    store = Store()
    for [poll] in await _scrape([srv.url(0)], n=3):
        store.add(poll)
    srv.faults = {"backwards": 1.0}
    for [poll] in await _scrape([srv.url(0)], n=2):
        store.add(poll)
    rate = store.tasks["faulty/worker-0"].rate(M.K_WORKER_STEPS, 3600)
    assert rate is not None and rate >= 0


async def test_mixed_faults_through_poller_and_recorder(tmp_path):
    with FaultServer(seed=11) as srv:
        store = Store()
        rec = Recorder(tmp_path / "rec.sqlite", interval=0.1)
        poller = Poller(
            [ScrapeSource([ScrapeTarget(srv.url(i)) for i in range(8)], timeout=0.3)],
            store,
            interval=0.1,
            sinks=[rec],
        )
        polls = 0
        for _ in range(6):
            cycle = await poller.poll_once()
            assert not cycle.source_errors
            polls += len(cycle.polls)
        await poller.aclose()
        rec.close()
    with sqlite3.connect(tmp_path / "rec.sqlite") as db:
        assert db.execute("SELECT count(*) FROM polls").fetchone()[0] == polls == 48
