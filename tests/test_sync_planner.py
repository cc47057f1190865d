"""Synchronous all-reduce shapes: the ring algebra, link figures, revocation policy, the workload's
``[parallel]`` table, ``plan --workload`` and ``predict`` sync rows (issue 17, items 2-4)."""

from __future__ import annotations

import argparse
import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest

from cmdare.planner.predict.batch import PredictInputError, predict_csv_text
from cmdare.planner.risk_cost.overheads import Overheads
from cmdare.planner.risk_cost.revocation import RevocationModel
from cmdare.planner.risk_cost.sync_time_cost import SyncColumns, estimate_sync, penalties
from cmdare.planner.risk_cost.time_cost import RunSettings
from cmdare.planner.risk_cost.workload import WorkloadError, load_workload, parse_workload
from cmdare.planner.speed.allreduce import SyncParams, calibrate, exposed_seconds, sync_step
from cmdare.planner.speed.collectives import allreduce_parts
from cmdare.planner.speed.interconnect import links, node_links
from cmdare.tui.commands import UsageError, plan

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples/workload-sync-ddp.toml"
A = lambda *x: np.array(x, dtype=float)  # noqa: E731


def test_ring_sends_two_n_minus_one_over_n_of_the_gradients() -> None:
    s, gbps = 100e6, 10.0
    zero = A(0, 0, 0)
    wire, lat, algo = allreduce_parts(A(s, s, s), A(1, 2, 64), A(1, 1, 1), A(gbps, gbps, gbps), A(gbps, gbps, gbps),
                                      zero, zero, A(1, 1, 1))  # fmt: skip
    one = s * 8 / (gbps * 1e9)
    assert wire[0] == 0.0 and algo[0] == "none"
    assert wire[1] == pytest.approx(
        1.0 * one
    )  # two nodes: the tree's S through the NIC, as the ring's 2(N−1)/N
    assert wire[2] == pytest.approx(2 * 63 / 64 * one)  # 3+ nodes: the tree moves as much as the ring
    _, hops, algo = allreduce_parts(A(0), A(1), A(8), A(gbps), A(gbps), A(1e-3), A(1e-3), A(3))
    # no bytes: latency alone, 2 log2(8) tree steps a bucket beat the ring's 2(N−1)
    assert algo[0] == "tree" and hops[0] == pytest.approx(3 * 2 * 3 * 1e-3) and hops[0] < 3 * 2 * 7 * 1e-3


def test_only_the_last_bucket_is_sure_to_be_exposed() -> None:
    # 4 buckets, backward 2/3 of 0.3 s: 0.15 s of overlap; a short all-reduce shows only its last bucket
    assert exposed_seconds(A(0.08), A(0.3), A(4), 2 / 3)[0] == pytest.approx(0.02)
    assert exposed_seconds(A(0.4), A(0.3), A(4), 2 / 3)[0] == pytest.approx(0.25)
    assert exposed_seconds(A(0.4), A(0.3), A(1), 2 / 3)[0] == pytest.approx(0.4)  # one bucket: no overlap


def _terms(nodes: int, g: int, nic: float, p: SyncParams | None = None):
    return sync_step(A(0.2), 25e6, A(nodes), A(g), A(126), A(nic), A(5e-6), A(30e-6), p or SyncParams())


def test_more_gpus_per_node_keeps_the_ring_off_the_nic() -> None:
    one_node, two_nodes = _terms(1, 8, 16), _terms(8, 1, 16)
    assert one_node.link[0] == "intra" and two_nodes.link[0] == "nic"
    assert one_node.step[0] < two_nodes.step[0]
    assert _terms(1, 1, 16).exposed[0] == 0.0  # one GPU: nothing to reduce


def test_calibration_reproduces_the_measured_split() -> None:
    raw = _terms(4, 1, 16)
    for measured in (0.004, 0.05, 0.3):  # hidden-tail branch, and the overlap-limited branch
        p = calibrate(0.25, measured, raw, SyncParams())
        again = _terms(4, 1, 16, p)
        waited = again.exposed[0] + again.straggler[0]  # a rank's all-reduce time includes its wait
        assert again.compute[0] == pytest.approx(0.25) and waited == pytest.approx(measured)


def test_link_figures_name_their_sources() -> None:
    assert all(link.source for link in links().values())
    assert node_links("P100", 1).nic_gbps == 16 and node_links("P100", 8).nic_gbps == 32  # per vCPU, N1 cap
    assert node_links("V100", 8, "fast").nic_gbps == 100 and node_links("V100", 8).nic_gbps == 32
    assert node_links("V100", 8).intra_gbps > node_links("P100", 8).intra_gbps  # NVLink vs PCIe
    assert node_links("T4", 1, nic_gbps=1.5).nic_gbps == 1.5


def _cols(nodes: list[int], degraded: list[float]) -> SyncColumns:
    n = len(nodes)
    return SyncColumns(
        gpu=np.full(n, "P100"),
        region=np.full(n, "us-central1"),
        provisioning=np.full(n, "preemptible"),
        nodes=np.array(nodes),
        steps_per_sec=np.full(n, 2.0),
        degraded_steps_per_sec=np.array(degraded),
        node_usd_per_hour=np.full(n, 1.5),
        egress_usd=np.zeros(n),
    )


def test_revocation_policy_is_the_cheaper_per_shape_and_risk_is_any_node() -> None:
    run = RunSettings(steps=40_000, checkpoint_interval_steps=None, checkpoint_mb=10.0)
    ov = Overheads.load()
    restart, elastic, chosen = penalties(_cols([1, 8], [0.0, 1.75]), run, ov, elastic=True)
    assert np.isinf(elastic[0]) and chosen[0] == restart[0]  # one node: nothing survives to shrink to
    assert elastic[1] < restart[1] and chosen[1] == elastic[1]  # 8 nodes: 7 keep training meanwhile
    _, _, never = penalties(_cols([1, 8], [0.0, 1.75]), run, ov, elastic=False)
    assert never[1] == restart[1]
    out = estimate_sync(_cols([1, 8], [0.0, 1.75]), run, ov, RevocationModel.load())
    per_node = out.figures.per_node_risk
    assert out.figures.p_revocation[1] == pytest.approx(1 - (1 - per_node[1]) ** 8)
    assert list(out.policy) == ["restart", "elastic"]
    assert (out.figures.seconds_p90 >= out.figures.seconds_p50).all()


def test_workload_parallel_table() -> None:
    w = load_workload(EXAMPLE)
    assert w.parallel.sync and w.parallel.gpus_per_node == 1 and w.current.ps == 0
    base = EXAMPLE.read_text()
    with pytest.raises(WorkloadError, match=r"parallel\.mode"):
        parse_workload(base.replace('mode = "sync"', 'mode = "ring"'))
    with pytest.raises(WorkloadError, match=r"current\.workers: sync mode"):
        parse_workload(base.replace("gpus_per_node = 1", "gpus_per_node = 3"))
    with pytest.raises(WorkloadError, match=r"current\.ps: must be > 0"):  # PS mode still needs a PS
        parse_workload(base.replace('mode = "sync"', 'mode = "ps"'))
    for ps in ("3", "-1"):  # no parameter server in all-reduce training (a PS count was silently ignored)
        with pytest.raises(WorkloadError, match=r":18: current\.ps: must be 0 in sync mode"):
            parse_workload(base.replace("ps = 0", f"ps = {ps}"), "w.toml")
    with pytest.raises(WorkloadError, match=r"model\.params: must be at least 1"):  # was 0/0 in the band
        parse_workload(base.replace("params = 26204362", "params = 1e-300"))
    with pytest.raises(WorkloadError, match=r"parallel\.bucket_mb: must be at least 0\.01"):
        parse_workload(base.replace("elastic = true", "elastic = true\nbucket_mb = 1e-300"))
    assert (
        parse_workload(base.replace("elastic = true", "elastic = true\nbucket_mb = 0.5")).parallel.bucket_mb
        == 0.5
    )


def _plan(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    plan.register(parser.add_subparsers(dest="cmd"))
    args = parser.parse_args(["plan", *argv])
    return args.func(args)


def test_plan_ranks_sync_shapes(capsys: pytest.CaptureFixture[str]) -> None:
    assert _plan(["--workload", str(EXAMPLE), "--json", "--top", "0"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {"nodes", "gpus_per_node", "comm_share", "policy"} <= set(rows[0])
    assert all(r["ps"] == 0 and r["workers"] == r["nodes"] * r["gpus_per_node"] for r in rows)
    assert {r["gpus_per_node"] for r in rows} >= {1, 2, 4} and any(r["pareto"] for r in rows)
    for r in rows:
        if r["steps_per_sec_p10"] is not None:
            assert r["steps_per_sec_p10"] <= r["steps_per_sec"] <= r["steps_per_sec_p90"]
    assert _plan(["--workload", str(EXAMPLE), "--top", "3"]) == 0
    text = capsys.readouterr().out
    assert "nod g/n" in text and "all-reduce" in text and "on revocation:" in text
    # what a sync row's steps/s and band are, said once (the rows said "beyond the measured domain: allreduce")
    assert "beyond the measured domain: allreduce" not in text
    assert (
        "sync: steps/s of each shape's own global batch" in text
        and "bands cover the compute term and the scaling" in text
    )


def test_explain_says_a_sync_band_covers_compute_and_scaling() -> None:
    from cmdare.tui.widgets.explain import band_scope

    assert band_scope("allreduce").startswith(", compute and scaling band (published scaling residuals")
    assert band_scope("gpu") == ", beyond the measured domain: gpu" and band_scope("none") == ""


def test_plan_rejects_a_bad_parallel_table(tmp_path: Path) -> None:
    bad = tmp_path / "w.toml"
    bad.write_text(EXAMPLE.read_text().replace("elastic = true", 'elastic = "yes"'))
    with pytest.raises(UsageError, match="parallel.elastic"):
        _plan(["--workload", str(bad)])
    bad.write_text(EXAMPLE.read_text().replace('gpu = "T4"', 'gpu = "cpu"'))
    with pytest.raises(UsageError, match=r"unknown GPU 'cpu'; known: K80") as err:
        _plan(["--workload", str(bad)])
    assert "np." not in str(err.value)  # the name as written, not numpy's repr of it


HEADER = "model,model_flops,params,batch_size,gpu,workers,ps,mode,gpus_per_node,nic_gbps\n"
SHAKE = "shakebig,22864820174,26204362,128"


def test_predict_sync_rows_and_old_rows_side_by_side() -> None:
    body = (
        HEADER
        + f"ResNet-32,1658696889,1857722,128,P100,8,1,,,\n{SHAKE},V100,16,0,sync,8,\n{SHAKE},V100,16,0,sync,1,1\n"
    )
    rows = list(csv.DictReader(io.StringIO(predict_csv_text(body))))
    assert rows[0]["bottleneck"] == "ps" and rows[0]["allreduce_share"] == ""
    fast, slow = rows[1], rows[2]
    assert float(fast["steps_per_sec"]) > 4 * float(slow["steps_per_sec"])  # 1 Gbit/s NICs between 16 nodes
    assert slow["bottleneck"] == "network" and float(slow["allreduce_share"]) > 0.5
    assert float(fast["examples_per_sec"]) == pytest.approx(float(fast["steps_per_sec"]) * 16 * 128, rel=1e-4)
    assert fast["ps_utilization"] == ""


def test_predict_old_files_unchanged() -> None:
    old = (ROOT / "examples/predict.csv").read_text()
    header = predict_csv_text(old).splitlines()[0]
    assert "allreduce_share" not in header and header.endswith("bottleneck,ps_utilization")


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (f"{SHAKE},V100,16,1,sync,1,", "ps must be 0"),
        (f"{SHAKE},V100,6,0,sync,4,", "not a multiple of gpus_per_node"),
        (f"{SHAKE},V100,8,0,ring,1,", "mode='ring'"),
        (f"{SHAKE},V100,8,0,sync,1,-3", "nic_gbps"),
        (f"{SHAKE},V100,8,0,sync,1,1e-300", r"nic_gbps='1e-300' must be 0\.01\.\.10000"),
        (f"{SHAKE},V100,8,0,sync,32,", "gpus_per_node"),
    ],
)
def test_predict_bad_sync_rows_name_the_row(row: str, message: str) -> None:
    with pytest.raises(PredictInputError, match=rf"row 1 \(line 2\): .*{message}"):
        predict_csv_text(HEADER + row + "\n")
