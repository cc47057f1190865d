"""Worker-side rules: ``straggler`` (one worker steps slower than its peers) and ``input-bound``
(GPUs idle while neither the PS nor the network is the cause)."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence

from cmdare.planner.alerts import AlertContext, Finding
from cmdare.planner.overview import STEP_WINDOW_S, JobView, NodeView
from cmdare.planner.ps_rules import ps_load
from cmdare.planner.rule_support import (
    canonical_gpu,
    current_prediction,
    node_usd_per_hour,
    price_usd_per_hour,
    signed_pct,
    thresholds_of,
    up_workers,
)
from cmdare.planner.speed_model import SpeedPrediction


# ----------------------------------------------------------------------------------- straggler
def _majority(values: Sequence[str]) -> str:
    return Counter(values).most_common(1)[0][0] if values else ""


def _straggler_cause(ctx: AlertContext, job: JobView, w: NodeView, peers: list[NodeView]) -> tuple[str, str]:
    """(cause, words): slower-gpu | other-region | unexplained."""
    gpu, region = _majority([p.gpu for p in peers]), _majority([p.region for p in peers])
    if w.gpu and gpu and canonical_gpu(w.gpu) != canonical_gpu(gpu):
        pred = current_prediction(ctx, job)
        rates = pred.worker_steps_per_sec if pred else {}
        mine, theirs = rates.get(canonical_gpu(w.gpu)), rates.get(canonical_gpu(gpu))
        if mine and theirs and mine < theirs:
            return (
                "slower-gpu",
                f"a slower GPU type ({w.gpu} vs {gpu}: predicted {theirs / mine:.1f}× slower)",
            )
        return "slower-gpu", f"a different GPU type ({w.gpu} vs {gpu})"
    if w.region and region and w.region != region:
        return (
            "other-region",
            f"in another region ({w.region} vs {region}: every PS round trip crosses regions)",
        )
    return "unexplained", "unexplained (same GPU type and region as its peers)"


def _median_without(ranked: list[float], k: int) -> float:
    """Median of the sorted list ``ranked`` with its ``k``-th element left out."""
    n = len(ranked) - 1

    def at(j: int) -> float:
        return ranked[j if j < k else j + 1]

    return at(n // 2) if n % 2 else (at(n // 2 - 1) + at(n // 2)) / 2


def straggler_rule(ctx: AlertContext) -> list[Finding]:
    """A worker whose step time is ≥ ratio × the median of its peers'."""
    th, out = thresholds_of(ctx), []
    book = ctx.extras.get("price_book")
    for job in ctx.jobs:
        workers = [w for w in up_workers(job) if w.step_seconds]
        if len(workers) < max(th.straggler_min_workers, 2):
            continue
        times = [w.step_seconds for w in workers]
        order = sorted(range(len(workers)), key=times.__getitem__)
        ranked = [times[i] for i in order]
        rank_of = {i: k for k, i in enumerate(order)}
        for i, w in enumerate(workers):
            med = _median_without(ranked, rank_of[i])  # the peers' median, O(1) per worker
            ratio = w.step_seconds / med  # type: ignore[operator]
            if ratio < th.straggler_ratio:
                continue
            peers = [p for p in workers if p is not w]
            cause, words = _straggler_cause(ctx, job, w, peers)
            own = w.steps_per_sec or 1.0 / w.step_seconds  # type: ignore[operator]
            gain = own * (ratio - 1) / job.steps_per_sec if job.steps_per_sec else None
            gpu, region = _majority([p.gpu for p in peers]), _majority([p.region for p in peers])
            fix = f"replace {w.name} with a {gpu} worker in {region}"
            if gain is not None:
                fix += f": predicted up to {signed_pct(gain)} steps/s"
            a = node_usd_per_hour(book, w)
            b = price_usd_per_hour(book, "node_price", gpu, 1, region, w.provisioning or "standard")
            if a is not None and b is not None and abs(b - a) > 0.005:
                fix += f", {b - a:+.2f} $/h"
            evidence = {
                "step_seconds": round(w.step_seconds, 4),
                "peer_median_step_seconds": round(med, 4),  # type: ignore[arg-type]
                "ratio": round(ratio, 3),
                "window_s": STEP_WINDOW_S,
                "cause": cause,
                "gpu": w.gpu,
                "region": w.region,
                "peer_gpu": gpu,
                "peer_region": region,
                "peers": len(peers),
            }
            out.append(
                Finding(
                    "straggler",
                    f"{job.name}/{w.name}",
                    "warning",
                    f"{w.name} steps {ratio:.2f}× slower than its peers' median: {words}",
                    evidence,
                    fix,
                )
            )
    return out


# ----------------------------------------------------------------------------------- input-bound
def _busy_share(ctx: AlertContext, w: NodeView, pred: SpeedPrediction | None) -> float | None:
    """Share of wall time the GPU computes: DCGM util, else step seconds × own steps/s."""
    if w.gpu_util is not None:
        return w.gpu_util / 100.0
    if w.step_seconds and w.steps_per_sec:
        return w.step_seconds * w.steps_per_sec
    own = pred.worker_steps_per_sec.get(canonical_gpu(w.gpu)) if pred else None
    return w.steps_per_sec / own if own and w.steps_per_sec else None


def input_bound_rule(ctx: AlertContext) -> list[Finding]:
    """GPUs busy well below capacity while neither the PS nor the network is the cause."""
    th, out = thresholds_of(ctx), []
    for job in ctx.jobs:
        pred, workers = current_prediction(ctx, job), up_workers(job)
        shares = [s for w in workers if (s := _busy_share(ctx, w, pred)) is not None]
        if not shares or len({w.region for w in workers}) > 1:  # cross-region: the network may be the cause
            continue
        share = statistics.median(shares)
        dcgm = any(w.gpu_util is not None for w in workers)
        if share >= (th.gpu_util_max / 100.0 if dcgm else th.busy_share_max):
            continue
        load = ps_load(ctx, job, pred) if pred else None
        if load is not None and (
            load.ps_utilization >= th.ps_utilization_min
            or (load.nic_util or 0) >= th.ps_nic_util_max
            or (load.cpu_util or 0) >= th.ps_cpu_util_max
        ):
            continue  # the PS is busy: that is ps-saturation's call
        what = "GPU utilisation (DCGM)" if dcgm else "step compute share"
        evidence = {
            "busy_share": round(share, 3),
            "signal": what,
            "workers": len(shares),
            "window_s": STEP_WINDOW_S,
            "ps_utilization": load and round(load.ps_utilization, 3),
            "steps_per_sec": job.steps_per_sec,
        }
        fix = None
        if pred and job.steps_per_sec:
            gain = pred.steps_per_sec / job.steps_per_sec - 1
            if gain > 0.05:
                fix = (
                    f"feed the GPUs faster (more input threads, prefetch, cache decoded data): predicted "
                    f"{signed_pct(gain)} steps/s (≈{pred.steps_per_sec:.0f}) when the input keeps up"
                )
                evidence["predicted_steps_per_sec"] = round(pred.steps_per_sec, 2)
        out.append(
            Finding(
                "input-bound",
                job.name,
                "warning",
                f"GPUs busy {share:.0%} of the time ({what}) while the PS and network are not the cause",
                evidence,
                fix,
            )
        )
    return out
