"""The straggler, input-bound and ps-saturation rules read a job's workers as columns (numpy arrays kept
from refresh to refresh, planner/rules/worker_columns.py); these tests hold them to the per-worker
definitions they replace, on random fleets with ties, mixed signals (DCGM, step compute share, the
model), CPU-only workers, parameter servers and tasks down, and hold columns kept over refreshes (only
the views that changed read again) to columns read whole."""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import replace

import numpy as np
import pytest

from cmdare.collectors.observed import JobView, NodeView
from cmdare.collectors.samples import JobFacts, ModelSpec
from cmdare.planner.rules.alerts import AlertContext, Finding
from cmdare.planner.rules.inputs import RuleInputs, frozen_map
from cmdare.planner.rules.ps_rules import ps_load
from cmdare.planner.rules.rule_support import compute_share, compute_shares
from cmdare.planner.rules.worker_columns import JobColumns, canonical_gpu, compute_shares_of
from cmdare.planner.rules.worker_rules import _slowest
from cmdare.planner.speed.speed_model import SpeedPrediction


def _node(i: int, rng: random.Random, *, status: str = "up", role: str = "worker") -> NodeView:
    gpu = rng.choice(["V100", "V100", "K80", "CPU"])
    step = rng.choice([None, 0.1, 0.1, 0.2, round(rng.uniform(0.05, 0.6), 2)])  # ties on purpose
    sps = rng.choice([None, 0.0, 3.0, round(rng.uniform(1, 10), 2)])
    util = rng.choice([None, None, None, round(rng.uniform(10, 100), 1)])
    return NodeView(
        name=f"w{i}",
        role=role,
        gpu=gpu,
        region="us-central1",
        zone="",
        provisioning="spot",
        status=status,
        steps_per_sec=sps,
        step_seconds=step,
        gpu_util=util,
        net_in_bps=None,
        net_out_bps=None,
        started_at=0.0,
        last_error=None,
        restarts=0,
        cause="",
    )


def _job(nodes: list[NodeView]) -> JobView:
    return JobView(
        name="j",
        facts=JobFacts("j"),
        steps_per_sec=10.0,
        examples_per_sec=None,
        global_step=1.0,
        eta_seconds=None,
        nodes=nodes,
        sync="async-ps",
    )


def _slowest_reference(workers: list[NodeView], ratio_min: float) -> list[tuple[float, str, float]]:
    """Every worker against the median of all the others, slowest first (the later worker first on
    ties): the definition, at O(n²)."""
    out = []
    for i, w in enumerate(workers):
        peers = [p.step_seconds for j, p in enumerate(workers) if j != i]
        med = statistics.median(peers)
        if w.step_seconds / med >= ratio_min:
            out.append((w.step_seconds, i, w.step_seconds / med, med))
    out.sort(key=lambda x: (x[0], x[1]), reverse=True)
    return [(round(r, 12), workers[i].name, round(m, 12)) for _, i, r, m in out]


@pytest.mark.parametrize("seed", range(40))
def test_slowest_matches_every_worker_against_its_peers(seed):
    rng = random.Random(seed)
    workers = [w for w in (_node(i, rng) for i in range(rng.randint(2, 60))) if w.step_seconds]
    if len(workers) < 2:
        return
    ratio = rng.choice([1.2, 1.5, 2.0])
    ratios, meds, idx = _slowest(np.array([w.step_seconds for w in workers]), ratio)
    got = [(round(r, 12), workers[i].name, round(m, 12)) for r, m, i in zip(ratios, meds, idx, strict=True)]
    assert got == _slowest_reference(workers, ratio)


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("with_model", [False, True])
def test_compute_shares_match_compute_share_of_each_worker(seed, with_model):
    rng = random.Random(seed)
    nodes = [_node(i, rng, status=rng.choice(["up", "up", "silent"]), role=rng.choice(["worker", "ps", "chief"]))
             for i in range(rng.randint(1, 50))]  # fmt: skip
    rates = {"V100": 6.0, "K80": 0.0}  # a K80 rate of 0: the model cannot say (no share)
    pred = (
        SpeedPrediction(
            steps_per_sec=10.0,
            examples_per_sec=1280.0,
            bottleneck="compute",
            ps_utilization=0.1,
            worker_steps_per_sec=rates,
            compute_bound_steps_per_sec=10.0,
            terms={},
            source="test",
        )
        if with_model
        else None
    )
    job = _job(nodes)
    cols = JobColumns.of(job)
    gpu_workers = [n for n in job.up_workers() if n.gpu != "CPU"]
    sets = ((gpu_workers, cols.up_worker & cols.owns()[cols.gpu]), (list(job.up_workers()), cols.up_worker))
    for workers, where in sets:  # input-bound's set, ps-saturation's set
        assert cols.views(where) == workers
        shares, first, dcgm = compute_shares(workers, pred)
        want = [(s, sig) for s, sig in (compute_share(w, pred) for w in workers) if s is not None]
        assert sorted(shares) == sorted(s for s, _ in want)  # the same floats
        assert dcgm == any(sig.startswith("GPU utilisation") for _, sig in want)
        assert first == (want[0][1] if want else "")
        got, got_first, got_dcgm = compute_shares_of(cols, where, pred)
        assert got.tolist() == shares and (got_first, got_dcgm) == (first, dcgm)


def _fleet(rng: random.Random, n: int) -> list[NodeView]:
    """Workers, a chief, PSs and tasks down, with checkpoints here and there."""
    out = []
    for i in range(n):
        role = rng.choice(["worker"] * 8 + ["ps", "chief"])
        node = _node(i, rng, status=rng.choice(["up"] * 6 + ["silent", "revoked"]), role=role)
        node = replace(node, region=rng.choice(["us-central1", "us-central1", "europe-west4"]),
                       last_checkpoint_at=rng.choice([None, 1e9 + rng.random()]),
                       checkpoint_seconds=rng.choice([None, rng.uniform(1, 9)]),
                       checkpoint_interval_s=rng.choice([None, rng.uniform(60, 900)]),
                       net_in_bps=rng.uniform(1e8, 2e9) if role == "ps" else None)  # fmt: skip
        out.append(node)
    return out


def _same_columns(a: JobColumns, b: JobColumns) -> None:
    assert a.nodes is b.nodes
    for name in ("up_worker", "up_ps", "worker", "chief"):
        assert getattr(a, name).tolist() == getattr(b, name).tolist(), name
    for name in ("gpu", "region"):  # the same labels (codes may differ: the order they were met)
        assert [a.labels[c] for c in getattr(a, name)] == [b.labels[c] for c in getattr(b, name)], name
    for name in ("step", "sps", "util", "ckpt_last", "ckpt_write", "ckpt_gap"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


@pytest.mark.parametrize("seed", range(12))
def test_columns_kept_over_refreshes_match_columns_read_whole(seed):
    """Each refresh gives some tasks a new view (another GPU, region, role or state too), now and then the
    job gains or loses tasks: the kept columns read only the views that changed and hold what a
    fresh read holds; so do the rules' verdicts."""
    from cmdare.planner.rules.bottlenecks import DEFAULT_RULES

    rng = random.Random(seed)
    nodes = _fleet(rng, rng.randint(2, 80))
    kept = JobColumns(list(nodes))
    for _ in range(8):
        if rng.random() < 0.2:  # a task joins or leaves: another length, read whole
            nodes = nodes[:-1] if len(nodes) > 3 and rng.random() < 0.5 else [*nodes, *_fleet(rng, 1)]
        fresh_views = _fleet(rng, len(nodes))
        swapped = rng.sample(range(len(nodes)), rng.randint(0, len(nodes)))
        nodes = list(nodes)
        for i in swapped:
            nodes[i] = fresh_views[i] if rng.random() < 0.3 else replace(nodes[i], steps_per_sec=rng.random())
        was_length, held = len(kept.nodes), kept.copy()  # a ranking's copy: no update changes it
        kept = kept.update(nodes)
        _same_columns(held, JobColumns(held.nodes))
        if was_length == len(nodes):
            assert kept.changed == len(swapped)
        job = _job(nodes)
        _same_columns(kept, JobColumns.of(job))
        ctx = AlertContext(0.0, [job], RuleInputs(columns=frozen_map({job.name: kept})))
        for rule in DEFAULT_RULES:  # the kept columns and the job's own give the same verdicts
            assert rule(ctx) == rule(AlertContext(0.0, [_job(nodes)])), rule.__name__


def _ps_load_reference(job: JobView, pred: SpeedPrediction) -> tuple[float, float | None] | None:
    """The per-worker loop :func:`ps_load` replaced: (compute-bound rate, median step-time ratio)."""
    x, workers = job.steps_per_sec, job.up_workers()
    if not x or x <= 0 or not workers:
        return None
    bound, ratios = 0.0, []
    for w in workers:
        own = pred.worker_steps_per_sec.get(canonical_gpu(w.gpu))
        if not own:
            return None
        cycle = 1.0 / own
        if w.step_seconds:
            ratios.append(w.step_seconds / cycle)
        bound += 1.0 / max(w.step_seconds or 0.0, cycle)
    return bound, statistics.median(ratios) if ratios else None


@pytest.mark.parametrize("seed", range(12))
def test_ps_load_matches_the_per_worker_loop(seed):
    rng = random.Random(seed)
    nodes = [n for n in _fleet(rng, rng.randint(2, 200)) if n.gpu != "CPU" or rng.random() < 0.1]
    rates = {"V100": 6.0, "K80": 1.5, "CPU": 0.4}
    pred = SpeedPrediction(steps_per_sec=10.0, examples_per_sec=1280.0, bottleneck="ps", ps_utilization=0.5,
                           worker_steps_per_sec=rates, compute_bound_steps_per_sec=10.0, terms={"ps": 0.01},
                           source="test")  # fmt: skip
    job = _job(nodes)
    want = _ps_load_reference(job, pred)
    got = ps_load(AlertContext(0.0, [job]), job, pred)
    assert (got is None) == (want is None)
    if got is not None and want is not None:
        assert (got.compute_bound, got.compute_ratio) == want  # the same floats, summed in the same order
        assert math.isfinite(got.efficiency)


@pytest.mark.parametrize("seed", range(6))
def test_checkpoint_facts_of_columns_match_the_views(seed):
    from cmdare.planner.risk_cost.checkpointing import CheckpointFacts

    job = _job(_fleet(random.Random(seed), 60))
    assert CheckpointFacts.of_columns(JobColumns.of(job)) == CheckpointFacts.of(job)


@pytest.mark.parametrize("seed", range(8))
def test_the_live_plans_inputs_from_columns_match_the_views(seed):
    """The live ranking's calibration samples, the job's region and provisioning, and the calibration's
    residual: from the columns as from one worker after another."""
    from collections import Counter

    from cmdare.planner.live.plan import _dominant
    from cmdare.planner.speed.calibration import Calibration
    from cmdare.planner.speed.speed_model import SpeedModel

    rng = random.Random(seed)
    nodes = [replace(n, provisioning=rng.choice(["spot", "standard", ""]), region=rng.choice(["", n.region]),
                     gpu=rng.choice([n.gpu, "Tesla K80", "V100"]) if n.gpu != "CPU" else "")
             for n in _fleet(rng, rng.randint(2, 120))]  # fmt: skip
    job = _job(nodes)
    cols = JobColumns.of(job)
    workers = [n for n in job.nodes if n.role in ("worker", "chief")]
    assert cols.dominant(cols.region[cols.worker]) == _dominant(
        Counter(n.region for n in workers if n.region)
    )
    assert cols.dominant(cols.prov[cols.worker]) == _dominant(
        Counter(n.provisioning for n in workers if n.provisioning)
    )
    model = SpeedModel.load()
    net = ModelSpec(name="ResNet-32", model_flops=1658696889.0, params=1857722.0, batch_size=128)
    one = Calibration(model, net, {"K80": 3, "V100": 2}, 1)
    for n in job.workers():
        if n.status == "up" and n.step_seconds and n.gpu:
            one.add_worker_step_time(n.gpu, n.step_seconds)
    assert cols.step_times() == one.step_times  # the same names, in the same order, the same times
    for r in (5.0, 7.5):
        one.add_cluster_rate(r)
    one.fit()
    errs = [
        abs(one._predict(one.compute_scale_, one.ps_scale_).steps_per_sec / r - 1) for r in one.cluster_rates
    ]
    pred = one._predict(one.compute_scale_, one.ps_scale_)
    for g, v in one.step_times.items():
        if g in pred.worker_steps_per_sec:
            errs += [abs(one._worker_step_time(pred, g) / x - 1) for x in v]
    assert one.residual == float(np.mean(errs))


@pytest.mark.parametrize("seed", range(10))
def test_a_sync_jobs_split_shape_and_straggler_from_columns_match_the_views(seed):
    """A data-parallel job's measured split, shape, placement and refused ranks, and its sync straggler:
    read from the planner's kept columns (as its refresh does) and from the views, one rank at a time."""
    from cmdare.planner.live import sync_job
    from cmdare.planner.rules.sync_rules import sync_straggler_rule
    from cmdare.planner.rules.worker_columns import kept_columns

    rng = random.Random(seed)
    nodes = [replace(n, allreduce_seconds=rng.choice([None, 0.0, rng.uniform(0.001, 0.5)]),
                     local_rank=rng.choice([str(i % 8)] * 8 + ["", "x"]) if seed % 3 else str(i % 4),
                     steps_per_sec=rng.choice([None, 0.0, rng.uniform(0.5, 9), 100.0]), rank=str(i))
             for i, n in enumerate(_fleet(rng, rng.randint(2, 150)))]  # fmt: skip
    asked = (
        sync_job._measured_split,
        sync_job._sync_shape,
        sync_job._placement,
        sync_job._allreduce_refusals,
    )
    views = _job(nodes)
    views = replace(views, sync="sync-allreduce")
    want = [f(views) for f in asked]
    job = replace(views, tally=None)
    cols = JobColumns.of(job)
    with kept_columns({job.name: cols}):
        assert sync_job._kept(job) is cols
        assert [f(job) for f in asked] == want
    assert sync_job._kept(job) is None  # outside the planner's refresh: the views
    ctx = AlertContext(0.0, [job], RuleInputs(columns=frozen_map({job.name: cols})))
    assert sync_straggler_rule(ctx) == _sync_straggler_reference(views)


def _sync_straggler_reference(job: JobView) -> list[Finding]:
    """The sync straggler's verdict over the views (the rule's per-rank code before columns)."""
    from cmdare.planner.live.sync_job import rank_split, ranks
    from cmdare.planner.rules import sync_rules
    from cmdare.planner.rules.worker_columns import kept_columns

    with kept_columns({}):  # no columns: columns_of reads the job's own (a full read), as a control
        got = sync_rules.sync_straggler_rule(AlertContext(0.0, [job]))
    rs = [(n, s) for n in ranks(job) if (s := rank_split(n)) is not None]
    if len(rs) >= 2:  # the per-rank definition, for the ratio the finding states
        slow, (c, _) = max(rs, key=lambda r: r[1][0])
        med = statistics.median(s[0] for n, s in rs if n is not slow)
        for f in got:
            assert f.subject == f"{job.name}/{slow.name}" and f.evidence["ratio"] == round(c / med, 3)
    return got
