"""The generated bottleneck rules (``cmdare-tui rules``) on a large synthetic fleet, timed by the engine itself:
Debian's ``/usr/bin/prometheus`` scrapes one page holding N tasks (each with its own ``instance`` label,
kept with ``honor_labels``: ~5 series a task, as the cmdare exporter gives them) and evaluates the rule
file; the figures are Prometheus' own: ``prometheus_rule_group_last_duration_seconds`` of each group, and
``process_cpu_seconds_total`` per evaluation less what scraping alone costs (measured first, no rules).

    python benchmarks/rules_engine.py [--tasks 100,10000] [--evaluations 6] [--rounds 2]

Jobs of 100 tasks (1 PS, 99 workers, one straggler each, the PS busy); 5 s scrape and evaluation, 20 s
window. Each N runs one Prometheus; the current file and the file as it was before (``_rules_before.yml``)
take turns on it (reloaded with SIGHUP), ``--rounds`` times each. Printed per N and file: the rule time per
evaluation interval (the interval's group, plus the share of the identity and graph-only groups: they run
once a window), Prometheus' CPU per evaluation of the interval's group (all groups' work, less scraping), the alerts firing, and the ratio current / before measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the repository root: helpers import as tests.*

from cmdare.collectors import metrics as M  # noqa: E402
from cmdare.planner.rules import engine_rules as R  # noqa: E402
from tests.page_server import close_server, serve_pages  # noqa: E402
from tests.prom_server import PromServer  # noqa: E402

PER_JOB = 100
INTERVAL_S = 5.0
WINDOW_S = 4 * INTERVAL_S
BEFORE = HERE / "_rules_before.yml"  # generated with the same interval and window


class FleetPage:
    """One HTTP page with every task of the fleet; counters grow with wall time (rates are constant)."""

    def __init__(self, tasks: int) -> None:
        self.t0 = time.time()
        self.rows: list[tuple[str, str, float, float]] = []  # (instance, info line, steps/s, step s)
        for i in range(tasks):
            job, k = f"job-{i // PER_JOB}", i % PER_JOB
            inst = f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}:9100"
            role = "ps" if k == 0 else "worker"
            info = (f'{M.TASK_INFO.name}{{instance="{inst}",job="{job}",task="t-{k}",role="{role}",'
                    f'gpu="{"" if role == "ps" else "P100"}",region="us-central1"}} 1')  # fmt: skip
            step_s = 0.12 * (1.6 if k == 7 else 1.0)  # one straggler a job
            self.rows.append((inst, info, 0.0 if role == "ps" else 1.0 / step_s * 0.7, step_s))
        self.server = serve_pages(lambda _path: self.render().encode())
        self.target = f"127.0.0.1:{self.server.server_address[1]}"

    def render(self) -> str:
        dt = time.time() - self.t0
        out = []
        for inst, info, rate, step_s in self.rows:
            out.append(info)
            if rate:
                n = rate * dt
                out += [f'{M.K_WORKER_STEPS}{{instance="{inst}"}} {n:.3f}',
                        f'{M.K_STEP_SECONDS_SUM}{{instance="{inst}"}} {n * step_s:.3f}',
                        f'{M.K_STEP_SECONDS_COUNT}{{instance="{inst}"}} {n:.3f}',
                        f'{M.K_PREEMPTED}{{instance="{inst}"}} 0']  # fmt: skip
            else:  # the PS: 3 Gbit/s each way
                b = 3e9 / 8 * dt
                out += [f'{M.PS_BYTES_SAMPLE}{{instance="{inst}",direction="in"}} {b:.0f}',
                        f'{M.PS_BYTES_SAMPLE}{{instance="{inst}",direction="out"}} {b:.0f}']  # fmt: skip
        return "\n".join(out) + "\n"

    def close(self) -> None:
        close_server(self.server)


def _own_metrics(url: str) -> dict[str, float]:
    """Prometheus' figures about itself (its ``/metrics`` page): CPU, and per group its last evaluation's
    duration and timestamp and the evaluations done (``group:metric`` keys)."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("process_cpu_seconds_total "):
            out["cpu"] = float(line.split()[1])
        elif line.startswith("prometheus_rule_group_") and 'rule_group="' in line:
            name = line.split("{", 1)[0].removeprefix("prometheus_rule_group_")
            group = line.split('rule_group="', 1)[1].split('"', 1)[0].rsplit(";", 1)[-1]
            out[f"{group}:{name}"] = float(line.rsplit(" ", 1)[1])
    return out


def _done(own: dict[str, float], group: str) -> float:
    return own.get(f"{group}:iterations_total", 0.0) - own.get(f"{group}:iterations_missed_total", 0.0)


class Server(PromServer):
    """Prometheus evaluating ``rules`` every INTERVAL_S (reloaded on SIGHUP)."""

    rules: Path

    def config(self) -> str:
        return (
            super().config().replace("global:\n", f"global:\n  evaluation_interval: {INTERVAL_S:g}s\n", 1)
            + f"rule_files: ['{self.rules}']\n"
        )


def _measure_file(prom: Server, text: str, evaluations: int, scrape_cpu: float) -> dict:
    """Load ``text`` as the rule file, wait until its alerts fire, then read ``evaluations`` evaluations."""
    prom.rules.write_text(text)
    assert prom.proc is not None
    prom.proc.send_signal(signal.SIGHUP)
    reloaded = time.time()
    time.sleep(2 * INTERVAL_S)
    durations: dict[str, list[float]] = {}
    stamps: dict[str, float] = {}
    start, t_start = None, 0.0
    deadline = time.monotonic() + (evaluations + 10) * INTERVAL_S * 6
    while len(durations.get(R.BOTTLENECK_GROUP, [])) < evaluations and time.monotonic() < deadline:
        time.sleep(INTERVAL_S / 4)
        own = _own_metrics(prom.url)
        if not prom.query('count(ALERTS{alertstate="firing",alertname="CmdareStraggler"})'):
            continue  # warming up (rates over a whole window, compute share over two)
        if start is None:
            start, t_start = own, time.monotonic()
        for group in (R.BOTTLENECK_GROUP, R.IDENTITY_GROUP, R.FIGURES_GROUP):
            stamp = own.get(f"{group}:last_evaluation_timestamp_seconds")
            if stamp and stamp > reloaded and stamp != stamps.get(group):  # an evaluation of this file
                stamps[group] = stamp
                durations.setdefault(group, []).append(own[f"{group}:last_duration_seconds"])
    end = _own_metrics(prom.url)
    assert start is not None, "the alerts never fired"
    elapsed = time.monotonic() - t_start
    runs = _done(end, R.BOTTLENECK_GROUP) - _done(start, R.BOTTLENECK_GROUP)
    rule_cpu = end["cpu"] - start["cpu"] - scrape_cpu * elapsed
    main = statistics.median(durations[R.BOTTLENECK_GROUP])
    slow = {
        g: statistics.median(durations[g]) if durations.get(g) else 0.0
        for g in (R.IDENTITY_GROUP, R.FIGURES_GROUP)
    }
    alerts = prom.query('count by (alertname) (ALERTS{alertstate="firing"})')
    return {
        "group_s": main,
        "slow_s": sum(slow.values()),
        "per_interval_s": main + sum(slow.values()) * INTERVAL_S / WINDOW_S,
        "cpu_per_interval_s": rule_cpu / runs if runs else float("nan"),
        "evaluations": len(durations[R.BOTTLENECK_GROUP]),
        "alerts": {a["metric"]["alertname"]: int(float(a["value"][1])) for a in alerts},
    }


def measure(tasks: int, evaluations: int, rounds: int, workdir: Path) -> dict[str, list[dict]]:
    page = FleetPage(tasks)
    workdir.mkdir(parents=True, exist_ok=True)
    prom = Server([page.target], workdir / "prom", scrape_interval=f"{INTERVAL_S:g}s", honor_labels=True)
    prom.rules = workdir / "cmdare-rules.yml"
    prom.rules.write_text("groups: []\n")
    prom.start(timeout=60)
    files = {
        "before": BEFORE.read_text(),
        "current": R.render(R.RuleOptions(interval_s=INTERVAL_S, window_s=WINDOW_S)),
    }
    try:
        time.sleep(3 * INTERVAL_S)  # scraping only: its CPU is taken off the rules' figures
        a, t0 = _own_metrics(prom.url), time.monotonic()
        time.sleep(6 * INTERVAL_S)
        scrape_cpu = (_own_metrics(prom.url)["cpu"] - a["cpu"]) / (time.monotonic() - t0)
        out: dict[str, list[dict]] = {name: [] for name in files}
        for _ in range(rounds):
            for name, text in files.items():
                out[name].append(_measure_file(prom, text, evaluations, scrape_cpu))
        return out
    finally:
        prom.stop()
        page.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default="100,10000")
    ap.add_argument("--evaluations", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(x) for x in args.tasks.split(",")):
            got = measure(n, args.evaluations, args.rounds, Path(tmp) / str(n))
            med = {
                name: {
                    k: statistics.median(r[k] for r in runs) for k in ("per_interval_s", "cpu_per_interval_s")
                }
                for name, runs in got.items()
            }
            for name, runs in got.items():
                for r in runs:
                    print(f"{n:>7,} tasks  {name:<8} rule group {r['group_s'] * 1e3:8.1f} ms + identity and figures "
                          f"{r['slow_s'] * 1e3:7.1f} ms a window = {r['per_interval_s'] * 1e3:8.1f} ms and "
                          f"{r['cpu_per_interval_s'] * 1e3:7.1f} ms CPU an interval of {INTERVAL_S:g} s "
                          f"({r['evaluations']} evaluations); firing {json.dumps(r['alerts'])}", flush=True)  # fmt: skip
            b, c = med["before"], med["current"]
            print(f"{n:>7,} tasks  current / before (medians): time {c['per_interval_s'] / b['per_interval_s']:.2f}, "
                  f"CPU {c['cpu_per_interval_s'] / b['cpu_per_interval_s']:.2f}", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
