"""A large fleet's store in a long session: N tasks of ~10 series, each given a point every 2 minutes (a
fleet's sweep, ``fleet.SWEEP_S``) for ``--points`` sweeps, appended to the store directly (no server, no
session: an hour of sweeps in minutes), with the session's sparse window (2.5 sweeps) and its figures let
go after each cycle.

    python benchmarks/store_history.py [--tasks 100000] [--points 32]

Prints the process' RSS growth over the store's start (MB, and bytes a task) after 3 points (what
``prometheus_scale.py`` reaches) and after the last (32 sweeps: ~1 h, the store's floors reached), the
points and newest rows a task holds, and what the history budget (``[caps] history_mb``) allows.
"""

from __future__ import annotations

import argparse
import gc
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SWEEP_S = 120.0  # a point every sweep (collectors/prometheus/fleet.py: SWEEP_S)
SPARSE_S = 2.5 * SWEEP_S  # the session's sparse window at that sweep (prometheus/source.py: SPARSE_SWEEPS)
N_SERIES = 10  # a fleet task's series (the detail query's metrics, steps and step times among them)
MIN_POINTS_BEFORE = 16  # the points' floor of a build before it followed the newest rows (a fixed 16)


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def run(n: int, points: int) -> dict[str, float]:
    from cmdare.collectors import metrics as M
    from cmdare.collectors.samples import TaskInfo, TaskPoll
    from cmdare.collectors.store import RECENT_POINTS, Store

    keys = [M.K_WORKER_STEPS, M.K_GLOBAL_STEP, *(f"series_{j}" for j in range(N_SERIES - 2))]
    infos = [TaskInfo(job="bench", task=f"w{i}") for i in range(n)]
    sources = [f"http://10.0.{i // 250}.{i % 250}:9400" for i in range(n)]
    gc.collect()
    r0 = rss_mb()
    store = Store()
    store.set_sparse_window(SPARSE_S)
    out: dict[str, float] = {}
    for p in range(points):
        for i in range(n):
            t = 1.7e9 + SWEEP_S * p + i % 120  # the sweep reads its tasks over its period
            values = {k: 1.7e9 + 3.0 * p + j for j, k in enumerate(keys)}
            store.add(TaskPoll(source=sources[i], t=t, ok=True, info=infos[i], values=values))
        store.release_figures()
        if p + 1 in (3, points):
            gc.collect()
            grown = rss_mb() - r0
            ts = store.tasks["bench/w0"]
            floor = getattr(ts, "floor", None)  # None: a build before the floors (before/after in turns)
            rows = len(ts._recent)
            if floor is not None and floor < MIN_POINTS_BEFORE:  # a build whose floor follows the rows
                floor = max(floor, min(RECENT_POINTS, rows + 1))
            allowed = store.allowed(N_SERIES) if floor is None else store.allowed(N_SERIES, rows, floor)
            print(
                f"  N={n:,} after {p + 1} sweeps ({(p + 1) * SWEEP_S / 60:.0f} min): RSS +{grown:.0f} MB "
                f"({grown * 2**20 / n:,.0f} B a task) | a task holds {len(ts.times)} points, "
                f"{len(ts._recent)} newest rows | budget allows {allowed}"
                f" points ({store.history_bytes >> 20} MB)",
                flush=True,
            )
            out[f"rss_mb_{p + 1}"] = grown
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=100_000)
    ap.add_argument("--points", type=int, default=32)
    args = ap.parse_args(argv)
    if args.tasks < 1 or args.points < 3:
        print("store_history: --tasks >= 1 and --points >= 3", file=sys.stderr)
        return 2
    print(f"store_history: {args.tasks:,} tasks, {N_SERIES} series, a point every {SWEEP_S:g} s")
    run(args.tasks, args.points)
    return 0


if __name__ == "__main__":
    sys.exit(main())
