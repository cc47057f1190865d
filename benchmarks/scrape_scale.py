"""Many nodes, direct scrape: N loopback exporters (~300 series each, node_exporter + DCGM + the job
exporter) served by a separate process (benchmarks/exporter_farm.py), polled every 2 s.

    python benchmarks/scrape_scale.py [--targets 50,200,1000] [--cycles 8] [--app] [--quick]

Per N it prints: CPU share of one core of the monitor process (the farm's CPU is excluded and
shown apart), split into the event-loop thread (scrape, parse, store, lifecycle, overview) and the
worker threads (the live planner re-ranks shapes there after each refresh), wall time per poll cycle (median / max), and the p99 event-loop lag while polling —
Textual draws on the same asyncio loop, so a frame cannot appear sooner than the loop is free
(``--app`` runs the real app headless and measures the lag inside it, rendering included).
Baseline in the same run: prometheus_client's reference parser on the same page (the fast scanner
in collectors/scrape/exposition.py falls back to it on lines it does not understand).
Target: <= 25% of one core at 200 targets.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from exporter_farm import Farm, NodePage, raise_fd_limit, series_count  # noqa: E402

from cmdare.collectors.scrape import exposition as E  # noqa: E402

TARGET_CPU_AT_200 = 0.25  # share of one core (issue 10)
LAG_TICK_S = 0.010


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main_thread_cpu() -> float:
    """CPU seconds of the event-loop thread alone (worker threads, e.g. the planner's ranking, excluded)."""
    f = Path(f"/proc/self/task/{threading.get_native_id()}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class ScaleResult:
    n: int
    cpu_share: float  # of one core, monitor process only
    loop_share: float  # of one core, the event-loop thread (collectors + overview; planner threads excluded)
    farm_share: float  # of one core, the exporter process (not counted)
    cycle_median_s: float
    cycle_max_s: float
    lag_p99_ms: float
    answered: int
    mode: str


async def _lag_probe(stop: asyncio.Event, lags: list[float]) -> None:
    """Sleep LAG_TICK_S repeatedly; lateness of each wake-up is how long a frame would wait."""
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        t0 = loop.time()
        await asyncio.sleep(LAG_TICK_S)
        lags.append(max(0.0, loop.time() - t0 - LAG_TICK_S))


def p99(xs: list[float]) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(0.99 * len(xs)))]


async def measure_session(urls: list[str], cycles: int, warmup: int, farm: Farm) -> ScaleResult:
    """The monitor without Textual: poller (scrape, parse, store, lifecycle) + planner analysis."""
    from cmdare.tui.options import SessionOptions
    from cmdare.tui.session import MonitorSession

    session = MonitorSession(SessionOptions(targets=urls, refresh=2.0, timeout=2.0))
    session.start()
    stop, lag_stop = asyncio.Event(), asyncio.Event()
    walls: list[float] = []
    lags: list[float] = []
    marks: dict[str, float] = {}
    answered = 0

    def on_state(state) -> None:  # noqa: ANN001
        nonlocal answered
        c = session.poller.last_cycle
        if "cpu" not in marks:
            # warm-up ends once the one-off work is done (connections, the planner's first model load)
            ranking = getattr(session, "_ranking", None)
            if session.poller.cycles >= warmup and (ranking is None or ranking.done()):
                marks.update(
                    cpu=cpu_seconds(), wall=time.monotonic(), farm=farm.cpu_seconds(), loop=main_thread_cpu()
                )
                lags.clear()
            return
        walls.append(c.elapsed)
        answered = c.answered
        if len(walls) >= cycles:
            stop.set()

    probe = asyncio.create_task(_lag_probe(lag_stop, lags))
    try:
        await asyncio.wait_for(session.run(stop, on_state), timeout=(warmup + cycles) * 2.0 + 180)
    finally:
        lag_stop.set()
        await probe
        wall = time.monotonic() - marks.get("wall", time.monotonic())
        cpu = cpu_seconds() - marks.get("cpu", cpu_seconds())
        loop_cpu = main_thread_cpu() - marks.get("loop", main_thread_cpu())
        farm_cpu = farm.cpu_seconds() - marks.get("farm", farm.cpu_seconds())
        await session.aclose()
    return ScaleResult(
        len(urls),
        cpu / wall,
        loop_cpu / wall,
        farm_cpu / wall,
        statistics.median(walls),
        max(walls),
        p99(lags) * 1000,
        answered,
        "session",
    )


async def measure_app(urls: list[str], cycles: int, warmup: int, farm: Farm) -> ScaleResult:
    """The real app, headless (rendering included), lag measured on its own loop."""
    from cmdare.tui.app import CmdareApp
    from cmdare.tui.options import SessionOptions

    app = CmdareApp(SessionOptions(targets=urls, refresh=2.0, timeout=2.0))
    lags: list[float] = []
    walls: list[float] = []
    async with app.run_test(size=(160, 50)) as pilot:
        lag_stop = asyncio.Event()
        probe = asyncio.create_task(_lag_probe(lag_stop, lags))
        deadline = time.monotonic() + (warmup + cycles) * 2.0 + 120

        async def until(n: int) -> None:
            while (app.state.cycles if app.state else 0) < n and time.monotonic() < deadline:
                await pilot.pause(0.05)

        await until(warmup)
        lags.clear()
        c0, t0, f0, seen, l0 = cpu_seconds(), time.monotonic(), farm.cpu_seconds(), warmup, main_thread_cpu()
        while seen < warmup + cycles and time.monotonic() < deadline:
            await until(seen + 1)
            seen = app.state.cycles
            walls.append(app.session.poller.last_cycle.elapsed)
        wall = time.monotonic() - t0
        cpu, farm_cpu, loop_cpu = cpu_seconds() - c0, farm.cpu_seconds() - f0, main_thread_cpu() - l0
        answered = app.session.poller.last_cycle.answered
        lag_stop.set()
        await probe
        await app.action_quit()
    return ScaleResult(
        len(urls),
        cpu / wall,
        loop_cpu / wall,
        farm_cpu / wall,
        statistics.median(walls),
        max(walls),
        p99(lags) * 1000,
        answered,
        "app",
    )


def parser_ratio(repeat: int = 100) -> tuple[float, float]:
    """(fast ms, reference ms) to parse one ~300-series page."""
    node = NodePage(1)
    node.t0 -= 1000
    text = node.body().decode()
    t = time.perf_counter()
    for _ in range(repeat):
        E.parse_exposition(text)
    fast = (time.perf_counter() - t) / repeat
    t = time.perf_counter()
    for _ in range(max(1, repeat // 10)):
        E._fold_samples(list(E._samples_reference(text)), None)
    ref = (time.perf_counter() - t) / max(1, repeat // 10)
    return fast * 1000, ref * 1000


def run(ns: list[int], cycles: int, warmup: int, app: bool) -> list[ScaleResult]:
    raise_fd_limit()
    fast_ms, ref_ms = parser_ratio()
    print(
        f"scrape_scale: {series_count()} series per target; parse one page {fast_ms:.2f} ms "
        f"vs prometheus_client {ref_ms:.2f} ms (ratio {ref_ms / fast_ms:.1f}x faster)"
    )
    results = []
    for n in ns:
        with Farm(n) as farm:
            fn = measure_app if app else measure_session
            r = asyncio.run(fn(farm.urls, cycles, warmup, farm))
        results.append(r)
        flag = ""
        if n == 200:
            ok = r.cpu_share <= TARGET_CPU_AT_200
            flag = f"  target <= {TARGET_CPU_AT_200:.0%}: {'PASS' if ok else 'MISS'} ({r.cpu_share / TARGET_CPU_AT_200:.2f}x of budget)"
        print(
            f"  N={n:5d} [{r.mode}] cpu {r.cpu_share:6.1%} of one core (loop thread {r.loop_share:5.1%}, "
            f"planner threads {max(0.0, r.cpu_share - r.loop_share):5.1%}) | cycle median {r.cycle_median_s * 1000:6.0f} ms"
            f" max {r.cycle_max_s * 1000:6.0f} ms | loop lag p99 {r.lag_p99_ms:6.1f} ms | answered {r.answered}/{n}"
            f" | farm (not counted) {r.farm_share:.0%}{flag}"
        )
    if len(results) >= 2:
        a, b = results[0], results[-1]
        print(
            f"  growth {a.n} -> {b.n} targets ({b.n / a.n:.0f}x): cpu {b.cpu_share / a.cpu_share:.1f}x, "
            f"cycle {b.cycle_median_s / a.cycle_median_s:.1f}x"
        )
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", default="50,200,1000", help="comma-separated target counts")
    ap.add_argument("--cycles", type=int, default=8, help="measured poll cycles per N")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument(
        "--app", action="store_true", help="run the real Textual app headless (rendering counted)"
    )
    ap.add_argument("--quick", action="store_true", help="CI-sized: N=50,200 and 4 cycles")
    args = ap.parse_args(argv)
    ns = [int(x) for x in args.targets.split(",")]
    cycles = args.cycles
    if args.quick:
        ns, cycles = [n for n in ns if n <= 200] or [50], min(cycles, 4)
    run(ns, cycles, args.warmup, args.app)
    return 0


if __name__ == "__main__":
    sys.exit(main())
