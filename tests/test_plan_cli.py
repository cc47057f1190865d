"""``cmdare-tui plan``: JSON rows, text output, objectives, and usage errors."""

from __future__ import annotations

import argparse
import json
import sys
import types
from pathlib import Path

import pytest

from cmdare.tui.commands import UsageError, plan

EXAMPLE = Path(__file__).resolve().parents[1] / "examples/workload-resnet32.toml"
KEYS = {"gpu", "workers", "ps", "region", "provisioning", "steps_per_sec", "hours_p50", "hours_p90", "cost_usd_p50",
        "cost_usd_p90", "p_revocation", "expected_revocations", "pareto", "price_source"}  # fmt: skip


def _ranked(out: list[str]) -> list[int]:
    """Indices of the ranked rows' lines (a rank, then ten columns); each row's details follow it."""
    return [k for k, line in enumerate(out) if line[:3].strip().isdigit() and len(line.split()) == 11]


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    plan.register(parser.add_subparsers(dest="cmd"))
    args = parser.parse_args(["plan", *argv])
    return args.func(args)


def test_json_rows(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["--workload", str(EXAMPLE), "--json", "--top", "7", "--objective", "cost"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 7 and KEYS <= set(rows[0])
    assert [r["cost_usd_p50"] for r in rows] == sorted(r["cost_usd_p50"] for r in rows)
    assert rows[0]["price_source"] == "offline" and isinstance(rows[0]["pareto"], bool)


def test_top_zero_lists_every_shape(capsys: pytest.CaptureFixture[str]) -> None:
    _run(["--workload", str(EXAMPLE), "--json", "--top", "0"])
    assert len(json.loads(capsys.readouterr().out)) >= 1000


def test_text_output(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "300")
    _run(["--workload", str(EXAMPLE), "--top", "3"])
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("objective balanced") and "offline prices, " in out[0]
    assert out[2].split()[0] == "cur" and out[3].startswith(" " * 6 + "current shape, ranked #")
    ranked = _ranked(out)
    assert len(ranked) == 3 and "time" in out[ranked[0] + 1]  # each row's details beneath it
    assert out[-1].startswith("best staying in us-central1: ")


@pytest.mark.parametrize("columns", ["80", "60", "120"])
def test_text_wraps_at_the_width(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                 columns: str) -> None:  # fmt: skip
    """Issue 30: ``plan --workload`` wraps at COLUMNS (default 80) like ``snapshot``; nothing is cut."""
    monkeypatch.setenv("COLUMNS", columns)
    _run(["--workload", str(EXAMPLE), "--top", "5"])
    text = capsys.readouterr().out
    assert max(map(len, text.splitlines())) <= max(int(columns), 78)  # the fixed columns need 78
    assert "best staying in us-central1:" in text and "P(≥1 revocation)" in " ".join(text.split())


def test_bad_workload_is_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "w.toml"
    bad.write_text(EXAMPLE.read_text().replace("[options]", "[options]\nspeed = 3"))
    with pytest.raises(UsageError, match=r"w\.toml:\d+: options\.speed: unknown key"):
        _run(["--workload", str(bad)])
    with pytest.raises(UsageError, match="cannot read"):
        _run(["--workload", str(tmp_path / "missing.toml")])
    with pytest.raises(UsageError, match="give --workload"):
        _run([])


def test_geo_is_delegated(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    fake = types.ModuleType("cmdare.tui.commands.plan_geo")
    fake.run_geo = lambda path, as_json, top: calls.append((path, as_json, top)) or 0
    monkeypatch.setitem(sys.modules, "cmdare.tui.commands.plan_geo", fake)
    assert _run(["--geo", "g.toml", "--json", "--top", "4"]) == 0
    assert calls == [(Path("g.toml"), True, 4)]


def test_unpriced_current_shape_is_price_unknown_and_the_alternatives_are_ranked(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 16 item 5: GCP no longer prices K80; the default (offline) book still plans the job. Issue 30:
    shapes with a fitted revocation curve but no price are kept, ranked by time after the priced ones."""
    monkeypatch.setenv("COLUMNS", "300")
    icac = EXAMPLE.parent / "workload-icac2019-k80.toml"
    assert _run(["--workload", str(icac), "--top", "5"]) == 0
    out = capsys.readouterr().out.splitlines()
    details = [out[k + 1] for k in _ranked(out)]
    assert "price unknown in the offline book; study-era book (prices of 2019-02-15): $" in out[1]
    cur = next(line for line in out if line.startswith("cur "))
    assert "K80" in cur and "unknown" in cur
    ranked = _ranked(out)
    assert len(ranked) == 5 and all("cost n/a (current price unknown)" in line for line in details)
    assert _run(["--workload", str(icac), "--json", "--top", "0"]) == 0
    rows = json.loads(capsys.readouterr().out)
    priced = [r for r in rows if r["cost_usd_p50"] is not None]  # valid JSON: null, not NaN
    unpriced = rows[len(priced) :]
    assert all(r["cost_usd_p50"] > 0 for r in priced) and len(priced) > 100
    assert (
        unpriced and all(r["cost_usd_p50"] is None for r in unpriced) and any(r["current"] for r in unpriced)
    )
    assert {r["gpu"] for r in unpriced} == {"K80"}  # K80: fitted curves, no price in today's book
    assert _run(["--workload", str(icac), "--prices", "study-era", "--json", "--top", "2"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["price_source"] == "offline" and rows[0]["price_date"] == "prices of 2019-02-15"


def test_a_shape_with_a_risk_curve_but_no_price_is_ranked_by_time_with_price_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 30: K80 in europe-west1 has a fitted revocation curve and no price today: ranked, never dropped."""
    monkeypatch.setenv("COLUMNS", "300")
    w = tmp_path / "k80-euw1.toml"
    w.write_text((EXAMPLE.parent / "workload-icac2019-k80.toml").read_text().replace(
        'region = "us-east1"', 'region = "europe-west1"').replace(
        'regions = ["us-east1", "us-central1", "us-west1"]', 'regions = ["europe-west1", "us-central1"]'))  # fmt: skip
    assert _run(["--workload", str(w), "--json", "--top", "0", "--objective", "time"]) == 0
    rows = json.loads(capsys.readouterr().out)
    k80 = [r for r in rows if r["gpu"] == "K80" and r["region"] == "europe-west1"]
    assert k80 and all(
        r["cost_usd_p50"] is None and r["p_revocation"] > 0 for r in k80 if r["provisioning"] != "standard"
    )
    hours = [r["hours_p50"] for r in rows]
    assert hours == sorted(hours) or all(
        not r["feasible"] for r in rows[hours.index(max(hours)) :]
    )  # by time
    _run(["--workload", str(w), "--top", "0", "--objective", "time"])
    lines = capsys.readouterr().out.splitlines()
    rows_k80 = [
        lines[k + 1] for k in _ranked(lines) if lines[k].split()[1] == "K80" and "europe-west1" in lines[k]
    ]
    assert rows_k80 and all("price unknown: ranked by time" in d for d in rows_k80)


def test_one_row_per_distinct_shape_units_and_price_date(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "300")
    assert _run(["--workload", str(EXAMPLE), "--json", "--top", "0"]) == 0
    rows = json.loads(capsys.readouterr().out)
    keys = [(r["gpu"], r["workers"], r["ps"], r["region"], r["provisioning"] == "standard") for r in rows]
    assert len(keys) == len(set(keys)), "spot and preemptible twins of equal price and risk are one row"
    assert any(r["also_provisioning"] for r in rows)
    assert rows[0]["price_date"].startswith("price date unknown (derived ")
    _run(["--workload", str(EXAMPLE), "--top", "3"])
    out = capsys.readouterr().out.splitlines()
    assert "P(≥1 rev)" in out[1] and "steps/s" in out[1] and "s/pre" in out[2]
    assert "price date unknown (derived" in out[0] and "P(≥1 revocation)" in out[5]


def test_region_moves_name_egress_for_the_stated_dataset_and_capacity(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    w = tmp_path / "w.toml"
    w.write_text(EXAMPLE.read_text().split("[allowed]")[0] + (
        '[allowed]\ngpus = ["P100"]\nregions = ["us-central1", "asia-east1"]\nmax_workers = 6\nmax_ps = 2\n'
        "[options]\ndataset_gb = 150\n"
    ))  # fmt: skip
    assert _run(["--workload", str(w), "--json", "--top", "0"]) == 0
    rows = json.loads(capsys.readouterr().out)
    home = [r for r in rows if r["region"] == "us-central1"]
    away = [r for r in rows if r["region"] == "asia-east1"]
    assert home and away and all(r["region_note"] == "" and r["egress_usd"] == 0 for r in home)
    assert all(r["egress_usd"] == pytest.approx(3.0) for r in away)
    note = away[0]["region_note"]
    assert "data egress ≈$3.00 for 150 GB from us-central1" in note and "capacity not guaranteed" in note
    assert "another continent" in note
    _run(["--workload", str(w), "--top", "0"])
    assert "† asia-east1: data egress ≈$3.00" in capsys.readouterr().out


def test_explanations_never_pair_a_dominant_term_with_another_bottleneck() -> None:
    table = plan.build_table(EXAMPLE, "balanced")
    for i in [0, *map(int, table.view[:40])]:
        text = table.explain(i).text()
        assert "dominant" not in text
        ex = table.explain(i)
        if ex.bottleneck != ex.dominant:
            assert text.startswith(f"speed limited by {ex.bottleneck}")


def test_rows_carry_the_speed_band_or_say_it_is_not_available(capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.util

    has_band = importlib.util.find_spec("cmdare.planner.speed.speed_band") is not None
    assert _run(["--workload", str(EXAMPLE), "--json", "--top", "5"]) == 0
    rows = json.loads(capsys.readouterr().out)
    if has_band:
        assert all(r["steps_per_sec_p10"] <= r["steps_per_sec"] <= r["steps_per_sec_p90"] for r in rows)
        assert {r["extrapolation"] for r in rows} <= {"none", "network", "gpu", "ps", "workers"}
    else:
        assert all(r["steps_per_sec_p10"] is None and r["extrapolation"] is None for r in rows)
        _run(["--workload", str(EXAMPLE), "--top", "1"])
        assert "band: n/a in this build" in capsys.readouterr().out.splitlines()[0]
