"""Issue 27 item 5: a replay writes nothing beside the recording (read-only mode, however asked for,
in commands and in the app in tmux) and loses nothing of its ``-wal``; a recording that cannot be
played is refused in one line (exit 2), and the end says what was played.

The recordings are real: the project's Recorder writes them, and the ``-wal`` left by a crash is made
by SQLite itself (a writer that never closes). SQLite's own reading of a copy is the reference for what
the ``-wal`` holds."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from cmdare.collectors import metrics as M
from cmdare.collectors import writes
from cmdare.collectors.clock import ManualClock
from cmdare.collectors.poller import Cycle
from cmdare.collectors.recording import sqlite_image
from cmdare.collectors.recording.recorder import Recorder, RecordingError
from cmdare.collectors.recording.replay import ReplayFinished, ReplaySource, open_recording
from cmdare.collectors.samples import TaskInfo, TaskPoll
from tests.test_readonly_mode import fresh_env, tree
from tests.test_tmux_hostile import PrivateTmux

pytestmark = pytest.mark.slow

EXE = str(Path(sys.executable).with_name("cmdare-tui"))
CYCLES = 6  # recorded and closed (in the main file); as many again only in the -wal


def _recording(path: Path) -> None:
    rec = Recorder(path, interval=2.0)
    info = TaskInfo(job="j", task="w0")
    for i in range(CYCLES):
        t = 1.7e9 + 2 * i
        poll = TaskPoll(
            source="http://w0/metrics", t=t, ok=True, info=info, values={M.K_WORKER_STEPS: 10.0 * i}
        )
        rec.record(Cycle(t=t, elapsed=0.01, polls=[poll], transitions=[]))
    rec.close()


def crashed_copy(src_dir: Path, dest: Path) -> Path:
    """A recording of ``2 × CYCLES`` cycles whose second half is only in its ``-wal`` (copied while its
    writer still had it open, as a crash leaves it), at ``dest``."""
    live = src_dir / "live.sqlite"
    _recording(live)
    c = sqlite3.connect(live)
    c.execute("PRAGMA wal_autocheckpoint = 0")  # the new cycles stay in the -wal
    with c:
        c.execute(
            f"INSERT INTO cycles SELECT id + {CYCLES}, t + {2 * CYCLES}, elapsed, source_errors FROM cycles"
        )
        c.execute(f"INSERT INTO polls SELECT cycle + {CYCLES}, seq, source, t + {2 * CYCLES}, ok, info, vals, "
                  "error, facts, elapsed FROM polls")  # fmt: skip
    shutil.copy(live, dest)
    shutil.copy(f"{live}-wal", f"{dest}-wal")
    c.close()
    return dest


def _sqlite_count(path: Path, tmp: Path) -> int:
    """Cycles SQLite itself sees in the recording and its -wal (read from a copy it may write beside)."""
    ref = tmp / "ref"
    ref.mkdir(exist_ok=True)
    shutil.copy(path, ref / "r.sqlite")
    if Path(f"{path}-wal").exists():
        shutil.copy(f"{path}-wal", ref / "r.sqlite-wal")
    c = sqlite3.connect(ref / "r.sqlite")
    n = c.execute("SELECT count(*) FROM cycles").fetchone()[0]
    c.close()
    shutil.rmtree(ref)
    return n


@pytest.fixture(autouse=True)
def _no_log_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """No log file handler another in-process test left behind (read-only mode would refuse it)."""
    monkeypatch.setattr(logging.getLogger(), "handlers", [])


def _replayed(path: Path) -> tuple[int, list[str], str]:
    """(cycles played, notes, end message) of a ReplaySource over ``path``."""

    async def go() -> tuple[int, list[str], str]:
        src = ReplaySource(path, ManualClock(), speed=0)
        n, notes = 0, []
        async with httpx.AsyncClient() as client:
            try:
                while True:
                    polls = await src.poll(client, src.clock)
                    notes += [p.error for p in polls if p.error]
                    n += any(p.ok for p in polls)
            except ReplayFinished as end:
                src.close()
                return n, notes, str(end)

    return asyncio.run(go())


def test_sqlite_alone_writes_beside_a_recording_or_loses_its_wal(tmp_path: Path):
    """The two measured pitfalls this replaces: mode=ro writes -shm, immutable=1 misses the -wal."""
    (tmp_path / "copy").mkdir()
    rec = crashed_copy(tmp_path, tmp_path / "copy" / "r.sqlite")
    before = tree(rec.parent)
    ro = sqlite3.connect(f"file:{rec}?mode=ro", uri=True)
    assert ro.execute("SELECT count(*) FROM cycles").fetchone()[0] == 2 * CYCLES
    ro.close()
    assert set(tree(rec.parent)) - set(before) == {"r.sqlite-shm"}  # a file written in "read-only"
    Path(f"{rec}-shm").unlink()
    imm = sqlite3.connect(f"file:{rec}?immutable=1", uri=True)
    assert imm.execute("SELECT count(*) FROM cycles").fetchone()[0] == CYCLES  # the -wal's half lost
    imm.close()


def test_a_crashed_recording_replays_whole_and_nothing_is_written(tmp_path: Path):
    (tmp_path / "copy").mkdir()
    rec = crashed_copy(tmp_path, tmp_path / "copy" / "r.sqlite")
    before = tree(rec.parent)
    writes.set_read_only(True)
    try:
        played, notes, end = _replayed(rec)
    finally:
        writes.set_read_only(False)
    assert tree(rec.parent) == before
    assert played == 2 * CYCLES == _sqlite_count(rec, tmp_path) and not notes
    assert end == f"recording ended cleanly ({2 * CYCLES} cycles replayed)"


@pytest.mark.parametrize("damage", ["torn last frame", "flipped byte", "foreign salt"])
def test_wal_frames_are_read_as_sqlite_reads_them(tmp_path: Path, damage: str):
    (tmp_path / "copy").mkdir()
    rec = crashed_copy(tmp_path, tmp_path / "copy" / "r.sqlite")
    wal = Path(f"{rec}-wal")
    size = wal.stat().st_size
    page = sqlite_image.wal_content(wal)
    assert page is not None
    frame = 24 + page.page_size
    data = bytearray(wal.read_bytes())
    if damage == "torn last frame":
        data = data[: size - page.page_size // 2]
    elif damage == "flipped byte":
        data[32 + frame + 24 + 100] ^= 0xFF  # inside the second frame's page
    else:
        data[32 + 2 * frame + 8] ^= 0x01  # the third frame's salt: not this -wal's frame
    wal.write_bytes(bytes(data))
    want = _sqlite_count(rec, tmp_path)
    conn = sqlite_image.open_private(rec)
    assert conn.execute("SELECT count(*) FROM cycles").fetchone()[0] == want
    assert conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    conn.close()
    assert sorted(p.name for p in rec.parent.iterdir()) == ["r.sqlite", "r.sqlite-wal"]


def test_a_wal_too_large_to_copy_is_said_in_read_only_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "copy").mkdir()
    rec = crashed_copy(tmp_path, tmp_path / "copy" / "r.sqlite")
    monkeypatch.setattr(sqlite_image, "IMAGE_LIMIT", 4096)
    before = tree(rec.parent)
    writes.set_read_only(True)
    try:
        played, notes, _ = _replayed(rec)
    finally:
        writes.set_read_only(False)
    assert tree(rec.parent) == before and played == CYCLES
    assert "a private copy would take" in notes[0] and "replay without --read-only" in notes[0]
    played, notes, _ = _replayed(rec)  # outside read-only mode SQLite reads the -wal itself
    assert played == 2 * CYCLES and not notes


def _damaged(tmp_path: Path, kind: str) -> Path:
    rec = tmp_path / f"{kind}.sqlite"
    _recording(rec)
    c = sqlite3.connect(rec)
    root = {"polls": c.execute("SELECT rootpage FROM sqlite_master WHERE name = 'polls'").fetchone()[0]}
    page = c.execute("PRAGMA page_size").fetchone()[0]
    with c:
        if kind == "no polls":
            c.execute("DELETE FROM polls")
        elif kind == "no cycles":
            c.execute("DELETE FROM polls")
            c.execute("DELETE FROM cycles")
    c.close()
    if kind == "damaged page":
        with open(rec, "r+b") as fh:
            fh.seek((root["polls"] - 1) * page)
            fh.write(b"\xff" * page)
    return rec


@pytest.mark.parametrize(
    ("kind", "words"),
    [("damaged page", "damaged: Page"), ("no polls", "no poll recorded"), ("no cycles", "no cycle recorded")],
)
def test_a_recording_that_cannot_be_played_is_refused_in_one_line(tmp_path: Path, kind: str, words: str):
    rec = _damaged(tmp_path, kind)
    with pytest.raises(RecordingError, match=f"not a usable recording \\({words}"):
        open_recording(rec)
    r = subprocess.run([EXE, "snapshot", "--read-only", "--replay", str(rec), "--samples", "2", "--interval", "0"],
                       capture_output=True, text=True, timeout=120, env=fresh_env(tmp_path / "home"))  # fmt: skip
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and f"not a usable recording ({words}" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(kind)) == [rec.name]


def test_unreadable_cycles_are_said_at_the_end(tmp_path: Path):
    rec = tmp_path / "r.sqlite"
    _recording(rec)
    c = sqlite3.connect(rec)
    with c:
        c.execute("UPDATE cycles SET t = 'x' WHERE id IN (2, 3)")
    c.close()
    played, notes, end = _replayed(rec)
    assert played == CYCLES - 2 and any("implausible time" in n for n in notes)
    assert end == f"recording ended ({CYCLES} cycles: {CYCLES - 2} replayed, 2 unreadable, skipped)"


@pytest.mark.parametrize("how", ["--read-only", "CMDARE_READ_ONLY=1", "read_only = true"])
def test_read_only_replay_commands_write_nothing(tmp_path: Path, how: str):
    home = tmp_path / "home"
    home.mkdir()
    (home / "rec").mkdir()
    rec = crashed_copy(tmp_path, home / "rec" / "r.sqlite")
    env = fresh_env(home)
    args = [EXE, "snapshot", "--replay", str(rec), "--replay-speed", "1000", "--samples", str(2 * CYCLES + 1),
            "--interval", "0"]  # fmt: skip
    if how == "--read-only":
        args.append("--read-only")
    elif how.startswith("CMDARE"):
        env["CMDARE_READ_ONLY"] = "1"
    else:
        (home / "cfg.toml").write_text("read_only = true\n")
        args += ["--config", str(home / "cfg.toml")]
    before = tree(home)
    r = subprocess.run(args, capture_output=True, text=True, timeout=120, env=env, cwd=home)
    assert r.returncode == 0, r.stderr
    assert "READ-ONLY" in r.stdout and f"recording ended cleanly ({2 * CYCLES} cycles replayed)" in r.stdout
    assert tree(home) == before


def test_read_only_replay_in_the_app_writes_nothing(tmp_path: Path):
    """The app in a real terminal, read-only by the environment, plays the crashed recording to its end."""
    home = tmp_path / "home"
    (home / "rec").mkdir(parents=True)
    rec = crashed_copy(tmp_path, home / "rec" / "r.sqlite")
    before = tree(home)
    env_words = " ".join(
        f"{k}={v}" for k, v in fresh_env(home).items() if k in ("HOME",) or k.startswith("XDG")
    )
    t = PrivateTmux(f"env {env_words} CMDARE_READ_ONLY=1 TERM=xterm-256color {EXE} --replay {rec} "
                    "--replay-speed 1000", tmp_path / "pty.raw", tmp_path / "pid", width=120, height=30)  # fmt: skip
    try:
        t.go()
        s = t.wait_for(lambda s: "recording ended" in s, timeout=90)
        assert "READ-ONLY" in s and f"{2 * CYCLES}/{2 * CYCLES} polls, recording ended" in s, s
        t.keys("q")
        t.wait_for(lambda s: "EXIT=0" in s, timeout=20)
    finally:
        t.kill()
    assert tree(home) == before
    assert sorted(os.listdir(rec.parent)) == ["r.sqlite", "r.sqlite-wal"]


def test_the_app_checks_a_recording_in_read_only_mode_already(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The app checks --replay while it reads its flags: read-only mode (here from the environment) is on
    by then, so a -wal too large to copy is not handed to SQLite (which would write a -shm beside it)."""
    from cmdare.tui import cli

    (tmp_path / "copy").mkdir()
    rec = crashed_copy(tmp_path, tmp_path / "copy" / "r.sqlite")
    monkeypatch.setattr(sqlite_image, "IMAGE_LIMIT", 4096)
    monkeypatch.setenv("CMDARE_READ_ONLY", "1")
    real = cli.session_options

    def checked_then_stop(args: object) -> object:  # the app itself is not started: the check is the point
        real(args)
        raise SystemExit(0)

    monkeypatch.setattr(cli, "session_options", checked_then_stop)
    before = tree(rec.parent)
    try:
        with pytest.raises(SystemExit):
            cli.run_app(cli.build_parser().parse_args(["--replay", str(rec)]))
    finally:
        writes.set_read_only(False)
    assert tree(rec.parent) == before
