"""Issue 30: plans an operator can act on — every row's time and cost include what switching to it costs, a row
whose saving is smaller than that is "not worth switching", "stay" is a ranked row, rows identical but for the
region are one, and a shape with a revocation curve but no price is ranked by time. The real ranking on the
shipped models and the offline price book."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cmdare.planner.risk_cost.revocation import RevocationModel
from cmdare.planner.risk_cost.shapes import rank_shapes
from cmdare.planner.risk_cost.sync_shapes import rank_sync_shapes
from cmdare.planner.risk_cost.workload import load_workload
from cmdare.planner.speed.speed_model import SpeedModel

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _ddp(tmp_path: Path, steps: int, extra: str = "") -> Path:
    """The DDP example with ``steps`` left (550: about 7 minutes on its 4 T4 nodes)."""
    text = (EXAMPLES / "workload-sync-ddp.toml").read_text().replace("steps = 20000", f"steps = {steps}")
    w = tmp_path / "ddp.toml"
    w.write_text(text + extra)
    return w


@pytest.fixture(scope="module")
def models() -> tuple[SpeedModel, object, RevocationModel]:
    from cmdare.collectors.pricing import load_book

    return SpeedModel.load(), load_book("offline"), RevocationModel.load()


@pytest.mark.parametrize("objective", ["time", "cost", "balanced"])
def test_minutes_left_no_row_recommends_a_switch_that_costs_more_than_it_saves(tmp_path, models, objective):
    speed, book, rev = models
    table = rank_sync_shapes(load_workload(_ddp(tmp_path, 550)), speed, book, rev, objective)
    c = table.columns
    view = [int(i) for i in table.view]
    stay = view.index(0)  # "stay" is a ranked row
    t0, k0 = float(c["hours_p50"][0]) * 3600, float(c["cost_usd_p50"][0])
    for i in view[:stay]:  # every row ranked above staying pays for its switch on the objective
        sw_s, sw_usd = float(c["switch_s"][i]), float(c["switch_usd"][i])
        assert c["worth_switching"][i] and sw_s > 0 and c["switch_kind"][i] in ("restart", "elastic")
        saved_s = t0 - (float(c["hours_p50"][i]) * 3600 - sw_s)  # what it saves before its switch
        saved_usd = k0 - (float(c["cost_usd_p50"][i]) - sw_usd)
        if objective == "time":
            assert saved_s > sw_s
        elif objective == "cost":
            assert saved_usd > sw_usd
    for i in view[stay + 1 :]:
        assert not c["worth_switching"][i] and table.switch_words(i).startswith("not worth switching")
    # no shape, however fast, finishes 7 minutes of work in seconds: its switch counts in its time
    assert np.all(c["hours_p50"] * 3600 >= c["switch_s"])
    restart = c["switch_kind"] == "restart"  # at the least a server start and a cold framework restart
    assert restart.any() and np.all(c["switch_s"][restart] >= 69.9 + 81.97)


def test_explanation_lists_the_switching_terms_with_their_sources(tmp_path, models):
    speed, book, rev = models
    w = _ddp(tmp_path, 550, '\ndata_region = "us-central1"\ndataset_gb = 20\n')
    table = rank_sync_shapes(load_workload(w), speed, book, rev, "time")
    move = next(int(i) for i in table.view if table.columns["region"][int(i)] != "us-central1")
    terms = {name: (sec, src) for name, sec, src in table.switch_terms(move)}
    start = next(k for k in terms if k.startswith("server start"))
    from cmdare.planner.risk_cost.overheads import Overheads

    booted = Overheads.load().server_start(
        str(table.columns["gpu"][move]), str(table.columns["provisioning"][move])
    )
    assert "∥ data copy" in start and terms[start][0] == pytest.approx(booted)  # overheads.json
    assert "startup_time" in terms[start][1]
    assert "tf_restart_cold_warm_seconds.csv" in terms["restart, cold"][1]
    assert terms["restart, cold"][0] == pytest.approx(81.97)
    assert "half the 600 s checkpoint interval" in terms["redo since checkpoint"][1]
    copy_s, copy_src = terms["dataset copy"]
    assert (
        copy_s == pytest.approx(20 * 8 / 1.44)
        and "wan_links.csv" in copy_src
        and "1.44" in table.switch_basis["copy"]
    )
    assert (
        table.egress_words(move)
        == "$0.40 for the dataset's copy at $0.02/GB (GCP inter-region within a continent, background.md §2)"
    )
    ex = table.explain(move)
    assert ex.seconds["switch"] == pytest.approx(float(table.columns["switch_s"][move]))
    assert table.explain(0).seconds["switch"] == 0.0 and table.switch_words(0).startswith("stay")


def test_a_measured_last_checkpoint_sets_the_work_a_switch_redoes(tmp_path, models):
    speed, book, rev = models
    fresh = rank_sync_shapes(load_workload(_ddp(tmp_path, 550, "since_checkpoint_s = 0\n")), speed, book, rev)
    stale = rank_sync_shapes(
        load_workload(_ddp(tmp_path, 550, "since_checkpoint_s = 900\n")), speed, book, rev
    )
    for t in (fresh, stale):
        assert t.switch_basis["redo"].startswith("measured: last checkpoint")
    i = int(np.flatnonzero(fresh.columns["switch_kind"] == "restart")[0])
    key = lambda t, j: (t.columns["gpu"][j], t.columns["nodes"][j], t.columns["gpus_per_node"][j],  # noqa: E731
                        t.columns["region"][j], t.columns["provisioning"][j])  # fmt: skip
    j = next(j for j in range(stale.columns["gpu"].size) if key(stale, j) == key(fresh, i))
    assert fresh.columns["switch_redo_s"][i] == 0.0 and stale.columns["switch_redo_s"][j] > 0
    assert stale.columns["hours_p50"][j] > fresh.columns["hours_p50"][i]


def test_scaling_a_ps_job_costs_the_request_overhead_not_a_restart(models):
    speed, book, rev = models
    table = rank_shapes(load_workload(EXAMPLES / "workload-resnet32.toml"), speed, book, rev)
    c = table.columns
    scale = np.flatnonzero(c["switch_kind"] == "scale")
    assert scale.size and np.all(c["switch_restart_s"][scale] == 0) and np.all(c["switch_redo_s"][scale] == 0)
    assert np.all(c["switch_s"][scale] < 160)  # server start + join, only while the new workers are missing
    assert c["switch_kind"][0] == "stay" and c["switch_s"][0] == 0


def test_rows_identical_but_for_the_region_are_one_row_listing_the_regions(tmp_path, models, capsys):
    from cmdare.tui.commands import plan

    speed, book, rev = models
    table = rank_sync_shapes(load_workload(_ddp(tmp_path, 20000)), speed, book, rev, "time")
    c = table.columns
    folded = [int(i) for i in table.view if len(c["regions"][int(i)]) > 1]
    assert folded
    for i in folded:
        members = table.members(i)
        assert members and [str(c["region"][i]), *(str(c["region"][j]) for j in members)] == list(
            c["regions"][i]
        )
        for j in members:
            assert j not in set(table.view.tolist())
            assert c["hours_p50"][j] == pytest.approx(c["hours_p50"][i])
            assert c["cost_usd_p50"][j] == pytest.approx(c["cost_usd_p50"][i])
    shown = [tuple(str(c[k][int(i)]) for k in ("gpu", "nodes", "gpus_per_node", "provisioning", "hours_p50",
                                                "cost_usd_p50", "p_revocation")) for i in table.view]  # fmt: skip
    assert len(shown) == len(set(shown)), "one row per distinct outcome"
    args = ["plan", "--workload", str(_ddp(tmp_path, 20000)), "--json", "--top", "0", "--objective", "time"]
    import argparse

    parser = argparse.ArgumentParser()
    plan.register(parser.add_subparsers(dest="cmd"))
    ns = parser.parse_args(args)
    assert ns.func(ns) == 0
    rows = json.loads(capsys.readouterr().out)
    assert any(len(r["regions"]) > 1 for r in rows) and all(r["regions"][0] == r["region"] for r in rows)
    moved = next(
        r for r in rows if r["switch_kind"] == "restart"
    )  # plan --json carries the terms and sources
    assert {t["term"] for t in moved["switch_terms"]} >= {"restart, cold", "redo since checkpoint"}
    assert (
        sum(t["seconds"] for t in moved["switch_terms"]) >= moved["switch_s"] - 1
    )  # copy overlaps the start


def test_the_pane_lists_a_folded_rows_regions_beneath_it_when_expanded(tmp_path, models):
    from cmdare.tui.panes.planner import ranked_rows

    speed, book, rev = models
    table = rank_sync_shapes(load_workload(_ddp(tmp_path, 20000)), speed, book, rev, "time")
    rows = ranked_rows(table, n=len(table))
    folded = next(int(r.key) for r in rows if len(table.columns["regions"][int(r.key)]) > 1)
    cell = str(next(r for r in rows if r.key == str(folded)).cells[5])
    assert cell.rstrip("†").endswith("+")  # Region: stands for more regions
    open_rows = ranked_rows(table, n=len(table), expanded=frozenset({folded}))
    keys = [r.key for r in open_rows]
    at = keys.index(str(folded))
    members = table.members(folded)
    assert keys[at + 1 : at + 1 + len(members)] == [str(j) for j in members]
    assert all(str(open_rows[at + 1 + k].cells[0]).startswith("└") for k in range(len(members)))
