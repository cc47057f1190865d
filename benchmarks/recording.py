"""Recording: polls/s written to SQLite at 1,000 nodes (the real Recorder as a Poller sink), replay
speed (the real ReplaySource into a fresh store, as fast as it goes), and file size per node-hour.

    python benchmarks/recording.py [--nodes 1000] [--cycles 150] [--quick]

Baseline in the same run: the write rate a live session needs (nodes / 2 s poll interval), so the
headroom is a ratio; replay speed is given as a multiple of real time.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
import time
from pathlib import Path

from memory import INTERVAL_S, SyntheticNodes  # noqa: E402

from cmdare.collectors.clock import ManualClock  # noqa: E402
from cmdare.collectors.poller import Cycle, Poller  # noqa: E402
from cmdare.collectors.recording.recorder import Recorder  # noqa: E402
from cmdare.collectors.recording.replay import ReplaySource  # noqa: E402
from cmdare.collectors.store import Store  # noqa: E402


async def _record(path: Path, nodes: int, cycles: int) -> float:
    """Seconds spent inside the recorder for ``cycles`` cycles of ``nodes`` polls."""
    clock = ManualClock()
    rec = Recorder(path, interval=INTERVAL_S)
    spent = 0.0

    def sink(cycle: Cycle) -> None:
        nonlocal spent
        t0 = time.perf_counter()
        rec.record(cycle)
        spent += time.perf_counter() - t0

    poller = Poller(
        [SyntheticNodes(nodes)], Store(capacity=64), clock=clock, interval=INTERVAL_S, sinks=[sink]
    )
    for _ in range(cycles):
        await poller.poll_once()
        clock.advance(INTERVAL_S)
    rec.close()
    return spent


async def _replay(path: Path) -> tuple[int, int, float]:
    clock = ManualClock()
    src = ReplaySource(path, clock, speed=0)
    poller = Poller([src], Store(), clock=clock, interval=INTERVAL_S)
    polls = cycles = 0
    t0 = time.perf_counter()
    while True:
        cycle = await poller.poll_once()
        if cycle.source_errors:  # ReplayFinished becomes the replay source's status
            break
        polls += len(cycle.polls)
        cycles += 1
    wall = time.perf_counter() - t0
    src.close()
    return cycles, polls, wall


def run(nodes: int, cycles: int) -> dict[str, float]:
    logging.getLogger("cmdare").setLevel(logging.ERROR)  # the replay's end is logged as a source status
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.sqlite"
        spent = asyncio.run(_record(path, nodes, cycles))
        size = sum(p.stat().st_size for p in Path(tmp).iterdir())
        r_cycles, r_polls, r_wall = asyncio.run(_replay(path))
    polls = nodes * cycles
    rate = polls / spent
    need = nodes / INTERVAL_S
    node_hours = nodes * cycles * INTERVAL_S / 3600
    recorded_s = cycles * INTERVAL_S
    print(
        f"recording: {nodes} nodes x {cycles} cycles ({polls} polls, {recorded_s / 60:.0f} min at {INTERVAL_S:g} s)"
    )
    print(
        f"  write {rate:,.0f} polls/s = {rate / need:.0f}x what a live session needs ({need:.0f} polls/s); "
        f"{spent / cycles * 1000:.0f} ms per 1,000-node cycle"
    )
    print(
        f"  file {size / 2**20:.1f} MB = {size / node_hours / 2**20:.2f} MB per node-hour "
        f"({size / polls:.0f} B per poll)"
    )
    print(
        f"  replay {r_polls / r_wall:,.0f} polls/s, {r_cycles} cycles in {r_wall:.1f} s = "
        f"{recorded_s / r_wall:.0f}x real time (store and lifecycle included)"
    )
    assert r_polls == polls, (r_polls, polls)
    return {
        "polls_per_s": rate,
        "mb_per_node_hour": size / node_hours / 2**20,
        "replay_x": recorded_s / r_wall,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--cycles", type=int, default=150)
    ap.add_argument("--quick", action="store_true", help="CI-sized: 1,000 nodes x 20 cycles")
    a = ap.parse_args(argv)
    run(a.nodes, 20 if a.quick else a.cycles)
    return 0


if __name__ == "__main__":
    sys.exit(main())
