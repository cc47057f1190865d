"""The real program in a real terminal: tmux at 80×24 running ``cmdare-tui --demo --read-only``;
keys are sent with ``send-keys`` and the screen read with ``capture-pane``."""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXE = REPO / ".venv" / "bin" / "cmdare-tui"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None or not EXE.exists(), reason="needs tmux and .venv"),
]


class Tmux:
    def __init__(self, command: str, width: int = 80, height: int = 24) -> None:
        self.name = f"cmdare-test-{uuid.uuid4().hex[:8]}"
        self.server = [
            "tmux",
            "-L",
            self.name,
            "-f",
            "/dev/null",
        ]  # a private server: the default one is shared
        # (without COLUMNS and LINES: under pytest the tmux server passed COLUMNS=80 LINES=24 on to the app,
        # which then drew at 80x24 whatever the pane's size)
        subprocess.run([*self.server, "new-session", "-d", "-s", self.name, "-x", str(width), "-y", str(height),
                        f"env -u COLUMNS -u LINES {command}; echo EXIT=$?; sleep 30"], check=True)  # fmt: skip

    def screen(self) -> str:
        r = subprocess.run(
            [*self.server, "capture-pane", "-p", "-t", self.name], capture_output=True, text=True
        )
        return r.stdout

    def keys(self, *keys: str) -> None:
        for k in keys:
            subprocess.run([*self.server, "send-keys", "-t", self.name, k], check=True)
            time.sleep(0.4)

    def wait_for(
        self, pred: Callable[[str], bool], timeout: float = 60.0
    ) -> str:  # a hang bound, not a speed target
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            s = self.screen()
            if pred(s):
                return s
            time.sleep(0.25)
        raise AssertionError("screen never matched:\n" + self.screen())

    def kill(self) -> None:
        subprocess.run([*self.server, "kill-server"], capture_output=True)


def test_demo_read_only_at_80x24():
    t = Tmux(f"{EXE} --demo --read-only --refresh 1")
    try:
        s = t.wait_for(lambda s: "worker-0" in s and "polled " in s)
        lines = s.splitlines()
        assert lines[0].lstrip().startswith("READ-ONLY") and "DEMO" in lines[0]
        assert "1 Cluster" in lines[1] and "Steps/s" in s and "● up" in s
        assert all(len(line) <= 80 for line in lines)
        assert "Export" not in s  # write actions are absent from the footer
        t.keys("2")
        t.wait_for(lambda s: "Global step" in s and "ETA" in s and "measured" in s)
        t.keys("p")
        t.wait_for(lambda s: "per worker" in s)
        t.keys("3")
        s = t.wait_for(lambda s: "▶ 8×P100·1PS" in s and "Δtime" in s, timeout=40)  # the ranked view
        t.keys("Enter")
        t.wait_for(lambda s: "Why this shape" in s and "Switching" in s)
        # at 80x24 the explanation scrolls: its time split and bottleneck are below the switching terms
        t.keys(*["Down"] * 12)
        t.wait_for(lambda s: "Why this shape" in s and ("bottleneck:" in s or "speed limited by" in s))
        t.keys("Escape")
        t.wait_for(lambda s: "Why this shape" not in s)
        time.sleep(0.5)  # a key right after Escape may be read as alt+key
        t.keys("1", "/")
        t.wait_for(lambda s: "filter rows" in s)
        t.keys("ps-0", "Enter")
        s = t.wait_for(lambda s: "ps-0" in s and "worker-1" not in s)
        t.keys("?")
        s = t.wait_for(lambda s: "cmdare-tui — keys" in s)
        assert "READ-ONLY: nothing is written" in s and "Export" not in s
        t.keys("Escape")
        t.wait_for(lambda s: "keys" not in s.splitlines()[3])
        t.keys("q")
        t.wait_for(lambda s: "EXIT=0" in s, timeout=10)
    finally:
        t.kill()
