"""Idle cost: the real ``cmdare-tui`` watching two static targets (their /metrics pages never change), in
tmux, against a bare Textual app showing a static label under the same harness in the same run.

    python benchmarks/idle.py [--seconds 60] [--warmup 15] [--rounds 1]

Each program runs in a private tmux server (``tmux -L``) at 120x40; after ``--warmup`` seconds (start-up,
the planner's warm-up, the first rankings) the bytes tmux receives from it (``pipe-pane``) and its CPU
time (``/proc/PID/stat``, user + system, threads included) are counted over ``--seconds``. Printed: CPU
as % of one core and terminal bytes/s for each, and the app's figures beside the bare app's.
Goal (issue 34): the app <= 0.5% of a core and <= 1 kB/s to the terminal.

The two targets are one exposition page each, rendered once from the project's own
``TrainingExporter`` (a worker that has made 1,200 steps) and served unchanged (tests/page_server.py). The app
asks such a page every 2nd, then every 4th refresh once it has read it the same three times (collectors/scrape).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(
    0, str(Path(__file__).resolve().parent.parent)
)  # the repository root: helpers import as tests.*
from tests.page_server import close_server, serve_pages  # noqa: E402

GOAL_CPU_PCT = 0.5
GOAL_BYTES_S = 1000.0
CMDARE = Path(sys.executable).with_name("cmdare-tui")
BARE_APP = """
from textual.app import App
from textual.widgets import Static
class Bare(App):
    def compose(self):
        yield Static("bare-app-ready")
Bare().run()
"""
TICKS = os.sysconf("SC_CLK_TCK")


def static_page(task: str) -> bytes:
    """One worker's exposition page, rendered once (counters at 1,200 steps; never changes after)."""
    from prometheus_client import generate_latest

    from cmdare.collectors.exporter import TrainingExporter

    exp = TrainingExporter(
        "idle-bench", "worker", task, gpu="v100", region="us-central1", provisioning="spot"
    )
    for _ in range(1200):
        exp.step(0.25, examples=32)
    exp.set_global_step(2400)
    return generate_latest(exp.registry)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def measure(argv: list[str], warmup: float, seconds: float, env: dict[str, str]) -> tuple[float, float]:
    """(CPU % of one core, terminal bytes/s) of ``argv`` in a private tmux server over ``seconds`` after
    ``warmup``."""
    sock = f"idle-bench-{os.getpid()}"
    tmux = ["tmux", "-L", sock]
    workdir = Path(tempfile.mkdtemp(prefix="idle-bench-"))
    out = workdir / "pane.bytes"
    cmd = " ".join(f"'{a}'" for a in argv)
    try:
        subprocess.run([*tmux, "-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "40", cmd],
                       check=True, env=env)  # fmt: skip
        pid = int(subprocess.check_output([*tmux, "display", "-p", "#{pane_pid}"], text=True).strip())
        time.sleep(warmup)
        subprocess.run([*tmux, "pipe-pane", "-O", f"cat > {out}"], check=True)
        c0, t0 = cpu_seconds(pid), time.monotonic()
        time.sleep(seconds)
        c1, t1 = cpu_seconds(pid), time.monotonic()
        subprocess.run([*tmux, "pipe-pane"], check=True)  # stop piping
        time.sleep(0.2)
        size = out.stat().st_size if out.exists() else 0
        return 100 * (c1 - c0) / (t1 - t0), size / (t1 - t0)
    finally:
        subprocess.run([*tmux, "kill-server"], check=False, capture_output=True)
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--warmup", type=float, default=15.0)
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    if shutil.which("tmux") is None:
        sys.exit("idle.py: tmux is not installed")
    pages = {"/a/metrics": static_page("w0"), "/b/metrics": static_page("w1")}
    srv = serve_pages(pages.get)
    base = f"http://127.0.0.1:{srv.server_address[1]}"
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env.update(TERM="xterm-256color", CMDARE_READ_ONLY="1")
    app = [str(CMDARE), "--read-only", "--target", f"{base}/a/metrics", "--target", f"{base}/b/metrics"]
    bare = [sys.executable, "-c", BARE_APP]
    runs: dict[str, list[tuple[float, float]]] = {"cmdare-tui": [], "bare Textual": []}
    for _ in range(args.rounds):  # rotated: the two alternate, so load drifts hit both
        runs["bare Textual"].append(measure(bare, args.warmup, args.seconds, env))
        runs["cmdare-tui"].append(measure(app, args.warmup, args.seconds, env))
    close_server(srv)
    print(f"idle, two static targets, {args.seconds:g} s after {args.warmup:g} s warm-up, "
          f"{args.rounds} round(s), medians:")  # fmt: skip
    med = {
        k: (statistics.median(c for c, _ in v), statistics.median(b for _, b in v)) for k, v in runs.items()
    }
    for name, (cpu, bps) in med.items():
        print(f"  {name:13s} {cpu:5.2f}% of a core  {bps:8.1f} B/s to the terminal")
    (cpu, bps), (bcpu, bbps) = med["cmdare-tui"], med["bare Textual"]
    print(f"  ratio CPU {cpu / bcpu if bcpu else float('inf'):.1f}x bare; "
          f"goal <= {GOAL_CPU_PCT}% ({'met' if cpu <= GOAL_CPU_PCT else 'missed'}), "
          f"<= {GOAL_BYTES_S:g} B/s ({'met' if bps <= GOAL_BYTES_S else 'missed'}); bare writes {bbps:.1f} B/s")  # fmt: skip


if __name__ == "__main__":
    main()
