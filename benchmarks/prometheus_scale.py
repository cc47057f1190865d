"""Many nodes through Prometheus: Debian's real ``/usr/bin/prometheus`` scrapes N loopback exporters
(benchmarks/exporter_farm.py, ~300 series each); cmdare-tui reads it through the HTTP API with its
per-task aggregate queries (``sum by (job, instance)``: the server folds ~300 series into ~12).

    python benchmarks/prometheus_scale.py [--targets 100,1000] [--refreshes 8] [--quick]
    python benchmarks/prometheus_scale.py --synthetic 1000,10000 [--scrape 15] [--refreshes 60]
    python benchmarks/prometheus_scale.py --synthetic 100000 --minutes 60 [--timeline out.json]

Per N: the monitor's CPU share of one core at a 2 s refresh (Prometheus and the farm run in their
own processes and are not counted), and wall time per refresh (query + decode + store + overview).
Targets: <= 10% of one core and <= 200 ms per refresh at 1,000 nodes; growth 100 -> 1,000 shown.

``--synthetic``: the same session against benchmarks/fake_prometheus.py (a synthetic API server in its
own process, answering like a Prometheus that scrapes every ``--scrape`` s; 0: every answer new) at
each N in one run: our CPU seconds per refresh (decode, store, overview, rules; Prometheus' own cost
is not in it), and the growth in CPU per refresh from the first N to the last (issue 20: <= 3x). The session
runs under the app's garbage-collector policy (``--collector app``, tui/gc_pacing.py) or CPython's defaults.

``--minutes M``: a long session (what an operator who leaves the app open meets): M minutes of refreshes
after the warm-up instead of ``--refreshes``, with the process' resident set sampled every 0.5 s from the
start: one line a minute (the minute's highest and last RSS, the full collections and the pacer's full walks
so far, the frozen objects, the points the store holds) and the peak over the whole run.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # the repository root: helpers import as tests.*

from exporter_farm import Farm, raise_fd_limit  # noqa: E402
from scrape_scale import main_thread_cpu  # noqa: E402

from tests.prom_server import PromServer  # noqa: E402

TARGET_CPU = 0.10
TARGET_REFRESH_S = 0.200
REFRESH_S = 2.0
SCRAPE_INTERVAL = "5s"  # Prometheus' own scrape interval (its cost is not the monitor's)
# --synthetic measures 60 refreshes (120 s) at each N: a whole sweep at 10,000 tasks (SWEEP_S) and a dozen column
# reads, so that where the window falls on them (and on a full garbage collection) moves the figure little; with 8
# refreshes (16 s) one column read or collection more or less moved the 10,000-task figure 0.044-0.079 s
SYNTHETIC_REFRESHES = 60
DEFAULT_GC_THRESHOLD = gc.get_threshold()  # CPython's, as the process started
# --synthetic runs the session under the app's collector policy by default: the session-only figures are then
# the app's own minus its screen (app_scale.py's session-only run does the same); "default" keeps CPython's
COLLECTORS = {
    "app": "the app's (young collections every 50,000 allocations, survivors frozen, paced full collections)",
    "default": "CPython's default thresholds",
}


def peak_rss_mb() -> float:
    """This process's peak resident set so far (MB): with N ascending, the largest N's."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_mb() -> float:
    """This process's resident set now (MB), from /proc (0 where there is none)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class RssTimeline:
    """Samples the resident set every ``every_s`` in a thread; :meth:`mark` closes a bucket (a minute of a
    long session) with the highest sample since the last mark and the figures the caller adds."""

    def __init__(self, every_s: float = 0.5) -> None:
        import threading

        self._every_s = every_s
        self._stop = threading.Event()
        self._high = 0.0
        self.peak = 0.0
        self.rows: list[dict[str, float]] = []
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._every_s):
            r = rss_mb()
            self._high = max(self._high, r)
            self.peak = max(self.peak, r)

    def mark(self, **figures: float) -> dict[str, float]:
        """Close a bucket: its highest RSS, the RSS now, seconds since the start, and ``figures``."""
        now = rss_mb()
        row = {
            "t_s": time.monotonic() - self._t0,
            "rss_max_mb": max(self._high, now),
            "rss_mb": now,
            **figures,
        }
        self.peak = max(self.peak, now)
        self._high = 0.0
        self.rows.append(row)
        return row

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def _measure(
    url: str,
    n: int,
    refreshes: int,
    caps: dict[str, int] | None = None,
    collector: str = "default",
    minutes: float = 0.0,
    timeline: RssTimeline | None = None,
) -> tuple[float, float, list[float], int, float, list[float]]:
    from cmdare.tui.gc_pacing import settle_collector, start_pacing, stop_pacing
    from cmdare.tui.options import SessionOptions
    from cmdare.tui.session import MonitorSession

    session = MonitorSession(
        SessionOptions.of(  # past 10,000 tasks a query may take the synthetic server longer (as a user would set)
            prometheus=url,
            selector='job="bench"',
            refresh=REFRESH_S,
            timeout=30.0 if n > 10_000 else 10.0,
            caps=caps or {},
        )  # fmt: skip
    )
    session.start()
    if (
        collector == "app"
    ):  # the app's policy from its first data frame on (tui/gc_pacing.py settle_collector)
        settle_collector()
    try:
        for _ in range(2):  # warm-up: connection, planner model
            state = await session.refresh()
        t_warm = time.monotonic()
        # a fleet past 20,000 tasks meets its tasks as its sweep reads them (~4 min at 100,000): measured once
        # every task has been read once (each task's first read costs more than the next ones)
        while n > 20_000 and sum(len(j.nodes) for j in state.jobs) < n and time.monotonic() - t_warm < 600:
            start = time.monotonic()
            state = await session.refresh()
            await asyncio.sleep(max(0.0, REFRESH_S - (time.monotonic() - start)))
        if n > 20_000:
            print(f"  N={n}: every task read once after {time.monotonic() - t_warm:.0f} s of refreshes")
        if hasattr(session, "update_plans"):
            await session.update_plans()  # the live planner's first (model-loading) ranking
        walls: list[float] = []
        cycles: list[float] = []  # CPU of each refresh's cycle (the refresh and its pause: threads included)
        c0, t0, l0 = cpu_seconds(), time.monotonic(), main_thread_cpu()
        nodes = 0
        if minutes:
            refreshes = round(minutes * 60 / REFRESH_S)
        next_mark = time.monotonic() + 60.0
        for _ in range(refreshes):
            if timeline is not None and time.monotonic() >= next_mark:
                next_mark += 60.0
                pacer = start_pacing() if collector == "app" else None
                row = timeline.mark(
                    full_collections=gc.get_stats()[2]["collections"],
                    full_walks=pacer.full_walks if pacer is not None else 0,
                    frozen=gc.get_freeze_count(),
                    store_mb=sum(ts.nbytes for ts in session.store.tasks.values()) / 2**20,
                )
                print(
                    f"    {row['t_s'] / 60:5.1f} min: RSS max {row['rss_max_mb']:4.0f} MB, now {row['rss_mb']:4.0f} MB"
                    f" | full collections {row['full_collections']:.0f}, pacer's walks {row['full_walks']:.0f},"
                    f" frozen {row['frozen'] / 1e6:.2f} M | store points {row['store_mb']:.0f} MB",
                    flush=True,
                )
            start, c_start = time.monotonic(), cpu_seconds()
            state = await session.refresh()
            walls.append(time.monotonic() - start)
            nodes = sum(len(j.nodes) for j in state.jobs)
            await asyncio.sleep(max(0.0, REFRESH_S - (time.monotonic() - start)))
            cycles.append(cpu_seconds() - c_start)
        wall = time.monotonic() - t0
        cpu = cpu_seconds() - c0
        share, loop_share = cpu / wall, (main_thread_cpu() - l0) / wall
    finally:
        await session.aclose()
        if collector == "app":  # the next N starts as this one did
            stop_pacing()
            gc.unfreeze()
            gc.set_threshold(*DEFAULT_GC_THRESHOLD)
    return share, loop_share, walls, nodes, cpu / refreshes, cycles


def quartiles(xs: list[float]) -> tuple[float, float, float]:
    """The quartiles of ``xs`` (its median in the middle): how much one refresh's CPU moves in a run."""
    if len(xs) < 2:
        return (xs[0],) * 3 if xs else (0.0, 0.0, 0.0)
    q1, q2, q3 = statistics.quantiles(xs, n=4)
    return q1, q2, q3


def measure(n: int, refreshes: int) -> dict[str, float]:
    with Farm(n) as farm, tempfile.TemporaryDirectory() as tmp:
        targets = [u.removeprefix("http://").removesuffix("/metrics") for u in farm.urls]
        prom = PromServer(targets, Path(tmp), scrape_interval=SCRAPE_INTERVAL, job="bench", honor_labels=True)
        prom.start(timeout=60)
        try:
            prom.wait_for_targets(n, timeout=120)
            prom.wait_for(
                "count(cmdare_worker_steps_total)", lambda r: bool(r) and float(r[0]["value"][1]) >= n, 60
            )
            time.sleep(2 * float(SCRAPE_INTERVAL.rstrip("s")) + 1)  # two scrapes: rates exist
            share, loop_share, walls, nodes, _, _ = asyncio.run(_measure(prom.url, n, refreshes))
        finally:
            prom.stop()
    med = statistics.median(walls)
    print(
        f"  N={n:5d} cpu {share:6.1%} of one core (loop thread {loop_share:5.1%}, planner threads "
        f"{max(0.0, share - loop_share):5.1%}) | refresh median {med * 1000:5.0f} ms max {max(walls) * 1000:5.0f} ms"
        f" | nodes seen {nodes}/{n}"
    )
    return {"n": n, "cpu": share, "refresh_s": med, "nodes": nodes}


def synthetic(
    ns: list[int],
    refreshes: int,
    scrape_s: float,
    collector: str = "app",
    minutes: float = 0.0,
    timeline_out: str = "",
) -> list[dict[str, float]]:
    """CPU seconds per refresh against the synthetic server at each N (see the docstring)."""
    from fake_prometheus import FakePrometheus

    print(
        f"prometheus_scale --synthetic: fake Prometheus (scrape every {scrape_s:g} s), refresh every {REFRESH_S:g} s,"
        f" {f'{minutes:g} minutes' if minutes else f'{refreshes} refreshes'} a N, collector: {COLLECTORS[collector]}"
    )
    out = []
    timeline = RssTimeline() if minutes else None
    for n in ns:
        with FakePrometheus(n, scrape_s) as prom:
            c0 = cpu_seconds()
            # past the default tasks cap (10,000) the session is configured for N, as a user would
            caps = {"tasks": n} if n > 10_000 else None
            share, _, walls, nodes, per, cycles = asyncio.run(
                _measure(prom.url, n, refreshes, caps, collector, minutes, timeline)
            )
        rss = peak_rss_mb()
        if timeline is not None:
            print(
                f"  N={n:6d} over {minutes:g} minutes: peak RSS sampled {timeline.peak:.0f} MB (ru_maxrss {rss:.0f} MB)"
            )
            if timeline_out:
                import json

                Path(timeline_out).write_text(json.dumps(timeline.rows, indent=1))
        q1, q2, q3 = quartiles(cycles)
        out.append({"n": n, "cpu_per_refresh": per, "cpu": share, "refresh_s": statistics.median(walls),
                    "rss_mb": rss})  # fmt: skip
        print(
            f"  N={n:6d} cpu {per:6.3f} s per refresh ({share:6.1%} of one core) | refresh median "
            f"{statistics.median(walls) * 1000:5.0f} ms max {max(walls) * 1000:5.0f} ms | nodes {nodes}/{n}"
            f" | peak RSS {rss:.0f} MB | warm-up and measure {cpu_seconds() - c0:.1f} s CPU"
        )
        print(
            f"           a refresh's CPU over {len(cycles)} refreshes: quartiles {q1:.3f} / {q2:.3f} / {q3:.3f} s"
        )
    if len(out) > 1:
        a, b = out[0], out[-1]
        ratio = b["cpu_per_refresh"] / a["cpu_per_refresh"]
        print(
            f"  growth {a['n']:.0f} -> {b['n']:.0f} tasks ({b['n'] / a['n']:.0f}x): CPU per refresh "
            f"{ratio:.1f}x (target <= 3x: {'PASS' if ratio <= 3 else 'MISS'})"
        )
    return out


def run(ns: list[int], refreshes: int) -> list[dict[str, float]]:
    raise_fd_limit()
    print(
        f"prometheus_scale: real Prometheus (scrape every {SCRAPE_INTERVAL}), monitor refresh every {REFRESH_S:g} s"
    )
    out = [measure(n, refreshes) for n in ns]
    last = out[-1]
    ok_cpu, ok_t = last["cpu"] <= TARGET_CPU, last["refresh_s"] <= TARGET_REFRESH_S
    print(
        f"  at N={last['n']:.0f}: cpu target <= {TARGET_CPU:.0%}: {'PASS' if ok_cpu else 'MISS'} "
        f"({last['cpu'] / TARGET_CPU:.2f}x of budget); refresh target <= {TARGET_REFRESH_S * 1000:.0f} ms: "
        f"{'PASS' if ok_t else 'MISS'} ({last['refresh_s'] / TARGET_REFRESH_S:.2f}x of budget)"
    )
    if len(out) > 1:
        a = out[0]
        print(
            f"  growth {a['n']:.0f} -> {last['n']:.0f} nodes ({last['n'] / a['n']:.0f}x): "
            f"cpu {last['cpu'] / a['cpu']:.1f}x, refresh {last['refresh_s'] / a['refresh_s']:.1f}x"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", default="100,1000")
    ap.add_argument(
        "--refreshes", type=int, default=None, help="refreshes measured at each N (8; --synthetic: 60)"
    )
    ap.add_argument("--quick", action="store_true", help="CI-sized: 100 nodes, 4 refreshes")
    ap.add_argument(
        "--synthetic", default="", help="task counts against the synthetic server, e.g. 1000,10000"
    )
    ap.add_argument(
        "--scrape", type=float, default=15.0, help="--synthetic: its scrape interval (0: all new)"
    )
    ap.add_argument(
        "--collector",
        choices=sorted(COLLECTORS),
        default="app",
        help="--synthetic: the garbage collector's policy",
    )
    ap.add_argument(
        "--minutes", type=float, default=0.0, help="--synthetic: a long session of this many minutes a N"
    )
    ap.add_argument(
        "--timeline", default="", help="--minutes: write the minute-by-minute rows to this JSON file"
    )
    a = ap.parse_args(argv)
    if a.synthetic:
        ns = [int(x) for x in a.synthetic.split(",")]
        synthetic(ns, a.refreshes or SYNTHETIC_REFRESHES, a.scrape, a.collector, a.minutes, a.timeline)
        return 0
    ns = [100] if a.quick else [int(x) for x in a.targets.split(",")]
    run(ns, 4 if a.quick else a.refreshes or 8)
    return 0


if __name__ == "__main__":
    sys.exit(main())
