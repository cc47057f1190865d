"""Issue 30: revocation risk that admits its period — each vendored period fitted on its own data, P(≥1
revocation) as a band across periods that moves with the cluster's own lifetimes, and the benchmark that fits on
one period and scores the other."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import CMDARE

from cmdare.planner.risk_cost.revocation import RevocationModel
from cmdare.planner.risk_cost.risk_periods import band_columns, period_risks

LOG = CMDARE / "icac2019_transient-deep-learning/data/lifetime/lifetime.csv"
REPO = Path(__file__).resolve().parents[1]


def _module(rel: str):
    spec = importlib.util.spec_from_file_location(Path(rel).stem, REPO / rel)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_each_period_is_fitted_on_its_own_data():
    model = RevocationModel.load()
    assert set(model.periods_) == {"cmdare-2020", "icac-2019-02"} and model.period_ == "cmdare-2020"
    old = model.periods_["icac-2019-02"]
    lives = _module("scripts/fit_revocation_model.py").parse_icac_lifetime_log(LOG.read_text())
    for key, (n, k) in old.cells.items():  # the cell counts are the 2019 log's, not the 2020 CDFs'
        mine = [lt for lt in lives if f"{lt.gpu}/{lt.region}" == key]
        assert n == len(mine) and k == sum(lt.revoked for lt in mine)
    day = np.array(23.9)
    p100 = {
        p: float(model.for_period(p).survival("P100", "us-east1", "preemptible", day)) for p in model.periods_
    }
    assert 1 - p100["cmdare-2020"] > 0.6 and 1 - p100["icac-2019-02"] < 0.2  # 21/30 vs 1/10 revoked in 24 h
    # a cell where none of the 10 servers was revoked is not "never": the Jeffreys estimate ½ / 11
    none = 1 - float(model.for_period("icac-2019-02").survival("P100", "us-central1", "preemptible", day))
    assert none == pytest.approx(0.5 / 11, abs=0.01)


def test_the_band_spans_the_periods_and_moves_with_the_clusters_own_lifetimes():
    model = RevocationModel.load()
    cols = {k: np.array(v) for k, v in {"gpu": ["V100", "V100"], "region": ["us-central1", "europe-west4"],
                                         "provisioning": ["preemptible", "standard"]}.items()}  # fmt: skip
    hours, nodes = np.array([6.0, 6.0]), np.array([4, 4])
    risks = period_risks(model, cols, hours, nodes)
    main = 1 - model.survival("V100", "us-central1", "preemptible", hours[:1]) ** 4
    band = band_columns(np.r_[main, 0.0], risks)
    assert band["p_revocation_low"][0] < band["p_revocation_high"][0] == pytest.approx(main[0])
    assert band["p_revocation_high"][1] == 0.0  # on-demand: never revoked, in every period
    assert set(band["p_revocation_periods"][0]) == {"cmdare-2020", "icac-2019-02"}
    lives = _module("scripts/fit_revocation_model.py").parse_icac_lifetime_log(LOG.read_text())
    learned = RevocationModel.load().update([lt for lt in lives if lt.gpu == "V100"])
    after = band_columns(np.r_[main, 0.0], period_risks(learned, cols, hours, nodes))
    for period in (
        "cmdare-2020",
        "icac-2019-02",
    ):  # the cluster saw fewer revocations than 2020: every period moves
        assert after["p_revocation_periods"][0][period] < band["p_revocation_periods"][0][period]


def test_plan_shows_the_band_and_names_the_headlines_period(capsys, monkeypatch):
    from cmdare.tui.commands.plan import build_table, plan_rows, render_text

    monkeypatch.setenv("COLUMNS", "200")
    table = build_table(REPO / "examples/workload-resnet32.toml", "balanced")
    rows = plan_rows(table, 3)
    assert all(r["p_revocation_low"] <= r["p_revocation"] <= r["p_revocation_high"] for r in rows)
    assert all(r["p_revocation_period"] == "cmdare-2020" for r in rows)
    text = render_text(table, rows)
    cur = next(line for line in text.splitlines() if line.startswith("cur "))
    lo, hi = table.columns["p_revocation_low"][0], table.columns["p_revocation_high"][0]
    assert cur.rstrip().endswith(f"{lo:.2f}–{hi:.2f}")
    assert "P(≥1 revocation) 0.46 (CM-DARE (ICDCS 2020)); fitted on other periods: Feb 2019" in text


def test_the_benchmark_prints_in_period_and_cross_period_coverage(capsys):
    bench = _module("benchmarks/revocation_periods.py")
    assert bench.main() == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if "in-period" in line]
    assert len(lines) == 4 and all("cross-period" in line and "cells" in line for line in lines)
    assert (
        "fit on CM-DARE (ICDCS 2020): in-period 12/12 cells, cross-period (Feb 2019 (ICAC 2019 log)) 1/11"
        in out
    )
    assert "P100  CM-DARE (ICDCS 2020) 0.54 (4 cells) · Feb 2019 (ICAC 2019 log) 0.20 (4 cells)" in out
    assert sys.modules.get("scipy") is not None  # the band uses scipy's beta quantiles


def test_own_lifetimes_say_which_period_the_cluster_resembles():
    lives = _module("scripts/fit_revocation_model.py").parse_icac_lifetime_log(LOG.read_text())
    assert RevocationModel.load().period_weights() == {}  # nothing learned yet
    learned = RevocationModel.load().update(lives)
    w = learned.period_weights()
    assert w["icac-2019-02"] > 0.99 and learned.learned() == len(lives)  # the log is the 2019 period
    # each period's hazard scale is learned against its own curves: the 2019 period already fits its own log
    own = learned.for_period("icac-2019-02").hazard_scale("P100", "us-east1")[0]
    main = learned.hazard_scale("P100", "us-east1")[0]
    assert abs(own - 1.0) < abs(main - 1.0)
