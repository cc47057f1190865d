"""Ten thousand tasks with the app on screen (issue 20): the real ``cmdare-tui`` (benchmarks/app_probe.py:
its own ``main`` plus two timing hooks) on a pseudo-terminal (120x40), reading Debian's real
``/usr/bin/prometheus``, which scrapes N synthetic task exporters (benchmarks/task_farm.py: one process,
one port, a path per task, listed to Prometheus by file_sd, each target with its own ``instance``).

Why a file_sd list of synthetic endpoints and not 10,000 real exporters or a backfill: 10,000
processes (or ports) do not fit on 2 shared cores, while one farm process answering ~670 scrapes/s
does, and Prometheus then does its real work (scraping, storing, answering); a promtool backfill
would leave out the scraping cost that the "app CPU <= 0.5x Prometheus'" target compares against.

    python benchmarks/app_scale.py [--tasks 1000,10000] [--seconds 60] [--quick]
    python benchmarks/app_scale.py --synthetic 10000,100000 [--seconds 60]

Per N, over the same window (after a warm-up of one sweep period, ``WARM_UP_S``: in its first sweep a
large fleet reads each task's recent history once, as the sweep meets it; the app's CPU share in that
warm-up is printed too): the app's CPU share of one core (UI included: the whole process), refresh
latency (poll began -> state painted) median and p99, the app's peak RSS, Prometheus' own CPU, the
farm's, and the load average. Then growth 1,000 -> 10,000. Targets: <= 10% of a core, p99 <= 1 s,
<= 400 MB, app CPU <= 0.5x Prometheus', CPU growth <= 3x.

``--synthetic`` (issue 34: 100,000 tasks): the same app against benchmarks/fake_prometheus.py (the
synthetic Prometheus API in its own process, answering like a server that scrapes every 15 s: no real
engine holds 100,000 targets on this machine), ``[caps] tasks`` set to N in a config file as a user
would, ``--timeout 30`` past 10,000 tasks. The warm-up lasts until the Cluster pane's border counts
every task (a large fleet's tasks appear as its sweep first reads them: minutes at 100,000), at most
``SYNTHETIC_WARM_UP_MAX_S``; its CPU share is printed as the first sweep's. The server's own CPU is
printed, not compared (it is no engine), and no session-only run follows (``prometheus_scale.py
--synthetic`` measures that).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # the repository root: helpers import as tests.*

from task_farm import TaskFarm, file_sd  # noqa: E402

from cmdare.collectors.prometheus.fleet import FOCUS_FROM, SWEEP_S  # noqa: E402
from tests.prom_server import PromServer  # noqa: E402

TARGET_CPU, TARGET_P99_S, TARGET_RSS_MB, TARGET_VS_PROM, TARGET_GROWTH = 0.10, 1.0, 400.0, 0.5, 3.0
SCRAPE_INTERVAL = "15s"
TIMEOUT_S = 10.0  # per query: at 10,000 tasks a loaded 2-core machine's Prometheus needs more than 2 s
WARM_UP_S = SWEEP_S + 10.0  # a large fleet is measured after one sweep period: each task's history read once
SMALL_WARM_UP_S = 10.0  # below FOCUS_FROM tasks every refresh reads every task: nothing to sweep
TICK = os.sysconf("SC_CLK_TCK")
SYNTHETIC_SCRAPE_S = 15.0
SYNTHETIC_WARM_UP_MAX_S = 600.0
UP_COUNT = re.compile(r"([\d,]+)/([\d,]+) up")  # the Cluster pane's border: up/total


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads) so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


ANSI = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]")


def spawn_on_pty(
    argv: list[str], env: dict[str, str], tail: bytearray, cols: int = 120, rows: int = 40
) -> subprocess.Popen:
    """``argv`` on a fresh pty whose output is drained by a thread, as a terminal would; the last
    64 kB are kept in ``tail`` (to read the status line)."""
    import fcntl
    import struct
    import termios

    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    env = {**env, "TERM": "xterm-256color", "COLUMNS": str(cols), "LINES": str(rows)}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
    os.close(slave)

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 1 << 16)
            except OSError:
                break
            if not chunk:
                break
            tail.extend(chunk)
            del tail[: max(0, len(tail) - (1 << 16))]
        os.close(master)

    threading.Thread(target=drain, daemon=True).start()
    return proc


def refreshes(path: Path, since: float) -> list[float]:
    """Poll-to-painted latencies of the refreshes that began after ``since``."""
    out = []
    for line in path.read_text().splitlines() if path.exists() else []:
        a, b = map(float, line.split())
        if a >= since:
            out.append(b - a)
    return out


def measure(n: int, seconds: float, tmp: Path) -> dict[str, float]:
    with TaskFarm() as farm:
        sd = tmp / f"targets-{n}.json"
        file_sd(sd, farm.port, n)
        scrape = (
            f"  - job_name: 'bench'\n    file_sd_configs:\n      - files: ['{sd}']\n"
            f"    scrape_interval: {SCRAPE_INTERVAL}\n    scrape_timeout: 10s\n"
        )
        with PromServer(
            [], tmp / f"prom-{n}", scrape_interval=SCRAPE_INTERVAL, scrape_configs=scrape
        ) as prom:
            prom.wait_for(
                "count(cmdare_task_info)",
                lambda r: bool(r) and int(float(r[0]["value"][1])) >= n,
                timeout=120,
            )
            probe = tmp / f"probe-{n}.txt"
            argv = [sys.executable, str(HERE / "app_probe.py"), "--prometheus", prom.url, "--selector",
                    'job="bench"', "--read-only", "--refresh", "2", "--timeout", str(TIMEOUT_S)]  # fmt: skip
            tail = bytearray()
            app = spawn_on_pty(argv, {**os.environ, "CMDARE_PROBE": str(probe)}, tail)
            try:
                deadline = time.monotonic() + 120
                while len(refreshes(probe, 0)) < 4 and time.monotonic() < deadline:  # the first refreshes
                    time.sleep(0.5)
                assert prom.proc is not None
                # the first sweep: a large fleet reads each task's history once as the sweep meets it
                w0, wa0 = time.monotonic(), cpu_s(app.pid)
                warm = WARM_UP_S if n > FOCUS_FROM else SMALL_WARM_UP_S
                time.sleep(warm)
                first = (cpu_s(app.pid) - wa0) / (time.monotonic() - w0)
                t0, a0, p0, f0 = time.monotonic(), cpu_s(app.pid), cpu_s(prom.proc.pid), cpu_s(farm.proc.pid)  # type: ignore[union-attr]
                time.sleep(seconds)
                wall = time.monotonic() - t0
                a1, p1, f1 = cpu_s(app.pid), cpu_s(prom.proc.pid), cpu_s(farm.proc.pid)  # type: ignore[union-attr]
                rss = peak_rss_mb(app.pid)
                lat = sorted(refreshes(probe, t0))
                status = last_status(bytes(tail))
            finally:
                app.terminate()
                try:
                    app.wait(10)
                except subprocess.TimeoutExpired:
                    app.kill()
            sess = asyncio.run(session_only(prom.url, seconds))
    p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else float("nan")
    return {
        "n": n,
        "seconds": wall,
        "first": first,
        "warm": warm,
        "app": (a1 - a0) / wall,
        "prom": (p1 - p0) / wall,
        "farm": (f1 - f0) / wall,
        "rss": rss,
        "median": statistics.median(lat) if lat else float("nan"),
        "p99": p99,
        "refreshes": len(lat),
        "load": os.getloadavg()[0],
        "status": status,
        "sess": sess["cpu"],
        "sess_median": sess["median"],
        "sess_p99": sess["p99"],
    }


def tasks_shown(screen: bytes) -> int:
    """The task count on the Cluster pane's border (``812/812 up``) last painted, 0 before one."""
    hits = UP_COUNT.findall(ANSI.sub(b"", screen).decode(errors="replace"))
    return int(hits[-1][1].replace(",", "")) if hits else 0


def print_full_collections(t0: float, t1: float) -> None:
    """With ``$CMDARE_GC_LOG`` set (benchmarks/app_probe.py writes it): the app's full garbage collections
    since start-up and inside the measured window ``t0..t1`` (monotonic), their seconds and frozen counts."""
    path = os.environ.get("CMDARE_GC_LOG")
    if not path or not Path(path).exists():
        return
    rows = [[float(x) for x in line.split()] for line in Path(path).read_text().splitlines() if line.strip()]
    inside = [r for r in rows if t0 <= r[0] <= t1]
    total = sum(r[1] for r in rows)
    print(
        f"  full collections: {len(rows)} since start-up ({total:.2f} s in all), {len(inside)} in the window: "
        + ", ".join(f"{r[1]:.2f} s ({int(r[2]):,} freed, {int(r[3]):,} frozen)" for r in inside),
        flush=True,
    )


def measure_synthetic(n: int, seconds: float, tmp: Path) -> dict[str, float]:
    """The app against the synthetic API server at ``n`` tasks (see the module's docstring)."""
    from fake_prometheus import FakePrometheus

    config = tmp / f"config-{n}.toml"
    config.write_text(f"[caps]\ntasks = {max(n, 10_000)}\n")
    timeout = 30.0 if n > 10_000 else TIMEOUT_S
    with FakePrometheus(n, SYNTHETIC_SCRAPE_S) as prom:
        probe = tmp / f"probe-{n}.txt"
        argv = [sys.executable, str(HERE / "app_probe.py"), "--config", str(config), "--prometheus", prom.url,
                "--selector", 'job="bench"', "--read-only", "--refresh", "2", "--timeout", str(timeout)]  # fmt: skip
        tail = bytearray()
        app = spawn_on_pty(argv, {**os.environ, "CMDARE_PROBE": str(probe)}, tail)
        try:
            deadline = time.monotonic() + 120
            while len(refreshes(probe, 0)) < 2 and time.monotonic() < deadline:  # the first refreshes
                time.sleep(0.5)
            w0, wa0, shown = time.monotonic(), cpu_s(app.pid), 0
            while shown < n and time.monotonic() - w0 < SYNTHETIC_WARM_UP_MAX_S:
                time.sleep(0.5)  # the count as it passes in the terminal's output (its tail is 64 kB)
                shown = max(shown, tasks_shown(bytes(tail)))
            time.sleep(2 * SYNTHETIC_SCRAPE_S)  # the sweep's period settles once every task is read
            warm = time.monotonic() - w0
            first = (cpu_s(app.pid) - wa0) / warm
            first_rss = peak_rss_mb(app.pid)
            t0, a0, p0 = time.monotonic(), cpu_s(app.pid), cpu_s(prom.proc.pid)  # type: ignore[union-attr]
            load0 = os.getloadavg()[0]
            time.sleep(seconds)
            wall = time.monotonic() - t0
            a1, p1 = cpu_s(app.pid), cpu_s(prom.proc.pid)  # type: ignore[union-attr]
            rss = peak_rss_mb(app.pid)
            lat = sorted(refreshes(probe, t0))
            status, shown = last_status(bytes(tail)), max(shown, tasks_shown(bytes(tail)))
            print_full_collections(t0, t0 + wall)
        finally:
            app.terminate()
            try:
                app.wait(10)
            except subprocess.TimeoutExpired:
                app.kill()
    p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else float("nan")
    return {"n": n, "seconds": wall, "first": first, "warm": warm, "first_rss": first_rss, "app": (a1 - a0) / wall,
            "prom": (p1 - p0) / wall, "rss": rss, "median": statistics.median(lat) if lat else float("nan"),
            "p99": p99, "refreshes": len(lat), "load": (load0 + os.getloadavg()[0]) / 2, "status": status,
            "shown": shown}  # fmt: skip


def goal_checks(big: dict[str, float]) -> list[tuple[str, bool]]:
    """The goals both reports check at the largest fleet: the app's CPU (UI included), p99, memory."""
    return [
        (
            f"app CPU at {big['n']:,} tasks <= {TARGET_CPU:.0%} of a core (UI included)",
            big["app"] <= TARGET_CPU,
        ),
        (f"refresh p99 <= {TARGET_P99_S:g} s", big["p99"] <= TARGET_P99_S),
        (f"app RSS <= {TARGET_RSS_MB:.0f} MB", big["rss"] <= TARGET_RSS_MB),
    ]


def report_synthetic(rows: list[dict[str, float]]) -> int:
    print("app_scale --synthetic: the real cmdare-tui on a pty (120x40) against benchmarks/fake_prometheus.py"
          f" (scrape every {SYNTHETIC_SCRAPE_S:g} s), refresh every 2 s")  # fmt: skip
    print(f"{'tasks':>8} {'app CPU':>8} {'s/refr':>7} {'median':>8} {'p99':>7} {'RSS MB':>7} {'refr':>5} "
          f"{'load':>5} | {'warm-up':>8} {'its CPU':>8} {'its RSS':>8} | {'server CPU':>10}")  # fmt: skip
    for r in rows:
        per = r["app"] * r["seconds"] / max(r["refreshes"], 1)
        print(f"{r['n']:>8,} {r['app']:>8.1%} {per:>7.3f} {r['median']:>7.3f}s {r['p99']:>6.3f}s {r['rss']:>7.0f} "
              f"{r['refreshes']:>5} {r['load']:>5.1f} | {r['warm']:>7.0f}s {r['first']:>8.1%} {r['first_rss']:>8.0f}"
              f" | {r['prom']:>10.1%}")  # fmt: skip
    for r in rows:
        print(f"  at {r['n']:,}: {r['shown']:,} tasks on the Cluster pane's border; status: {r['status']}")
    big = rows[-1]
    checks = [
        *goal_checks(big),
        (f"every task on screen ({big['n']:,})", big["shown"] >= big["n"]),
    ]
    if len(rows) > 1:
        per = [r["app"] * r["seconds"] / max(r["refreshes"], 1) for r in (rows[0], big)]
        growth = per[1] / per[0]
        checks.append((f"CPU per refresh growth {rows[0]['n']:,} -> {big['n']:,}: {growth:.2f}x <= "
                       f"{TARGET_GROWTH:g}x", growth <= TARGET_GROWTH))  # fmt: skip
    for what, ok in checks:
        print(f"  {what}: {'PASS' if ok else 'MISS'}")
    return 0 if all(ok for _, ok in checks) else 1


async def session_only(url: str, seconds: float) -> dict[str, float]:
    """The same refreshes without a screen: the headless session (sources, store, planner) in this
    process, a refresh every 2 s, over the same Prometheus right after the app's window."""
    import resource

    from cmdare.tui.app import collect_again
    from cmdare.tui.options import SessionOptions
    from cmdare.tui.session import MonitorSession

    def cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    opts = SessionOptions.of(
        prometheus=url, selector='job="bench"', refresh=2.0, timeout=TIMEOUT_S, read_only=True
    )
    session = MonitorSession(opts)
    session.start()
    try:
        for _ in range(3):  # warm-up: identities, backfill, the planner's models
            await session.refresh()
        gc.disable()  # the app's collector policy (it pauses the collector at start-up), so the two compare
        collect_again()
        c0, t0, lat = cpu(), time.monotonic(), []
        while time.monotonic() - t0 < seconds:
            began = time.monotonic()
            await session.refresh()
            lat.append(time.monotonic() - began)
            await asyncio.sleep(max(0.0, 2.0 - (time.monotonic() - began)))
        share = (cpu() - c0) / (time.monotonic() - t0)
    finally:
        await session.aclose()
    lat.sort()
    return {
        "cpu": share,
        "median": statistics.median(lat),
        "p99": lat[min(len(lat) - 1, int(0.99 * len(lat)))],
    }


def last_status(screen: bytes) -> str:
    """The last status line the app painted (``every 2s, polled 14:05 · …``), ANSI stripped."""
    text = ANSI.sub(b"", screen).decode(errors="replace")
    hits = re.findall(r"every [\d.]+s, polled [^\n\r]*", text)
    return hits[-1].strip()[:160] if hits else "(no status line seen)"


def report(rows: list[dict[str, float]]) -> int:
    print(f"{'tasks':>7} {'app CPU':>8} {'Prom CPU':>9} {'app/Prom':>9} {'farm':>6} {'median':>8} {'p99':>7} "
          f"{'RSS MB':>7} {'refr':>5} {'load':>5} | {'session CPU':>11} {'median':>8} {'p99':>7}")  # fmt: skip
    for r in rows:
        print(
            f"{r['n']:>7,} {r['app']:>8.1%} {r['prom']:>9.1%} {r['app'] / r['prom']:>8.2f}x {r['farm']:>6.1%} "
            f"{r['median']:>7.3f}s {r['p99']:>6.3f}s {r['rss']:>7.0f} {r['refreshes']:>5} {r['load']:>5.1f} | "
            f"{r['sess']:>11.1%} {r['sess_median']:>7.3f}s {r['sess_p99']:>6.3f}s"
        )
    print(
        "  (app: the real cmdare-tui on a pty, UI included, measured after its warm-up; session: the same"
        " refreshes headless, right after)"
    )
    for r in rows:
        print(
            f"  app CPU in the {r['warm']:.0f} s warm-up before, at {r['n']:,} tasks: {r['first']:.1%} of a core"
        )
    for r in rows:
        print(f"  status at {r['n']:,}: {r['status']}")
    big = rows[-1]
    checks = [
        *goal_checks(big),
        (f"app CPU <= {TARGET_VS_PROM}x Prometheus' own", big["app"] <= TARGET_VS_PROM * big["prom"]),
    ]
    if len(rows) > 1:
        growth = big["app"] / rows[0]["app"]
        per = [r["app"] * r["seconds"] / max(r["refreshes"], 1) for r in (rows[0], big)]
        print(f"  app CPU seconds per refresh: {per[0]:.2f} -> {per[1]:.2f} ({per[1] / per[0]:.1f}x)")
        checks.append(
            (
                f"CPU growth {rows[0]['n']:,} -> {big['n']:,}: {growth:.2f}x <= {TARGET_GROWTH:g}x",
                growth <= TARGET_GROWTH,
            )
        )
    for what, ok in checks:
        print(f"  {what}: {'PASS' if ok else 'MISS'}")
    return 0 if all(ok for _, ok in checks) else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default="1000,10000")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--quick", action="store_true", help="100 and 1,000 tasks, 20 s each")
    ap.add_argument(
        "--synthetic", default="", help="task counts against the synthetic API server, e.g. 10000,100000"
    )
    a = ap.parse_args(argv)
    if a.synthetic:
        rows = []
        with tempfile.TemporaryDirectory() as tmp:
            for n in [int(x) for x in a.synthetic.split(",")]:
                rows.append(measure_synthetic(n, a.seconds, Path(tmp)))
                print(f"  measured {n:,} tasks", flush=True)
        return report_synthetic(rows)
    tasks = [100, 1000] if a.quick else [int(x) for x in a.tasks.split(",")]
    seconds = 20.0 if a.quick else a.seconds
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in tasks:
            rows.append(measure(n, seconds, Path(tmp)))
            print(f"  measured {n:,} tasks", flush=True)
    return report(rows)


if __name__ == "__main__":
    sys.exit(main())
