"""What the untrusted-text boundary costs: one poll cycle's CPU work for 1,000 tasks (parse each
exposition page, build its TaskInfo / JobFacts / TaskPoll) with the sanitiser, and with it replaced
by the identity in the same run (the baseline), as a ratio; for ordinary labels and for hostile ones
(escape sequences, markup, bidi, 2 kB values: the slow path).

Run: ``.venv/bin/python benchmarks/sanitise_cost.py [--tasks 1000]``. Target: ratio <= 1.10 for
ordinary labels (the boundary must be invisible at 1,000 nodes).
"""

from __future__ import annotations

import argparse
import time
from contextlib import contextmanager
from typing import Any

from cmdare.collectors import samples
from cmdare.collectors.samples import TaskPoll
from cmdare.collectors.scrape.exposition import parse_exposition

HOSTILE_VALUE = "\x1b]52;c;ZXZpbA==\x07[link=file:///etc/passwd]x[/link]\u202eab\u200b" + "L" * 2000


def page(i: int, hostile: bool) -> str:
    """A typical page of one task: identity, job facts, the contract's counters, node detail."""
    v = f"{HOSTILE_VALUE}{i}" if hostile else ""
    text = (
        f'cmdare_task_info{{job="resnet{v}",task="worker-{i}{v}",role="worker",gpu="P100{v}",'
        f'region="us-east1{v}",zone="us-east1-b",provisioning="spot"}} 1\n'
        f'cmdare_job_info{{job="resnet{v}",model="resnet-32{v}",batch_size="128"}} 1\n'
        f"cmdare_worker_steps_total {i * 10}\ncmdare_examples_total {i * 1280}\ncmdare_global_step {i * 40}\n"
        f"cmdare_step_seconds_sum {i * 0.1}\ncmdare_step_seconds_count {i}\n"
        f'cmdare_stage_bytes_sent_total{{peer="stage-1{v}"}} {i}\n'
    )
    return text + "".join(f'node_cpu_seconds_total{{cpu="{c}",mode="user"}} {c}.5\n' for c in range(16))


def cycle(pages: list[str]) -> list[TaskPoll]:
    out = []
    for i, text in enumerate(pages):
        p = parse_exposition(text)
        out.append(
            TaskPoll(
                source=f"http://10.0.{i // 250}.{i % 250}:9400/metrics",
                t=0.0,
                ok=True,
                info=p.info,
                values=p.values,
                job_facts=p.facts,
                error="; ".join(p.notes) or None,
            )
        )
    return out


@contextmanager
def without_sanitiser() -> Any:
    """The value types without their cleaning step (``__post_init__`` a no-op)."""
    types = (samples.TaskInfo, samples.ModelSpec, samples.JobFacts, samples.TaskPoll)
    saved = [t.__post_init__ for t in types]
    for t in types:
        t.__post_init__ = lambda self: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        for t, f in zip(types, saved, strict=True):
            t.__post_init__ = f  # type: ignore[method-assign]


def timed(pages: list[str]) -> float:
    """CPU seconds of one cycle (process time: other processes on a shared machine weigh less)."""
    t0 = time.process_time()
    cycle(pages)
    return time.process_time() - t0


def best_of(pages: list[str], repeats: int = 21) -> tuple[float, float]:
    """(best with the sanitiser, best without), measured in turns so that load on the machine
    weighs on both alike."""
    cost = base = float("inf")
    for _ in range(repeats):
        cost = min(cost, timed(pages))
        with without_sanitiser():
            base = min(base, timed(pages))
    return cost, base


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=1000)
    ap.add_argument("--quick", action="store_true", help="200 tasks")
    n = 200 if ap.parse_args().quick else ap.parse_args().tasks
    for kind in ("ordinary", "hostile"):
        pages = [page(i, kind == "hostile") for i in range(n)]
        cycle(pages)  # warm-up (and the memo of the slow path)
        cost, base = best_of(pages)
        verdict = ("PASS" if cost / base <= 1.10 else "MISS") if kind == "ordinary" else "(no target)"
        print(f"sanitiser, {kind} labels, {n} tasks: {1000 * cost:.1f} ms CPU/cycle vs {1000 * base:.1f} ms "
              f"without: ratio {cost / base:.3f} {verdict}")  # fmt: skip


if __name__ == "__main__":
    main()
