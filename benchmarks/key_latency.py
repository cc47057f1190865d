"""Key latency: the time from a key sent to the terminal to the screen that answers it, for
``cmdare-tui --demo`` driven in tmux, against the same harness's echo latency (a program that
only echoes each key) and one other Textual app (toolong, installed from PyPI into a temporary
venv by this benchmark; ``--no-other`` skips it).

    python benchmarks/key_latency.py [--runs 20] [--no-other] [--app COMMAND]

``--app`` measures another build the same way (e.g. ``"env PYTHONPATH=/tmp/old cmdare-tui"`` for a tree
of an older commit), to compare before and after in the same hour.

How it measures: each program runs in its own tmux server (a private socket) at a fixed size; one
tmux control-mode client sends the keys and reads the pane's output as tmux reads it from the
program (``%output`` notifications, stamped on arrival). After each burst of output the harness
asks tmux for the screen (``capture-pane -e``, through the same client) and checks whether it
shows the key's effect (the help window open, the Job pane shown, the cursor on the next row…);
the latency is the arrival time of the last output before that screen, minus the time the key
was sent. The screen capture itself is never counted. A check looks for the end of the key's frame (the
help: its title, its bottom border, and the key line below it), not its first line: a frame reaches
tmux in pieces, and a check met by the first piece timed the first change, not the answer (builds
before 2026-12-03 18:55 UTC checked the help's title alone). Keys are sent at random moments relative to
the demo's polls (every 2 s, its default), so a key that lands during a refresh counts as it is.

The goal (issue 28): every key answered in <= 50 ms median and <= 100 ms p90 on this machine
under the demo. The machine's load average is printed: on a shared machine the absolute figures
move with it; the ratio to the echo baseline much less.
"""

from __future__ import annotations

import argparse
import os
import queue
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

CMDARE = Path(sys.executable).with_name("cmdare-tui")
GOAL_MEDIAN_MS, GOAL_P90_MS = 50.0, 100.0
ANSWER_TIMEOUT_S = 5.0  # a key not answered by then counts as this long (a hang bound)
SGR = re.compile(r"\x1b\[[0-9;]*m")
ECHO = r"""
import os, sys, tty
tty.setraw(0)
os.write(1, b"echo ready")
n = 0
while True:
    c = os.read(0, 64)
    if not c or c == b"\x03":
        break
    n += 1
    os.write(1, f"\r\x1b[2Kkey {n} {c!r}".encode())
"""

Screen = list[str]  # lines with their SGR escapes (capture-pane -e)
Check = Callable[[Screen], bool]


def plain(screen: Screen) -> str:
    """The screen's text without escapes."""
    return "\n".join(SGR.sub("", line) for line in screen)


class Control:
    """A tmux server of its own running ``command`` at ``size``, and a control-mode client to it."""

    def __init__(self, command: str, size: tuple[int, int]) -> None:
        self.name = f"keylat-{uuid.uuid4().hex[:8]}"
        self.base = ["tmux", "-L", self.name, "-f", "/dev/null"]
        subprocess.run([*self.base, "new-session", "-d", "-s", "s", "-x", str(size[0]), "-y", str(size[1]),
                        command], check=True)  # fmt: skip
        self.proc = subprocess.Popen([*self.base, "-C", "attach-session", "-t", "s"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, bufsize=0)  # fmt: skip
        self.lines: queue.Queue[tuple[float, bytes]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.last_output = 0.0  # when the last %output arrived (of those read so far)
        self.unanswered = False  # whether a key went unanswered (its screen is printed once)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put((time.perf_counter(), line))

    def send(self, command: str) -> float:
        """Write one tmux command; the time it was written."""
        assert self.proc.stdin is not None
        t = time.perf_counter()
        self.proc.stdin.write(command.encode() + b"\n")
        return t

    def next_output(self, timeout: float) -> bool:
        """Wait for output (notifications read on the way); False when none came in ``timeout``."""
        end = time.perf_counter() + timeout
        while (left := end - time.perf_counter()) > 0:
            try:
                t, line = self.lines.get(timeout=left)
            except queue.Empty:
                return False
            if line.startswith(b"%output"):
                self.last_output = t
                self._drain()
                return True
        return False

    def _drain(self) -> None:
        """Read the notifications already here."""
        while True:
            try:
                t, line = self.lines.get_nowait()
            except queue.Empty:
                return
            if line.startswith(b"%output"):
                self.last_output = t

    def screen(self) -> tuple[Screen, float]:
        """The pane's screen and the arrival time of the last output before it."""
        self.send("capture-pane -p -e -t s")
        out: Screen = []
        inside, before = False, self.last_output
        while True:
            t, line = self.lines.get(timeout=ANSWER_TIMEOUT_S)
            if line.startswith(b"%output") and not inside:
                before = self.last_output = t
            elif line.startswith(b"%begin"):
                inside = True
            elif line.startswith((b"%end", b"%error")) and inside:
                return out, before
            elif inside:
                out.append(line.decode("utf-8", "replace").rstrip("\n"))

    def wait_screen(self, check: Check, timeout: float = 60.0) -> Screen:
        """Wait until the screen passes ``check`` (a hang bound, not a measurement)."""
        end = time.perf_counter() + timeout
        while time.perf_counter() < end:
            screen, _ = self.screen()
            if check(screen):
                return screen
            time.sleep(0.2)
        raise RuntimeError("the screen never showed what was waited for:\n" + plain(self.screen()[0]))

    def key(self, key: str, check: Check) -> float:
        """Send ``key``; seconds until the output after which the screen passes ``check``."""
        self._drain()
        sent = self.send(f"send-keys -t s {key}")
        end = sent + ANSWER_TIMEOUT_S
        while time.perf_counter() < end:
            if not self.next_output(end - time.perf_counter()):
                break
            screen, at = self.screen()
            if check(screen):
                return max(at - sent, 0.0)
        if not self.unanswered:  # the first key never answered: its screen, to see why
            self.unanswered = True
            print(f"key {key!r} not answered in {ANSWER_TIMEOUT_S:g} s; the screen:\n{plain(self.screen()[0])}",
                  file=sys.stderr)  # fmt: skip
        return ANSWER_TIMEOUT_S

    def close(self) -> None:
        self.proc.kill()
        subprocess.run([*self.base, "kill-server"], capture_output=True)


@dataclass
class Scenario:
    """Keys pressed in turn, each with what its answer looks like on screen."""

    name: str
    keys: list[tuple[str, Check]]
    samples: list[float] = field(default_factory=list)


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


def run_scenarios(ctl: Control, scenarios: list[Scenario], runs: int, settle: Callable[[], None]) -> None:
    """Each scenario's keys ``runs`` times in all, at random moments (0.1-0.5 s apart)."""
    for sc in scenarios:
        for i in range(runs):
            key, check = sc.keys[i % len(sc.keys)]
            time.sleep(random.uniform(0.1, 0.5))
            sc.samples.append(ctl.key(key, check))
        settle()


def text_check(word: str, present: bool = True) -> Check:
    """The screen shows ``word`` (or no longer does)."""
    return lambda s: (word in plain(s)) == present


HELP_BOX_WIDTH = 78  # tui/help_screen.py's box (border included), centred


def help_drawn(screen: Screen, width: int, shown: bool) -> bool:
    """The help drawn whole (``shown``: its title, its bottom border and its key line ``esc Close help``) or
    gone whole (no row holds its title or its side borders, the app's key line is back): the last rows of
    the frame, not the first change of it (a frame reaches tmux in pieces)."""
    lines = plain(screen).splitlines()
    left = (width - HELP_BOX_WIDTH) // 2
    right = left + HELP_BOX_WIDTH - 1
    edges = [(ln[left], ln[right]) for ln in lines if len(ln) > right]
    key_line = lines[-1] if lines else ""
    if shown:
        return "keys (esc closes)" in "\n".join(lines) and ("╰", "╯") in edges and "Close help" in key_line
    boxed = any(a in "│╭╰" and b in "│╮╯" for a, b in edges)
    return "keys (esc closes)" not in "\n".join(lines) and not boxed and " Filter " in key_line


def polled(screen: Screen) -> bool:
    """The status line shows data: ``polled HH:MM`` (builds before 2026-12-03 said ``poll #N``)."""
    text = plain(screen)
    return "polled " in text or "poll #" in text


def cursor_on(name: str) -> Check:
    """The row naming task ``name`` is drawn in the cursor's colours (the line's first background)."""

    def check(screen: Screen) -> bool:
        line = next((ln for ln in screen if f" {name} " in SGR.sub("", ln)), "")
        return CURSOR_BG[0] != "" and CURSOR_BG[0] in line.split(name)[0]

    return check


CURSOR_BG = [""]  # the cursor row's background escape, learnt from the first screen


def learn_cursor(screen: Screen) -> None:
    """Find the background the cursor row has and the next row lacks (worker-0 vs ps-0)."""
    first = next(ln for ln in screen if " worker-0 " in SGR.sub("", ln))
    second = next(ln for ln in screen if " ps-0 " in SGR.sub("", ln))
    own = set(re.findall(r"48;5;\d+|48;2;\d+;\d+;\d+", first.split("worker-0")[0]))
    other = set(re.findall(r"48;5;\d+|48;2;\d+;\d+;\d+", second.split("ps-0")[0]))
    CURSOR_BG[0] = sorted(own - other)[0] if own - other else ""


def measure_cmdare(runs: int, app: str) -> list[Scenario]:
    """The demo at 120x40 (cursor, sort, help) and at 80x24 (pane switch: one pane at a time)."""
    out = []
    ctl = Control(f"{app} --demo", (120, 40))
    try:
        screen = ctl.wait_screen(lambda s: polled(s) and "worker-1" in plain(s))
        time.sleep(2.5)  # one more poll (every 2 s): the rows and the planner's first answers are in
        screen = ctl.screen()[0]
        learn_cursor(screen)
        settle = lambda: ctl.wait_screen(polled)  # noqa: E731
        cur = Scenario("cursor down/up (j, k)", [("j", cursor_on("ps-0")), ("k", cursor_on("worker-0"))])
        opened, close = Scenario("help open (?)", []), Scenario("help close (esc)", [])
        sort = Scenario("sort reversed (S)", [("S", text_check("Status ▼")), ("S", text_check("Status ▲"))])
        run_scenarios(ctl, [cur], runs, settle)
        for _ in range(runs):  # help opens and closes in turn
            time.sleep(random.uniform(0.1, 0.5))
            opened.samples.append(ctl.key("?", lambda s: help_drawn(s, 120, shown=True)))
            time.sleep(random.uniform(0.1, 0.5))
            close.samples.append(ctl.key("Escape", lambda s: help_drawn(s, 120, shown=False)))
        ctl.key("s", text_check("Status ▲"))  # sorted by the first column; then S reverses it
        run_scenarios(ctl, [sort], runs, settle)
        out += [cur, opened, close, sort]
    finally:
        ctl.close()
    ctl = Control(f"{app} --demo", (80, 24))
    try:
        ctl.wait_screen(lambda s: polled(s) and "worker-1" in plain(s))
        switch = Scenario("pane switch (2, 1) at 80x24", [("2", text_check("Global step")),
                                                           ("1", text_check(" Status "))])  # fmt: skip
        run_scenarios(ctl, [switch], runs, lambda: None)
        out.append(switch)
    finally:
        ctl.close()
    return out


def measure_echo(runs: int) -> Scenario:
    """The harness's own floor: a program that echoes each key."""
    ctl = Control(f"{sys.executable} -c '{ECHO}'", (80, 24))
    try:
        ctl.wait_screen(text_check("echo ready"))  # raw mode on: each key is read alone
        sc = Scenario("echo (baseline)", [])
        for i in range(runs):
            time.sleep(random.uniform(0.1, 0.3))
            sc.samples.append(ctl.key("j", text_check(f"key {i + 1} ")))
        return sc
    finally:
        ctl.close()


def toolong_venv() -> Path | None:
    """toolong's ``tl`` in a temporary venv (made once, kept in the temp directory), or None."""
    venv = Path(tempfile.gettempdir()) / "cmdare-bench-toolong"
    tl = venv / "bin" / "tl"
    if tl.exists():
        return tl
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    made = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "toolong"], capture_output=True)
    if made.returncode != 0:
        print(f"toolong not installed: {made.stderr.decode(errors='replace').strip()[:200]}")
        return None
    return tl


def measure_toolong(runs: int) -> list[Scenario]:
    """toolong on a 5,000-line log: the cursor moves up and down; its help (f1) opens and closes
    (a screen over the whole terminal, as cmdare-tui's help)."""
    tl = toolong_venv()
    if tl is None:
        return []
    log = Path(tempfile.mkdtemp()) / "app.log"
    log.write_text("".join(f"2026-12-03 10:00:{i % 60:02d} INFO line {i} of the log\n" for i in range(5000)))
    ctl = Control(f"{tl} {log}", (120, 40))
    try:
        ctl.wait_screen(lambda s: "of the log" in plain(s))  # it opens at the end (tailing)
        sc = Scenario("toolong cursor down/up", [])
        for _ in range(5):  # away from the end it opens at: a key down then moves something
            ctl.key("Up", lambda s: True)
        time.sleep(0.5)
        last = ctl.screen()[0]
        for i in range(runs):
            time.sleep(random.uniform(0.1, 0.5))
            before = last
            sc.samples.append(ctl.key("Down" if i % 2 == 0 else "Up", lambda s, b=before: s != b))
            last = ctl.screen()[0]
        opened, closed = Scenario("toolong help open (f1)", []), Scenario("toolong help close (esc)", [])
        for _ in range(runs):
            time.sleep(random.uniform(0.1, 0.5))
            opened.samples.append(ctl.key("F1", lambda s, b=last: s != b))
            time.sleep(random.uniform(0.1, 0.5))
            closed.samples.append(ctl.key("Escape", lambda s, b=last: s == b))
        return [sc, opened, closed]
    finally:
        ctl.close()
        shutil.rmtree(log.parent, ignore_errors=True)


def report(scenarios: list[Scenario], base: Scenario) -> None:
    b = statistics.median(base.samples) * 1000
    print(f"{'':34} {'median':>8} {'p90':>8} {'max':>8} {'× echo':>7}")
    for sc in [base, *scenarios]:
        ms = [s * 1000 for s in sc.samples]
        med, p90 = statistics.median(ms), percentile(ms, 0.9)
        goal = "" if sc is base or "toolong" in sc.name else (
            "  goal met" if med <= GOAL_MEDIAN_MS and p90 <= GOAL_P90_MS else "  goal missed")  # fmt: skip
        print(f"{sc.name:34} {med:7.1f}ms {p90:7.1f}ms {max(ms):7.1f}ms {med / b:6.1f}×{goal}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=20, help="keys per scenario (default 20)")
    p.add_argument("--no-other", action="store_true", help="skip the other Textual app (toolong)")
    p.add_argument(
        "--app", default=str(CMDARE), help="the command that starts cmdare-tui (default: this venv's)"
    )
    args = p.parse_args(argv)
    if shutil.which("tmux") is None:
        print("tmux is needed", file=sys.stderr)
        return 2
    load = os.getloadavg()
    base = measure_echo(args.runs)
    scenarios = measure_cmdare(args.runs, args.app)
    scenarios += [] if args.no_other else measure_toolong(args.runs)
    print(f"key latency, {args.runs} keys per row; load average {load[0]:.2f} before, "
          f"{os.getloadavg()[0]:.2f} after ({os.cpu_count()} cores); goal ≤ {GOAL_MEDIAN_MS:.0f} ms median, "
          f"≤ {GOAL_P90_MS:.0f} ms p90; app: {args.app}")  # fmt: skip
    report(scenarios, base)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
