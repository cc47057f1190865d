"""Issue 30: when to checkpoint and the work at risk — Daly's optimum interval per shape, the exporter's
checkpoint metric through a real scrape into ``snapshot --json``, checkpoints marked in JSON-lines and
TensorBoard logs (torch's real SummaryWriter), and the ``checkpoint-overdue`` alert."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import replace
from pathlib import Path

import httpx
import numpy as np
import pytest

from cmdare.collectors import metrics as M
from cmdare.collectors.clock import ManualClock
from cmdare.collectors.exporter import TrainingExporter
from cmdare.collectors.logs.source import JsonlSource
from cmdare.planner.risk_cost.checkpointing import (
    OVERDUE_FACTOR,
    CheckpointFacts,
    daly_interval,
    work_at_risk,
)
from cmdare.planner.risk_cost.overheads import Overheads

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_daly_is_young_to_first_order_and_the_mtbf_when_writes_are_slow():
    m = np.array([3600.0, 36000.0])
    tau = daly_interval(4.0, m)
    assert np.allclose(tau, np.sqrt(2 * 4.0 * m), rtol=0.02)  # δ ≪ M: Young's √(2δM)
    assert daly_interval(100.0, np.array([30.0]))[0] == 30.0  # δ ≥ 2M: τ = M
    assert np.isinf(daly_interval(4.0, np.array([np.inf]))[0])  # never revoked: no optimum


def test_the_optimum_minimises_the_shapes_expected_time():
    from cmdare.collectors.pricing import load_book
    from cmdare.planner.risk_cost.revocation import RevocationModel
    from cmdare.planner.risk_cost.shapes import enumerate_shapes, rank_shapes
    from cmdare.planner.risk_cost.workload import load_workload
    from cmdare.planner.speed.speed_model import SpeedModel

    w = load_workload(EXAMPLES / "workload-resnet32.toml")
    model, book, rev = SpeedModel.load(), load_book("offline"), RevocationModel.load()
    few = {k: v[:2] for k, v in enumerate_shapes(w).items()}  # the current shape (and one more): fast
    table = rank_shapes(w, model, book, rev, shapes=few)
    tau = float(table.columns["ckpt_optimal_s"][0])
    assert 60 < tau < 600 and table.columns["ckpt_saves_s"][0] > 0  # every 10 min is too rare on spot P100s

    def expected(interval_s: float) -> float:
        o = replace(w.options, checkpoint_interval_s=interval_s, checkpoint_interval_steps=None)
        t = rank_shapes(replace(w, options=o), model, book, rev, shapes=few)
        return float(t.columns["hours_expected"][0])

    at = expected(tau)
    assert at <= expected(tau / 2) and at <= expected(2 * tau)
    assert "checkpoint every" in table.checkpoint_words(
        0
    ) and "against every 10m00s" in table.checkpoint_words(0)


def test_work_at_risk_counts_the_redo_a_replacement_and_a_restart():
    o = Overheads.load()
    facts = CheckpointFacts(last_at=1_000.0, write_s=2.0, interval_s=None)
    row = {"ckpt_optimal_s": 300.0, "ckpt_saves_s": 20.0, "ckpt_saves_usd": 0.05, "ckpt_mtbf_s": 9000.0,
           "ckpt_write_s": 2.0}  # fmt: skip
    r = work_at_risk(facts, 1_700.0, o, "P100", "preemptible", 7.2, row)
    assert r.since_s == 700.0 and r.overdue and OVERDUE_FACTOR * 300 < 700
    expect = 700.0 + o.request_overhead("P100", "preemptible") + o.framework_restart(False)
    assert r.revocation_now_s == pytest.approx(expect) and r.revocation_now_usd == pytest.approx(
        expect * 7.2 / 3600
    )
    assert r.interval_s == 600.0 and r.interval_basis.startswith("assumed")
    assert not work_at_risk(facts, 1_500.0, o, "P100", "preemptible", 7.2, row).overdue


async def test_jsonl_and_tensorboard_logs_mark_checkpoints(tmp_path):
    f = tmp_path / "log.jsonl"
    lines = [{"time": 1_700_000_000.0, "step": 10}, {"time": 1_700_000_060.0, "checkpoint": "ckpt/step-20.pt"},
             {"time": 1_700_000_090.0, "step": 30, "loss": 0.5}]  # fmt: skip
    f.write_text("".join(json.dumps(x) + "\n" for x in lines))
    async with httpx.AsyncClient() as c:
        (p,) = await JsonlSource(f, job="j").poll(c, ManualClock(1_700_000_100.0))
    assert p.values[M.K_LAST_CHECKPOINT] == 1_700_000_060.0 and p.values[M.K_GLOBAL_STEP] == 30

    torch_tb = pytest.importorskip("torch.utils.tensorboard")
    from cmdare.collectors.tensorboard.source import TensorBoardSource

    w = torch_tb.SummaryWriter(log_dir=str(tmp_path / "tb" / "run"))
    for i in range(1, 6):
        w.add_scalar("train/loss", 1.0 / i, 100 * i, walltime=1_700_000_000.0 + 10 * i)
    w.add_scalar("checkpoint_seconds", 3.9, 300, walltime=1_700_000_031.0)  # logged when step 300 was saved
    w.close()
    src = TensorBoardSource(tmp_path / "tb", job="tb")
    async with httpx.AsyncClient() as c:
        for _ in range(50):
            (p,) = await src.poll(c, ManualClock(1_700_000_100.0))
            if p.ok and M.K_LAST_CHECKPOINT in p.values:
                break
            time.sleep(0.05)  # the source reads its files in its own thread
        await src.aclose()
    assert p.values[M.K_LAST_CHECKPOINT] == pytest.approx(1_700_000_031.0)
    assert M.is_checkpoint_tag("ckpt") and not M.is_checkpoint_tag("val/checkpoint_loss")


@pytest.fixture
def checkpointing_job():
    """A real exporter (rank 0 of a sync job on T4) stepping in a thread; it wrote a checkpoint 2 s ago."""
    exp = TrainingExporter("ckpt-job", "chief", "worker-0", gpu="T4", region="us-central1", provisioning="spot",
                           model="shakebig", model_flops=22864820174, params=26204362, batch_size=128,
                           target_steps=2000, sync="sync-allreduce", rank=0, local_rank=0)  # fmt: skip
    port = exp.start(0)
    with exp.checkpoint():
        time.sleep(0.05)
    exp.last_checkpoint.set(time.time() - 2.0)
    stop = threading.Event()

    def train() -> None:
        step = 0
        while not stop.wait(0.02):
            step += 1
            exp.step(0.015, examples=128)
            exp.observe_allreduce(0.003)
            exp.set_global_step(step)

    t = threading.Thread(target=train, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{port}/metrics"
    stop.set()
    t.join(timeout=5)
    exp.stop()


def test_snapshot_json_carries_the_work_at_risk_and_the_optimum_interval(checkpointing_job, capsys):
    from cmdare.tui.cli import main

    code = main(["snapshot", "--json", "--samples", "2", "--interval", "0.5", "--target", checkpointing_job])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    (job,) = doc["planner"]["jobs"]
    risk = job["checkpoint"]
    assert 2.0 <= risk["since_s"] < 60 and risk["write_basis"].startswith("measured")
    assert 0.04 <= risk["write_s"] < 5
    assert risk["revocation_now_s"] > risk["since_s"] + 100  # + a replacement's start and a cold restart
    assert risk["optimal_s"] and risk["optimal_s"] > 0 and risk["method"].startswith("Daly 2006")
    assert risk["overdue"] is False
    rows = job["ranking"]["rows"]
    assert rows[0]["current"] and rows[0]["switch"]["kind"] == "stay" and rows[0]["switch"]["seconds"] == 0
    moved = [r for r in rows if not r["current"]]
    assert moved and all(r["switch"]["terms"] and r["switch"]["seconds"] > 0 for r in moved)
    assert all(r["p_revocation_low"] <= r["p_revocation"] <= r["p_revocation_high"] for r in rows)
    assert rows[0]["risk_period"] == "cmdare-2020" and set(rows[0]["p_revocation_periods"]) >= {
        "icac-2019-02"
    }


def test_checkpoint_overdue_is_raised_past_the_stated_factor_of_the_optimum():
    from cmdare.collectors.observed import JobView
    from cmdare.collectors.samples import JobFacts
    from cmdare.planner.rules.alerts import AlertContext, AlertEngine
    from cmdare.planner.rules.bottlenecks import DEFAULT_RULES
    from cmdare.planner.rules.inputs import RuleInputs, frozen_map

    o = Overheads.load()
    row = {"ckpt_optimal_s": 300.0, "ckpt_saves_s": 20.0, "ckpt_saves_usd": 0.05, "ckpt_mtbf_s": 9000.0,
           "ckpt_write_s": 2.0}  # fmt: skip
    job = JobView(
        name="j",
        facts=JobFacts(job="j"),
        steps_per_sec=10.0,
        examples_per_sec=None,
        global_step=100.0,
        eta_seconds=600.0,
        nodes=[],
    )
    engine = AlertEngine(DEFAULT_RULES, raise_after=1, clear_after=1)

    def alerts(now: float) -> list:
        risk = work_at_risk(CheckpointFacts(last_at=1_000.0), now, o, "P100", "spot", 7.2, row)
        return [a for a in engine.evaluate(AlertContext(now, [job], RuleInputs(work_at_risk=frozen_map({"j": risk}))))
                if a.kind == "checkpoint-overdue"]  # fmt: skip

    assert alerts(1_000.0 + 2 * 300.0 - 1) == []  # within 2x the optimum
    (a,) = alerts(1_000.0 + 2 * 300.0 + 60)
    assert a.subject == "j" and "past 2× the optimum interval 5m00s" in a.message and "$" in a.message
    assert a.fix.startswith("checkpoint now, then every 5m00s") and a.evidence["since_checkpoint_s"] == 660
    assert "last checkpoint (exporter or logs)" in a.evidence["measured"]


def test_a_failed_write_records_no_checkpoint_and_a_bad_since_is_one_clear_line(tmp_path):
    from prometheus_client import generate_latest

    from cmdare.tui.commands import UsageError
    from cmdare.tui.commands.plan import build_table

    exp = TrainingExporter("j", "chief", "worker-0")
    with pytest.raises(OSError), exp.checkpoint():
        raise OSError("disk full")
    page = generate_latest(exp.registry).decode()
    assert (
        "cmdare_checkpoint_seconds_count 0.0" in page
        and "cmdare_last_checkpoint_timestamp_seconds 0.0" in page
    )
    exp.checkpoint_done(3.5, at=1_700_000_000.0)
    page = generate_latest(exp.registry).decode()
    assert (
        "cmdare_checkpoint_seconds_count 1.0" in page
        and "cmdare_last_checkpoint_timestamp_seconds 1.7e+09" in page
    )
    w = tmp_path / "w.toml"
    text = (EXAMPLES / "workload-resnet32.toml").read_text()
    w.write_text(text.replace("[options]", "[options]\nsince_checkpoint_s = -5"))
    with pytest.raises(UsageError, match=r"options\.since_checkpoint_s: must be seconds >= 0"):
        build_table(w, "balanced")


def test_a_stated_write_time_sets_the_optimum(tmp_path):
    from cmdare.tui.commands.plan import build_table

    text = (EXAMPLES / "workload-resnet32.toml").read_text()
    w = tmp_path / "w.toml"
    w.write_text(text.replace("[options]", "[options]\ncheckpoint_write_s = 40"))
    slow = build_table(w, "balanced")
    fast = build_table(EXAMPLES / "workload-resnet32.toml", "balanced")
    assert slow.columns["ckpt_write_s"][0] == 40.0
    # Daly: the optimum grows with the write time (about as its square root)
    ratio = slow.columns["ckpt_optimal_s"][0] / fast.columns["ckpt_optimal_s"][0]
    assert 2.5 < ratio < 4.0
