"""Read-only mode writes nothing: the app (Pilot) and ``snapshot`` (a subprocess) run with HOME, XDG
dirs and cwd in a fresh directory that is compared byte for byte afterwards; the same on a
read-only mount; and a write attempt in code raises ReadOnlyError."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cmdare.collectors import writes
from cmdare.tui.help_screen import HelpOverlay
from tests.test_tui_snapshots import fixed_app

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
XDG = ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME")


def tree(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` with its bytes (None for directories)."""
    out: dict[str, bytes | None] = {}
    for p in sorted(root.rglob("*")):
        out[str(p.relative_to(root))] = None if p.is_dir() else p.read_bytes()
    return out


def fresh_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in XDG and k != "NO_COLOR"}
    env.update(HOME=str(home), TERM="dumb", PYTHONDONTWRITEBYTECODE="1")
    env.update({v: str(home / v.lower()) for v in XDG})
    return env


def test_write_attempt_under_read_only_raises(tmp_path: Path):
    writes.set_read_only(True)
    for attempt in (lambda: writes.write_text(tmp_path / "a.txt", "x"), lambda: writes.make_dirs(tmp_path / "d"),
                    lambda: writes.open_sqlite(tmp_path / "db.sqlite", writable=True)):  # fmt: skip
        with pytest.raises(writes.ReadOnlyError):
            attempt()
    assert list(tmp_path.iterdir()) == []


async def test_app_read_only_writes_nothing_and_hides_write_actions(isolated_home: Path):
    (isolated_home / "keep.txt").write_text("untouched")
    before = tree(isolated_home)
    writes.set_read_only(True)
    app, run_before = fixed_app(read_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await run_before(pilot)
        assert "READ-ONLY" in str(app.query_one("#badges").render())
        assert not app.check_action("export", ())
        await pilot.press("e")  # bound to export: must do nothing
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Export JSON" not in titles and "Screenshot" not in titles and "Show Planner" in titles
        await pilot.press("question_mark")
        assert app.help_shown
        assert all(
            "Export" not in desc for _, keys in app.query_one(HelpOverlay).sections for _, desc in keys
        )
        await pilot.press("escape", "q")
    assert tree(isolated_home) == before


async def test_writable_app_exports_through_the_guard(isolated_home: Path):
    app, run_before = fixed_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await run_before(pilot)
        assert "Export JSON" in [c.title for c in app.get_system_commands(app.screen)]
        await pilot.press("e")
        await pilot.pause()
    assert len(list(isolated_home.glob("cmdare-snapshot-*.json"))) == 1


def run_snapshot(home: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        "-m",
        "cmdare.tui.cli",
        "snapshot",
        "--demo",
        "--samples",
        "2",
        "--interval",
        "0.3",
        *extra,
    ]
    return subprocess.run(cmd, cwd=home, env=fresh_env(home), capture_output=True, text=True, timeout=60)


def test_snapshot_subprocess_read_only_writes_nothing(tmp_path: Path):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".config").mkdir()
    before = tree(home)
    r = run_snapshot(home, "--read-only")
    assert r.returncode == 0, r.stderr
    assert "Cluster" in r.stdout and "worker-0" in r.stdout
    assert tree(home) == before


def test_snapshot_env_read_only_on_a_read_only_mount(tmp_path: Path):
    home = tmp_path / "ro"
    home.mkdir()
    (home / "marker").write_text("ro")
    try:
        subprocess.run(["mount", "--bind", str(home), str(home)], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"cannot bind-mount here: {exc}")
    try:
        remount = subprocess.run(
            ["mount", "-o", "remount,bind,ro", str(home)], capture_output=True, text=True
        )
        if remount.returncode != 0:
            pytest.skip(f"cannot remount read-only: {remount.stderr.strip()}")
        with pytest.raises(OSError):
            (home / "probe").write_text("x")  # the mount really is read-only
        env_home = fresh_env(home)
        env_home["CMDARE_READ_ONLY"] = "1"
        cmd = [
            sys.executable,
            "-m",
            "cmdare.tui.cli",
            "snapshot",
            "--demo",
            "--samples",
            "2",
            "--interval",
            "0.3",
        ]
        r = subprocess.run(cmd, cwd=home, env=env_home, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert "Traceback" not in r.stderr
        assert tree(home) == {"marker": b"ro"}
    finally:
        subprocess.run(["umount", str(home)], capture_output=True)
