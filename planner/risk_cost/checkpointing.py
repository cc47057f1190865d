"""When to checkpoint (issue 30): the interval that minimises a shape's expected time, and a live job's work at
risk.

**Interval.** Daly's higher-order estimate of the optimum checkpoint interval (J. T. Daly, "A higher order
estimate of the optimum checkpoint interval for restart dumps", Future Generation Computer Systems 22(3),
303–312, 2006; to first order Young's ``√(2δM)``: J. W. Young, CACM 17(9), 530–531, 1974)::

    τ = √(2δM) · [1 + ⅓·√(δ / 2M) + ⅑·(δ / 2M)] − δ      for δ < 2M, else τ = M

with ``δ`` the time to write one checkpoint (measured by the exporter's ``cmdare_checkpoint_seconds`` on a live
job, else the CM-DARE fit ``3.65 s + 0.0199 s/MB``, ``planner/data/overheads.json``) and ``M`` the mean time
between revocations that send the job back to its last checkpoint: the shape's expected run time ÷ its
expected such revocations (any node of a synchronous job; a PS job's chief — one worker revocation in n — or a
PS). Daly assumes a constant hazard; the bathtub curve's is averaged over the run (an approximation, said on
screen). What the optimum saves is the shape's expected time and cost re-estimated at ``τ`` against the job's
current interval (measured between its checkpoints, else the workload's, else 600 s).

**Work at risk.** A live job's time since its last checkpoint, and what a revocation now would cost: that work
trained again, plus a replacement server's start and join and a cold framework restart (the study's overheads),
at the job's burn rate in dollars. ``checkpoint-overdue`` when the work at risk passes :data:`OVERDUE_FACTOR` ×
the optimum interval."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from cmdare.collectors.observed import JobView
from cmdare.planner.risk_cost.overheads import Overheads
from cmdare.planner.risk_cost.time_cost import RunSettings, TimeCost
from cmdare.planner.risk_cost.workload import Options

if TYPE_CHECKING:
    from cmdare.planner.rules.worker_columns import JobColumns

METHOD = "Daly 2006 higher-order optimum (Young 1974 to first order), hazard averaged over the run"
#: ``checkpoint-overdue`` is raised when the work at risk passes this many optimum intervals (stated choice:
#: at 2τ the expected loss of a revocation is 4× what the optimum schedule risks on average, τ/2).
OVERDUE_FACTOR = 2.0
DEFAULT_INTERVAL_S = 600.0  # TensorFlow 1.x MonitoredTrainingSession's save_checkpoint_secs (assumption)


def daly_interval(write_s: float | np.ndarray, mtbf_s: np.ndarray) -> np.ndarray:
    """Daly's optimum interval (seconds of work between checkpoints); inf where nothing is ever revoked."""
    d = np.asarray(write_s, dtype=float)
    m = np.asarray(mtbf_s, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        x = d / (2.0 * m)
        tau = np.sqrt(2.0 * d * m) * (1.0 + np.sqrt(x) / 3.0 + x / 9.0) - d
    tau = np.where(d < 2.0 * m, tau, m)
    return np.where(np.isfinite(m), tau, np.inf)


def interval_columns(
    tc: TimeCost,
    run: RunSettings,
    write_s: float,
    steps_per_sec: np.ndarray,
    again: Callable[[RunSettings], TimeCost],
) -> dict[str, np.ndarray]:
    """Per shape: its current interval (s), the optimum (s; inf: never revoked), the mean time between
    revocations that force a restart (s), and the expected time (s) and cost (USD) the optimum saves —
    ``again`` re-estimates the shapes with other run settings."""
    v = np.maximum(np.asarray(steps_per_sec, dtype=float), 1e-12)
    redo = tc.redo_events if tc.redo_events is not None else tc.expected_revocations
    mtbf = np.where(redo > 1e-9, tc.seconds_expected / np.maximum(redo, 1e-12), np.inf)
    tau = daly_interval(write_s, mtbf)
    evaluated = np.minimum(tau, 10.0 * tc.seconds_expected)  # never revoked: one checkpoint in ten runs
    best = again(replace(run, checkpoint_interval_steps=None, checkpoint_interval_s=evaluated))
    now = (
        run.checkpoint_interval_steps / v
        if run.checkpoint_interval_steps
        else np.full(v.shape, run.checkpoint_interval_s)
    )
    return {
        "ckpt_interval_s": now,
        "ckpt_optimal_s": tau,
        "ckpt_mtbf_s": mtbf,
        "ckpt_write_s": np.full(v.shape, float(write_s)),
        "ckpt_saves_s": np.maximum(tc.seconds_expected - best.seconds_expected, 0.0),
        "ckpt_saves_usd": np.maximum(tc.cost_expected - best.cost_expected, 0.0),
    }


@dataclass(frozen=True)
class CheckpointFacts:
    """What a live job's tasks say of its checkpoints: the newest (Unix s), the mean write time (s) and the
    measured interval between them (s) — None where nothing was measured."""

    last_at: float | None = None
    write_s: float | None = None
    interval_s: float | None = None

    @classmethod
    def of_columns(cls, cols: JobColumns) -> CheckpointFacts:
        """:meth:`of` from the job's columns (the same figures: the same values, in the same order)."""
        last, write, gaps = (c[~np.isnan(c)] for c in (cols.ckpt_last, cols.ckpt_write, cols.ckpt_gap))
        return cls(
            float(last.max()) if len(last) else None,
            float(np.mean(write)) if len(write) else None,
            float(np.median(gaps)) if len(gaps) else None,
        )

    @classmethod
    def of(cls, job: JobView) -> CheckpointFacts:
        """The job's checkpoints, from its tasks' views (the newest write of any task, the writers' means)."""
        last = [n.last_checkpoint_at for n in job.nodes if n.last_checkpoint_at is not None]
        write = [n.checkpoint_seconds for n in job.nodes if n.checkpoint_seconds is not None]
        gaps = [n.checkpoint_interval_s for n in job.nodes if n.checkpoint_interval_s is not None]
        return cls(
            max(last) if last else None,
            float(np.mean(write)) if write else None,
            float(np.median(gaps)) if gaps else None,
        )

    def since(self, now: float) -> float | None:
        """Seconds since the job's last checkpoint at ``now`` (None: none seen)."""
        return None if self.last_at is None else max(now - self.last_at, 0.0)

    def options(self, now: float, base: Options | None = None) -> Options:
        """Planner options for a live job: what it measured of its checkpoints (time since the last, write
        time, interval) in place of the defaults."""
        base = base or Options()
        return replace(
            base,
            since_checkpoint_s=self.since(now),
            checkpoint_write_s=self.write_s,
            checkpoint_interval_s=self.interval_s or base.checkpoint_interval_s,
            checkpoint_interval_steps=None if self.interval_s else base.checkpoint_interval_steps,
        )


@dataclass(frozen=True, kw_only=True)
class WorkAtRisk:
    """A live job's checkpoint figures (seconds, USD): the work since its last checkpoint (None: no
    checkpoint seen), what a revocation now would cost, the optimum interval for its shape with what it saves
    against its current interval, and whether the work at risk is past :data:`OVERDUE_FACTOR` × the optimum."""

    since_s: float | None
    revocation_now_s: float | None
    revocation_now_usd: float | None
    interval_s: float
    interval_basis: str
    write_s: float
    write_basis: str
    optimal_s: float | None  # None: no ranking yet; inf: the shape is never revoked
    saves_s: float | None
    saves_usd: float | None
    mtbf_s: float | None
    method: str = METHOD
    overdue_factor: float = OVERDUE_FACTOR

    def with_ranking(self, table_row: dict[str, float] | None) -> WorkAtRisk:
        """These figures with the optimum interval of a (newer) ranking's current-shape row."""
        if not table_row:
            return self
        return replace(self, optimal_s=table_row.get("ckpt_optimal_s"), saves_s=table_row.get("ckpt_saves_s"),
                       saves_usd=table_row.get("ckpt_saves_usd"), mtbf_s=table_row.get("ckpt_mtbf_s"),
                       write_s=table_row.get("ckpt_write_s") or self.write_s)  # fmt: skip

    @property
    def overdue(self) -> bool:
        """The work at risk is past the stated factor × the optimum interval."""
        return (
            self.since_s is not None
            and self.optimal_s is not None
            and np.isfinite(self.optimal_s)
            and self.since_s > self.overdue_factor * self.optimal_s
        )


def work_at_risk(
    facts: CheckpointFacts,
    now: float,
    overheads: Overheads,
    gpu: str,
    provisioning: str,
    usd_per_hour: float | None,
    table_row: dict[str, float] | None,
    checkpoint_mb: float | None = None,
) -> WorkAtRisk:
    """The work at risk of a live job at ``now``: ``table_row`` is its ranking's current-shape row (the
    ``ckpt_*`` columns, None before a ranking); the replacement's start and join and a cold restart are the
    study's overheads for ``gpu`` / ``provisioning``; money at ``usd_per_hour`` (the job's burn rate)."""
    since = facts.since(now)
    cost = None
    if since is not None:
        cost = since + overheads.request_overhead(gpu, provisioning) + overheads.framework_restart(False)
    usd = cost * usd_per_hour / 3600.0 if cost is not None and usd_per_hour is not None else None
    if facts.interval_s is not None:
        interval, basis = facts.interval_s, "measured between the job's checkpoints"
    else:
        interval, basis = DEFAULT_INTERVAL_S, "assumed: 600 s (TensorFlow's default; no interval measured)"
    if facts.write_s is not None:
        write, wbasis = facts.write_s, "measured (cmdare_checkpoint_seconds)"
    else:
        write = float(overheads.checkpoint_cost(checkpoint_mb or 0.0))
        wbasis = "CM-DARE fit 3.65 s + 0.0199 s/MB (overheads.json)"
    bare = WorkAtRisk(
        since_s=since,
        revocation_now_s=cost,
        revocation_now_usd=usd,
        interval_s=interval,
        interval_basis=basis,
        write_s=write,
        write_basis=wbasis,
        optimal_s=None,
        saves_s=None,
        saves_usd=None,
        mtbf_s=None,
    )
    return bare.with_ranking(table_row)


def ranking_row(columns: Mapping[str, np.ndarray] | None) -> dict[str, float] | None:
    """The ``ckpt_*`` figures of a ranked table's current shape (row 0 of its ``columns``), or None."""
    if columns is None or "ckpt_optimal_s" not in columns:
        return None
    return {k: float(columns[k][0]) for k in columns if k.startswith("ckpt_")}
