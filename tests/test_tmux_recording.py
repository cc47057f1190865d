"""A recording made in the TUI is complete in its ``.sqlite`` alone (issue 28 item 4, issue 27): the real app in a
private tmux server records a live exporter; it is ended each way a user or the system ends it (``q``, ctrl+c,
SIGTERM, SIGHUP, the terminal gone) and the file, copied without its ``-wal``, holds every cycle the screen showed
and the closing lifetimes; killed with SIGKILL, the copy still holds the cycles checkpointed as it went. While
recording, the top line says REC and the file's name."""

from __future__ import annotations

import os
import re
import shutil
import signal
import sqlite3
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cmdare.collectors.exporter import TrainingExporter

REPO = Path(__file__).resolve().parents[1]
EXE = REPO / ".venv" / "bin" / "cmdare-tui"
# the session's environment: COLUMNS/LINES (pytest sets them) would override the pane's real size
ENV = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR", "TMUX")}

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None or not EXE.exists(), reason="needs tmux and .venv"),
]


class AppInTmux:
    """The app in one session of a private tmux server (its stderr left to the pane: Textual draws there)."""

    def __init__(self, command: str, pidfile: Path) -> None:
        self.sock = f"cmdare-rec-{uuid.uuid4().hex[:8]}"
        self.pidfile = pidfile
        script = f"sh -c 'echo $$ > {pidfile}; exec {command}'; echo EXIT=$?; sleep 60"
        self.tmux("-f", "/dev/null", "new-session", "-d", "-s", "t", "-x", "100", "-y", "30", script)

    def tmux(self, *args: str) -> str:
        r = subprocess.run(["tmux", "-L", self.sock, *args], capture_output=True, text=True, env=ENV)
        return r.stdout

    def pid(self) -> int:
        self.wait(lambda: self.pidfile.exists() and self.pidfile.read_text().strip() != "")
        return int(self.pidfile.read_text())

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "t")

    def wait_screen(self, pred: Callable[[str], bool]) -> str:
        self.wait(lambda: pred(self.screen()), what=lambda: self.screen())
        return self.screen()

    @staticmethod
    def wait(pred: Callable[[], bool], timeout: float = 60, what: Callable[[], str] = lambda: "") -> None:
        """A hang bound, not a speed target."""
        end = time.monotonic() + timeout
        while not pred():
            assert time.monotonic() < end, "never happened:\n" + what()
            time.sleep(0.2)

    def kill(self) -> None:
        self.tmux("kill-server")


@pytest.fixture(scope="module")
def exporter() -> Iterator[str]:
    """One live training exporter on loopback whose step count moves."""
    exp = TrainingExporter(job="rec", role="worker", task="0", batch_size=32, target_steps=10_000)
    port = exp.start()
    for _ in range(5):
        exp.step(0.01, examples=32)
    yield f"http://127.0.0.1:{port}/metrics"
    exp.stop()


def _poll_number(screen: str) -> int:
    """The polls recorded so far, as the REC marker says (``● REC  run.sqlite, 12 polls``); -1 before."""
    m = re.search(r"REC +\S+, ([\d,]+) polls?", screen)
    return int(m[1].replace(",", "")) if m else -1


def _copy_alone(path: Path, into: Path) -> Path:
    """The recording's main file copied without its -wal / -shm (as a user copies or attaches it)."""
    copy = into / "copy.sqlite"
    shutil.copyfile(path, copy)
    return copy


def _counts(db: Path) -> tuple[int, int, int]:
    """(cycles, polls, lifetimes still running at close) in a copy of a recording."""
    conn = sqlite3.connect(f"file:{db}?immutable=1", uri=True)  # the copy is ours: nothing beside it is read
    try:
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == ("1",)
        cycles = conn.execute("SELECT count(*) FROM cycles").fetchone()[0]
        polls = conn.execute("SELECT count(*) FROM polls").fetchone()[0]
        running = conn.execute("SELECT count(*) FROM lifetimes WHERE end IS NULL").fetchone()[0]
        return cycles, polls, running
    finally:
        conn.close()


def _end(app: AppInTmux, how: str) -> None:
    pid = app.pid()
    if how == "q":
        app.tmux("send-keys", "-t", "t", "q")
    elif how == "ctrl+c":
        app.tmux("send-keys", "-t", "t", "C-c")
    elif how == "terminal gone":  # an SSH disconnect: the pty closes under the app (SIGHUP)
        app.kill()
    else:
        os.kill(pid, {"SIGTERM": signal.SIGTERM, "SIGHUP": signal.SIGHUP, "SIGKILL": signal.SIGKILL}[how])
    app.wait(lambda: _gone(pid))


def _gone(pid: int) -> bool:
    """The process has exited (reaped, or a zombie not yet reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:  # reaped, between any two looks
        return True


@pytest.mark.parametrize("how", ["q", "ctrl+c", "SIGTERM", "SIGHUP", "terminal gone"])
def test_every_way_out_leaves_a_complete_recording(exporter: str, tmp_path: Path, how: str) -> None:
    rec = tmp_path / "run.sqlite"
    app = AppInTmux(f"{EXE} --refresh 0.5 --target {exporter} --record {rec}", tmp_path / "pid")
    try:
        screen = app.wait_screen(lambda s: _poll_number(s) >= 2)
        assert "● REC  run.sqlite" in screen.splitlines()[0]  # the marker, on the top line
        seen = _poll_number(app.screen())
        _end(app, how)
        if how != "terminal gone":
            app.wait_screen(lambda s: "EXIT=0" in s)  # ctrl+c quits like q (it once only said "press ctrl+q")
    finally:
        app.kill()
    cycles, polls, running = _counts(_copy_alone(rec, tmp_path))
    assert cycles >= seen and polls >= cycles, (how, cycles, seen)
    if how != "terminal gone":  # an orderly close wrote the lifetimes still running (the forced path may not)
        assert running == 1
    assert not Path(f"{rec}-wal").exists() or Path(f"{rec}-wal").stat().st_size == 0


def test_a_killed_recording_keeps_its_checkpointed_cycles(exporter: str, tmp_path: Path) -> None:
    """SIGKILL leaves no chance to close: the WAL, checkpointed as the recording went, already put the first
    cycles into the main file (a copy without the -wal once held 0 cycles)."""
    rec = tmp_path / "run.sqlite"
    app = AppInTmux(f"{EXE} --refresh 0.5 --target {exporter} --record {rec}", tmp_path / "pid")
    try:
        app.wait_screen(lambda s: _poll_number(s) >= 2)
        _end(app, "SIGKILL")
    finally:
        app.kill()
    assert Path(f"{rec}-wal").exists()  # no close ran
    cycles, polls, _ = _counts(_copy_alone(rec, tmp_path))
    assert cycles >= 1 and polls >= 1


def test_a_forced_exit_checkpoints_from_another_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The forced quit (tui/signals.py's watchdog, when the terminal is gone and Textual's writes block) cannot use
    the recorder's connection: a connection of its own, from another thread, moves the committed cycles into the
    main file while the recorder stays open."""
    import threading

    from cmdare.collectors.poller import Cycle
    from cmdare.collectors.recording import recorder
    from cmdare.collectors.recording.recorder import Recorder, checkpoint_file
    from cmdare.collectors.samples import TaskPoll

    monkeypatch.setattr(recorder, "CHECKPOINT_EVERY_S", 1e9)  # no periodic checkpoint after the first cycle
    rec = Recorder(tmp_path / "run.sqlite")
    for i in range(10):
        rec.record(
            Cycle(
                t=1.0 + i,
                elapsed=0.0,
                polls=[TaskPoll(source="w", t=1.0 + i, ok=True, values={"cmdare_global_step": i})],
                transitions=[],
            )
        )
    assert _counts(_copy_alone(rec.path, tmp_path))[0] == 1
    worker = threading.Thread(target=checkpoint_file, args=(rec.path,))
    worker.start()
    worker.join()
    assert _counts(_copy_alone(rec.path, tmp_path))[0] == 10
    rec.close()
