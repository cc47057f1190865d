"""``cmdare-tui prices`` through an argparse parser built here (the lead wires the real CLI)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import platformdirs
import pytest

from cmdare.tui.commands import UsageError
from cmdare.tui.commands.prices import register
from tests.catalog_server import CatalogServer, gpu_sku, host_sku

FIELDS = ["gpu", "count", "region", "provisioning", "usd_per_hour", "gpu_usd_per_hour", "host_usd_per_hour",
          "source", "as_of"]  # fmt: skip


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="cmdare-tui")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["prices", *argv])
    return args.func(args)


@pytest.fixture(autouse=True)
def _cache_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(platformdirs, "user_cache_dir", lambda *a, **k: str(tmp_path / "cache"))


def test_offline_json_rows(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["--offline", "--json", "--gpu", "v100", "--region", "us-central1"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and all(list(r) == FIELDS for r in rows)
    assert {r["gpu"] for r in rows} == {"V100"} and {r["region"] for r in rows} == {"us-central1"}
    assert {r["provisioning"] for r in rows} == {"standard", "spot"}
    assert {r["count"] for r in rows} == {1, 2, 4, 8}
    assert all(r["source"] == "offline" for r in rows)
    one = next(r for r in rows if r["count"] == 1 and r["provisioning"] == "standard")
    assert one["usd_per_hour"] == pytest.approx(one["gpu_usd_per_hour"] + one["host_usd_per_hour"], abs=1e-5)


def test_spot_filter_and_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(["--offline", "--json", "--spot"]) == 0
    assert {r["provisioning"] for r in json.loads(capsys.readouterr().out)} == {"spot"}
    assert _run(["--offline", "--gpu", "T4"]) == 0
    out = capsys.readouterr().out
    assert "offline" in out and "T4" in out and "us-central1" in out


@pytest.mark.parametrize(
    "argv",
    [
        ["--offline", "--gpu", "Z9000"],
        ["--offline", "--region", "mars-north1"],
        ["--billing-endpoint", "not a url"],
        ["--billing-endpoint", "ftp://127.0.0.1:1"],
        ["--billing-endpoint", "http://127.0.0.1:99999999"],
    ],
)
def test_bad_input_is_a_usage_error(argv: list[str]) -> None:
    with pytest.raises(UsageError):
        _run(argv)


def test_billing_endpoint_gives_live_rows(capsys: pytest.CaptureFixture[str]) -> None:
    skus = [gpu_sku("V100", 2.48, ["us-central1"]), host_sku("n1", "Core", 0.031611, ["us-central1"]),
            host_sku("n1", "Ram", 0.004237, ["us-central1"])]  # fmt: skip
    with CatalogServer(skus) as server:
        assert _run(["--json", "--billing-endpoint", server.endpoint, "--max-age-hours", "0"]) == 0
    rows: list[dict[str, Any]] = json.loads(capsys.readouterr().out)
    assert rows and {r["source"] for r in rows} == {"live"}
    assert rows[0]["gpu_usd_per_hour"] == pytest.approx(2.48)
    assert all(r["auth"] == "" for r in server.requests)  # anonymous credentials


def test_unreachable_endpoint_falls_back_with_reason(capsys: pytest.CaptureFixture[str]) -> None:
    with CatalogServer([], status=403) as server:
        assert _run(["--json", "--billing-endpoint", server.endpoint, "--gpu", "V100"]) == 0
    captured = capsys.readouterr()
    assert {r["source"] for r in json.loads(captured.out)} == {"offline"}
    assert "HTTP 403" in captured.err


def test_installed_cli_prints_offline_book_as_json(isolated_home):
    """The console script, as a user runs it, offline from a fresh install."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    exe = Path(sys.executable).with_name("cmdare-tui")
    out = subprocess.run(
        [str(exe), "prices", "--json", "--offline", "--gpu", "V100"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert rows and all(r["gpu"] == "V100" and r["source"] == "offline" for r in rows)
    assert {
        "usd_per_hour",
        "gpu_usd_per_hour",
        "host_usd_per_hour",
        "as_of",
        "region",
        "provisioning",
    } <= set(rows[0])
    bad = subprocess.run([str(exe), "prices", "--gpu", "NOPE"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr
