"""A job's steps/s from its tasks, by how the job trains.

- ``async-ps`` (asynchronous parameter-server training): every worker step is a global step, so the
  job's steps/s is the *sum* of the workers' ``cmdare_worker_steps_total`` rates.
- ``sync-allreduce`` and ``pipeline``: all workers (stages) take each global step together, so the
  job's steps/s is the *rate of the shared global step* (the median over the tasks reporting it; the
  mean worker rate when no task reports one). Summing would count each step once per worker.

The mode is declared by ``cmdare_job_info{sync=…}``. Undeclared, it is inferred for exporter-
instrumented tasks (they carry the step-time histogram), and for log runs (TensorBoard, JSON lines) each
named for a rank (``exp/rank0``, ``exp/rank1``: the per-rank logs of one job) within the tighter
:data:`LOG_SYNC_TOLERANCE`; other log runs are independent runs (a sweep) and add up. Two or more workers whose global steps are *shared* (their newest values lie within one rate window of steps of each
other) and each of whose own rates is within :data:`SYNC_TOLERANCE` of the global step's rate train
synchronously; anything else is treated as asynchronous (the sum), as before. Examples/s is the sum
of every task's ``cmdare_examples_total`` rate in every mode (each worker processes its own batch).
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from cmdare.collectors import metrics as M
from cmdare.collectors.samples import Coverage, JobFacts, RoleFigures
from cmdare.collectors.store import TaskSeries

SYNC_TOLERANCE = 0.25  # a worker within 25% of the global step's rate steps with it
# ranks of one synchronous job take each step together: their logged rates agree within a few percent
# (independent runs of a sweep drift apart); assumption, tighter than SYNC_TOLERANCE as names can mislead
LOG_SYNC_TOLERANCE = 0.05
# a run (or log file) named for the rank that wrote it: ``rank0``, ``rank_1``, ``local-rank-2``, ``proc3``,
# ``worker-4``, ``gpu5``, ``node6``, or a bare number, as the last part of its name
RANK_NAME = re.compile(
    r"(?:^|/)\d+$|(?:^|[/_.\-])(?:local[_-]?)?(?:rank|proc|process|worker|gpu|node|device)[_-]?\d+$", re.I
)
WORKER_ROLES = ("worker", "chief", "stage")


@dataclass(frozen=True, kw_only=True)
class JobRate:
    steps_per_sec: float  # NaN when unknown
    examples_per_sec: float
    global_step: float
    sync: str  # async-ps | sync-allreduce | pipeline | "" (one worker: either reading is the same)
    how: str  # declared | inferred | ""
    basis: str = ""  # where the rates come from when not the tasks' own samples (a large fleet)
    # how many tasks a summed figure rests on, of how many feed it (None: not a sum, or nothing to count)
    steps_coverage: Coverage | None = None
    examples_coverage: Coverage | None = None


def _rates(tasks: Sequence[TaskSeries], key: str, window: float) -> list[float]:
    return [r for ts in tasks if (r := ts.rate(key, window)) is not None and math.isfinite(r)]


def infer_sync(workers: Sequence[TaskSeries], window: float) -> str:
    """``sync-allreduce`` when the workers share one global step advancing at each one's own rate,
    ``async-ps`` otherwise, "" with fewer than two workers (nothing to tell apart)."""
    steps = _rates(workers, M.K_WORKER_STEPS, window)
    if len(steps) < 2:
        return ""
    tolerance = SYNC_TOLERANCE
    if not all(ts.has(M.K_STEP_SECONDS_COUNT) for ts in workers):
        # log runs (TensorBoard, JSON lines): independent runs whose steps add up (a sweep), unless each
        # is named for a rank (``exp/rank0``, ``rank_1.jsonl``) and they step in lockstep: the per-rank
        # logs of one synchronous job
        if not all(RANK_NAME.search(ts.info.task) for ts in workers):
            return "async-ps"
        tolerance = LOG_SYNC_TOLERANCE
    g_rates = _rates(workers, M.K_GLOBAL_STEP, window)
    latest = [g for ts in workers if (g := ts.latest(M.K_GLOBAL_STEP)) is not None]
    if len(g_rates) < 2 or len(latest) < 2:
        return "async-ps"
    g = statistics.median(g_rates)
    shared = max(latest) - min(latest) <= g * window + 1.0
    each = g > 0 and all(abs(r - g) <= tolerance * g for r in steps)
    return "sync-allreduce" if shared and each else "async-ps"


def job_rate(tasks: Sequence[TaskSeries], facts: JobFacts | None, window: float) -> JobRate:
    """The job's steps/s, examples/s and global step from its answering tasks."""
    workers = [ts for ts in tasks if ts.info.role in WORKER_ROLES] or list(tasks)
    declared = facts.model.sync if facts is not None else ""
    sync = declared or infer_sync(workers, window)
    steps = _rates(workers, M.K_WORKER_STEPS, window)
    steps_coverage = None
    if sync in ("sync-allreduce", "pipeline"):  # a median: any of the tasks tells the job's speed
        g_rates = _rates(tasks, M.K_GLOBAL_STEP, window)
        rate = statistics.median(g_rates) if g_rates else (statistics.fmean(steps) if steps else math.nan)
    else:
        rate = math.fsum(steps) if steps else math.nan
        steps_coverage = _coverage(workers, M.K_WORKER_STEPS, len(steps))
    examples = _rates(tasks, M.K_EXAMPLES, window)
    gsteps = [g for ts in tasks if (g := ts.latest(M.K_GLOBAL_STEP)) is not None]
    return JobRate(
        steps_per_sec=rate,
        examples_per_sec=math.fsum(examples) if examples else math.nan,
        global_step=max(gsteps) if gsteps else math.nan,
        sync=sync,
        how="declared" if declared else ("inferred" if sync else ""),
        steps_coverage=steps_coverage,
        examples_coverage=_coverage(tasks, M.K_EXAMPLES, len(examples)),
    )


def _coverage(tasks: Sequence[TaskSeries], key: str, rated: int) -> Coverage | None:
    """``rated`` of the tasks that feed ``key``: those of a role any task of which reports it (a task read
    once has no rate yet; one whose value was not read yet, a large cluster's values read in turns, will
    report it too); None when none do, or none has a rate yet (no figure: nothing to qualify)."""
    roles = {ts.info.role for ts in tasks if ts.has(key)}
    feeding = sum(1 for ts in tasks if ts.info.role in roles) if roles else 0
    return Coverage(min(rated, feeding), feeding) if feeding and rated else None


def fleet_rate(jr: JobRate, roles: Mapping[str, RoleFigures]) -> JobRate:
    """``jr`` with a large fleet's steps/s and examples/s from Prometheus' per-task rates (see
    ``prometheus.fleet``): asynchronous, the sum of the workers'; synchronous or a pipeline, the median
    task's of the largest worker role (each steps once a global step). The global step and how the
    job trains stay the tasks' own (``jr``). A sum over part of the tasks carries its coverage; before
    the server's rates are read, a sum waits (NaN: ``jr``'s would be a few tasks' sample of thousands)."""
    workers = [r for role, r in roles.items() if role in WORKER_ROLES] or list(roles.values())
    rated = sum(r.rated for r in workers)
    tasks = sum(r.tasks for r in workers)
    window = max(r.window_s for r in workers)
    waiting = "waiting for Prometheus' per-task rates"
    steps_coverage = None
    if jr.sync in ("sync-allreduce", "pipeline"):
        main = max(workers, key=lambda r: r.rated)
        steps, how = (main.p50, f"median of {main.rated:,} tasks' rates") if rated else (jr.steps_per_sec, "")
    elif rated:
        steps, how = math.fsum(r.steps_per_sec or 0.0 for r in workers), f"sum of {rated:,} tasks' rates"
        steps_coverage = Coverage(rated, tasks)
    else:
        steps, how, steps_coverage = math.nan, waiting, Coverage(0, tasks)
    # examples: the roles whose tasks report any (a parameter server counts none)
    reporting = [r for r in roles.values() if r.examples_rated]
    ex = [r.examples_per_sec for r in reporting if r.examples_per_sec is not None]
    ex_coverage: Coverage | None
    if ex:
        examples = math.fsum(ex)
        ex_coverage = Coverage(sum(r.examples_rated for r in reporting), sum(r.tasks for r in reporting))
    else:  # the examples column not read yet (or no task counts examples)
        examples, ex_coverage = math.nan, Coverage(0, tasks) if jr.examples_coverage is not None else None
    basis = f"Prometheus: {how} over {window:.0f} s" if how and how != waiting else how
    return replace(
        jr,
        steps_per_sec=math.nan if steps is None else steps,
        examples_per_sec=examples,
        basis=basis,
        steps_coverage=steps_coverage,
        examples_coverage=ex_coverage,
    )
