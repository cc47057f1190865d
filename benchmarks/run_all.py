"""Run every benchmark script in benchmarks/ (each in its own process, bounded in time) and print
every figure with its target, then a summary of the lines that carry a verdict.

    python benchmarks/run_all.py [--quick] [--only startup,memory] [--soak]

``--quick`` passes ``--quick`` to the scripts that have it (CI-sized runs) and smaller sizes to those
that take one; the 30-minute soak runs only with ``--soak``. Everything listens on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
HELPERS = {
    "run_all",
    "exporter_farm",
    "task_farm",
    "fake_prometheus",
    "app_probe",
    "child_server",
}  # not benchmarks
NOT_BY_DEFAULT = {"soak"}
# extra arguments for scripts without --quick, in quick mode
QUICK_ARGS = {"detection": ["--per-kind", "5", "--group-seeds", "1"]}
# per-script time limit (s); the full-size runs of the scale benchmarks take minutes
LIMIT_S = {
    "soak": 2400,
    "prometheus_scale": 900,
    "scrape_scale": 600,
    "fault_injection": 900,
    "app_scale": 1500,  # 1,000 and 10,000 tasks through a real Prometheus, the app on a pty
    "large_inputs": 900,
    "table_cost": 900,  # the Cluster pane at 1,000 and 10,000 tasks, before and after, in turns (~4 min)
}
DEFAULT_LIMIT_S = 600
VERDICT_WORDS = (
    "PASS",
    "MISS",
    "target",
    "ratio",
    "crashes",
    "polls/s",
    "node-hour",
    "first frame",
    "growth",
)


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{cpu}, {os.cpu_count()} logical CPUs, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}"
    )


def scripts(only: set[str] | None, soak: bool) -> list[Path]:
    found = sorted(p for p in HERE.glob("*.py") if p.stem not in HELPERS and not p.stem.startswith("_"))
    if only:
        return [p for p in found if p.stem in only]
    return [p for p in found if soak or p.stem not in NOT_BY_DEFAULT]


def run_one(path: Path, quick: bool) -> tuple[int, str, float]:
    args = [sys.executable, str(path)]
    if quick:
        args += ["--quick"] if "--quick" in path.read_text() else QUICK_ARGS.get(path.stem, [])
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            args,
            capture_output=True,
            text=True,
            timeout=LIMIT_S.get(path.stem, DEFAULT_LIMIT_S),
            cwd=HERE.parent,
        )
        out = proc.stdout + (f"\n[stderr tail]\n{proc.stderr[-1500:]}" if proc.returncode else "")
        return proc.returncode, out, time.monotonic() - t0
    except subprocess.TimeoutExpired as exc:
        text = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return 124, text + "\n[timed out]", time.monotonic() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="CI-sized runs")
    ap.add_argument("--only", default="", help="comma-separated script names (without .py)")
    ap.add_argument("--soak", action="store_true", help="include the 30-minute soak")
    a = ap.parse_args(argv)
    only = {s.strip() for s in a.only.split(",") if s.strip()} or None
    print(f"machine: {machine()}")
    print(f"mode: {'quick (CI-sized)' if a.quick else 'full'}\n")
    summary: list[str] = []
    failed = []
    for path in scripts(only, a.soak):
        print(f"=== {path.name}", flush=True)
        code, out, took = run_one(path, a.quick)
        print(out.rstrip())
        print(f"--- {path.name}: exit {code}, {took:.0f} s\n", flush=True)
        if code:
            failed.append(path.stem)
        summary += [
            f"{path.stem:>18}: {ln.strip()}" for ln in out.splitlines() if any(w in ln for w in VERDICT_WORDS)
        ]
    print("=== summary (figures with targets)")
    print("\n".join(summary) or "(none)")
    if failed:
        print(f"scripts that failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
