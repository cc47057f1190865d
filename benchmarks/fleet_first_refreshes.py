"""A large fleet's first refreshes through Debian's real Prometheus: N synthetic task exporters
(benchmarks/task_farm.py: one process, a file_sd target each) scraped every 15 s; a headless session
refreshing every 2 s from its start, once Prometheus holds 75 s of every task (as a server that has run
for a while). Per refresh: the job's examples/s against the farm's own (32 examples a step, task i
stepping every 0.25 × (1 + (i mod 97)/97) s) and Prometheus' ``sum(rate(cmdare_examples_total[1m]))``
at that moment, and what the figure says it covers.

    python benchmarks/fleet_first_refreshes.py [--tasks 2200] [--refreshes 10]

Goal (issue 31, item 4): a figure over part of the fleet says how much ("412 of 2,200 tasks so far") or
waits, and is whole (within 2% of Prometheus' own sum) within a few refreshes.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # the repository root: helpers import as tests.*

from task_farm import STEP_S, TaskFarm, file_sd  # noqa: E402

from tests.prom_server import PromServer  # noqa: E402

SCRAPE_INTERVAL = "15s"
TIMEOUT_S = 10.0


def farm_truth(n: int) -> float:
    """The farm's own examples/s over its ``n`` tasks (task_farm.page)."""
    return math.fsum(32 / (STEP_S * (1 + (i % 97) / 97)) for i in range(n))


async def watch(url: str, refreshes: int, truth: float) -> list[str]:
    from cmdare.collectors.prometheus.source import PrometheusAPISource
    from cmdare.tui.options import SessionOptions
    from cmdare.tui.session import MonitorSession

    src = PrometheusAPISource(url, 'job="bench"', timeout=TIMEOUT_S)
    opts = SessionOptions(refresh=2.0, read_only=True)
    session = MonitorSession(opts, extra_sources=[src])
    session.start()
    rows = []
    t0 = time.monotonic()
    try:
        for i in range(refreshes):
            started = time.monotonic()
            state = await session.refresh()
            answer = await src.query(session.poller.client(), "sum(rate(cmdare_examples_total[1m]))")  # type: ignore[union-attr]
            own = float(answer[0]["value"][1]) if answer else math.nan
            job = state.job("big")
            ex = job.examples_per_sec if job is not None else None
            part = job.coverage_note() if job is not None else ""
            off = f"{(ex or 0) / truth - 1:+.1%}" if ex else "–"
            rows.append(
                f"{i + 1:>3} {time.monotonic() - t0:6.1f} s  examples/s {ex or float('nan'):>10,.0f} "
                f"({off} vs the farm's {truth:,.0f}; Prometheus now {own:,.0f})  {part or 'whole'}"
            )
            print(rows[-1], flush=True)
            await asyncio.sleep(max(0.0, 2.0 - (time.monotonic() - started)))
    finally:
        await session.aclose()
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=2200)
    ap.add_argument("--refreshes", type=int, default=10)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp, TaskFarm() as farm:
        sd = Path(tmp) / "targets.json"
        file_sd(sd, farm.port, args.tasks)
        scrape = (
            f"  - job_name: 'bench'\n    file_sd_configs:\n      - files: ['{sd}']\n"
            f"    scrape_interval: {SCRAPE_INTERVAL}\n    scrape_timeout: 10s\n"
        )
        with PromServer(
            [], Path(tmp) / "prom", scrape_interval=SCRAPE_INTERVAL, scrape_configs=scrape
        ) as prom:
            # every task scraped for 75 s: Prometheus' rates over 1 min are whole
            prom.wait_for(
                "count(count_over_time(cmdare_task_info[1m]) >= 4)",
                lambda r: bool(r) and int(float(r[0]["value"][1])) >= args.tasks,
                timeout=240,
            )
            time.sleep(15)
            print(f"{args.tasks:,} tasks, scraped every {SCRAPE_INTERVAL}; a refresh every 2 s", flush=True)
            asyncio.run(watch(prom.url, args.refreshes, farm_truth(args.tasks)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
