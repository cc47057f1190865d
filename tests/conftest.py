"""Shared fixtures. Servers the tests need (exporters, Prometheus) are started here on 127.0.0.1."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

REPO = Path(__file__).resolve().parents[1]
# The CM-DARE data is vendored at <repo>/data/cmdare (data/cmdare/PROVENANCE.md): the repository root is laid
# out like the workplace's ../shared (``<root>/data/cmdare/...``), so tests never need ../shared.
DATA_ROOT = REPO
CMDARE = DATA_ROOT / "data" / "cmdare"

# Hypothesis: the same examples on every run by default ("ci": derandomised, no per-example deadline on a
# loaded machine, a failure printed with its reproduce blob); HYPOTHESIS_PROFILE=random explores new
# examples locally (docs/testing.md). Loaded here, before any test module builds its own settings.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True, database=None)
settings.register_profile("random", deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def _no_color_and_writable(monkeypatch: pytest.MonkeyPatch):
    """Textual turns monochrome when NO_COLOR merely exists: unset it; and reset read-only mode."""
    from cmdare.collectors import writes

    monkeypatch.delenv("NO_COLOR", raising=False)
    writes.set_read_only(False)
    yield
    writes.set_read_only(False)


@pytest.fixture
def shared_dir() -> Path:
    """The root holding ``data/cmdare`` (the vendored copy in this repository); never skips."""
    assert CMDARE.is_dir(), f"vendored CM-DARE data missing: {CMDARE}"
    return DATA_ROOT


@pytest.fixture
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """HOME and XDG dirs pointed at an empty temporary directory."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
        monkeypatch.setenv(var, str(home / var.lower()))
    os.chdir(home)
    return home
