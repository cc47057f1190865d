"""Rule ``checkpoint-overdue``: the work a live job has done since its last checkpoint is past
:data:`~cmdare.planner.risk_cost.checkpointing.OVERDUE_FACTOR` × the optimum checkpoint interval for its shape
(:mod:`cmdare.planner.risk_cost.checkpointing`), so a revocation now would cost more than the checkpoint
schedule it should follow risks. Times in seconds, money in USD."""

from __future__ import annotations

from cmdare.planner.rules.alerts import AlertContext, Finding
from cmdare.planner.rules.rule_support import basis


def _dur(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 60}m{s % 60:02d}s" if s < 3600 else f"{s // 3600}h{s % 3600 // 60:02d}m"


def checkpoint_overdue_rule(ctx: AlertContext) -> list[Finding]:
    """A job whose time since its last checkpoint passes the stated factor × its optimum interval."""
    out = []
    for job in ctx.jobs:
        risk = ctx.inputs.work_at_risk.get(job.name)
        if risk is None or not risk.overdue or not job.steps_per_sec:
            continue
        assert risk.since_s is not None and risk.optimal_s is not None  # overdue says so
        money = f", ${risk.revocation_now_usd:.2f}" if risk.revocation_now_usd is not None else ""
        lost = _dur(risk.revocation_now_s or risk.since_s)
        evidence = {
            **basis(["last checkpoint (exporter or logs)", "cluster steps/s"],
                    ["revocation model (restart-forcing rate)", "checkpoint write time", "CM-DARE overheads"]),
            "since_checkpoint_s": round(risk.since_s),
            "optimal_interval_s": round(risk.optimal_s),
            "overdue_factor": risk.overdue_factor,
            "revocation_now_s": None if risk.revocation_now_s is None else round(risk.revocation_now_s),
            "revocation_now_usd": None if risk.revocation_now_usd is None else round(risk.revocation_now_usd, 2),
            "method": risk.method,
        }  # fmt: skip
        out.append(
            Finding(
                kind="checkpoint-overdue",
                subject=job.name,
                severity="warning",
                message=f"{_dur(risk.since_s)} of work since the last checkpoint, past {risk.overdue_factor:g}× the "
                f"optimum interval {_dur(risk.optimal_s)}: a revocation now costs {lost}{money}",
                evidence=evidence,
                fix=f"checkpoint now, then every {_dur(risk.optimal_s)} (saves {_dur(risk.saves_s or 0.0)} expected "
                f"against every {_dur(risk.interval_s)})",
            )
        )
    return out
