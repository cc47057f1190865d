"""One MLflow run as a task: its logged metric points folded into a timeline, and the poll that shows it.
Shared by the tracking-server source (:mod:`cmdare.collectors.mlflow.server`) and the file-store source
(:mod:`cmdare.collectors.mlflow.store`), so both read a run by the same rules as the TensorBoard and
JSON-lines sources:

* **Identity**: job = the experiment's name, task = the run's name (``run_name``; two runs of one
  experiment with the same name are told apart by their run id's first 8 characters), role ``chief``.
  Runs named for a rank (``rank0``, ``rank1``) stepping in lockstep are one synchronous job
  (:mod:`cmdare.collectors.jobrate`), like per-rank TensorBoard runs.
* **Rate**: a metric point is ``(key, value, timestamp ms, step)``; the run's step is the highest step
  of its current timeline and the poll is stamped with that point's own timestamp, so steps/s is exact
  steps over logged seconds (``cmdare_global_step`` and ``cmdare_worker_steps_total``). A run that logs
  everything at step 0 (``log_metric`` without ``step``) has its step from a metric named ``step``,
  ``global_step``, ``iteration``… (:data:`cmdare.collectors.logs.keys.STEP_KEYS`) when it logs one, else no
  step at all (said, never a rate of 0).
* **Restart**: a key whose step goes back at a later timestamp (a run resumed from a checkpoint with
  ``start_run(run_id=…)``) starts a new timeline: counted (``cmdare_log_restarts``), the abandoned steps
  dropped as TensorBoard drops orphaned steps, the rate counted from the new timeline only.
* **Loss**: every metric is kept as ``scalar{tag=<key>}``; loss, learning rate and examples/s by the
  shared name rules (:func:`cmdare.collectors.metrics.training_keys`: ``total_loss``/``loss`` before
  ``train/loss`` before components, evaluation losses never). A key naming a checkpoint marks one
  written at its point's time.
* **System metrics** (``system/…``, MLflow's ``enable_system_metrics_logging``) count their own samples as
  steps: kept as scalars (``system/gpu_0_utilization_percentage``… averaged as the task's GPU %), never
  taken for the training step, a restart or a sign of life.
* **Finished**: MLflow's own status ``FINISHED``, ``FAILED`` or ``KILLED`` (said: "run failed"); a run still
  ``RUNNING`` whose writer stayed silent past its own cadence (a killed process never sets its status),
  or whose newest point is older than :data:`OLD_RUN_S`, is finished too, as a silent TensorBoard run is.

Names, keys and statuses come from a server or files: untrusted, cleaned by the value types they end
in (:class:`cmdare.collectors.samples.TaskPoll`), bounded here (:data:`MAX_KEYS` keys a run).
"""

from __future__ import annotations

import functools
import math
import re
from collections import deque
from dataclasses import dataclass, field

from cmdare.collectors import metrics as M
from cmdare.collectors.clock import Clock, clock_time, plausible_time
from cmdare.collectors.logs.keys import STEP_KEYS
from cmdare.collectors.samples import TaskInfo, TaskPoll
from cmdare.collectors.tensorboard.source import scalar_key

IDLE_AFTER_S = 150.0  # no new point for this long (until the run's own cadence is known): finished
OLD_RUN_S = 600.0  # assumption: a newest point this old on the reader's clock is a finished run
MAX_KEYS = 64  # metric keys kept per run (bounded memory); more are counted and said
SYSTEM_PREFIX = "system/"  # MLflow's system metrics: stepped by their own sample counter
MAX_SYSTEM_KEYS = 32  # system metric keys kept per run
GPU_UTIL_KEY = re.compile(r"^system/gpu_\d+_utilization_percentage$")  # one node's GPUs (multi-node: named)
MAX_DROPPED = 1000  # names of keys past MAX_KEYS remembered (to say how many)
MAX_STEP = 1e15  # a larger step is no training step: the point is rejected
TERMINAL = {"FINISHED": "finished", "FAILED": "run failed", "KILLED": "run killed"}
STATUS_CODES = {1: "RUNNING", 2: "SCHEDULED", 3: "FINISHED", 4: "FAILED", 5: "KILLED"}  # meta.yaml's


@dataclass
class RunTimeline:
    """What one run's points say so far; fed point by point (:meth:`add`), reported by :meth:`poll`."""

    info: TaskInfo
    source: str  # the poll's source text (a URL or path and the run id; no credentials)
    status: str = "RUNNING"  # MLflow's run status (RUNNING, SCHEDULED, FINISHED, FAILED, KILLED)
    step: float = math.nan  # highest step of the current timeline
    t: float = math.nan  # seconds since the epoch of the newest point at that step (the run's clock)
    base: float = 0.0  # the step the current timeline began at
    restarts: int = 0
    restart_at: tuple[float, float] | None = None  # (step, time) the current timeline began at
    values: dict[str, float] = field(default_factory=dict)  # key -> value at its newest (step, time)
    system: dict[str, tuple[float, float]] = field(default_factory=dict)  # system key -> (time, value)
    last: dict[str, tuple[float, float]] = field(default_factory=dict)  # key -> (step, time) of that value
    dropped_keys: set[str] = field(default_factory=set)  # keys past MAX_KEYS (up to MAX_DROPPED named)
    rejected: int = 0  # points with an implausible time or step, since the last poll
    checkpoint_at: float = math.nan
    new_points: int = 0  # points accepted since the last poll
    idle_polls: int = 0
    last_new: float = math.nan  # clock.monotonic() of the last poll that saw a new point
    gaps: deque[float] = field(default_factory=lambda: deque(maxlen=8))
    notes: list[str] = field(default_factory=list)  # said with the next poll

    def add(self, key: str, value: float, timestamp_ms: float, step: float) -> None:
        """Fold one logged point in (points of one key in the order they were logged)."""
        t = timestamp_ms / 1000.0
        if not (plausible_time(t) and math.isfinite(step) and 0 <= step <= MAX_STEP and math.isfinite(value)):
            self.rejected += 1
            return
        if key.startswith(SYSTEM_PREFIX):  # a sample of the machine, not of the training
            seen = self.system.get(key)
            if (seen is None and len(self.system) < MAX_SYSTEM_KEYS) or (seen is not None and t >= seen[0]):
                self.system[key] = (t, value)
            return
        if key not in self.last and len(self.last) >= MAX_KEYS:
            if len(self.dropped_keys) < MAX_DROPPED:
                self.dropped_keys.add(key)
            return
        if self.restart_at is not None and step >= self.restart_at[0] and t < self.restart_at[1]:
            return  # logged before the restart at a step it went back before: the abandoned timeline
        prev = self.last.get(key)
        if prev is not None and step < prev[0] and t > prev[1] and not step >= self.step:
            self._restart(step, t)  # this key went back, later: training again from an earlier step
        elif prev is not None and (step, t) <= prev:
            return  # a point folded already (a server's latest value again), or an older one
        self.last[key], self.values[key] = (step, t), value
        self.new_points += 1
        if math.isnan(self.step) or (step, t) > (self.step, self.t):
            self.step, self.t = step, t
        if _checkpoint_key(key) and not t <= self.checkpoint_at:
            self.checkpoint_at = t

    def _restart(self, step: float, t: float) -> None:
        self.restarts += 1
        self.base, self.restart_at = step, (step, t)
        self.step, self.t = step, t
        for key in [k for k, (s, _) in self.last.items() if s >= step]:
            del self.last[key], self.values[key]  # the abandoned values give way to the new timeline's
        self.notes.append(f"restarted from step {step:,.0f}: the earlier timeline's later steps discarded")

    def _step_values(self) -> tuple[dict[str, float], str]:
        """The step counters, and a note when the run logs no step."""
        if self.step > 0:
            return {M.K_GLOBAL_STEP: self.step, M.K_WORKER_STEPS: self.step - self.base}, ""
        for key in STEP_KEYS:  # everything at step 0: a metric that counts steps, if one is logged
            if key in self.values:
                return {M.K_GLOBAL_STEP: self.values[key], M.K_WORKER_STEPS: self.values[key]}, ""
        return {}, "metrics logged without a step (all at step 0): no steps/s"

    def poll(self, clock: Clock, idle_after_s: float, elapsed: float, catching_up: bool = False) -> TaskPoll:
        """The run's poll now: values stamped with the run's own clock; finished by MLflow's status, by
        silence past the run's own cadence, or by age."""
        now = clock.monotonic()
        new, self.new_points = self.new_points, 0
        if new and not catching_up and not math.isnan(self.last_new):  # a backlog's pace is not the writer's
            self.gaps.append(now - self.last_new)
        if new or math.isnan(self.last_new):
            self.idle_polls, self.last_new = 0, now
        else:
            self.idle_polls += 1
        notes, self.notes = self.notes, []
        if self.rejected:
            notes.append(f"{self.rejected} point(s) with an implausible time or step rejected")
            self.rejected = 0
        if self.dropped_keys:
            more = "+" if len(self.dropped_keys) >= MAX_DROPPED else ""
            notes.append(f"more than {MAX_KEYS} metric keys: {len(self.dropped_keys)}{more} not kept")
        if math.isnan(self.step):  # no point yet: not a task (no identity the lifecycle could call silent)
            what = "reading its metrics" if catching_up else "no metrics logged yet"
            return TaskPoll(source=self.source, t=clock.now(), ok=False, error="; ".join([*notes, what]), elapsed=elapsed,
                            catching_up=catching_up)  # fmt: skip
        last = f"last metric at {clock_time(self.t)}, step {self.step:,.0f}"
        limit = 2.0 * max(self.gaps) if len(self.gaps) >= 3 else idle_after_s
        idle = now - self.last_new
        terminal = TERMINAL.get(self.status)
        if terminal is None and not catching_up and self.idle_polls > 0 and idle >= limit:
            error = "; ".join([f"finished: no new metric for {idle:.0f} s ({last})", *notes])
            return TaskPoll(source=self.source, t=clock.now(), ok=False, info=self.info, error=error, elapsed=elapsed,
                            finished=True)  # fmt: skip
        steps, step_note = self._step_values()
        values = dict(steps)
        if self.restarts:
            values[M.K_LOG_RESTARTS] = float(self.restarts)
        values.update({scalar_key(k): v for k, v in self.values.items()})
        values.update(M.training_keys(self.values))
        values.update({scalar_key(k): v for k, (_, v) in self.system.items()})
        gpus = [v for k, (_, v) in self.system.items() if GPU_UTIL_KEY.match(k)]
        if gpus:
            values[M.K_GPU_UTIL] = sum(gpus) / len(gpus)
        if not math.isnan(self.checkpoint_at):
            values[M.K_LAST_CHECKPOINT] = self.checkpoint_at
        bad = [k for k, v in values.items() if not M.valid_value(k, v)]
        if bad:
            notes.append(f"{len(bad)} value(s) out of range dropped")
            values = {k: v for k, v in values.items() if k not in bad}
        if terminal is not None:
            notes.insert(0, f"{terminal}: MLflow status {self.status} ({last})")
        notes += [step_note] if step_note else []
        old = not catching_up and clock.now() - self.t >= max(OLD_RUN_S, limit)
        return TaskPoll(source=self.source, t=self.t, ok=True, info=self.info, values=values, error="; ".join(notes) or None,
                        elapsed=elapsed, catching_up=catching_up, finished=terminal is not None or old)  # fmt: skip


def turning_points(
    points: list[tuple[float, float, float]], before: float = math.nan
) -> list[tuple[float, float, float]]:
    """The ``(timestamp, value, step)`` points of one key's chunk the timeline needs: the newest, and each
    step that goes back with the point before it (a restart; ``before``: the step of the key's point folded
    last, for a chunk that begins with one). The others move no figure shown; folding only these keeps a
    backlog cheap."""
    n = len(points)
    return [
        p for i, p in enumerate(points)
        if i == n - 1 or points[i + 1][2] < p[2] or p[2] < (points[i - 1][2] if i else before)
    ]  # fmt: skip


def last_step(timeline: RunTimeline, key: str) -> float:
    """The step of ``key``'s point folded last (NaN when none)."""
    return timeline.last.get(key, (math.nan, math.nan))[0]


@functools.lru_cache(maxsize=4096)
def _checkpoint_key(key: str) -> bool:
    """Whether a metric key names a checkpoint written (asked for every point: cached by key)."""
    return M.is_checkpoint_tag(key)


def run_names(runs: list[tuple[str, str, str]]) -> dict[str, str]:
    """Task names for ``(experiment id, run id, run name)`` triples: the run's name, or its id's first 8
    characters when it has none; a name two runs of one experiment share gets ``#<id[:8]>`` added."""
    count: dict[tuple[str, str], int] = {}
    for exp, _, name in runs:
        count[(exp, name)] = count.get((exp, name), 0) + 1
    out = {}
    for exp, run_id, name in runs:
        if not name:
            out[run_id] = run_id[:8]
        else:
            out[run_id] = name if count[(exp, name)] == 1 else f"{name}#{run_id[:8]}"
    return out
