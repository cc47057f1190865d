"""Worker-side rules: ``straggler`` (one worker steps slower than its peers) and ``input-bound``
(GPUs idle while the PS was measured not busy). Each names the measurements it rests on; a cause
that was not measured is said to be open, never "not the cause"; both causes are named when both fit.
GPU wording and GPU rules apply only to tasks that own a GPU."""

from __future__ import annotations

import statistics
from collections import Counter
from operator import attrgetter
from typing import TYPE_CHECKING

from cmdare.collectors.observed import STEP_WINDOW_S, WORKER_ROLES, JobView, NodeView
from cmdare.collectors.pricing.shapes import PS_SHAPE
from cmdare.planner.live.outlook import owns_gpu
from cmdare.planner.rules.alerts import AlertContext, Finding
from cmdare.planner.rules.ps_rules import PsLoad, ps_load
from cmdare.planner.rules.rule_support import (
    basis,
    canonical_gpu,
    compute_shares,
    current_prediction,
    node_usd_per_hour,
    price_usd_per_hour,
    ps_traffic_gbps,
    signed_pct,
    thresholds_of,
)
from cmdare.planner.rules.thresholds import Thresholds

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


def _median_without(ranked: list[float], k: int) -> float:
    """Median of the sorted list ``ranked`` with its ``k``-th element left out."""
    n = len(ranked) - 1

    def at(j: int) -> float:
        return ranked[j if j < k else j + 1]

    return at(n // 2) if n % 2 else (at(n // 2 - 1) + at(n // 2)) / 2


def _slowest(workers: list[NodeView], ratio_min: float) -> list[tuple[float, NodeView, float]]:
    """(ratio, worker, peers' median) of every worker whose step time is ≥ ``ratio_min`` × its peers'
    median, slowest first (ties: the later worker first). A pass, a sort of the step times and O(1)
    a straggler: the rest of a 10,000-worker job is never visited one by one."""
    times = [w.step_seconds or 0.0 for w in workers]  # each has a step time (the caller's filter)
    ranked = sorted(times)
    found = []  # (ratio, peers' median) from the slowest down; the rest are faster still
    for k in range(len(ranked) - 1, -1, -1):
        med = _median_without(ranked, k)
        ratio = ranked[k] / med
        if ratio < ratio_min:
            break
        found.append((ratio, med))
    if not found:
        return []
    cut = ranked[len(ranked) - len(found)]  # the fastest straggler's time: who is at least as slow
    slow = sorted((t, i) for i, t in enumerate(times) if t >= cut)[-len(found) :]
    return [(ratio, workers[i], med) for (ratio, med), (_, i) in zip(found, reversed(slow), strict=True)]


def straggler_rule(ctx: AlertContext) -> list[Finding]:
    """A worker whose step time is ≥ ratio × the median of its peers'. Raised, it holds until the ratio
    falls below the clear ratio (a band: no flapping around one line). An unexplained one (same GPU
    type and region as its peers) needs ``straggler_min_peers`` peers to be told apart: with fewer, the
    job gets one info flag that says so (the same subject whichever worker is slower, so no flap)."""
    th, out = thresholds_of(ctx), []
    book = ctx.inputs.price_book
    low = min(th.straggler_clear_ratio, th.straggler_ratio)
    for job in ctx.jobs:
        workers = [w for w in job.up_workers() if w.step_seconds]
        if job.sync == "sync-allreduce" or len(workers) < max(
            th.straggler_min_workers, 2
        ):  # sync: sync_rules
            continue
        slow = _slowest(workers, low)
        if not slow:
            continue
        peers = len(workers) - 1
        raised = sum(1 for ratio, _, _ in slow if ratio >= th.straggler_ratio)  # past the raise line
        gpus, regions = Counter(map(_GPU, workers)), Counter(map(_REGION, workers))  # the peers' usual
        undecided: tuple[float, NodeView, float] | None = None
        for ratio, w, med in slow[:STRAGGLERS_SHOWN]:
            gpu, region = _majority_without(gpus, w.gpu), _majority_without(regions, w.region)
            causes = _straggler_causes(ctx, job, w, gpu, region)
            if causes[0][0] == "unexplained" and peers < th.straggler_min_peers:
                undecided = undecided or (ratio, w, med)
                continue
            out.append(_straggler(ctx, job, book, th, (ratio, w, med), causes, (gpu, region), peers, raised))
        if undecided is not None:
            out.append(_too_few_peers(job, workers, undecided, th))
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


def _gpu_workers(job: JobView) -> list[NodeView]:
    """The job's up workers that own a GPU (the GPU labels checked once each, from the census)."""
    gpus = {g for (role, g, _, _, up) in job.kinds if up and role in WORKER_ROLES and owns_gpu(g)}
    return [w for w in job.up_workers() if w.gpu in gpus]


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
        shares, first, dcgm = compute_shares(_gpu_workers(job), pred)
        if not shares:
            continue
        what = "GPU utilisation (DCGM)" if dcgm else first
        share = statistics.median(shares)
        if share >= (th.gpu_util_max / 100.0 if dcgm else th.busy_share_max):
            continue
        load = ps_load(ctx, job, pred) if pred else None
        traffic = ps_traffic_gbps(job)
        cpus = [ctx.inputs.ps_cpu.get(f"{job.name}/{n.name}") for n in job.up_ps_nodes()]
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
