"""Memory: RSS after 1 h of history at 1,000 nodes, on a simulated clock (2 s polls = 1,800 cycles),
through the real poller, store (ring buffers), lifecycle and the overview the panes draw.

    python benchmarks/memory.py [--nodes 1000] [--hours 1] [--quick]

Each node's poll carries the values a node_exporter + job exporter page folds into (12 series).
Prints RSS before (imports done) and after, the growth over the last half of the run (ring buffers
must make it ~0 once they are full), and the ring buffers' own share. Target <= 200 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import sys
import time
from pathlib import Path

from cmdare.collectors import metrics as M
from cmdare.collectors.clock import ManualClock
from cmdare.collectors.observed import build_jobs
from cmdare.collectors.poller import Poller
from cmdare.collectors.samples import TaskInfo, TaskPoll
from cmdare.collectors.store import DEFAULT_CAPACITY, Store

TARGET_MB = 200.0
INTERVAL_S = 2.0


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class SyntheticNodes:
    """A source of ``n`` nodes' polls, values moving like a training job's (no network)."""

    name = "synthetic"

    def __init__(self, n: int, jobs: int = 10, seed: int = 0) -> None:
        self.infos = [
            TaskInfo(
                job=f"job-{i % jobs}",
                task=f"worker-{i}",
                role="worker",
                gpu="P100",
                region="us-central1",
                zone="us-central1-c",
                provisioning="preemptible",
            )
            for i in range(n)
        ]
        self.rng = random.Random(seed)
        self.k = 0

    async def poll(self, client: object, clock: ManualClock) -> list[TaskPoll]:
        self.k += 1
        k, t = self.k, clock.now()
        out = []
        for i, info in enumerate(self.infos):
            s = k * 24 + i
            values = {
                M.K_GLOBAL_STEP: float(s * 8),
                M.K_WORKER_STEPS: float(s),
                M.K_EXAMPLES: float(s * 128),
                M.K_STEP_SECONDS_SUM: s * 0.08,
                M.K_STEP_SECONDS_COUNT: float(s),
                M.K_PREEMPTED: 0.0,
                M.K_CPU_BUSY: k * 30.0,
                M.K_NET_RX: k * 1e6,
                M.K_NET_TX: k * 1e6,
                M.K_GPU_UTIL: 80 + self.rng.random(),
                M.K_PROCESS_CPU: k * 1.5,
                "node_memory_MemAvailable_bytes": 1.2e10,
            }
            out.append(
                TaskPoll(
                    source=f"http://10.0.{i // 250}.{i % 250}:9100/metrics",
                    t=t,
                    ok=True,
                    info=info,
                    values=values,
                )
            )
        return out


async def _simulate(n: int, cycles: int, progress: bool) -> tuple[float, float, float, Store]:
    clock = ManualClock()
    store = Store()
    poller = Poller([SyntheticNodes(n)], store, clock=clock, interval=INTERVAL_S)
    mid = 0.0
    t0 = time.monotonic()
    for c in range(cycles):
        await poller.poll_once()
        clock.advance(INTERVAL_S)
        if c == cycles // 2:
            gc.collect()
            mid = rss_mb()
        if progress and c % 300 == 0:
            print(
                f"  … cycle {c}/{cycles}, RSS {rss_mb():.0f} MB, {time.monotonic() - t0:.0f} s",
                file=sys.stderr,
            )
    jobs = build_jobs(store, poller.lifecycle, clock.now())
    assert sum(len(j.nodes) for j in jobs) == n
    gc.collect()
    return mid, rss_mb(), time.monotonic() - t0, store


def ring_bytes(store: Store) -> int:
    total = 0
    for ts in store.tasks.values():
        total += ts.nbytes
    for js in store.jobs.values():
        total += js.nbytes
    return total


def run(n: int, hours: float, progress: bool = False) -> dict[str, float]:
    cycles = int(hours * 3600 / INTERVAL_S)
    gc.collect()
    before = rss_mb()
    mid, after, wall, store = asyncio.run(_simulate(n, cycles, progress))
    rings = ring_bytes(store) / 2**20
    ok = after <= TARGET_MB
    print(
        f"memory: {n} nodes, {hours:g} h of history at {INTERVAL_S:g} s ({cycles} cycles, ring capacity "
        f"{DEFAULT_CAPACITY}) simulated in {wall:.0f} s"
    )
    print(
        f"  RSS {after:.0f} MB (target <= {TARGET_MB:.0f} MB: {'PASS' if ok else 'MISS'}; "
        f"{after / TARGET_MB:.2f}x of budget) | before data {before:.0f} MB | ring buffers {rings:.0f} MB"
    )
    print(f"  growth over the second half: {after - mid:+.1f} MB ({(after - mid) / max(mid, 1):+.1%})")
    return {"rss_mb": after, "before_mb": before, "growth_mb": after - mid}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--hours", type=float, default=1.0)
    ap.add_argument("--quick", action="store_true", help="CI-sized: 1,000 nodes for 0.1 h")
    ap.add_argument("--progress", action="store_true")
    a = ap.parse_args(argv)
    run(a.nodes, 0.1 if a.quick else a.hours, a.progress)
    return 0


if __name__ == "__main__":
    sys.exit(main())
