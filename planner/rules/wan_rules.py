"""The wan-bound rule: a geo-distributed pipeline paced by a WAN stage boundary.

:func:`stage_rates` reads the stage counters (per-second rates) from the store; the verdict per
boundary comes from :func:`cmdare.planner.geo.geo_model.wan_bound_from_live`.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from cmdare.collectors import metrics as M
from cmdare.collectors.observed import RATE_WINDOW_S
from cmdare.collectors.store import Store
from cmdare.planner.geo.geo_live import LiveBoundary, wan_bound_from_live
from cmdare.planner.rules.alerts import AlertContext, Finding
from cmdare.planner.rules.inputs import LinkCapacities, StageRates
from cmdare.planner.rules.rule_support import rate_window_s, signed_pct, thresholds_of

#: Many parallel TCP connections reach ≈5 Gbit/s on a WAN regardless of distance (Atlas, background.md §2).
ATLAS_MULTI_CONN_GBPS = 5.0


# ----------------------------------------------------------------------------------- wan-bound
def stage_rates(store: Store, window_s: float = RATE_WINDOW_S) -> dict[str, list[StageRates]]:
    """Stage counters of every job in the store (tasks without stage counters are left out)."""
    out: dict[str, list[StageRates]] = {}
    for ts in store.staged.values():  # the tasks that ever sent stage counters (the store's index)
        mb = ts.rate(M.K_STAGE_MICROBATCHES, window_s)
        if mb is None:
            continue
        sent = {
            k[len(M.K_STAGE_BYTES_PREFIX) : -1]: r
            for k in ts.keys()
            if k.startswith(M.K_STAGE_BYTES_PREFIX) and (r := ts.rate(k, window_s)) is not None
        }
        i = ts.info
        out.setdefault(i.job, []).append(
            StageRates(
                task=i.task,
                stage=i.stage or i.task,
                dc=i.dc,
                compute=ts.rate(M.K_STAGE_COMPUTE, window_s) or 0.0,
                wait=ts.rate(M.K_STAGE_WAIT, window_s) or 0.0,
                microbatches=mb,
                sent=sent,
            )
        )
    return out


def _order(stage: str) -> tuple[int, str]:
    return (int(stage), "") if stage.isdigit() else (1 << 30, stage)


def _pipeline(
    stages: Sequence[StageRates],
) -> tuple[dict[str, float], dict[str, float], dict[tuple[str, str], float]]:
    """(compute s per micro-batch by stage, wait share by stage, forward WAN bytes/s by boundary)."""
    by_stage: dict[str, list[StageRates]] = {}
    for s in stages:
        by_stage.setdefault(s.stage, []).append(s)
    compute = {
        k: sum(s.compute for s in v) / mb
        for k, v in by_stage.items()
        if (mb := sum(s.microbatches for s in v)) > 0
    }
    wait = {
        k: sum(s.wait for s in v) / max(sum(s.wait + s.compute for s in v), 1e-12)
        for k, v in by_stage.items()
    }
    task_stage = {s.task: s.stage for s in stages}
    dc = {s.stage: s.dc for s in stages}
    sent: dict[tuple[str, str], float] = {}
    for s in stages:
        for peer, r in s.sent.items():
            dst = task_stage.get(peer, peer)
            # A WAN boundary joins two DCs; gradients flow back on the other direction of the same
            # full-duplex link, so the forward direction (lower stage -> higher) decides.
            if dc.get(dst, s.dc) != s.dc and _order(s.stage) < _order(dst):
                sent[(s.stage, dst)] = sent.get((s.stage, dst), 0.0) + r
    return compute, wait, sent


def live_boundaries(
    stages: Sequence[StageRates], caps_by_dc: LinkCapacities, wait_share_min: float
) -> tuple[list[LiveBoundary], dict[str, str], dict[tuple[str, str], float]]:
    """Every WAN stage boundary of one job, measured: (boundaries, stage → DC, known capacities)."""
    compute, wait, sent = _pipeline(stages)
    per_pipe = statistics.median(s.microbatches for s in stages) if stages else 0.0
    dc = {s.stage: s.dc for s in stages}
    caps = {k: c for k in sent if (c := caps_by_dc.get(frozenset((dc[k[0]], dc[k[1]])))) is not None}
    return wan_bound_from_live(compute, sent, per_pipe, wait, caps, wait_share_min), dc, caps


def pipelines(ctx: AlertContext) -> dict[str, tuple[list[LiveBoundary], dict[str, str]]]:
    """Per pipeline job: its measured WAN boundaries and each stage's DC (for the Planner pane)."""
    caps_by_dc = ctx.inputs.link_capacity_gbps
    th = thresholds_of(ctx)
    out = {}
    for job, stages in ctx.inputs.stages.items():
        boundaries, dc, _ = live_boundaries(stages, caps_by_dc, th.wan_wait_share_min)
        out[job] = (boundaries, dc)
    return out


def wan_bound_rule(ctx: AlertContext) -> list[Finding]:
    """A WAN stage boundary whose transfer time per micro-batch exceeds the slowest stage's compute.

    With the link's capacity known (``link_capacity_gbps``: DC pair → Gbit/s) the transfer time is
    bytes ÷ capacity; unknown, it is bounded by the measured period and the receiver's wait share
    decides, and a single such WAN link is named by elimination (several: the job is flagged)."""
    th, out = thresholds_of(ctx), []
    caps_by_dc = ctx.inputs.link_capacity_gbps
    for job, stages in ctx.inputs.stages.items():
        boundaries, dc, caps = live_boundaries(stages, caps_by_dc, th.wan_wait_share_min)
        verdicts = [v for v in boundaries if v.wan_bound]
        known = [v for v in verdicts if (v.from_stage, v.to_stage) in caps]
        unknown = [v for v in verdicts if (v.from_stage, v.to_stage) not in caps]
        if known or len(unknown) == 1:
            out += [
                _wan_finding(ctx, job, v, dc, (v.from_stage, v.to_stage) in caps) for v in known or unknown
            ]
        elif unknown:
            links = ", ".join(f"{v.from_stage}->{v.to_stage}" for v in unknown)
            out.append(
                Finding(
                    kind="wan-bound",
                    subject=job,
                    severity="warning",
                    message=f"pipeline paced by a WAN link, capacity unknown: one of {links}",
                    evidence={
                        "measured": ["stage wait/compute time", "stage bytes sent"],
                        "not_measured": ["link capacity"],
                        "window_s": rate_window_s(ctx),
                        "links": links,
                    },
                    fix=None,
                )
            )
    return out


def _wan_finding(ctx: AlertContext, job: str, v: Any, dc: dict[str, str], known: bool) -> Finding:
    cmax = v.max_stage_compute_seconds
    evidence = {
        "window_s": ctx.inputs.stage_window_s, "transfer_seconds_per_microbatch": round(v.transfer_seconds, 4),
        "max_stage_compute_seconds": round(cmax, 4), "measured_gbps": round(v.measured_gbps, 3),
        "bytes_per_microbatch": round(v.bytes_per_microbatch), "receiver_wait_share": v.wait_share
        and round(v.wait_share, 3), "from_dc": dc.get(v.from_stage, ""), "to_dc": dc.get(v.to_stage, ""),
        "capacity_known": known,
        "measured": ["stage wait/compute time", "stage bytes sent", *(["link capacity (given)"] if known else [])],
        "not_measured": [] if known else ["link capacity"],
    }  # fmt: skip
    link_gbps = v.bytes_per_microbatch * 8 / v.transfer_seconds / 1e9 if v.transfer_seconds > 0 else 0.0
    fix = None
    if link_gbps < ATLAS_MULTI_CONN_GBPS:
        t_new = v.transfer_seconds * link_gbps / ATLAS_MULTI_CONN_GBPS
        gain = v.transfer_seconds / max(cmax, t_new) - 1
        fix = (
            f"open parallel TCP connections on this link (Atlas: ≈{ATLAS_MULTI_CONN_GBPS:.0f} Gbit/s) or share "
            f"it in turn: predicted {signed_pct(gain)} micro-batches/s"
        )
        evidence["fix_predicted_gain"] = round(gain, 3)
    where = f"{dc.get(v.from_stage, '?')}→{dc.get(v.to_stage, '?')}"
    return Finding(
        kind="wan-bound",
        subject=f"{job}/{v.from_stage}->{v.to_stage}",
        severity="warning",
        message=f"stage {v.from_stage}→{v.to_stage} ({where}) needs {v.transfer_seconds * 1e3:.0f} ms per "
        f"micro-batch on the wire > slowest stage compute {cmax * 1e3:.0f} ms",
        evidence=evidence,
        fix=fix,
    )
