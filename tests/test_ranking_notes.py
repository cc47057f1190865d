"""Twin collapsing (against a brute force), region-move notes and price-date labels (issue 16 item 6)."""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np

from cmdare.planner.risk_cost.ranking_notes import collapse_twins, continent, price_date_label, region_notes


def _random_columns(rng: random.Random, n: int) -> dict[str, np.ndarray]:
    rows = [(rng.choice(["P100", "T4"]), rng.randint(1, 3), rng.randint(1, 2), rng.choice(["a-1", "b-1"]),
             rng.choice(["spot", "preemptible", "standard"]), rng.choice([1.0, 2.0]), rng.choice([0.1, 0.2]))
            for _ in range(n)]  # fmt: skip
    rows = list(dict.fromkeys(rows))  # one row per (shape, provisioning) as enumerate_shapes makes them
    seen: set = set()
    rows = [r for r in rows if not (r[:5] in seen or seen.add(r[:5]))]
    names = ("gpu", "workers", "ps", "region", "provisioning", "cost_usd_p50", "p_revocation")
    return {k: np.array([r[i] for r in rows], dtype=object if k in ("gpu", "region", "provisioning") else None)
            for i, k in enumerate(names)}  # fmt: skip


def test_collapse_twins_matches_a_brute_force():
    rng = random.Random(0)
    for _ in range(50):
        cols = _random_columns(rng, 40)
        keep, alias = collapse_twins(cols)
        n = cols["gpu"].size
        expect_drop = set()
        for i in range(n):
            for j in range(n):
                same_shape = all(cols[k][i] == cols[k][j] for k in ("gpu", "workers", "ps", "region"))
                pair = {cols["provisioning"][i], cols["provisioning"][j]} == {"spot", "preemptible"}
                equal = cols["cost_usd_p50"][i] == cols["cost_usd_p50"][j] and \
                    cols["p_revocation"][i] == cols["p_revocation"][j]  # fmt: skip
                if same_shape and pair and equal and (i == 0 or (j != 0 and j < i)):
                    expect_drop.add(j if i == 0 else i)
        assert set(np.nonzero(~keep)[0]) == expect_drop
        assert all(alias[i] in ("spot", "preemptible") for i in range(n) if alias[i])
        assert not any(alias[i] for i in expect_drop)


def test_twins_with_different_risk_stay_two_rows():
    cols = {"gpu": np.array(["P100", "P100"], dtype=object), "workers": np.array([4, 4]), "ps": np.array([1, 1]),
            "region": np.array(["r", "r"], dtype=object), "provisioning": np.array(["spot", "preemptible"], dtype=object),
            "cost_usd_p50": np.array([1.0, 1.0]), "p_revocation": np.array([0.2, 0.3])}  # fmt: skip
    keep, _ = collapse_twins(cols)
    assert keep.all()


def test_region_notes_name_egress_continent_and_capacity():
    region = np.array(["us-central1", "us-west1", "europe-west4"], dtype=object)
    notes = region_notes(region, "us-central1", None, 100.0, np.array([0.0, 2.0, 2.0]))
    assert notes[0] == ""
    assert notes[1] == "data egress ≈$2.00 for 100 GB from us-central1; capacity not guaranteed"
    assert "another continent" in notes[2] and "lower bound" in notes[2]
    bare = region_notes(region, "us-central1", None, 0.0, np.zeros(3))
    assert "egress not priced (set [options] dataset_gb)" in bare[1]
    moved_data = region_notes(region, "us-central1", "us-west1", 10.0, np.array([0.2, 0.0, 0.2]))
    assert (
        moved_data[0].startswith("data egress ≈$0.20 for 10 GB from us-west1")
        and "capacity" not in moved_data[0]
    )
    assert moved_data[1] == "capacity not guaranteed"
    assert continent("northamerica-northeast1") == continent("us-east1")


def test_price_date_labels():
    assert price_date_label(SimpleNamespace(source="live", as_of="2026-12-01T03:00", notes=())) == \
        "fetched 2026-12-01T03:00"  # fmt: skip
    assert (
        price_date_label(SimpleNamespace(source="offline", as_of="2019-02-15", notes=()))
        == "prices of 2019-02-15"
    )
    undated = SimpleNamespace(source="offline", as_of="2026-11-30", notes=("price date unknown (derived x)",))
    assert price_date_label(undated) == "price date unknown (derived x)"
