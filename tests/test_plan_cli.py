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


def test_text_output(capsys: pytest.CaptureFixture[str]) -> None:
    _run(["--workload", str(EXAMPLE), "--top", "3"])
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("objective balanced") and "prices offline" in out[0]
    assert out[2].split()[0] == "cur" and len(out) == 6 and "time" in out[3]


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


def test_unpriced_current_shape_suggests_study_era(capsys: pytest.CaptureFixture[str]) -> None:
    icac = EXAMPLE.parent / "workload-icac2019-k80.toml"
    with pytest.raises(UsageError, match="no price for the current shape K80.*--prices study-era"):
        _run(["--workload", str(icac)])
    assert _run(["--workload", str(icac), "--prices", "study-era", "--json", "--top", "2"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["price_source"] == "offline"
