"""Issue 15 item 4: collectors/writes.py, the one door for writes, never replaces what is not a regular
file, never writes through a symlink unless asked, and replaces atomically beside the target."""

from __future__ import annotations

import os
import stat
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cmdare.collectors import writes
from cmdare.collectors.pricing.cache import write_cache


def _special(tmp_path: Path, kind: str) -> Path:
    p = tmp_path / kind
    if kind == "dir":
        p.mkdir()
    elif kind == "fifo":
        os.mkfifo(p)
    elif kind == "device":
        return Path("/dev/null")
    elif kind == "symlink":
        (tmp_path / "real.txt").write_text("original\n")
        p.symlink_to(tmp_path / "real.txt")
    elif kind == "dangling":
        p.symlink_to(tmp_path / "nowhere" / "x")
    return p


@pytest.mark.parametrize("kind", ["dir", "fifo", "device", "symlink", "dangling"])
def test_refuses_and_leaves_the_target_alone(tmp_path: Path, kind: str):
    p = _special(tmp_path, kind)
    before = os.lstat(p)
    for write in (lambda: writes.write_text(p, "x"), lambda: writes.open_sqlite(p, writable=True),
                  lambda: writes.log_handler(p), lambda: writes.probe_writable(p)):  # fmt: skip
        with pytest.raises(writes.UnsafeTargetError):
            write()
    after = os.lstat(p)
    assert (stat.S_IFMT(after.st_mode), after.st_ino) == (stat.S_IFMT(before.st_mode), before.st_ino)
    if kind == "symlink":
        assert (tmp_path / "real.txt").read_text() == "original\n"
    assert not [q for q in tmp_path.iterdir() if q.name.startswith(".")]


def test_symlink_written_through_only_when_asked(tmp_path: Path):
    link = _special(tmp_path, "symlink")
    writes.write_text(link, "new\n", follow_symlinks=True)
    assert link.is_symlink() and (tmp_path / "real.txt").read_text() == "new\n"


def test_atomic_replace_keeps_mode_and_leaves_no_temp(tmp_path: Path):
    p = tmp_path / "out.csv"
    p.write_text("old\n")
    p.chmod(0o640)
    seen: list[str] = []

    def reader() -> None:  # a concurrent reader sees the old or the new file, never a partial one
        for _ in range(200):
            seen.append(p.read_text())

    t = threading.Thread(target=reader)
    t.start()
    for _ in range(20):
        writes.write_text(p, "new\n" * 10_000)
    t.join()
    assert set(seen) <= {"old\n", "new\n" * 10_000}
    assert stat.S_IMODE(p.stat().st_mode) == 0o640
    assert [q.name for q in tmp_path.iterdir()] == ["out.csv"]


def test_new_file_gets_umask_mode_not_0600(tmp_path: Path):
    old = os.umask(0o022)
    try:
        p = writes.write_text(tmp_path / "new.txt", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(p.stat().st_mode) == 0o644


def test_price_cache_refuses_a_symlink(tmp_path: Path):
    target = tmp_path / "elsewhere.json"
    target.write_text("{}")
    cache = tmp_path / "cache.json"
    cache.symlink_to(target)
    with pytest.raises(writes.UnsafeTargetError):
        write_cache(cache, {}, datetime.now(UTC))
    assert target.read_text() == "{}" and cache.is_symlink()


def test_probe_writable_leaves_nothing(tmp_path: Path):
    writes.probe_writable(tmp_path / "sub" / "rec.db")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "file").write_text("")
    with pytest.raises(OSError):
        writes.probe_writable(tmp_path / "file" / "rec.db")
