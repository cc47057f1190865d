"""Worker-side rules: ``straggler`` (one worker steps slower than its peers) and ``input-bound``
(GPUs idle while the PS was measured not busy). Each names the measurements it rests on; a cause
that was not measured is said to be open, never "not the cause"; both causes are named when both fit.
GPU wording and GPU rules apply only to tasks that own a GPU."""

from __future__ import annotations

from collections import Counter
from operator import attrgetter
from typing import TYPE_CHECKING

import numpy as np

from cmdare.collectors.observed import STEP_WINDOW_S, WORKER_ROLES, JobView, NodeView
from cmdare.collectors.pricing.shapes import PS_SHAPE
from cmdare.planner.live.outlook import owns_gpu
from cmdare.planner.rules.alerts import AlertContext, Finding
from cmdare.planner.rules.ps_rules import PsLoad, ps_load
from cmdare.planner.rules.rule_support import (
    basis,
    columns_of,
    current_prediction,
    node_usd_per_hour,
    price_usd_per_hour,
    ps_traffic_gbps,
    signed_pct,
    thresholds_of,
)
from cmdare.planner.rules.thresholds import Thresholds
from cmdare.planner.rules.worker_columns import (
    Floats,
    Ints,
    canonical_gpu,
    compute_shares_of,
    given,
    median_of,
)

if TYPE_CHECKING:
    from cmdare.collectors.pricing.book import PriceBook

# ----------------------------------------------------------------------------------- straggler
STRAGGLERS_SHOWN = 20  # per job, the slowest stragglers flagged (a wide fleet may hold thousands)
_GPU, _REGION = attrgetter("gpu"), attrgetter("region")


def _majority_without(counts: Counter[str], value: str) -> str:
    """The most common value of ``counts`` once one ``value`` is left out (a worker's peers)."""
    peers = counts.copy()
    peers[value] -= 1
    peers = +peers  # drop what is left at zero
    return peers.most_common(1)[0][0] if peers else ""


def _straggler_causes(
    ctx: AlertContext, job: JobView, w: NodeView, gpu: str, region: str
) -> list[tuple[str, str]]:
    """Every cause that fits, as (cause, words): slower-gpu and/or other-region, else unexplained;
    ``gpu`` and ``region``: what most of its peers have."""
    out: list[tuple[str, str]] = []
    if owns_gpu(w.gpu) and owns_gpu(gpu) and canonical_gpu(w.gpu) != canonical_gpu(gpu):
        pred = current_prediction(ctx, job)
        rates = pred.worker_steps_per_sec if pred else {}
        mine, theirs = rates.get(canonical_gpu(w.gpu)), rates.get(canonical_gpu(gpu))
        if mine and theirs and mine < theirs:
            out.append(
                ("slower-gpu", f"a slower GPU type ({w.gpu} vs {gpu}: predicted {theirs / mine:.1f}× slower)")
            )
        else:
            out.append(("slower-gpu", f"a different GPU type ({w.gpu} vs {gpu})"))
    if w.region and region and w.region != region:
        out.append(
            (
                "other-region",
                f"in another region ({w.region} vs {region}: every PS round trip crosses regions)",
            )
        )
    return out or [("unexplained", "unexplained (same GPU type and region as its peers)")]


def _slowest(times: Floats, ratio_min: float) -> tuple[Floats, Floats, Ints]:
    """(ratios, peers' medians, indices into ``times``) of every worker whose step time is ≥ ``ratio_min``
    × its peers' median (the median of every other worker's), slowest first (ties: the later worker
    first). A sort and a few array operations: each worker's peers' median is read off the sorted times
    with its own left out, for every worker at once, and the run stops at the first worker, from the
    slowest down, under ``ratio_min`` (the rest are faster still)."""
    order = np.argsort(times, kind="stable")  # ascending, ties by position: reversed, the later first
    ranked = times[order]
    n, k = len(ranked) - 1, np.arange(len(ranked))

    def at(j: int) -> Floats:
        return ranked[np.where(j < k, j, j + 1)]

    med = at(n // 2) if n % 2 else (at(n // 2 - 1) + at(n // 2)) / 2
    med, ranked, order = med[::-1], ranked[::-1], order[::-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = ranked / med
    below = np.flatnonzero(ratio < ratio_min)
    count = int(below[0]) if below.size else len(ratio)
    if (med[: count + 1] == 0).any():  # a median of 0 (times ≤ 0): no ratio, as a float division says
        raise ZeroDivisionError("float division by zero")
    return ratio[:count], med[:count], order[:count]


def straggler_rule(ctx: AlertContext) -> list[Finding]:
    """A worker whose step time is ≥ ratio × the median of its peers'. Raised, it holds until the ratio
    falls below the clear ratio (a band: no flapping around one line). An unexplained one (same GPU
    type and region as its peers) needs ``straggler_min_peers`` peers to be told apart: with fewer, the
    job gets one info flag that says so (the same subject whichever worker is slower, so no flap).
    The workers are read as columns (:mod:`~cmdare.planner.rules.worker_columns`): a sort and a few
    array operations per job, the views themselves only for the flagged."""
    th, out = thresholds_of(ctx), []
    book = ctx.inputs.price_book
    low = min(th.straggler_clear_ratio, th.straggler_ratio)
    for job in ctx.jobs:
        if job.sync == "sync-allreduce":  # sync: sync_rules
            continue
        cols = columns_of(ctx, job)
        where = cols.up_worker & given(cols.step)
        at = np.flatnonzero(where)  # the workers with a step time, in the nodes' order
        if len(at) < max(th.straggler_min_workers, 2):
            continue
        ratios, meds, idx = _slowest(cols.step[at], low)
        if not len(ratios):
            continue
        peers = len(at) - 1
        raised = int(np.count_nonzero(ratios >= th.straggler_ratio))  # past the raise line
        gpus, regions = cols.counter(cols.gpu[at]), cols.counter(cols.region[at])  # the peers' usual
        undecided: tuple[float, NodeView, float] | None = None
        for ratio, i, med in zip(ratios[:STRAGGLERS_SHOWN].tolist(), idx[:STRAGGLERS_SHOWN].tolist(),
                                 meds[:STRAGGLERS_SHOWN].tolist(), strict=True):  # fmt: skip
            w = cols.nodes[at[i]]
            gpu, region = _majority_without(gpus, w.gpu), _majority_without(regions, w.region)
            causes = _straggler_causes(ctx, job, w, gpu, region)
            if causes[0][0] == "unexplained" and peers < th.straggler_min_peers:
                undecided = undecided or (ratio, w, med)
                continue
            out.append(_straggler(ctx, job, book, th, (ratio, w, med), causes, (gpu, region), peers, raised))
        if undecided is not None:
            out.append(_too_few_peers(job, cols.views(where), undecided, th))
    return out


def _worker_kind(gpu: str) -> str:
    """'a P100 worker', 'a CPU worker', or 'another worker' when the peers' GPU is not labelled."""
    if owns_gpu(gpu):
        return f"a {gpu} worker"
    return "a CPU worker" if gpu.strip().upper() == "CPU" else "another worker"


def _straggler(
    ctx: AlertContext,
    job: JobView,
    book: PriceBook | None,
    th: Thresholds,
    found: tuple[float, NodeView, float],
    causes: list[tuple[str, str]],
    usual: tuple[str, str],
    peers: int,
    stragglers: int,
) -> Finding:
    """The straggler flag of one worker: its ratio to its peers' median, every cause that fits, and a
    fix whose every field is known (no region or GPU type is named that the tasks did not give)."""
    ratio, w, med = found
    gpu, region = usual
    words = " and ".join(c[1] for c in causes)
    step_s = w.step_seconds or 0.0  # a straggler has one (_slowest ranks step times)
    own = w.steps_per_sec or (1.0 / step_s if step_s else 0.0)
    gain = own * (ratio - 1) / job.steps_per_sec if job.steps_per_sec else None
    fix = f"replace {w.name} with {_worker_kind(gpu)}" + (f" in {region}" if region else "")
    if gain is not None:
        fix += f": predicted up to {signed_pct(gain)} steps/s"
    a = node_usd_per_hour(book, w)
    b = (
        price_usd_per_hour(book, "node_price", gpu, 1, region, w.provisioning or "standard")
        if region
        else None
    )
    if a is not None and b is not None and abs(b - a) > 0.005:
        fix += f", {b - a:+.2f} $/h"
    evidence = {
        **basis(["worker step time (histogram)", "peers' step times", "task labels (GPU, region)"]),
        "step_seconds": round(step_s, 4),
        "peer_median_step_seconds": round(med, 4),
        "ratio": round(ratio, 3),
        "raise_ratio": th.straggler_ratio,
        "clear_ratio": th.straggler_clear_ratio,
        "window_s": STEP_WINDOW_S,
        "causes": [c[0] for c in causes],
        "gpu": w.gpu,
        "region": w.region,
        "peer_gpu": gpu,
        "peer_region": region,
        "peers": peers,
        "stragglers": stragglers,  # at or past the raise ratio, in all; the STRAGGLERS_SHOWN slowest are flagged
    }
    than = f"its {peers} peers' median" if peers > 1 else "its peer"
    msg = f"{w.name} steps {ratio:.2f}× slower than {than}: {words}"
    if ratio < th.straggler_ratio:
        msg += f" (held until below {th.straggler_clear_ratio:g}×)"
    return Finding(
        kind="straggler",
        subject=f"{job.name}/{w.name}",
        severity="warning",
        message=msg,
        evidence=evidence,
        fix=fix,
        holds=ratio < th.straggler_ratio,
    )


def _too_few_peers(
    job: JobView, workers: list[NodeView], found: tuple[float, NodeView, float], th: Thresholds
) -> Finding:
    """One info flag for the job: its slowest worker lags, but with too few peers to tell whether it
    is the odd one (the subject is the job, whichever worker is slower this refresh)."""
    ratio, w, med = found
    need = th.straggler_min_peers
    others = ", ".join(p.name for p in workers if p is not w)
    msg = (f"{w.name} steps {ratio:.2f}× slower than {others}: too few workers to tell a straggler "
           f"({len(workers)} up; an unexplained straggler needs ≥ {need} peers, {need + 1} workers)")  # fmt: skip
    evidence = {
        **basis(["worker step time (histogram)", "peers' step times", "task labels (GPU, region)"]),
        "step_seconds": round(w.step_seconds or 0.0, 4),  # a straggler has one (_slowest ranks step times)
        "peer_median_step_seconds": round(med, 4),
        "ratio": round(ratio, 3),
        "workers": len(workers),
        "peers_needed": need,
        "window_s": STEP_WINDOW_S,
    }
    return Finding(
        kind="straggler",
        subject=job.name,
        severity="info",
        message=msg,
        evidence=evidence,
        fix=None,
        holds=ratio < th.straggler_ratio,
    )


# ----------------------------------------------------------------------------------- input-bound
def _ps_words(
    th: Thresholds, load: PsLoad | None, traffic: float | None, cpu: float | None
) -> tuple[bool, list[str], list[str], list[str]]:
    """(the PS was measured busy, words on what was measured, measured names, not measured names)."""
    words: list[str] = []
    measured: list[str] = []
    missing: list[str] = []
    busy = False
    if load is not None:  # with a model: the same test as ps-saturation's
        busy |= load.ps_utilization >= th.ps_utilization_min or (load.nic_util or 0.0) >= th.ps_nic_util_max
        words.append(f"PS ≈{min(load.ps_utilization, 1):.0%} busy (speed model)")
    if traffic is not None:
        if load is None:  # without: the measured-only test of ps-saturation
            busy |= traffic >= th.ps_traffic_high_gbps
        words.append(f"PS traffic {traffic:.1f} Gbit/s")
        measured.append("PS NIC traffic")
    else:
        missing.append("PS NIC traffic")
    if cpu is not None:
        busy |= cpu >= th.ps_cpu_util_max
        words.append(f"PS CPU {cpu:.0%}")
        measured.append("PS CPU")
    else:
        missing.append("PS CPU")
    return busy, words, measured, missing


def input_bound_rule(ctx: AlertContext) -> list[Finding]:
    """GPUs busy well below capacity while the PS was measured not busy; when the PS load was not
    measured, the message says the PS may be the cause too. Tasks without a GPU never count; "GPUs
    busy" is said only of DCGM's utilisation (else: the workers' measured compute share, which a job
    that declares a GPU but runs on CPUs also has). A sync all-reduce job is left to the sync rules."""
    th, out = thresholds_of(ctx), []
    for job in ctx.jobs:
        if job.sync == "sync-allreduce":  # no PS, and ranks idle at each all-reduce: sync_rules' call
            continue
        regions = {
            region
            for (role, gpu, region, _, up) in job.kinds
            if up and role in WORKER_ROLES and owns_gpu(gpu)
        }
        if len(regions) != 1:  # no GPU worker up, or cross-region: the network may be the cause
            continue
        pred = current_prediction(ctx, job)
        cols = columns_of(ctx, job)  # the up workers that own a GPU, as columns
        shares, first, dcgm = compute_shares_of(cols, cols.up_worker & cols.owns()[cols.gpu], pred)
        if not len(shares):
            continue
        what = "GPU utilisation (DCGM)" if dcgm else first
        share = median_of(shares)
        if share >= (th.gpu_util_max / 100.0 if dcgm else th.busy_share_max):
            continue
        load = ps_load(ctx, job, pred) if pred else None
        ps = cols.up_ps_nodes()
        traffic = ps_traffic_gbps(job, ps)
        cpus = [ctx.inputs.ps_cpu.get(f"{job.name}/{n.name}") for n in ps]
        cpu = max((c / PS_SHAPE.vcpus for c in cpus if c is not None), default=None)
        busy, ps_words, measured, missing = _ps_words(th, load, traffic, cpu)
        if busy:
            continue  # the PS is busy: that is ps-saturation's call
        open_cause = load is None and traffic is None and cpu is None
        tail = ("; PS load not measured: the PS may be the cause too" if open_cause
                else "; measured: " + ", ".join(ps_words) + ", workers in one region")  # fmt: skip
        evidence = {
            **basis(
                [what, *measured, "task regions"],
                ["PS seconds per step"] if load else [],
                [*missing, "input pipeline (inferred, not measured)"],
            ),
            "busy_share": round(share, 3),
            "signal": what,
            "workers": len(shares),
            "window_s": STEP_WINDOW_S,
            "ps_utilization": load and round(load.ps_utilization, 3),
            "ps_nic_gbps": traffic and round(traffic, 3),
            "steps_per_sec": job.steps_per_sec and round(job.steps_per_sec, 2),
            "also_possible": ["ps-saturation"] if open_cause else [],
        }
        fix = None
        if pred and job.steps_per_sec:
            gain = pred.steps_per_sec / job.steps_per_sec - 1
            if gain > 0.05:
                fix = (
                    f"feed the GPUs faster (more input threads, prefetch, cache decoded data): predicted "
                    f"{signed_pct(gain)} steps/s (≈{pred.steps_per_sec:.0f}; band: n/a) when the input keeps up"
                )
                evidence["predicted_steps_per_sec"] = round(pred.steps_per_sec, 2)
        out.append(
            Finding(
                kind="input-bound",
                subject=job.name,
                severity="warning",
                message=f"{'GPUs busy' if dcgm else 'workers compute'} {share:.0%} of the time ({what})"
                + ("" if dcgm else "; GPU use not measured")
                + tail,
                evidence=evidence,
                fix=fix,
            )  # fmt: skip
        )
    return out
