"""Shape enumeration, vectorised ranking, Pareto front, deltas and explanations."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cmdare.collectors.pricing import load_offline_book
from cmdare.planner.risk_cost.revocation import RevocationModel
from cmdare.planner.risk_cost.shapes import enumerate_shapes, pareto_mask, rank_shapes
from cmdare.planner.risk_cost.workload import load_workload
from cmdare.planner.speed.speed_model import SpeedModel

EXAMPLE = Path(__file__).resolve().parents[1] / "examples/workload-resnet32.toml"


@pytest.fixture(scope="module")
def table():
    w = load_workload(EXAMPLE)
    return rank_shapes(w, SpeedModel.load(), load_offline_book(), RevocationModel.load(), "balanced")


def test_enumeration_counts_and_current_first() -> None:
    w = load_workload(EXAMPLE)
    cols = enumerate_shapes(w)
    a = w.allowed
    assert cols["gpu"].size == len(a.gpus) * a.max_workers * a.max_ps * len(a.regions) * len(a.provisionings)
    assert (cols["gpu"][0], cols["workers"][0], cols["region"][0]) == ("P100", 4, "us-central1")


def test_table_basics(table) -> None:
    assert len(table) > 1000
    assert table.current["gpu"] == "P100" and table.current["workers"] == 4
    rows = table.top(5)
    assert [r["score"] for r in rows] == sorted(r["score"] for r in rows)
    assert all(r["feasible"] for r in rows)
    keys = {"gpu", "workers", "ps", "region", "provisioning", "steps_per_sec", "hours_p50", "hours_p90",
            "cost_usd_p50", "cost_usd_p90", "p_revocation", "expected_revocations", "pareto", "price_source"}  # fmt: skip
    assert keys <= set(rows[0])
    assert table.col("pareto").any()
    std = table.col("provisioning") == "standard"
    assert np.all(table.col("p_revocation")[std] == 0)


def test_objectives_rank_differently() -> None:
    w = load_workload(EXAMPLE)
    args = (w, SpeedModel.load(), load_offline_book(), RevocationModel.load())
    fast, cheap = (
        rank_shapes(*args, objective="time").top(1)[0],
        rank_shapes(*args, objective="cost").top(1)[0],
    )
    assert fast["hours_p50"] <= cheap["hours_p50"] and cheap["cost_usd_p50"] <= fast["cost_usd_p50"]
    with pytest.raises(ValueError):
        rank_shapes(*args, objective="fastest")


def test_filter_delta_explain(table) -> None:
    safe = table.filter(table.col("p_revocation") < 0.05)
    assert all(r["p_revocation"] < 0.05 for r in safe.top(50))
    assert "time" in table.delta(int(table.order[0])) and "P(≥1 revocation)" in table.delta(0)
    assert table.delta(0).startswith("+0% time, +0% cost")
    ex = table.explain(0)
    assert ex.dominant in ex.shares and sum(ex.shares.values()) == pytest.approx(1.0)
    assert ex.seconds["compute"] > 0 and ex.seconds["revocation"] > 0


def test_pareto_mask_matches_brute_force() -> None:
    rng = np.random.default_rng(0)
    pts = rng.random((700, 3))
    pts[::7] = pts[1::7]  # duplicates
    brute = np.array([not np.any(np.all(pts <= p, axis=1) & np.any(pts < p, axis=1)) for p in pts])
    np.testing.assert_array_equal(pareto_mask(pts), brute)


def test_pareto_rows_not_dominated(table) -> None:
    t, c, r = table.col("hours_p50"), table.col("cost_usd_p50"), table.col("p_revocation")
    for i in np.nonzero(table.col("pareto"))[0][:50]:
        dom = (t <= t[i]) & (c <= c[i]) & (r <= r[i]) & ((t < t[i]) | (c < c[i]) | (r < r[i]))
        assert not dom.any()


def test_worker_counts_are_dense_near_small_clusters_and_geometric_beyond():
    from cmdare.planner.risk_cost.shapes import worker_counts

    assert list(worker_counts(16, 8)) == list(range(1, 17))
    big = worker_counts(400, 200)
    assert list(big[:32]) == list(range(1, 33)) and big[-1] == 400 and 200 in big
    assert len(big) < 80
    steps = np.diff(big[32:]) / big[32:-1]
    assert (steps <= 0.12).all()  # ~10% apart after rounding
