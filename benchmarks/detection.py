"""Detection rate, false alarms per hour and refreshes to detect of the bottleneck rules over many random
scenarios built from the CM-DARE measurements, fed through the real poller/store/lifecycle/overview path.

    python benchmarks/detection.py [--shared DIR] [--per-kind N] [--seed S]

Scenarios (refresh every 2 s, multiplicative noise 1–5%): healthy clusters (K80 1–8 workers, P100 1–3
workers, only where the measured curve is within 15% of linear — P100 Shake-Shake-big at 3 workers is
already PS-bound in the data and is flagged), P100 + 1 PS at 6–8 workers (ps-saturation from the start), a straggler (×1.4–2.0) appearing
at refresh 20, an input-bound job (GPUs fed 30–50%) from refresh 20, a worker killed at refresh 20
(node-silent), a pipeline whose WAN link carries D·A/B > c (wan-bound). Baseline, same run: the same
engine without hysteresis (every kind raises on its first true refresh) — what hysteresis buys.

Groups beyond these random scenarios (issue 16), each printed on its own, engine beside baseline:

* boundary: every network on P100 at 4 and 5 workers (the knee) and K80 at 8 workers;
* held-out: every network on P100 at 2 and 3 workers — points ``planner/rules/thresholds.py`` did not use to
  set the thresholds (it used K80 1-PS and P100 1-PS at 5–8 workers);
* no-facts: the job exports no ``cmdare_job_info`` (P100 at 4, 5, 6, 8 and K80 at 4, 8 workers): the
  measured-only path (PS traffic and compute share).

Their truth comes from the measured curve, not from the engine: ps-saturation when the measured efficiency
(steps/s at n workers ÷ n × one worker's) is below ``SATURATED_BELOW``, healthy at ``HEALTHY_FROM`` or
above, and "either" in between (the knee: a flag there is neither a miss nor a false alarm; printed, not
scored). The thresholds were not tuned on these groups.
Targets (issue 8): detection ≥ 95%, 0 false alarms on healthy scenarios, ps-saturation ≤ 3 refreshes —
checked on every group, so the boundary and held-out scenarios can fail the run.
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
sys.path.insert(0, str(REPO))  # the repository root: helpers import as tests.*

from cmdare.collectors.pricing import load_offline_book  # noqa: E402
from cmdare.planner.rules.thresholds import Thresholds  # noqa: E402
from tests.alert_sim import Harness, SimCluster, SimPipeline, load_curves  # noqa: E402

MODELS = ("ResNet-15", "ResNet-32", "Shake-Shake-small", "Shake-Shake-big")
ONSET = 20
INTERVAL_S = 2.0
#: Ground truth of the boundary / held-out / no-facts groups: a 1-PS cluster is PS-saturated when its
#: measured efficiency is below this (issue 16: the knee near 5 P100 workers spans 0.79–0.89).
SATURATED_BELOW = 0.80
HEALTHY_FROM = 0.85
GROUP_SHAPES = {
    "boundary": [("P100", 4), ("P100", 5), ("K80", 8)],
    "held-out": [("P100", 2), ("P100", 3)],
    "no-facts": [("P100", 4), ("P100", 5), ("P100", 6), ("P100", 8), ("K80", 4), ("K80", 8)],
}


@dataclass
class Scenario:
    kind: str  # healthy | ps-saturation | straggler | input-bound | node-silent | wan-bound
    build: object  # () -> (cluster, fault callback or None)
    refreshes: int
    onset: int
    expected: set[tuple[str, str]] = field(default_factory=set)
    group: str = "random"
    label: str = ""


@dataclass
class Outcome:
    kind: str
    detected: bool
    latency: int | None
    false_alarms: int
    hours: float
    group: str = "random"
    label: str = ""


def efficiency(curves: dict, gpu: str, model: str, n: int) -> float:
    """Measured cluster steps/s at ``n`` workers ÷ (n × one worker's)."""
    c = curves[(gpu, model)]
    return c[n] / (n * c[1])


def _group_scenarios(curves: dict, rng: random.Random, seeds: int) -> list[Scenario]:
    """The boundary, held-out and no-facts groups, truth from the measured efficiency."""
    out: list[Scenario] = []
    for group, shapes in GROUP_SHAPES.items():
        for m in MODELS:
            for gpu, n in shapes:
                eff = efficiency(curves, gpu, m, n)
                sat = eff < SATURATED_BELOW
                truth = "ps-saturation" if sat else ("healthy" if eff >= HEALTHY_FROM else "either")
                for _ in range(seeds):
                    noise, seed = rng.uniform(0.01, 0.05), rng.randrange(1 << 30)

                    def build(m=m, gpu=gpu, n=n, noise=noise, seed=seed, facts=group != "no-facts"):
                        c = {g: curves[(g, m)] for g in ("K80", "P100")}
                        return SimCluster(m, c, [gpu] * n, noise=noise, seed=seed, facts=facts), None

                    expected = {("ps-saturation", "sim/ps-0")} if truth != "healthy" else set()
                    out.append(Scenario(truth, build, 30 if sat else 60, 1, expected, group,
                                        f"{m} {gpu}×{n} eff {eff:.2f}"))  # fmt: skip
    return out


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
    return Outcome(sc.kind, bool(hits) or not sc.expected, latency, false, sc.refreshes * INTERVAL_S / 3600,
                   sc.group, sc.label)  # fmt: skip


def _report(name: str, results: list[Outcome]) -> dict[str, float]:
    results = [r for r in results if r.kind != "either"]  # the knee: not scored
    faults = [r for r in results if r.kind != "healthy"]
    healthy = [r for r in results if r.kind == "healthy"]
    det = sum(r.detected for r in faults) / len(faults) if faults else float("nan")
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


def _group_table(group: str, ours: list[Outcome], base: list[Outcome]) -> bool:
    """One line per shape of a group: truth, engine vs baseline (detected share, false alarms); True
    when the engine meets the targets on the group."""
    note = " (not used to fit thresholds)" if group == "held-out" else ""
    print(f"\n{group}{note}: truth = ps-saturation when measured efficiency < {SATURATED_BELOW:.2f}, healthy "
          f"from {HEALTHY_FROM:.2f}, either in between (not scored)")  # fmt: skip
    print(f"  {'scenario':40s} {'truth':14s} {'engine det/FA':>14s} {'no-hyst det/FA':>15s}")
    ok = True
    for label in dict.fromkeys(r.label for r in ours if r.group == group):
        a = [r for r in ours if r.label == label and r.group == group]
        b = [r for r in base if r.label == label and r.group == group]
        det_a, det_b = (sum(r.detected for r in x) / len(x) for x in (a, b))
        fa_a, fa_b = (sum(r.false_alarms for r in x) for x in (a, b))
        truth = a[0].kind
        if truth == "either":  # a flag is allowed: show whether one was raised
            det_a, det_b = (sum(r.latency is not None for r in x) / len(x) for x in (a, b))
        ok &= truth == "either" or (fa_a == 0 and (truth == "healthy" or det_a >= 0.95))
        print(f"  {label:40s} {truth:14s} {det_a:7.0%} / {fa_a:<4d} {det_b:8.0%} / {fa_b:<4d}")
    return ok


async def main_async(args: argparse.Namespace) -> int:
    from tests.alert_sim import CURVES_CSV

    path = (
        Path(args.shared) / "data/cmdare/derived/cluster_speed_vs_workers.csv" if args.shared else CURVES_CSV
    )
    curves = load_curves(path)
    book = load_offline_book()
    th = Thresholds()
    no_hyst = replace(th, raise_after=1, clear_after=1, raise_after_by_kind={})
    rng = random.Random(args.seed)
    scenarios = _scenarios(curves, rng, args.per_kind) + _group_scenarios(curves, rng, args.group_seeds)
    ours = [await _run(s, th, book) for s in scenarios]
    base = [await _run(s, no_hyst, book) for s in scenarios]
    a = _report("engine (hysteresis 3/3, ps-saturation 2), all groups", ours)
    b = _report("baseline (no hysteresis), all groups", base)
    groups_ok = all([_group_table(g, ours, base) for g in GROUP_SHAPES])
    fa_ratio = (
        f"{a['fa_per_hour'] / b['fa_per_hour']:.2f}×" if b["fa_per_hour"] else "n/a (baseline has none)"
    )
    print(
        f"\nratios vs baseline: false alarms/h {fa_ratio}, "
        f"median refreshes to detect {a['median_latency'] / b['median_latency']:.2f}×"
    )
    ok = a["detection"] >= 0.95 and a["fa_healthy"] == 0 and groups_ok
    print(
        f"targets: detection ≥ 95% {'met' if a['detection'] >= 0.95 else 'MISSED'} · 0 false alarms on healthy "
        f"{'met' if a['fa_healthy'] == 0 else 'MISSED'} · every boundary / held-out / no-facts shape "
        f"{'met' if groups_ok else 'MISSED'}"
    )
    return 0 if ok else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shared", default=None, help="directory holding data/cmdare (default: this repository)")
    p.add_argument("--per-kind", type=int, default=30, help="random scenarios per kind (default 30)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--group-seeds", type=int, default=3, help="noisy runs per boundary/held-out shape (default 3)"
    )
    return asyncio.run(main_async(p.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
