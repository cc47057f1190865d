"""Robustness, counted: 10,000 polls against the fault-injecting server (tests/fault_server.py, own
process) through the real poller, store, lifecycle and SQLite recorder.

    python benchmarks/fault_injection.py [--targets 100] [--cycles 100] [--quick]

Prints crashes (exceptions out of a poll cycle, or a source that raised: must be 0), lost records
(polls missing from the recording: must be 0), and the share of faulty polls marked as they should
be (failed, or usable with a remark), beside the false-alarm share on clean polls.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the repository root: helpers import as tests.*

from cmdare.collectors import metrics as M  # noqa: E402
from cmdare.collectors.lifecycle import Lifecycle  # noqa: E402
from cmdare.collectors.poller import Poller  # noqa: E402
from cmdare.collectors.recording.recorder import Recorder  # noqa: E402
from cmdare.collectors.scrape.source import ScrapeSource, ScrapeTarget  # noqa: E402
from cmdare.collectors.store import Store  # noqa: E402
from tests.fault_server import EXPECT  # noqa: E402

TIMEOUT_S = 1.0  # per poll (the app default is 2 s); the server stalls 5 s on timeout/drip faults


def outcome(poll) -> str:  # noqa: ANN001
    return "failed" if not poll.ok else ("noted" if poll.error else "ok")


async def _run(urls: list[str], cycles: int, db: Path) -> tuple[list, int, int]:
    store, lifecycle = Store(capacity=256), Lifecycle()
    rec = Recorder(db, lifecycle=lifecycle, interval=TIMEOUT_S)
    poller = Poller(
        [ScrapeSource([ScrapeTarget(u) for u in urls], timeout=TIMEOUT_S)],
        store,
        lifecycle=lifecycle,
        interval=0.0,
        sinks=[rec],
    )
    polls, crashes = [], 0
    for _ in range(cycles):
        try:
            cycle = await poller.poll_once()
        except Exception as exc:  # what "never crashes" rules out
            crashes += 1
            print(f"  crash: {type(exc).__name__}: {exc}")
            continue
        crashes += len(cycle.source_errors)
        polls += cycle.polls
    await poller.aclose()
    rec.close()
    negative = sum(
        1 for ts in store.tasks.values() if (r := ts.rate(M.K_WORKER_STEPS, 3600)) is not None and r < 0
    )
    return polls, crashes, negative


def run(targets: int, cycles: int, seed: int = 1) -> dict[str, float]:
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "fault_server.py"), "--seed", str(seed)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        base = f"http://127.0.0.1:{port}"
        urls = [f"{base}/t/{i}/metrics" for i in range(targets)]
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "faults.sqlite"
            t0 = time.monotonic()
            polls, crashes, negative = asyncio.run(_run(urls, cycles, db))
            wall = time.monotonic() - t0
            with sqlite3.connect(db) as conn:
                recorded = conn.execute("SELECT count(*) FROM polls").fetchone()[0]
        with urllib.request.urlopen(f"{base}/faults", timeout=10) as r:
            served = {int(k): v for k, v in json.load(r).items()}
    finally:
        proc.terminate()
        proc.wait(5)
    by_url = {u: i for i, u in enumerate(urls)}
    right, total = Counter(), Counter()
    ambiguous = late = 0
    for p in polls:  # the request that arrived while this poll was running is the one it met
        start = p.t - p.elapsed - 0.002
        met = [f for f, t in served.get(by_url[p.source], []) if start <= t <= p.t + 0.002]
        fault = met[0] if met else "unreached"
        ambiguous += len(met) > 1
        total[fault] += 1
        good = outcome(p) == EXPECT.get(fault, "failed")
        right[fault] += good
        late += not good and p.error == "timed out"  # a usable page that did not arrive in time
    degraded = [f for f in total if EXPECT.get(f, "failed") != "ok"]
    n_deg = sum(total[f] for f in degraded)
    share = sum(right[f] for f in degraded) / max(1, n_deg)
    clean_wrong = sum(total[f] - right[f] for f in total if EXPECT.get(f) == "ok")
    clean_n = sum(total[f] for f in total if EXPECT.get(f) == "ok")
    print(
        f"fault_injection: {len(polls)} polls ({targets} targets x {cycles} cycles) in {wall:.0f} s, "
        f"timeout {TIMEOUT_S} s"
    )
    print(
        f"  crashes {crashes} (target 0) | lost records {len(polls) - recorded} of {len(polls)} (target 0) | "
        f"negative rates {negative}"
    )
    print(
        f"  degraded polls correctly marked: {share:.1%} of {n_deg} | false alarms on usable pages: "
        f"{clean_wrong / max(1, clean_n):.1%} of {clean_n}, of which timed out under load {late} | "
        f"ambiguous matches {ambiguous}"
    )
    print(
        "  per fault (right/served; unreached = timed out before the server read it): "
        + ", ".join(f"{f} {right[f]}/{total[f]}" for f in sorted(total))
    )
    return {"crashes": crashes, "lost": len(polls) - recorded, "share": share, "polls": len(polls)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", type=int, default=100)
    ap.add_argument("--cycles", type=int, default=100)
    ap.add_argument("--quick", action="store_true", help="CI-sized: 20 targets x 25 cycles")
    a = ap.parse_args(argv)
    t, c = (20, 25) if a.quick else (a.targets, a.cycles)
    r = run(t, c)
    return 0 if r["crashes"] == 0 and r["lost"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
