"""MLflow file store at scale: a store of 256 runs (32 running) × 10 keys × 1,000 points (64 MB of metric
lines) read by ``--mlruns``, against a baseline measured in the same run: the same source reading every
metric file whole and folding every point (what a first read cost before a file met first was read from
its last 2 KiB and only the points the timeline needs were folded).

    python benchmarks/mlflow_store.py [--runs 256] [--points 1000]

Prints, for each: the polls until every run is shown, the time of each, and the steady poll after; the
ratio of the polls' total to the baseline's. The reading runs in a worker thread: the UI waits for none
of it, but a refresh waits for the slowest source, so the first polls' times matter.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from pathlib import Path

from cmdare.collectors.clock import ManualClock
from cmdare.collectors.mlflow import store as mlflow_store
from cmdare.collectors.mlflow.store import MlrunsSource

KEYS = 10


def write_store(root: Path, runs: int, points: int) -> None:
    """``runs`` runs in 4 experiments (one in 8 running), ``KEYS`` keys of ``points`` points each."""
    t0 = int(time.time() * 1000) - 3_600_000
    for r in range(runs):
        exp = root / str(r % 4)
        if not (exp / "meta.yaml").exists():
            exp.mkdir(parents=True)
            (exp / "meta.yaml").write_text(f"name: exp{r % 4}\nlifecycle_stage: active\n")
        run = exp / f"run{r:04d}"
        (run / "metrics").mkdir(parents=True)
        status = 1 if r % 8 == 0 else 3
        (run / "meta.yaml").write_text(
            f"run_name: r{r}\nstatus: {status}\nlifecycle_stage: active\nstart_time: {t0}\n"
        )
        for k in range(KEYS):
            lines = "".join(f"{t0 + s * 100} {random.random()} {s}\n" for s in range(points))
            (run / "metrics" / f"key{k}").write_text(lines)


async def polls_until_shown(root: Path, runs: int) -> list[float]:
    """Seconds of each poll until every run is shown, then one steady poll."""
    source, clock, times = MlrunsSource(root), ManualClock(time.time()), []
    while True:
        t = time.perf_counter()
        polls = await source.poll(None, clock)  # type: ignore[arg-type]  # reads no URL
        times.append(time.perf_counter() - t)
        clock.advance(2.0)
        if sum(p.ok for p in polls) == runs and not any(p.catching_up for p in polls):
            t = time.perf_counter()
            await source.poll(None, clock)  # type: ignore[arg-type]
            return [*times, time.perf_counter() - t]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=256)
    ap.add_argument("--points", type=int, default=1000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "mlruns"
        write_store(root, args.runs, args.points)
        size = sum(f.stat().st_size for f in root.rglob("key*"))
        print(
            f"store: {args.runs} runs x {KEYS} keys x {args.points} points, {size / 1e6:.0f} MB of metric lines"
        )
        # baseline: every file read whole, every point folded, in the 32 MiB a poll the first version read
        start, budget, turning = (
            mlflow_store.START_TAIL_BYTES,
            mlflow_store.POLL_BYTES,
            mlflow_store.turning_points,
        )
        mlflow_store.START_TAIL_BYTES, mlflow_store.POLL_BYTES = 1 << 40, 32 * 1024 * 1024
        mlflow_store.turning_points = lambda points, before=0.0: points  # type: ignore[assignment]
        base = asyncio.run(polls_until_shown(root, args.runs))
        mlflow_store.START_TAIL_BYTES, mlflow_store.POLL_BYTES, mlflow_store.turning_points = (
            start,
            budget,
            turning,
        )
        now = asyncio.run(polls_until_shown(root, args.runs))
        for name, times in (("baseline (whole files)", base), ("--mlruns as shipped", now)):
            first = ", ".join(f"{t:.2f}" for t in times[:-1])
            print(
                f"{name:24s} polls until shown: {len(times) - 1} ({first} s); steady poll {times[-1] * 1000:.0f} ms"
            )
        print(f"ratio of the polls' total to the baseline's: {sum(now[:-1]) / sum(base[:-1]):.2f}")


if __name__ == "__main__":
    main()
