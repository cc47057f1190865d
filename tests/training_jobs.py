"""Support for the tests that run a real PyTorch job (examples/pytorch_ps, examples/pytorch_ddp): free
consecutive ports for its ranks, the DDP example under torchrun, a wait until it trains, and a sampler of its own
step counter."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import numpy as np

from cmdare.collectors import metrics as M
from cmdare.collectors.scrape.exposition import parse_exposition
from tests.prom_server import free_port


def port_base(count: int = 3) -> int:
    """A free port followed by ``count - 1`` free ones (a job's ranks listen on ``base + rank``)."""
    for _ in range(50):
        base = free_port()
        if base < 65000 and all(free_port_is(base + i) for i in range(count)):
            return base
    raise RuntimeError(f"no {count} consecutive free ports")


def free_port_is(port: int) -> bool:
    """True when ``port`` can be bound on 127.0.0.1 right now."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def worker_steps(url: str) -> float:
    """The job's own ``cmdare_worker_steps_total`` on one ``/metrics`` page (0 before the first step)."""
    text = httpx.get(url, timeout=2).text
    return parse_exposition(text).values.get(M.K_WORKER_STEPS, 0.0)


def wait_training(urls: list[str], timeout: float = 60.0) -> None:
    """Wait until every task but the first (the PS or rank 0's page) has counted a step."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if all(worker_steps(u) > 0 for u in urls[1:]):
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise RuntimeError("the PyTorch job did not start training")


class CounterSampler(threading.Thread):
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
        """Stop sampling and wait for the thread."""
        self._stop_evt.set()
        self.join(timeout=5)

    def rate(self, i: int, t0: float, t1: float) -> float:
        """Counter ``i``'s rate between ``t0`` and ``t1`` (epoch seconds), interpolated between samples."""
        ts, ns = np.array(self.samples[i]).T
        return float((np.interp(t1, ts, ns) - np.interp(t0, ts, ns)) / (t1 - t0))


DDP_TRAIN = Path(__file__).resolve().parents[1] / "examples" / "pytorch_ddp" / "train.py"


TRAIN_TIMEOUT_S = 240.0  # a watchdog: torch imports slowly on a busy machine
DDP_ATTEMPTS = 3


@contextmanager
def ddp_job(log_dir: Path, *train_args: str) -> Iterator[int]:
    """The DDP example (gloo, CPU, 2 ranks under torchrun, one thread each) training until stopped, with
    ``train_args`` added; yields the port base (rank r serves ``/metrics`` on base + r) once both ranks have counted
    a step. torchrun starts each rank in a session of its own: SIGTERM to the launcher stops them (SIGKILL is the
    fallback, and a rank whose launcher is gone stops by itself: train.py checks its parent every step).

    The ports are only known free when picked: another test's server can take one before torchrun or a rank binds
    it, and the launcher then exits. A launcher that exits before training is started again on fresh ports (up to
    ``DDP_ATTEMPTS`` in all); one that never trains fails with the tail of its log, which says why."""
    deadline = time.monotonic() + TRAIN_TIMEOUT_S
    logs: list[str] = []
    for attempt in range(DDP_ATTEMPTS):
        base = port_base()
        log_path = log_dir / f"torchrun-{attempt}.log"
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port",
               str(free_port()), str(DDP_TRAIN), "--steps", "0", "--port-base", str(base), *train_args]  # fmt: skip
        with log_path.open("wb") as log:
            proc = subprocess.Popen(cmd, env={**os.environ, "OMP_NUM_THREADS": "1"}, stdout=subprocess.DEVNULL,
                                    stderr=log, start_new_session=True)  # fmt: skip
            try:
                urls = [f"http://127.0.0.1:{base + r}/metrics" for r in range(2)]
                if _trains(proc, urls, deadline):
                    yield base
                    return
                logs.append(f"attempt {attempt + 1} (exit {proc.poll()}): {_tail(log_path)}")
                if proc.poll() is None:  # still running at the deadline: no use starting another
                    break
            finally:
                stop_job(proc)
    raise RuntimeError("the PyTorch DDP job did not start training:\n" + "\n".join(logs))


def _trains(proc: subprocess.Popen[bytes], urls: list[str], deadline: float) -> bool:
    """True once every rank's page counts a step; False when the launcher exits first or the deadline passes."""
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if all(worker_steps(u) > 0 for u in urls):
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    return False


def _tail(path: Path, size: int = 4000) -> str:
    """The last ``size`` characters of a log, for a failure's message."""
    return path.read_bytes()[-size:].decode(errors="replace")


def stop_job(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the launcher's session, SIGKILL if it has not gone in 20 s."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
