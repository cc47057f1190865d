"""A large fleet's store in a long session: N tasks of ~10 series, each given a point every 2 minutes (a
fleet's sweep, ``fleet.SWEEP_S``) for ``--points`` sweeps, appended to the store directly (no server, no
session: an hour of sweeps in minutes), with the session's sparse window (2.5 sweeps) and its figures let
go after each cycle.

    python benchmarks/store_history.py [--tasks 100000] [--points 32]
    python benchmarks/store_history.py --cpu 5000 [--repeat 5]   # a refresh's store work, CPU a task

Prints the process' RSS growth over the store's start (MB, and bytes a task) after 3 points (what
``prometheus_scale.py`` reaches) and after the last (32 sweeps: ~1 h, the store's floors reached), the
points and newest rows a task holds, and what the history budget (``[caps] history_mb``) allows.
"""

from __future__ import annotations

import argparse
import gc
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SWEEP_S = 120.0  # a point every sweep (collectors/prometheus/fleet.py: SWEEP_S)
SPARSE_S = 2.5 * SWEEP_S  # the session's sparse window at that sweep (prometheus/source.py: SPARSE_SWEEPS)
N_SERIES = 10  # a fleet task's series (the detail query's metrics, steps and step times among them)


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def run(n: int, points: int) -> dict[str, float]:
    from cmdare.collectors import metrics as M
    from cmdare.collectors.samples import TaskInfo, TaskPoll
    from cmdare.collectors.store import Store

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
            rows = len(ts._recent)  # the ring's points the budget allows, besides the newest rows
            allowed = (
                store.allowed(N_SERIES)
                if floor is None
                else rows + store.allowed(N_SERIES, rows, max(0, floor - rows))
            )
            print(
                f"  N={n:,} after {p + 1} sweeps ({(p + 1) * SWEEP_S / 60:.0f} min): RSS +{grown:.0f} MB "
                f"({grown * 2**20 / n:,.0f} B a task) | a task holds {len(ts.times)} points, "
                f"{len(ts._recent)} newest rows | budget allows {allowed}"
                f" points ({store.history_bytes >> 20} MB)",
                flush=True,
            )
            out[f"rss_mb_{p + 1}"] = grown
    return out


def time_refresh(n: int, repeat: int, asked: bool = True) -> None:
    """CPU of what a refresh asks of the store, a task at a time (best of ``repeat``): a sweep's append
    (a 4th point to tasks of 3), a view's figures (rates, ratios, latest values, as
    ``collectors/observed.py`` asks them of a swept task) and an hour's window (the checkpoint interval's
    read); then the same after 16 points (the ring in use). The windows are asked before the first point,
    as a session's views ask them every refresh (``asked=False``: first after the points, a wider window
    than the newest rows reach over: the rates then read the grid). Run it with main's tree and this one
    in turns."""
    import time

    from cmdare.collectors import metrics as M
    from cmdare.collectors.samples import TaskInfo, TaskPoll
    from cmdare.collectors.store import Store

    keys = [
        M.K_WORKER_STEPS,
        M.K_GLOBAL_STEP,
        M.K_STEP_SECONDS_SUM,
        M.K_STEP_SECONDS_COUNT,
        *(f"series_{j}" for j in range(N_SERIES - 4)),
    ]
    infos = [TaskInfo(job="bench", task=f"w{i}") for i in range(n)]
    sources = [f"http://10.0.{i // 250}.{i % 250}:9400" for i in range(n)]

    def poll(i: int, p: int) -> TaskPoll:
        values = {k: 1.7e9 + 3.0 * p * p + j for j, k in enumerate(keys)}
        return TaskPoll(
            source=sources[i], t=1.7e9 + SWEEP_S * p + i % 120, ok=True, info=infos[i], values=values
        )

    for points in (3, 16):
        best = {"append": math.inf, "view": math.inf, "hour window": math.inf}
        for _ in range(repeat):
            store = Store()
            store.set_sparse_window(SPARSE_S)
            if asked:  # the windows a session's views ask from its first refresh on (the newest rows reach
                store.sparse.asked(60.0)  # over the widest: TaskSeries._append_row)
            for p in range(points):
                for i in range(n):
                    store.add(poll(i, p))
            store.release_figures()
            polls = [poll(i, points) for i in range(n)]
            gc.collect()
            a = time.process_time()
            for q in polls:
                store.add(q)
            best["append"] = min(best["append"], time.process_time() - a)
            tasks = list(store.tasks.values())
            a = time.process_time()
            for ts in tasks:
                ts.rate(M.K_WORKER_STEPS, 10.0)
                ts.rate(M.K_GLOBAL_STEP, 10.0)
                ts.mean_of_ratio(M.K_STEP_SECONDS_SUM, M.K_STEP_SECONDS_COUNT, 60.0)
                ts.latest(M.K_LOSS)
                ts.latest("series_0")
                ts.last_value("series_1")
            best["view"] = min(best["view"], time.process_time() - a)
            a = time.process_time()
            for ts in tasks:
                ts.window_values("series_2", 3600.0)
            best["hour window"] = min(best["hour window"], time.process_time() - a)
        figures = ", ".join(f"{k} {v * 1e6 / n:.2f} us" for k, v in best.items())
        when = "" if asked else ", windows asked after the points"
        print(
            f"  CPU a task, {points} points held{when}, {n:,} tasks (best of {repeat}): {figures}", flush=True
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=100_000)
    ap.add_argument("--points", type=int, default=32)
    ap.add_argument("--cpu", type=int, default=0, metavar="N", help="time a refresh's store work on N tasks")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument(
        "--late-windows", action="store_true", help="--cpu: ask the rate windows after the points"
    )
    args = ap.parse_args(argv)
    if args.tasks < 1 or args.points < 3:
        print("store_history: --tasks >= 1 and --points >= 3", file=sys.stderr)
        return 2
    if args.cpu:
        time_refresh(args.cpu, max(1, args.repeat), asked=not args.late_windows)
        return 0
    print(f"store_history: {args.tasks:,} tasks, {N_SERIES} series, a point every {SWEEP_S:g} s")
    run(args.tasks, args.points)
    return 0


if __name__ == "__main__":
    sys.exit(main())
