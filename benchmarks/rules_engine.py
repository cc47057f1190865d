"""The generated bottleneck rules (``cmdare-tui rules``) on a large synthetic fleet, timed by the engine itself:
Debian's ``/usr/bin/prometheus`` scrapes one page holding N tasks (each with its own ``instance`` label,
kept with ``honor_labels``: ~7 series a task, as the cmdare exporter gives them) and evaluates the rule
file; the figure is Prometheus' own ``prometheus_rule_group_last_duration_seconds`` of the group.

    python benchmarks/rules_engine.py [--tasks 100,10000] [--evaluations 4]

Jobs of 100 tasks (1 PS, 99 workers, one straggler each, the PS busy). Printed per N: series scraped, the
group's evaluation time (median of ``--evaluations`` evaluations, seconds), the alerts firing, and the time
as a ratio of the first (baseline) N measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the repository root: helpers import as tests.*

from cmdare.collectors import metrics as M  # noqa: E402
from cmdare.planner.rules.engine_rules import RuleOptions, render  # noqa: E402
from tests.page_server import close_server, serve_pages  # noqa: E402
from tests.prom_server import PromServer  # noqa: E402

PER_JOB = 100
INTERVAL_S = 5.0


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
    """The rule group's figures from Prometheus' own ``/metrics`` page."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("prometheus_rule_group_last_") and "cmdare-bottlenecks" in line:
            out[line.split("{", 1)[0]] = float(line.rsplit(" ", 1)[1])
    return out


def measure(tasks: int, evaluations: int, workdir: Path) -> dict[str, float]:
    page = FleetPage(tasks)
    workdir.mkdir(parents=True, exist_ok=True)
    rules = workdir / "cmdare-rules.yml"
    rules.write_text(render(RuleOptions(interval_s=INTERVAL_S, window_s=4 * INTERVAL_S)))

    class Server(PromServer):
        def config(self) -> str:
            return (
                super().config().replace("global:\n", f"global:\n  evaluation_interval: {INTERVAL_S:g}s\n", 1)
                + f"rule_files: ['{rules}']\n"
            )

    prom = Server([page.target], workdir / "prom", scrape_interval=f"{INTERVAL_S:g}s", honor_labels=True)
    prom.start(timeout=60)
    try:
        durations: list[float] = []
        last_eval = None
        deadline = time.monotonic() + (evaluations + 8) * INTERVAL_S * 3
        while len(durations) < evaluations and time.monotonic() < deadline:
            time.sleep(INTERVAL_S / 2)
            own = _own_metrics(prom.url)  # Prometheus' figures about itself (its /metrics page)
            firing = prom.query('count(ALERTS{alertstate="firing"})')
            stamp = own.get("prometheus_rule_group_last_evaluation_timestamp_seconds")
            if stamp and stamp != last_eval and firing:  # warmed up: alerts fire
                last_eval = stamp
                durations.append(own["prometheus_rule_group_last_duration_seconds"])
        with urllib.request.urlopen(f"{prom.url}/api/v1/rules", timeout=10) as r:
            rules_doc = json.load(r)
        costly = sorted(((float(x.get("evaluationTime", 0)), x["name"]) for g in rules_doc["data"]["groups"]
                         for x in g["rules"]), reverse=True)[:3]  # fmt: skip
        series = prom.query("scrape_samples_scraped")
        alerts = prom.query('count by (alertname) (ALERTS{alertstate="firing"})')
        return {
            "tasks": tasks,
            "series": float(series[0]["value"][1]) if series else float("nan"),
            "eval_s": statistics.median(durations) if durations else float("nan"),
            "evaluations": len(durations),
            "alerts": {a["metric"]["alertname"]: int(float(a["value"][1])) for a in alerts},
            "costliest": ", ".join(f"{name} {t * 1e3:.0f} ms" for t, name in costly),
        }
    finally:
        prom.stop()
        page.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default="100,10000")
    ap.add_argument("--evaluations", type=int, default=4)
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.tasks.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            rows.append(measure(n, args.evaluations, Path(tmp) / str(n)))
            r = rows[-1]
            print(f"{r['tasks']:>7,} tasks  {r['series']:>9,.0f} series  rule group {r['eval_s'] * 1e3:8.1f} ms"
                  f"  ({r['evaluations']} evaluations)  x{r['eval_s'] / rows[0]['eval_s']:.1f} of {sizes[0]:,} tasks"
                  f"  firing {json.dumps(r['alerts'])}; costliest rules: {r['costliest']}", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
