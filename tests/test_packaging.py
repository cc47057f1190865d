"""Packaging and self-containment: quiet metadata, data folders shipped, and the tests never need ../shared."""

from __future__ import annotations

import re
import tomllib

from tests.conftest import CMDARE, REPO

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def test_license_is_an_spdx_string_not_a_table() -> None:
    assert PYPROJECT["project"]["license"] == "Apache-2.0"


def test_every_shipped_data_folder_is_a_listed_package() -> None:
    """setuptools warns for each folder of package data that is not in ``packages``."""
    st = PYPROJECT["tool"]["setuptools"]
    packages, dirs = set(st["packages"]), st["package-dir"]
    for pkg, folder in dirs.items():
        for sub in (REPO / folder).rglob("*"):
            if not sub.is_dir() or "__pycache__" in sub.parts or not any(f.is_file() for f in sub.iterdir()):
                continue
            dotted = ".".join((pkg, *sub.relative_to(REPO / folder).parts))
            assert dotted in packages, (
                f"{dotted} ({sub.relative_to(REPO)}) missing from [tool.setuptools] packages"
            )
    for pkg in st["package-data"]:
        assert pkg in packages


def test_vendored_cmdare_data_is_complete_attributed_and_not_installed() -> None:
    assert (CMDARE / "SOURCE.md").read_text().count("Apache License") >= 2
    provenance = (CMDARE / "PROVENANCE.md").read_text()
    assert "2026-12-01" in provenance and "gcp-catalog" in provenance and "Withheld" in provenance
    files = [p for p in CMDARE.rglob("*") if p.is_file()]
    assert len(files) == 240  # 238 data files + SOURCE.md + PROVENANCE.md
    assert sum(p.stat().st_size for p in files) < 3_000_000
    assert (CMDARE / "icac2019_transient-deep-learning/data/training/experiment_1ps_vs_2ps/2ps4k").is_dir()
    installed = set(PYPROJECT["tool"]["setuptools"]["package-dir"].values())
    assert "data" not in installed and not any(CMDARE.is_relative_to(REPO / d) for d in installed)


def test_no_test_script_or_benchmark_reads_or_skips_on_shared() -> None:
    """A fresh clone without ../shared runs everything: nothing looks for it (the GCP extract aside, whose
    derivation scripts take it as an explicit --catalog)."""
    pattern = re.compile(
        r"""parents?\[\d\]\.parent\s*/\s*["']shared|REPO\.parent\s*/\s*["']shared["']\)?(?!\s*/\s*["']data["']\s*/\s*["']gcp)"""
    )
    offenders = []
    for folder in ("tests", "scripts", "benchmarks"):
        for path in (REPO / folder).rglob("*.py"):
            text = path.read_text()
            if pattern.search(text) or re.search(r"skip\w*\([^)]*shared", text):
                offenders.append(str(path.relative_to(REPO)))
    assert offenders == []
