"""Soak: ``cmdare-tui --demo`` runs under a real pseudo-terminal for 30 minutes (revocations and
replacements included); its RSS is sampled every minute. Not for CI.

    python benchmarks/soak.py [--minutes 30] [--sample-every 60] [--quick]

Pass: no growth after the first window. Ring buffers are allocated at full size when a series is
first seen, so after start-up (the planner model, the first revocation) RSS should stay flat; the
slope is judged after the first ``--window`` minutes.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

CMDARE = Path(sys.executable).with_name("cmdare-tui")
MAX_GROWTH_MB_PER_MIN = 0.5  # threshold for "no growth" (assumption: noise of RSS sampling)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def soak(minutes: float, every: float, window: float) -> list[tuple[float, float]]:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color"}
    proc = subprocess.Popen(
        [str(CMDARE), "--demo", "--read-only"],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,
        close_fds=True,
    )
    os.close(slave)
    samples: list[tuple[float, float]] = []
    t0 = time.monotonic()
    next_sample = t0 + every
    try:
        while time.monotonic() - t0 < minutes * 60 and proc.poll() is None:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    os.read(master, 1 << 16)  # keep the terminal drained, as a real one would
                except OSError:
                    break
            if time.monotonic() >= next_sample:
                samples.append(((time.monotonic() - t0) / 60, rss_mb(proc.pid)))
                print(f"  minute {samples[-1][0]:5.1f}: RSS {samples[-1][1]:6.1f} MB", flush=True)
                next_sample += every
    finally:
        crashed = proc.poll() is not None
        if not crashed:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(10)
        os.close(master)
    if crashed:
        print(f"  the app exited early with status {proc.returncode}")
    late = [(m, r) for m, r in samples if m >= window]
    if len(late) >= 2:
        slope = (late[-1][1] - late[0][1]) / (late[-1][0] - late[0][0])
        ok = slope <= MAX_GROWTH_MB_PER_MIN and not crashed
        print(
            f"soak: {minutes:g} min, RSS {samples[0][1]:.0f} -> {samples[-1][1]:.0f} MB; after minute {window:g}: "
            f"{slope:+.2f} MB/min (target <= {MAX_GROWTH_MB_PER_MIN} MB/min: {'PASS' if ok else 'MISS'})"
        )
    return samples


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--sample-every", type=float, default=60, help="seconds between RSS samples")
    ap.add_argument("--window", type=float, default=5, help="minutes before growth is judged")
    ap.add_argument(
        "--quick", action="store_true", help="2 minutes, a sample every 10 s, judged after 0.5 min"
    )
    a = ap.parse_args(argv)
    if a.quick:
        soak(2, 10, 0.5)
    else:
        soak(a.minutes, a.sample_every, a.window)
    return 0


if __name__ == "__main__":
    sys.exit(main())
