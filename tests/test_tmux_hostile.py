"""The real program in a real terminal (a private tmux server, ``tmux -L``) against hostile targets
(tests/hostile_text_server.py on 127.0.0.1): no injected escape sequence reaches the terminal's byte
stream (recorded raw with ``pipe-pane``), the title and clipboard stay untouched, markup shows
literally, the app keeps polling; and SIGTERM / SIGHUP / SIGINT hand the terminal back restored."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.hostile_text_server import INJECTED, TITLE_MARK, HostileServer

REPO = Path(__file__).resolve().parents[1]
EXE = REPO / ".venv" / "bin" / "cmdare-tui"
SGR = re.compile(rb"\x1b\[[0-9;:]*m")
# the session's environment: COLUMNS/LINES (pytest sets them) would override the pane's real size
ENV = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR", "TMUX")}

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None or not EXE.exists(), reason="needs tmux and .venv"),
]


class PrivateTmux:
    """One session on a private tmux server; the app starts when :meth:`go` is called, after the
    pane's raw output is being recorded to ``raw``."""

    def __init__(self, command: str, raw: Path, pidfile: Path, width: int = 160, height: int = 45) -> None:
        self.sock = f"cmdare-sec-{uuid.uuid4().hex[:8]}"
        self.raw = raw
        script = f"read go; sh -c 'echo $$ > {pidfile}; exec {command}'; echo EXIT=$?; sleep 60"
        self.tmux(
            "-f", "/dev/null", "new-session", "-d", "-s", "t", "-x", str(width), "-y", str(height), script
        )
        self.tmux("set-option", "-g", "set-clipboard", "on")  # so that OSC 52 would fill a paste buffer
        self.tmux("pipe-pane", "-o", "-t", "t", f"cat >> {raw}")
        self.pidfile = pidfile

    def tmux(self, *args: str) -> str:
        r = subprocess.run(
            ["tmux", "-L", self.sock, *args], capture_output=True, text=True, check=False, env=ENV
        )
        return r.stdout

    def go(self) -> None:
        self.tmux("send-keys", "-t", "t", "Enter")

    def pid(self) -> int:
        end = time.monotonic() + 10
        while time.monotonic() < end:
            text = self.pidfile.read_text().strip() if self.pidfile.exists() else ""
            if text:
                return int(text)
            time.sleep(0.1)
        raise AssertionError("the app never started")

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "t")

    def screen_bytes(self) -> bytes:
        r = subprocess.run(
            ["tmux", "-L", self.sock, "capture-pane", "-p", "-e", "-t", "t"], capture_output=True
        )
        return r.stdout

    def fmt(self, spec: str) -> str:
        return self.tmux("display-message", "-p", "-t", "t", spec).strip()

    def wait_fmt(self, spec: str, want: str, timeout: float = 10.0) -> None:
        end = time.monotonic() + timeout
        while (got := self.fmt(spec)) != want:
            assert time.monotonic() < end, f"{spec} = {got!r}, not {want!r}"
            time.sleep(0.2)

    def keys(self, *keys: str) -> None:
        for k in keys:
            self.tmux("send-keys", "-t", "t", k)
            time.sleep(0.3)

    def wait_for(
        self, pred: Callable[[str], bool], timeout: float = 60.0
    ) -> str:  # a hang bound, not a speed target
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            s = self.screen()
            if pred(s):
                return s
            time.sleep(0.2)
        raise AssertionError("screen never matched:\n" + self.screen())

    def kill(self) -> None:
        self.tmux("kill-server")


def _polled(screen: str) -> bool:
    """The status line says the sources were polled (``polled HH:MM``: the first data is on screen)."""
    return re.search(r"polled \d\d:\d\d", screen) is not None


# the only string sequences Textual itself writes: OSC 22 (mouse pointer shape)
APP_OSC = re.compile(rb"\x1b\]22;[a-z-]*(?:\x07|\x1b\\)")


def assert_clean_stream(data: bytes) -> None:
    """No payload of the corpus, and no OSC/DCS/APC/PM/SOS or BEL but the app's own OSC 22."""
    for marker in INJECTED:
        assert marker not in data, f"{marker!r} reached the terminal"
    rest = APP_OSC.sub(b"", data)
    for opener in (b"\x1b]", b"\x1bP", b"\x1b_", b"\x1b^", b"\x1bX", b"\x07"):
        assert opener not in rest, f"{opener!r} reached the terminal"


def test_hostile_targets_reach_the_terminal_only_as_visible_text(tmp_path: Path):
    with HostileServer() as srv:
        targets = " ".join(f"--target {srv.target_url(i)}" for i in range(6))
        cmd = (f"{EXE} --read-only --refresh 0.5 {targets} --target {srv.garbage_url()} "
               f"--prometheus {srv.prometheus_error_url()}")  # fmt: skip
        t = PrivateTmux(cmd, tmp_path / "pty.raw", tmp_path / "pid")
        try:
            t.go()
            s = t.wait_for(
                lambda s: (
                    _polled(s)
                    and "oops[/]" in s
                    and "6/6 up" in s
                    and re.search(r"\d+/\d+ targets answered", s)
                )
            )
            answered = re.findall(r"\d+/\d+ targets answered", s)[0]  # every target that can answer, t5 too
            assert "␛]52;c" in s and "t2-␛]0;PW" in s and "[lin" in s  # shown as text, never obeyed
            srv.down.add(5)  # task t5 ("ding" and two BELs) stops answering: an alert names it
            t.keys("2")  # the Job pane's summary, the help screen, an alert's explain window
            t.keys("?")
            t.wait_for(lambda s: "cmdare-tui — keys" in s)
            t.keys("Escape")  # wait until it is handled: ESC and a quick next key read as alt+key
            t.wait_for(
                lambda s: "cmdare-tui — keys" not in s and re.search(r"[1-9]\d* active", s) is not None
            )
            for _ in range(5):  # under load "4" may not have moved the focus before Enter: try again
                t.keys("4", "Enter")
                if any("Alert: " in t.screen() or time.sleep(0.5) for _ in range(16)):
                    break
            t.wait_for(lambda s: "Alert: " in s)  # the explain window
            t.keys("Escape")
            t.wait_for(lambda s: "Alert: " not in s)
            t.wait_for(lambda s: answered not in s)  # t5 silent
            srv.down.discard(5)  # t5 answers again: the app, alive and still polling, says so
            t.wait_for(lambda s: answered in s)
            assert_clean_stream(t.raw.read_bytes())
            cells = SGR.sub(b"", t.screen_bytes())
            assert b"\x1b" not in cells and b"\x07" not in cells
            assert TITLE_MARK not in t.fmt("#{pane_title}")
            assert t.tmux("list-buffers").strip() == ""  # OSC 52 wrote no clipboard
            t.keys("q")
            t.wait_for(lambda s: "EXIT=0" in s, timeout=10)
        finally:
            t.kill()


def test_snapshot_text_and_json_carry_no_escape(tmp_path: Path):
    with HostileServer() as srv:
        args = [str(EXE), "snapshot", "--samples", "2", "--interval", "0.2", "--read-only",
                "--target", srv.target_url(0), "--target", srv.target_url(7), "--target", srv.garbage_url(),
                "--prometheus", srv.prometheus_error_url()]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
        plain = subprocess.run(args, capture_output=True, env=env, timeout=60)
        coloured = subprocess.run(args, capture_output=True, env={**env, "FORCE_COLOR": "1", "TERM": "xterm"},
                                  timeout=60)  # fmt: skip
        js = subprocess.run([*args, "--json"], capture_output=True, env=env, timeout=60)
    for r in (plain, coloured, js):
        assert r.returncode == 0, r.stderr[-2000:]
        assert b"Traceback" not in r.stderr
        assert_clean_stream(r.stdout + r.stderr)
    assert b"\x1b" not in plain.stdout + plain.stderr + js.stdout
    assert b"\x1b" not in SGR.sub(b"", coloured.stdout)
    text = plain.stdout.decode()
    assert "oops[/]" in text and "[link=file:///etc/passwd]x[/link]" in text and "␛]52;c;" in text
    assert "\u241b]0;" in js.stdout.decode("unicode_escape")


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 0), (signal.SIGHUP, 0), (signal.SIGINT, 130)])
def test_quit_signals_restore_the_terminal(tmp_path: Path, sig: signal.Signals, code: int):
    with HostileServer() as srv:
        t = PrivateTmux(f"{EXE} --read-only --refresh 0.5 --target {srv.target_url(2)}", tmp_path / "raw",
                        tmp_path / "pid", width=100, height=30)  # fmt: skip
        try:
            t.go()
            t.wait_for(_polled)
            t.wait_fmt("#{alternate_on} #{mouse_any_flag} #{cursor_flag}", "1 1 0")  # the app's modes
            os.kill(t.pid(), sig)
            t.wait_for(lambda s: f"EXIT={code}" in s, timeout=10)
            flags = "#{alternate_on} #{mouse_any_flag} #{mouse_button_flag} #{mouse_standard_flag} #{mouse_sgr_flag}"
            assert t.fmt(flags) == "0 0 0 0 0"  # alternate screen left, mouse tracking off
            assert t.fmt("#{cursor_flag} #{pane_dead}") == "1 0"  # cursor shown; the shell goes on
            assert "Traceback" not in t.screen()
        finally:
            t.kill()


def test_a_lost_terminal_ends_the_app(tmp_path: Path):
    """An SSH disconnect: the terminal goes away (tmux server killed: the pty closes, SIGHUP)."""
    with HostileServer() as srv:
        t = PrivateTmux(f"{EXE} --read-only --refresh 0.5 --target {srv.target_url(3)}", tmp_path / "raw",
                        tmp_path / "pid", width=100, height=30)  # fmt: skip
        t.go()
        t.wait_for(_polled)
        pid = t.pid()
        t.kill()
        end = time.monotonic() + 10
        while Path(f"/proc/{pid}").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z":
            assert time.monotonic() < end, "the app outlived its terminal"
            time.sleep(0.1)
