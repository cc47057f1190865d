"""Straggler flags that hold (issue 28 item 6): an unexplained straggler needs peers enough to be
told apart (with fewer, the job gets one info flag that says how many are needed, whichever worker
is slower), a raised flag holds inside its band, a fix names no empty field, evidence reads as
words, and "GPUs busy" is said only of a GPU utilisation that was measured.

The rules run on job views as the overview makes them (no collector needed: the rules read views);
the real app on the real two-worker PS example is in test_stalled_job.py."""

from __future__ import annotations

from cmdare.collectors.observed import JobView, NodeView
from cmdare.collectors.samples import JobFacts
from cmdare.planner.rules.alerts import AlertContext, AlertEngine
from cmdare.planner.rules.thresholds import Thresholds
from cmdare.planner.rules.worker_rules import input_bound_rule, straggler_rule
from cmdare.tui.panes.alerts import evidence_rows, evidence_value

TH = Thresholds()


def _worker(
    name: str, step_s: float, *, gpu: str = "", region: str = "", util: float | None = None
) -> NodeView:
    return NodeView(
        name=name,
        role="worker",
        gpu=gpu,
        region=region,
        zone="",
        provisioning="standard",
        status="up",
        steps_per_sec=1 / step_s,
        step_seconds=step_s,
        gpu_util=util,
        net_in_bps=None,
        net_out_bps=None,
        started_at=0.0,
        last_error=None,
        restarts=0,
        cause="",
    )


def _job(workers: list[NodeView]) -> JobView:
    return JobView(
        name="pytorch-ps",
        facts=JobFacts("pytorch-ps"),
        steps_per_sec=60.0,
        examples_per_sec=None,
        global_step=100.0,
        eta_seconds=None,
        nodes=workers,
        sync="async-ps",
    )


def test_two_cpu_workers_taking_turns_make_one_info_flag_on_the_job():
    eng = AlertEngine([straggler_rule], raise_after=3, clear_after=3)
    subjects = set()
    for i in range(12):  # worker-0 and worker-1 take turns at 1.30-1.55x, as on a loaded host
        slow, fast = (0.0155, 0.01) if i % 2 else (0.01, 0.0132)
        for a in eng.evaluate(
            AlertContext(float(i), [_job([_worker("worker-0", slow), _worker("worker-1", fast)])])
        ):
            subjects.add((a.kind, a.subject, a.severity))
            assert "needs ≥ 2 peers, 3 workers" in a.message and "2 up" in a.message
            assert a.fix is None and a.evidence["peers_needed"] == 2
    assert subjects == {("straggler", "pytorch-ps", "info")}
    assert len(eng.history) == 1  # raised once, never cleared and raised again


def test_a_straggler_with_two_peers_is_flagged_and_its_fix_has_no_empty_field():
    job = _job([_worker("worker-0", 0.01), _worker("worker-1", 0.0102), _worker("worker-2", 0.015)])
    (f,) = straggler_rule(AlertContext(0.0, [job]))
    assert (f.subject, f.severity) == ("pytorch-ps/worker-2", "warning")
    assert "its 2 peers' median" in f.message and "unexplained" in f.message
    assert f.fix.startswith("replace worker-2 with another worker: predicted up to +")
    assert " in :" not in f.fix and "  " not in f.fix
    rows = dict(evidence_rows(f.evidence))
    assert "  cause" not in rows and rows["  causes"] == "unexplained"
    assert rows["  gpu"] == "not given" and rows["  region"] == "not given"
    assert all(v.strip() for v in rows.values())


def test_a_slower_gpu_is_told_even_with_one_peer_and_cpu_is_said_as_cpu():
    job = _job([_worker("worker-0", 0.01, gpu="CPU", region="us-east1"),
                _worker("worker-1", 0.015, gpu="CPU", region="us-central1")])  # fmt: skip
    (f,) = straggler_rule(AlertContext(0.0, [job]))
    assert f.subject == "pytorch-ps/worker-1" and "its peer:" in f.message and "another region" in f.message
    assert f.fix.startswith("replace worker-1 with a CPU worker in us-east1")


def test_a_raised_straggler_holds_inside_its_band_and_clears_below_it():
    def job(ratio: float) -> JobView:
        return _job([_worker(f"worker-{i}", 0.01) for i in range(3)] + [_worker("worker-3", 0.01 * ratio)])

    eng = AlertEngine([straggler_rule], raise_after=3, clear_after=3)
    ratios = [1.4, 1.4, 1.4] + [1.2, 1.35, 1.2, 1.25, 1.2] * 2 + [1.1, 1.1, 1.1]
    active = [bool(eng.evaluate(AlertContext(float(i), [job(r)]))) for i, r in enumerate(ratios)]
    assert active == [False, False, True] + [True] * 10 + [True, True, False]
    assert len(eng.history) == 1
    assert "held until below 1.15×" in eng.history[0].message
    # inside the band with no flag up: nothing is raised
    eng = AlertEngine([straggler_rule], raise_after=3, clear_after=3)
    assert not any(eng.evaluate(AlertContext(float(i), [job(1.25)])) for i in range(6))


def test_gpus_busy_is_said_only_of_dcgm_utilisation():
    declared = [_worker(f"worker-{i}", 0.01, gpu="T4", region="us-central1") for i in range(2)]
    declared = [
        NodeView(**{**_fields(w), "steps_per_sec": 50.0}) for w in declared
    ]  # computes 50% of the time
    (f,) = input_bound_rule(AlertContext(0.0, [_job(declared)]))
    assert "GPUs busy" not in f.message and f.message.startswith("workers compute 50% of the time")
    assert "GPU use not measured" in f.message
    dcgm = [NodeView(**{**_fields(w), "gpu_util": 40.0}) for w in declared]
    (f,) = input_bound_rule(AlertContext(0.0, [_job(dcgm)]))
    assert f.message.startswith("GPUs busy 40% of the time (GPU utilisation (DCGM))")
    sync = JobView(
        name="ddp",
        facts=JobFacts("ddp"),
        steps_per_sec=60.0,
        examples_per_sec=None,
        global_step=100.0,
        eta_seconds=None,
        nodes=declared,
        sync="sync-allreduce",
    )
    assert input_bound_rule(AlertContext(0.0, [sync])) == []


def test_evidence_mappings_and_empty_labels_read_as_words():
    assert (
        evidence_value("dc", {"stage-0": "us-west1", "stage-1": ""}) == "stage-0 us-west1; stage-1 not given"
    )
    assert (
        evidence_value("x", {"link_gbps": 1.5, "wait_seconds": 0.25})
        == "link_gbps 1.5 Gbit/s; wait_seconds 250 ms"
    )
    assert "{" not in evidence_value("x", [{"a": 1}])
    gains = {"gradient compression 2×": 0.46, "larger buckets": 0.1}  # allreduce-bound's evidence
    assert evidence_value("predicted_gains", gains) == "gradient compression 2× +46%; larger buckets +10%"


def _fields(n: NodeView) -> dict:
    return {k: getattr(n, k) for k in NodeView.__slots__}


def test_a_sync_straggler_holds_inside_the_band_too():
    from cmdare.planner.rules.sync_rules import sync_straggler_rule

    def job(ratio: float) -> JobView:
        ranks = [NodeView(**{**_fields(_worker(f"worker-{i}", 0.01 * (ratio if i == 1 else 1.0))),
                             "allreduce_seconds": 0.002, "rank": str(i)}) for i in range(2)]  # fmt: skip
        return JobView(
            name="ddp",
            facts=JobFacts("ddp"),
            steps_per_sec=60.0,
            examples_per_sec=None,
            global_step=100.0,
            eta_seconds=None,
            nodes=ranks,
            sync="sync-allreduce",
        )

    eng = AlertEngine([sync_straggler_rule], raise_after=3, clear_after=3)
    ratios = [1.4] * 3 + [1.2, 1.25] * 4 + [1.05] * 3
    active = [bool(eng.evaluate(AlertContext(float(i), [job(r)]))) for i, r in enumerate(ratios)]
    assert active == [False, False, True] + [True] * 8 + [True, True, False]
