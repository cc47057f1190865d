"""Detection rate, false alarms per hour and refreshes to detect of the bottleneck rules over many random
scenarios built from the CM-DARE measurements, fed through the real poller/store/lifecycle/overview path.

    python benchmarks/detection.py [--shared DIR] [--per-kind N] [--seed S]

Scenarios (refresh every 2 s, multiplicative noise 1–5%): healthy clusters (K80 1–8 workers, P100 1–3
workers, only where the measured curve is within 15% of linear — P100 Shake-Shake-big at 3 workers is
already PS-bound in the data and is flagged), P100 + 1 PS at 6–8 workers (ps-saturation from the start), a straggler (×1.4–2.0) appearing
at refresh 20, an input-bound job (GPUs fed 30–50%) from refresh 20, a worker killed at refresh 20
(node-silent), a pipeline whose WAN link carries D·A/B > c (wan-bound). Baseline, same run: the same
engine without hysteresis (every kind raises on its first true refresh) — what hysteresis buys.
Targets (issue 8): detection ≥ 95%, 0 false alarms on healthy scenarios, ps-saturation ≤ 3 refreshes.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from test_alerts_sim import Harness, SimCluster, SimPipeline, load_curves  # noqa: E402

from cmdare.collectors.pricing import load_offline_book  # noqa: E402
from cmdare.planner.thresholds import Thresholds  # noqa: E402

MODELS = ("ResNet-15", "ResNet-32", "Shake-Shake-small", "Shake-Shake-big")
ONSET = 20
INTERVAL_S = 2.0


@dataclass
class Scenario:
    kind: str  # healthy | ps-saturation | straggler | input-bound | node-silent | wan-bound
    build: object  # () -> (cluster, fault callback or None)
    refreshes: int
    onset: int
    expected: set[tuple[str, str]] = field(default_factory=set)


@dataclass
class Outcome:
    kind: str
    detected: bool
    latency: int | None
    false_alarms: int
    hours: float


def _scenarios(curves: dict, rng: random.Random, per_kind: int) -> list[Scenario]:
    def cl(model: str, gpus: list[str], **kw: object) -> SimCluster:
        c = {g: curves[(g, model)] for g in ("K80", "P100")}
        return SimCluster(model, c, gpus, noise=rng.uniform(0.01, 0.05), seed=rng.randrange(1 << 30), **kw)

    def linear(m: str, gpu: str, n: int) -> bool:
        """The measured curve itself is within 15% of linear here (else the PS already binds)."""
        c = curves[(gpu, m)]
        return c[n] >= 0.85 * n * c[1]

    def pick(m: str, lo: int) -> tuple[str, int]:
        while True:
            gpu, n = rng.choice([("K80", rng.randint(lo, 8)), ("P100", rng.randint(lo, 3))])
            if linear(m, gpu, n):
                return gpu, n

    out: list[Scenario] = []
    for _ in range(per_kind):
        m = rng.choice(MODELS)
        gpu, n = pick(m, 1)
        out.append(Scenario("healthy", lambda m=m, g=gpu, n=n: (cl(m, [g] * n), None), 150, 1))
        n = rng.randint(6, 8)  # the plateau; 5 workers is the knee (efficiency 0.79-0.89)
        out.append(
            Scenario(
                "ps-saturation",
                lambda m=m, n=n: (cl(m, ["P100"] * n), None),
                30,
                1,
                {("ps-saturation", "sim/ps-0")},
            )
        )
        gpu, n = pick(m, 3)
        k, f = rng.randrange(n), rng.uniform(1.4, 2.0)

        def strag(m=m, g=gpu, n=n, k=k, f=f):
            c = cl(m, [g] * n)
            return c, lambda: setattr(c.workers[k], "slow", f)

        out.append(Scenario("straggler", strag, 60, ONSET, {("straggler", f"sim/worker-{k}")}))
        n, busy, dcgm = rng.randint(2, 8), rng.uniform(0.3, 0.5), rng.random() < 0.5

        def starve(m=m, n=n, busy=busy, dcgm=dcgm):
            c = cl(m, ["K80"] * n, dcgm=dcgm)
            return c, lambda: [setattr(w, "busy", busy) for w in c.workers]

        out.append(Scenario("input-bound", starve, 60, ONSET, {("input-bound", "sim")}))
        n = rng.randint(3, 8)
        k = rng.randrange(1, n)

        def kill(m=m, n=n, k=k):
            c = cl(m, ["K80"] * n)
            return c, lambda: setattr(c.workers[k], "alive", False)

        out.append(
            Scenario(
                "node-silent",
                kill,
                40,
                ONSET,
                {("node-silent", f"sim/worker-{k}"), ("node-revoked", f"sim/worker-{k}")},
            )
        )
        gbps = rng.uniform(0.2, 0.9)  # 2 × 50 MB per micro-batch: 0.2–0.9 Gbit/s → 0.9–4 s > 0.21 s compute

        def pipe(gbps=gbps):
            links = {frozenset(("dc-a", "dc-b")): gbps}
            return SimPipeline(
                ["dc-a", "dc-a", "dc-b", "dc-b"],
                links,
                noise=rng.uniform(0.01, 0.05),
                seed=rng.randrange(1 << 30),
            ), None

        out.append(Scenario("wan-bound", pipe, 30, 1, {("wan-bound", "pipe/1->2")}))
    return out


async def _run(sc: Scenario, th: Thresholds, book: object) -> Outcome:
    cluster, fault = sc.build()  # type: ignore[operator]
    h = Harness(cluster, interval=INTERVAL_S, thresholds=th, book=book)
    for i in range(1, sc.refreshes + 1):
        if i == sc.onset and fault is not None:
            fault()
        await h.refresh()
    raised = {(a.kind, a.subject): a.raised_at for a in reversed(h.engine.history)}
    t0 = h.clock.now() - (sc.refreshes - sc.onset) * INTERVAL_S
    hits = [t for key, t in raised.items() if key in sc.expected]
    latency = round((min(hits) - t0) / INTERVAL_S) + 1 if hits else None
    false = sum(1 for key in raised if key not in sc.expected)
    return Outcome(sc.kind, bool(hits) or not sc.expected, latency, false, sc.refreshes * INTERVAL_S / 3600)


def _report(name: str, results: list[Outcome]) -> dict[str, float]:
    faults = [r for r in results if r.kind != "healthy"]
    healthy = [r for r in results if r.kind == "healthy"]
    det = sum(r.detected for r in faults) / len(faults)
    fa_h = sum(r.false_alarms for r in results) / sum(r.hours for r in results)
    fa_healthy = sum(r.false_alarms for r in healthy)
    lat = [r.latency for r in faults if r.latency is not None]
    print(
        f"\n{name}: detection {det:.1%} of {len(faults)} faults · false alarms {fa_h:.2f}/h over "
        f"{sum(r.hours for r in results):.1f} h · on healthy scenarios {fa_healthy} · median refreshes to detect "
        f"{statistics.median(lat) if lat else float('nan'):.0f}"
    )
    for kind in sorted({r.kind for r in results}):
        rs = [r for r in results if r.kind == kind]
        ls = [r.latency for r in rs if r.latency is not None]
        print(
            f"  {kind:14s} n={len(rs):3d} detected {sum(r.detected for r in rs) / len(rs):6.1%}  false alarms "
            f"{sum(r.false_alarms for r in rs):3d}  median refreshes {statistics.median(ls) if ls else '-'}"
        )
    return {
        "detection": det,
        "fa_per_hour": fa_h,
        "fa_healthy": fa_healthy,
        "median_latency": statistics.median(lat) if lat else float("nan"),
    }


async def main_async(args: argparse.Namespace) -> int:
    from test_alerts_sim import CURVES_CSV

    path = (
        Path(args.shared) / "data/cmdare/derived/cluster_speed_vs_workers.csv" if args.shared else CURVES_CSV
    )
    curves = load_curves(path)
    book = load_offline_book()
    th = Thresholds()
    no_hyst = replace(th, raise_after=1, clear_after=1, raise_after_by_kind={})
    scenarios = _scenarios(curves, random.Random(args.seed), args.per_kind)
    ours = [await _run(s, th, book) for s in scenarios]
    base = [await _run(s, no_hyst, book) for s in scenarios]
    a = _report("engine (hysteresis 3/3, ps-saturation 2)", ours)
    b = _report("baseline (no hysteresis)", base)
    print(
        f"\nratios vs baseline: false alarms/h {a['fa_per_hour'] / b['fa_per_hour'] if b['fa_per_hour'] else 0:.2f}×, "
        f"median refreshes to detect {a['median_latency'] / b['median_latency']:.2f}×"
    )
    ok = a["detection"] >= 0.95 and a["fa_healthy"] == 0
    print(
        f"targets: detection ≥ 95% {'met' if a['detection'] >= 0.95 else 'MISSED'} · 0 false alarms on healthy "
        f"{'met' if a['fa_healthy'] == 0 else 'MISSED'}"
    )
    return 0 if ok else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shared", default=None, help="directory holding data/cmdare (default: this repository)")
    p.add_argument("--per-kind", type=int, default=30, help="random scenarios per kind (default 30)")
    p.add_argument("--seed", type=int, default=0)
    return asyncio.run(main_async(p.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
