"""Shared fixtures. Servers the tests need (exporters, Prometheus) are started here on 127.0.0.1."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


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
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} not present")
    return SHARED


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
