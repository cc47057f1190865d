"""What the consumers of a refresh cost at 10,000 and 100,000 tasks: the planner's and rules' passes
(:meth:`cmdare.planner.analysis.Analysis.refresh`), the live ranking (:meth:`Analysis.rank`) and the
app's ``apply_state`` (every pane, the paint that follows), fed synthetic job views shaped like
benchmarks/fake_prometheus.py's fleet (one job of K80 workers; ``--ps`` adds parameter servers, ``--sync``
makes it a data-parallel all-reduce job of 8 ranks a node), with ``--changed`` of the tasks given a new
view each refresh, as the collectors' overview hands them over (a new :class:`JobView` a refresh,
unchanged tasks the same objects). 13% is a 15 s scrape read every 2 s when every task's rates move; the
synthetic server's constant rate columns change far fewer (~800 views a refresh at 100,000 tasks: the
fleet's sweep and focus). The network is one the speed model predicts (``--fake-model``: the synthetic
server's, which it does not), so the outlook, the ranking and the model's verdicts run.

No collector runs here (decoding and the store are benchmarks/prometheus_scale.py's): this is the quick
loop for the consumer side. CPU per refresh (``time.process_time``, the collector paused around each
step) by part, medians over ``--refreshes``, and the growth from the first size to the last.

    python benchmarks/consumer_scale.py [--sizes 10000,100000] [--refreshes 8] [--changed 0.13]
                                        [--ps N] [--sync] [--fake-model] [--no-app] [--profile PART]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import pstats
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cmdare.collectors.observed import JobView, NodeView  # noqa: E402
from cmdare.collectors.samples import JobFacts, ModelSpec  # noqa: E402

if TYPE_CHECKING:
    from cmdare.planner.analysis import Analysis

T0 = 1_700_000_000.0
REFRESH_S = 2.0
RATE_WINDOW_S = 20.0  # the session's: refresh × RATE_WINDOW_POLLS
FAKE = JobFacts(
    "big", ModelSpec(name="ResNet-50")
)  # as fake_prometheus's cmdare_job_info: nothing to predict
# a network the speed model predicts (the study's ResNet-32 figures), with a target: outlook, ranking, ETA
PREDICTED = JobFacts(
    "big", ModelSpec(name="ResNet-32", model_flops=1658696889.0, params=1857722.0, batch_size=128), 10**9
)


def _node(i: int, rng: random.Random, ps_every: int, sync: bool = False) -> NodeView:
    """Task ``i``: a K80 worker whose step time is 0.1 s plus a little per task (fake_prometheus's), up
    for a day; every ``ps_every``-th a parameter server (0: none)."""
    ps = bool(ps_every) and i % ps_every == 0
    return NodeView(
        name=f"{'ps' if ps else 'worker'}-{i}", role="ps" if ps else "worker", gpu="" if ps else "K80",
        region="", zone="", provisioning="", status="up",
        steps_per_sec=None if ps else rng.uniform(0.95, 1.05), step_seconds=None if ps else 0.1 + i % 97 / 970,
        gpu_util=None, net_in_bps=rng.uniform(1e6, 1e8) if ps else None, net_out_bps=None,
        started_at=T0 - 86_400 - i % 1000, last_error=None, restarts=0, cause="",
        **({"allreduce_seconds": 0.02 + i % 89 / 8900, "rank": str(i), "local_rank": str(i % 8),
            "host": f"node-{i // 8}"} if sync else {}),
    )  # fmt: skip


def _kind(n: NodeView) -> tuple[str, str, str, str, str]:
    return (n.role, n.gpu, n.region, n.provisioning, n.status)


def job_views(
    n: int, changed: float, ps_every: int, facts: JobFacts, seed: int = 0, sync: bool = False
) -> Iterator[list[JobView]]:
    """Successive refreshes' job lists: each gives ``changed`` of the tasks a new view (new steps/s)."""
    rng = random.Random(seed)
    nodes = [_node(i, rng, ps_every, sync) for i in range(n)]
    tally = Counter(map(_kind, nodes))
    k = 0
    while True:
        if k:
            for i in rng.sample(range(n), int(changed * n)):
                if nodes[i].role != "ps":
                    nodes[i] = replace(nodes[i], steps_per_sec=rng.uniform(0.95, 1.05))
        job = JobView(name=facts.job, facts=facts, steps_per_sec=0.99 * n, examples_per_sec=None,
                      global_step=1000.0 + k * n, eta_seconds=None, nodes=list(nodes),
                      history=[0.99 * n] * min(k + 1, 120), sync="sync-allreduce" if sync else "async-ps" if ps_every else "",
                      tally=dict(tally))  # fmt: skip
        yield [job]
        k += 1


def rank(engine: Analysis, jobs: list[JobView], now: float) -> object:
    """The live ranking as the session starts it: with copies of the jobs' columns (a planner that keeps
    none, an older one measured for comparison, ranks from the views)."""
    if hasattr(engine, "ranking_columns"):
        return engine.rank(jobs, now, (), engine.ranking_columns(jobs))
    return engine.rank(jobs, now)


def cpu(step: Callable[[], object]) -> tuple[float, object]:
    gc.collect()
    gc.disable()
    try:
        t0 = time.process_time()
        out = step()
        return time.process_time() - t0, out
    finally:
        gc.enable()


def measure(
    n: int,
    refreshes: int,
    changed: float,
    ps_every: int,
    app: bool,
    profile: str,
    facts: JobFacts,
    sync: bool = False,
) -> dict[str, float]:
    from cmdare.collectors.pricing import load_offline_book
    from cmdare.collectors.store import Store
    from cmdare.planner.analysis import Analysis
    from cmdare.tui.session import MonitorState

    engine = Analysis(load_offline_book())
    store = Store()
    views = job_views(n, changed, ps_every, facts, sync=sync)
    parts: dict[str, list[float]] = {"analysis": [], "rank": [], "app": [], "cluster": []}
    prof = cProfile.Profile() if profile else None
    states: list[MonitorState] = []
    for k in range(refreshes + 2):
        jobs = next(views)
        now = T0 + REFRESH_S * k
        if prof is not None and profile == "analysis" and k >= 2:
            prof.enable()
        t, (planner, alerts) = cpu(lambda jobs=jobs, now=now: engine.refresh(store, jobs, now, RATE_WINDOW_S))  # type: ignore[misc]
        if prof is not None:
            prof.disable()
        if prof is not None and profile == "rank" and k >= 2:
            prof.enable()
        r, plans = cpu(lambda jobs=jobs, now=now: rank(engine, jobs, now))
        if prof is not None:
            prof.disable()
        engine.live_plans = plans  # type: ignore[assignment]
        if k >= 2:  # warm-up: the model's first predictions, the first ranking
            parts["analysis"].append(t)
            parts["rank"].append(r)
        states.append(MonitorState(t=now, cycles=k + 1, jobs=jobs, alerts=alerts, alert_history=[],  # type: ignore[arg-type]
                                   sources=[], demo=False, read_only=True, planner=planner))  # type: ignore[arg-type]  # fmt: skip
    if app:
        parts["app"], parts["cluster"] = asyncio.run(app_costs(states, prof if profile == "app" else None))
    if prof is not None:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
    out = {p: statistics.median(v) for p, v in parts.items() if v}
    print(f"  N={n:7,d} " + " | ".join(f"{p} {v * 1000:7.1f} ms" for p, v in out.items()), flush=True)
    return out


async def app_costs(
    states: list, prof: cProfile.Profile | None
) -> tuple[list[float], list[float]]:  # list[MonitorState]
    """CPU of ``apply_state`` and the paint that follows, the real app headless at 120x40; and of the
    Cluster pane's ``update_state`` alone (within it: its rows, table order and summary line)."""
    from cmdare.tui.app import CmdareApp
    from cmdare.tui.options import SessionOptions
    from cmdare.tui.panes.cluster import ClusterPane
    from cmdare.tui.session import MonitorSession, MonitorState

    class Quiet(MonitorSession):
        def start(self) -> None:  # no source: the states are handed over
            pass

    opts = SessionOptions(read_only=True)
    app = CmdareApp(opts, Quiet(opts), poll=False)
    costs: list[float] = []
    pane: list[float] = []
    async with app.run_test(size=(120, 40)) as pilot:
        cluster = app.query_one(ClusterPane)
        update = cluster.update_state

        def timed(state: MonitorState) -> None:
            t0 = time.process_time()
            update(state)
            pane.append(time.process_time() - t0)

        cluster.update_state = timed  # type: ignore[method-assign]

        async def settled() -> None:
            done = asyncio.Event()
            app.call_after_refresh(done.set)
            await done.wait()
            await pilot.pause()

        for k, s in enumerate(states):
            gc.collect()
            gc.disable()
            if prof is not None and k >= 2:
                prof.enable()
            t0 = time.process_time()
            app.apply_state(s)
            await settled()
            c = time.process_time() - t0
            if prof is not None:
                prof.disable()
            gc.enable()
            if k < 2:
                pane.clear()
            else:
                costs.append(c)
    return costs, pane


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--refreshes", type=int, default=8)
    ap.add_argument("--changed", type=float, default=0.13)
    ap.add_argument("--ps", type=int, default=0, help="every N-th task a parameter server (0: none)")
    ap.add_argument(
        "--fake-model", action="store_true", help="fake_prometheus's job: a network not predicted"
    )
    ap.add_argument("--sync", action="store_true", help="a data-parallel all-reduce job (8 ranks a node)")
    ap.add_argument("--no-app", action="store_true", help="the planner's parts only")
    ap.add_argument("--profile", choices=("", "analysis", "rank", "app"), default="")
    a = ap.parse_args(argv)
    print(f"consumer_scale: {a.changed:.0%} of tasks new each refresh, {a.refreshes} refreshes (medians)")
    out = [
        measure(
            int(x),
            a.refreshes,
            a.changed,
            a.ps,
            not a.no_app,
            a.profile,
            FAKE if a.fake_model else PREDICTED,
            a.sync,
        )
        for x in a.sizes.split(",")
    ]
    if len(out) > 1:
        first, last = out[0], out[-1]
        print("  growth: " + ", ".join(f"{p} {last[p] / first[p]:.1f}x" for p in last if first.get(p)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
