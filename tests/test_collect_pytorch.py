"""Integration: a real PyTorch parameter-server job (examples/pytorch_ps, 1 PS + 2 workers over
torch.distributed.rpc), watched by direct scrape and through Debian's real Prometheus.

Done-when of issues 3 and 14: every task appears with its role, step rates over a 10 s window within
2% of the job's own ``cmdare_worker_steps_total`` delta / time over the same span (direct and through
Prometheus), a killed task turns silent within 3 polls, and the recording replays to the same numbers."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from prom_server import free_port, prometheus_server  # noqa: F401 (fixture)

from cmdare.collectors import metrics as M
from cmdare.collectors.clock import ManualClock, SystemClock
from cmdare.collectors.exposition import parse_exposition
from cmdare.collectors.lifecycle import Lifecycle
from cmdare.collectors.poller import Poller
from cmdare.collectors.prometheus_api import PrometheusAPISource
from cmdare.collectors.recorder import Recorder
from cmdare.collectors.replay import ReplaySource
from cmdare.collectors.samples import TaskState
from cmdare.collectors.scrape import ScrapeSource, ScrapeTarget
from cmdare.collectors.store import Store

pytest.importorskip("torch")
pytestmark = pytest.mark.slow

TRAIN = Path(__file__).resolve().parents[1] / "examples" / "pytorch_ps" / "train.py"
ROLES = {"ps-0": "ps", "worker-0": "chief", "worker-1": "worker"}
POLLS = 12
WINDOW_S = 10.0  # the rate window the panes use (planner/overview.py RATE_WINDOW_S)


def _port_base() -> int:
    for _ in range(50):
        base = free_port()
        if base < 65000 and all(free_port_is(base + i) for i in range(3)):
            return base
    raise RuntimeError("no three consecutive free ports")


def free_port_is(port: int) -> bool:
    import socket

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


@pytest.fixture
def job(tmp_path: Path) -> Iterator[tuple[int, list[subprocess.Popen]]]:
    base, rpc = _port_base(), free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(TRAIN),
                "--rank",
                str(r),
                "--steps",
                "0",
                "--port-base",
                str(base),
                "--rpc-port",
                str(rpc),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=(tmp_path / f"rank{r}.log").open("wb"),
        )
        for r in range(3)
    ]
    yield base, procs
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
        p.wait(timeout=10)


def _count(url: str) -> float:
    text = httpx.get(url, timeout=2).text
    return parse_exposition(text).values.get(M.K_WORKER_STEPS, 0.0)


def _wait_training(urls: list[str], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if all(_count(u) > 0 for u in urls[1:]):
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise RuntimeError("the PyTorch job did not start training")


class _Sampler(threading.Thread):
    """Reads the job's own counter (``key``) every 50 ms, stamped at the request midpoint."""

    def __init__(self, urls: list[str], key: str = M.K_WORKER_STEPS) -> None:
        super().__init__(daemon=True)
        self.urls = urls
        self.key = key
        self.samples: list[list[tuple[float, float]]] = [[] for _ in urls]
        self._stop_evt = threading.Event()

    def run(self) -> None:
        with httpx.Client(timeout=2) as client:
            while not self._stop_evt.wait(0.05):
                for i, u in enumerate(self.urls):
                    t0 = time.time()
                    try:
                        n = parse_exposition(client.get(u).text).values.get(self.key, 0.0)
                    except httpx.HTTPError:
                        continue
                    self.samples[i].append(((t0 + time.time()) / 2, n))

    def stop(self) -> None:
        self._stop_evt.set()
        self.join(timeout=5)

    def rate(self, i: int, t0: float, t1: float) -> float:
        ts, ns = np.array(self.samples[i]).T
        return float((np.interp(t1, ts, ns) - np.interp(t0, ts, ns)) / (t1 - t0))


async def test_pytorch_ps_job_through_scrape_and_prometheus(job, prometheus_server, tmp_path):  # noqa: F811
    base, procs = job
    urls = [f"http://127.0.0.1:{base + r}/metrics" for r in range(3)]
    await asyncio.to_thread(_wait_training, urls)
    prom = prometheus_server([f"127.0.0.1:{base + r}" for r in range(3)], scrape_interval="1s")
    await asyncio.to_thread(prom.wait_for_targets, 3, 60.0)  # torch keeps 2 cores busy

    clock = SystemClock()
    scrape_store, scrape_lc = Store(), Lifecycle(silent_after=3)
    recorder = Recorder(tmp_path / "job.sqlite", lifecycle=scrape_lc, interval=1.0)
    scrape = Poller(
        [ScrapeSource([ScrapeTarget(u) for u in urls])],
        scrape_store,
        lifecycle=scrape_lc,
        clock=clock,
        interval=1.0,
        sinks=[recorder],
    )
    prom_store, prom_lc = Store(), Lifecycle(silent_after=3)
    via_prom = Poller(
        [PrometheusAPISource(prom.url, 'job="cmdare-test"')],
        prom_store,
        lifecycle=prom_lc,
        clock=clock,
        interval=1.0,
    )

    sampler = _Sampler(urls[1:])  # the job's own counts, read ~20 times a second
    sampler.start()
    await scrape.poll_once()  # warm the connections: later polls' times are not inflated by set-up
    await via_prom.poll_once()
    for _ in range(POLLS):
        await asyncio.sleep(1.0)
        await scrape.poll_once()
        await via_prom.poll_once()
    sampler.stop()

    for store in (scrape_store, prom_store):
        assert {ts.info.task: ts.info.role for ts in store.tasks.values()} == ROLES
        for i, task in enumerate(("worker-0", "worker-1")):
            ts = store.tasks[f"pytorch-ps/{task}"]
            t, _ = ts.window(M.K_WORKER_STEPS, WINDOW_S)
            own = sampler.rate(i, t[0], t[-1])  # the job's own delta / time over the same span
            measured = ts.rate(M.K_WORKER_STEPS, WINDOW_S)
            print(f"{task}: measured {measured:.2f} steps/s, job's own count {own:.2f}")
            assert own > 0 and measured == pytest.approx(own, rel=0.02), (task, measured, own)
    assert scrape_store.tasks["pytorch-ps/ps-0"].rate(M.K_PS_IN, 1e9) > 0

    procs[2].send_signal(signal.SIGKILL)  # worker-1 dies
    procs[2].wait(timeout=10)
    for _ in range(3):
        await asyncio.sleep(1.0)
        await asyncio.gather(scrape.poll_once(), via_prom.poll_once())
    assert scrape_lc.nodes["pytorch-ps/worker-1"].state is TaskState.SILENT
    assert prom_lc.nodes["pytorch-ps/worker-1"].state is TaskState.SILENT
    assert scrape_lc.nodes["pytorch-ps/worker-0"].state is TaskState.UP
    recorder.close()
    await asyncio.gather(scrape.aclose(), via_prom.aclose())

    rclock = ManualClock()
    replay = ReplaySource(tmp_path / "job.sqlite", rclock, speed=0)
    r_store, r_lc = Store(), Lifecycle(silent_after=3)
    player = Poller([replay], r_store, lifecycle=r_lc, clock=rclock, interval=replay.interval or 1.0)
    for _ in range(POLLS + 4):
        await player.poll_once()
    for key, ts in scrape_store.tasks.items():
        assert r_store.tasks[key].rate(M.K_WORKER_STEPS, 1e9) == ts.rate(M.K_WORKER_STEPS, 1e9)
    assert {k: n.state for k, n in r_lc.nodes.items()} == {k: n.state for k, n in scrape_lc.nodes.items()}
    replay.close()
