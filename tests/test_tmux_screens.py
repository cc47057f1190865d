"""Issue 18 (screens) in a real terminal: tmux at 80x24 and 120x40 (private server) running the real program. The
footer's keys are whole words left of the palette's key; help starts with the focused pane's keys; a
recording of the demo (made by ``snapshot --record``) replays with space/+/- on the footer and ends with
a clean header and a poll counter that stops."""

from __future__ import annotations

import re
import subprocess
import time

import pytest

from tests.test_tmux_readonly import EXE, REPO, Tmux, pytestmark  # noqa: F401  (skip without tmux)

PALETTE = "▏^p palette"


def footer_words(screen: str) -> str:
    """The footer line left of the palette's key; asserts the palette's key is whole and on screen."""
    last = screen.rstrip("\n").splitlines()[-1]
    assert PALETTE in last, last
    keys = last.split("▏")[0]
    assert keys.endswith(" "), f"a key runs under the palette: {last!r}"
    return keys


def cursor_task(t: Tmux) -> str:
    """The task on the Cluster table's cursor row: the one row whose first background colour no other has."""
    out = subprocess.run(
        [*t.server, "capture-pane", "-p", "-e", "-t", t.name], capture_output=True, text=True
    )
    rows: dict[str, str] = {}
    for line in out.stdout.splitlines():
        plain = re.sub(r"\x1b\[[0-9;]*m", "", line)
        name = re.search(r" ((?:worker|ps|stage)-\d+) ", plain)
        backgrounds = re.findall(r"48;5;\d+|48;2;\d+;\d+;\d+", line.split(name.group(1))[0]) if name else []
        if name and backgrounds:
            rows.setdefault(name.group(1), backgrounds[-1])
    alone = [task for task, bg in rows.items() if list(rows.values()).count(bg) == 1]
    assert len(alone) == 1, rows
    return alone[0]


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
def test_footer_and_help(size):
    t = Tmux(f"{EXE} --demo --refresh 1", *size)
    try:
        s = t.wait_for(lambda s: "worker-0" in s and "polled " in s and PALETTE in s)
        assert re.search(r"/ +Filter +s +Sort .*q +Quit +\? +Help", footer_words(s))
        # keys that start with ESC, as tmux sends them, are one key each after the app's 10 ms ESCDELAY
        # (tui/cli.py): ↓ moves the cursor; alt+j (ESC j) is not `esc` then `j` (which would move it)
        assert cursor_task(t) == "worker-0"
        t.keys("Down")
        assert cursor_task(t) == "ps-0"
        t.keys("M-j", "M-Down")
        assert cursor_task(t) == "ps-0"
        t.keys("Up")
        assert cursor_task(t) == "worker-0"
        t.keys("3")
        s = t.wait_for(lambda s: "Shape" in s and PALETTE in s)
        assert re.search(r"q +Quit +\? +Help", footer_words(s))
        t.keys("?")
        s = t.wait_for(lambda s: "cmdare-tui — keys" in s)
        left = (size[0] - 78) // 2  # the help box's columns (78 wide, centred): the panes show beside it
        lines = [line[left : left + 78] for line in s.splitlines()]
        own = next(i for i, line in enumerate(lines) if "Planner pane" in line)
        everywhere = next(i for i, line in enumerate(lines) if "Everywhere" in line)
        assert own < everywhere and "enter" in lines[own + 1] and "Explain the row" in lines[own + 1]
        assert not any("…" in line for line in lines[own : everywhere + 8]), s  # no description cut
        t.keys("Escape")
        t.wait_for(lambda s: "cmdare-tui — keys" not in s)
    finally:
        t.kill()


def test_replay_footer_and_end_at_80x24(tmp_path):
    rec = tmp_path / "demo.sqlite"
    made = subprocess.run([str(EXE), "snapshot", "--demo", "--record", str(rec), "--samples", "8",
                           "--interval", "0.5"], capture_output=True, cwd=REPO, timeout=120)  # fmt: skip
    assert made.returncode == 0, made.stderr
    t = Tmux(f"{EXE} --replay {rec} --replay-speed 0.5")
    try:
        s = t.wait_for(lambda s: "polls ×0.5" in s and "+ Faster" in s)
        keys = footer_words(s)
        assert "space Pause" in keys and "+ Faster" in keys and "- Slower" in keys, keys
        t.keys("plus", "plus", "plus")  # ×4
        s = t.wait_for(lambda s: "8/8 polls, recording ended" in s, timeout=60)
        header = s.splitlines()[0]
        assert "ReplayFinished" not in header and "0/0" not in header and "polled" not in header
        assert "targets answered" in header  # the last recorded status stays
        time.sleep(3)  # several recorded intervals: the header does not move
        assert t.screen().splitlines()[0] == header
        keys = footer_words(t.wait_for(lambda s: PALETTE in s.rstrip().splitlines()[-1]))
        assert "Faster" not in keys and "Pause" not in keys  # nothing left to play
    finally:
        t.kill()


def styled_screen(t: Tmux) -> str:
    """The screen with its styles, once two captures 0.5 s apart agree (a hang bound, not a speed target)."""
    capture = [*t.server, "capture-pane", "-p", "-e", "-t", t.name]
    last = ""
    end = time.monotonic() + 60
    while time.monotonic() < end:
        now = subprocess.run(capture, capture_output=True, text=True).stdout
        if now == last:
            return now
        last = now
        time.sleep(0.5)
    raise AssertionError("the screen never settled:\n" + t.screen())


def test_what_the_keys_leave_on_the_terminal_is_what_a_whole_frame_draws():
    """The app's frames write a style's code once per run of it and cut runs of text to the changed cells
    (tui/compact_driver.py, tui/pane_screen.py; issue 28): tmux, a real terminal, shows after a series of keys
    (cursor, sort, help opened and closed, panes switched) what it shows once the app has drawn every cell
    again (resized and back), polling paused so that nothing else changes."""
    t = Tmux(f"{EXE} --demo", 120, 40)
    try:
        t.wait_for(lambda s: "worker-1" in s and "polled " in s and PALETTE in s)
        t.keys("space")
        t.wait_for(lambda s: "paused" in s.lower())
        t.keys("j", "j", "k", "S", "?", "Escape", "2", "1", "?", "j", "Escape", "Down", "s")
        after_keys = styled_screen(t)
        # drawn again at 100x30 (one pane at a time: the pane tabs show), then at 120x40 (2x2: they go)
        for width, height, tabs in ((100, 30, True), (120, 40, False)):
            subprocess.run([*t.server, "resize-window", "-t", t.name, "-x", str(width), "-y", str(height)],
                           check=True)  # fmt: skip
            t.wait_for(lambda s, tabs=tabs: ("tab/1-4" in s) == tabs and PALETTE in s.splitlines()[-1])
        redrawn = styled_screen(t)
        assert "keys (esc closes)" not in redrawn and "paused" in t.screen().lower()
        assert redrawn.splitlines() == after_keys.splitlines()
    finally:
        t.kill()
