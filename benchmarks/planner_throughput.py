"""Planner throughput: shapes ranked per second, vectorised ``rank_shapes`` vs a naive per-shape loop.

Run: ``.venv/bin/python benchmarks/planner_throughput.py``. Prints shapes/s for ~10k and ~100k shapes
(vectorised, best of 3 after a warm-up) and the naive loop's rate on a sample in the same run, as a ratio;
then synchronous all-reduce shapes (``rank_sync_shapes``, nodes × GPUs per node × GPU × region × provisioning)
of about the same count, as a ratio to the PS ranking's rate.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np

from cmdare.collectors.pricing import load_offline_book
from cmdare.planner.risk_cost.overheads import Overheads
from cmdare.planner.risk_cost.revocation import RevocationModel
from cmdare.planner.risk_cost.shapes import enumerate_shapes, rank_shapes, run_settings
from cmdare.planner.risk_cost.sync_shapes import enumerate_sync, rank_sync_shapes
from cmdare.planner.risk_cost.time_cost import PriceTable, ShapeColumns, estimate
from cmdare.planner.risk_cost.workload import Workload, load_workload
from cmdare.planner.speed.speed_model import SpeedModel

EXAMPLE = Path(__file__).resolve().parents[1] / "examples/workload-resnet32.toml"
SYNC_EXAMPLE = EXAMPLE.with_name("workload-sync-ddp.toml")


def workload_of_size(base: Workload, book: object, target: int) -> Workload:
    """Widen the example's allowed space (GPUs and regions of the book, more workers) to ≈ ``target``."""
    gpus = tuple(g for g in ("K80", "P100", "V100", "T4", "L4", "A100") if g in book.gpus())  # type: ignore[attr-defined]
    regions = tuple(book.regions())  # type: ignore[attr-defined]
    per_worker = len(gpus) * len(regions) * base.allowed.max_ps * len(base.allowed.provisionings)
    allowed = dataclasses.replace(
        base.allowed, gpus=gpus, regions=regions, max_workers=max(1, target // per_worker)
    )
    return dataclasses.replace(base, allowed=allowed)


def vectorised_rate(
    workload: Workload, sm: SpeedModel, book: object, rm: RevocationModel, ov: Overheads
) -> tuple[int, float]:
    rank_shapes(workload, sm, book, rm, overheads=ov)  # warm caches (hazard tables)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        table = rank_shapes(workload, sm, book, rm, overheads=ov)
        best = min(best, time.perf_counter() - t0)
    n = len(enumerate_shapes(workload)["gpu"])
    return n, n / best if table is not None else 0.0


def naive_rate(
    workload: Workload, sm: SpeedModel, book: object, rm: RevocationModel, ov: Overheads, sample: int = 300
) -> float:
    """One shape at a time: speed model, price book and revocation model called per shape."""
    cols = enumerate_shapes(workload)
    idx = np.random.default_rng(0).choice(cols["gpu"].size, size=sample, replace=False)
    net = workload.model
    run, prices = run_settings(workload, ov), PriceTable(book)
    t0 = time.perf_counter()
    for i in idx:
        g, r, p = cols["gpu"][i], cols["region"][i], cols["provisioning"][i]
        w, ps = int(cols["workers"][i]), int(cols["ps"][i])
        v = sm.predict(net, {g: w}, ps).steps_per_sec
        deg = sm.predict(net, {g: w - 1}, ps).steps_per_sec if w > 1 else 0.0
        w_usd, ps_usd = prices.lookup(
            np.array([g]), np.array([r]), np.array([p]), workload.allowed.ps_provisioning
        )
        one = ShapeColumns(
            gpu=np.array([g]),
            region=np.array([r]),
            provisioning=np.array([p]),
            workers=np.array([w]),
            ps=np.array([ps]),
            steps_per_sec=np.array([v]),
            degraded_steps_per_sec=np.array([deg]),
            worker_usd_per_hour=w_usd,
            ps_usd_per_hour=ps_usd,
            egress_usd=np.zeros(1),
        )
        estimate(one, run, ov, rm)
    return sample / (time.perf_counter() - t0)


def sync_rate(
    book: object, sm: SpeedModel, rm: RevocationModel, ov: Overheads, target: int
) -> tuple[int, float]:
    """Shapes/s of ``rank_sync_shapes`` on the sync example widened to ≈ ``target`` enumerated shapes."""
    base = load_workload(SYNC_EXAMPLE)
    gpus = tuple(g for g in ("K80", "P100", "V100", "T4", "L4", "A100") if g in book.gpus())  # type: ignore[attr-defined]
    regions = tuple(book.regions())  # type: ignore[attr-defined]
    allowed = dataclasses.replace(base.allowed, gpus=gpus, regions=regions, max_workers=16)
    par = dataclasses.replace(base.parallel, max_gpus_per_node=8)
    w = dataclasses.replace(base, allowed=allowed, parallel=par)
    per = len(enumerate_sync(w)["gpu"])
    w = dataclasses.replace(w, allowed=dataclasses.replace(allowed, max_workers=max(16, 16 * target // per)))
    rank_sync_shapes(w, sm, book, rm, overheads=ov)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        rank_sync_shapes(w, sm, book, rm, overheads=ov)
        best = min(best, time.perf_counter() - t0)
    n = len(enumerate_sync(w)["gpu"])
    return n, n / best


def main() -> None:
    book, sm, rm, ov = load_offline_book(), SpeedModel.load(), RevocationModel.load(), Overheads.load()
    base = load_workload(EXAMPLE)
    naive = naive_rate(workload_of_size(base, book, 10_000), sm, book, rm, ov)
    print(f"naive per-shape loop: {naive:,.0f} shapes/s (sample of 300)")
    for target in (10_000, 100_000):
        n, rate = vectorised_rate(workload_of_size(base, book, target), sm, book, rm, ov)
        print(f"vectorised rank_shapes, {n:,} shapes: {rate:,.0f} shapes/s ({n / rate * 1000:.0f} ms) "
              f"= {rate / naive:,.0f}x the naive loop; target >= 100,000 shapes/s: {'met' if rate >= 1e5 else 'NOT met'}")  # fmt: skip
    n, ps_rate = vectorised_rate(workload_of_size(base, book, 10_000), sm, book, rm, ov)
    m, rate = sync_rate(book, sm, rm, ov, 10_000)
    print(f"rank_sync_shapes, {m:,} shapes: {rate:,.0f} shapes/s ({m / rate * 1000:.0f} ms) = "
          f"{rate / ps_rate:.2f}x the PS ranking ({n:,} shapes) in this run")  # fmt: skip


if __name__ == "__main__":
    main()
