"""Large inputs (issue 20): what a source can grow to, each case in its own process (so its peak RSS is
its own), through the real session (sources → caps → poller → store → overview) with the default
caps; per case the peak RSS, the time, and whether the status line (the real ``status_line``) says
what was dropped. A bare session's RSS is measured in the same run as the baseline.

    python benchmarks/large_inputs.py [--only jsonl_tasks,replay_keys]

Cases (the issue's): Prometheus answering for 100,000 tasks (a synthetic API server in its own
process: a real Prometheus cannot scrape 100,000 targets on this machine); answers of 120,000 rows
(tests/hostile_server.py); a 6.9 MB JSON-lines file naming 100,000 tasks; 2,000 lines x 100
distinct tags; 10,000 TensorBoard event files; 1 MB label values; 200,000 polls in one recorded
cycle. Target: every case <= 300 MB peak RSS, with the truncation said.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # the repository root: helpers import as tests.*

RSS_LIMIT_MB = 300.0
LIMIT_S = 240.0


def _status(session: object, state: object) -> str:
    from cmdare.tui.widgets.status import status_line

    return status_line(read_only=True, demo=False, replay=None, problem=None, state=state, refresh=2.0).plain


async def _session(opts: object, refreshes: int, until: str = "") -> tuple[str, int]:
    """Run a real session ``refreshes`` times (or, with ``until``, up to 60 times 0.5 s apart until
    the status line holds it); (the last status line, tasks in the store)."""
    from cmdare.tui.session import MonitorSession

    session = MonitorSession(opts)  # type: ignore[arg-type]
    session.start()
    line = ""
    try:
        for i in range(60 if until else refreshes):
            state = await session.refresh()
            line = _status(session, state)
            if until and (until in line and i >= refreshes):
                break
            await asyncio.sleep(0.5 if until else 0)
    finally:
        await session.aclose()
    return line, len(session.store.tasks)


def _opts(**kw: object) -> object:
    from cmdare.tui.options import SessionOptions

    return SessionOptions(read_only=True, timeout=30.0, **kw)  # type: ignore[arg-type]


# --- cases (run in the child) ---------------------------------------------------------------------
async def baseline(tmp: Path) -> tuple[str, int]:
    log = tmp / "one.jsonl"
    log.write_text('{"step": 1, "time": 1.7e9}\n')
    return await _session(_opts(jsonl=[str(log)]), 2)


async def prom_tasks(tmp: Path) -> tuple[str, int]:
    from fake_prometheus import FakePrometheus

    with FakePrometheus(100_000) as prom:
        return await _session(_opts(prometheus=prom.url, selector='job="bench"'), 3)


async def prom_rows(tmp: Path) -> tuple[str, int]:
    from tests.hostile_server import HostileProcess

    with HostileProcess() as srv:
        return await _session(_opts(prometheus=f"http://127.0.0.1:{srv.port}/p/rows120000"), 2)


async def jsonl_tasks(tmp: Path) -> tuple[str, int]:
    log = tmp / "tasks.jsonl"
    with log.open("w") as fh:  # ~6.9 MB: 100,000 tasks, one line each
        fh.writelines(f'{{"task": "worker-{i:06d}", "step": {i}, "loss": 0.5}}\n' for i in range(100_000))
    print(f"  jsonl {log.stat().st_size / 1e6:.1f} MB", file=sys.stderr)
    return await _session(_opts(jsonl=[str(log)]), 3)


async def jsonl_tags(tmp: Path) -> tuple[str, int]:
    log = tmp / "tags.jsonl"
    with log.open("w") as fh:  # 2,000 lines x 100 distinct tags (~3.7 MB)
        for k in range(2000):
            tags = ", ".join(f'"m{k:04d}_{j:02d}": {j}.5' for j in range(100))
            fh.write(f'{{"step": {k}, {tags}}}\n')
    return await _session(_opts(jsonl=[str(log)]), 3)


async def tb_files(tmp: Path) -> tuple[str, int]:
    from tensorboard_catchup import scalar_event

    from cmdare.collectors.tensorboard.tfrecord import frame

    root = tmp / "tb"
    for i in range(10_000):  # 10,000 runs of one small event file each
        d = root / f"run{i:05d}"
        d.mkdir(parents=True)
        (d / "events.out.tfevents.1700000000.host").write_bytes(
            b"".join(frame(scalar_event(1.7e9 + s, s, b"loss", 1.0 / (s + 1))) for s in range(3))
        )
    return await _session(_opts(tensorboard=[str(root)]), 3, until="only")  # the walk runs in a thread


async def big_labels(tmp: Path) -> tuple[str, int]:
    from tests.hostile_server import HostileProcess

    with HostileProcess() as srv:
        return await _session(_opts(targets=[f"http://127.0.0.1:{srv.port}/t/biglabels"] * 1), 3)


async def replay_keys(tmp: Path) -> tuple[str, int]:
    from adversarial import hostile_recording

    from cmdare.collectors.recording.replay import ReplayFinished

    path = tmp / "rec.sqlite"
    hostile_recording(path, "huge_cycle")  # 200,000 more polls in cycles 2 and 4
    try:
        return await _session(_opts(replay=str(path), replay_speed=0.0), 4)
    except ReplayFinished:
        return "replay ended", 0


CASES = {
    "baseline": baseline,
    "prom_tasks": prom_tasks,
    "prom_rows": prom_rows,
    "jsonl_tasks": jsonl_tasks,
    "jsonl_tags": jsonl_tags,
    "tb_files": tb_files,
    "big_labels": big_labels,
    "replay_keys": replay_keys,
}
SAID = ("showing", "cap", "only the first", "…", "not kept", "refused", "dropped", "past")


def child(name: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.monotonic()
        line, tasks = asyncio.run(CASES[name](Path(tmp)))
        took = time.monotonic() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"line": line, "tasks": tasks, "time": took, "rss": rss}))


def run(name: str) -> dict:
    try:
        p = subprocess.run(
            [sys.executable, __file__, "--child", name], capture_output=True, text=True, timeout=LIMIT_S
        )
        return json.loads(p.stdout.strip().splitlines()[-1])
    except subprocess.TimeoutExpired:
        return {"line": f"no end within {LIMIT_S:.0f} s", "tasks": 0, "time": LIMIT_S, "rss": float("nan")}
    except (json.JSONDecodeError, IndexError):
        return {"line": f"crashed: {p.stderr[-300:]!r}", "tasks": 0, "time": 0.0, "rss": float("nan")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="")
    ap.add_argument("--quick", action="store_true", help="same cases (each is bounded)")
    ap.add_argument("--child", default="")
    a = ap.parse_args(argv)
    if a.child:
        child(a.child)
        return 0
    names = [n for n in a.only.split(",") if n] or [n for n in CASES if n != "baseline"]
    base = run("baseline")
    print(
        f"baseline (a session on a one-line JSONL file): peak RSS {base['rss']:.0f} MB, {base['time']:.1f} s"
    )
    print(f"{'case':<13}{'RSS MB':>8}{'ratio':>7}{'time s':>8}{'tasks':>8}  said  status line")
    missed = []
    for n in names:
        r = run(n)
        said = any(w in r["line"] for w in SAID)
        ok = r["rss"] <= RSS_LIMIT_MB and said
        if not ok:
            missed.append(n)
        print(
            f"{n:<13}{r['rss']:>8.0f}{r['rss'] / base['rss']:>6.2f}x{r['time']:>8.1f}{r['tasks']:>8}  "
            f"{'yes ' if said else 'NO  '}  {r['line'][:150]}",
            flush=True,
        )
    print(
        f"every case <= {RSS_LIMIT_MB:.0f} MB with the truncation said: {'PASS' if not missed else 'MISS ' + ', '.join(missed)}"
    )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
