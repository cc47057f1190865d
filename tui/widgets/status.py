"""The status line (the app's top line): badges first (they must survive 80 columns), then the
last problem, when the sources were last polled and every source's message. Built as rich ``Text``:
source messages quote remote text, which is never parsed as markup.

Nothing on it changes with a refresh that brings nothing new (issue 34): the poll's clock reads hours and
minutes (it ticks once a minute), and a count of polls is shown only while recording (the recording grows
with each poll). An ever-moving ``poll #N`` repainted the line, and wrote it to the terminal, at every
refresh of a job whose numbers all stood still."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text

from cmdare.collectors.untrusted import clean_text
from cmdare.tui.format import clock  # hours and minutes: the line changes once a minute, not every poll

BADGE = "reverse bold"
REC_NAME_WIDTH = 28  # the top line keeps room for the poll count and the sources at 80 columns


def status_line(*, read_only: bool, demo: bool, replay: Any | None, problem: str | None,
                state: Any | None, refresh: float, recording: Path | None = None,
                paused: bool = False) -> Text:  # fmt: skip
    """The line for these facts (``replay``: a ReplaySource or None; ``state``: a MonitorState; ``recording``:
    the file ``--record`` writes to, while it does; ``paused``: live polling paused)."""
    line = Text()
    if recording is not None:
        polls = f", {state.cycles:,} poll{'s' if state.cycles != 1 else ''}" if state is not None else ""
        line.append(" ● REC ", "reverse bold red").append(f" {recording_name(recording)}{polls} · ")
    if paused:
        line.append(" PAUSED ", "reverse bold yellow").append(" ")
    if read_only:
        line.append(" READ-ONLY ", BADGE).append(" ")
    if demo:
        line.append(" DEMO ", BADGE).append(" ")
    if replay is not None:
        line.append(" REPLAY ", BADGE).append(f" {replay_note(replay)} · ")
    if problem:
        line.append(f"⚠ {problem}", "bold red").append(" · ")
    if state is not None:
        every = "paused (space resumes)" if paused else f"every {refresh:g}s"
        polled = "" if replay is not None else f"{every}, polled {clock(state.t)} · "
        line.append(polled + " · ".join(s.message for s in state.sources))
    else:
        line.append(f"polling every {refresh:g}s…")
    if demo:
        line.append(" simulated cluster on loopback, calibrated from CM-DARE measurements")
    return line


def recording_name(path: Path, width: int = REC_NAME_WIDTH) -> str:
    """The recording's file name as the top line shows it: cleaned, and cut in the middle past ``width``
    characters (its end, the distinguishing part of ``run-2026-12-03.sqlite``, stays)."""
    name = clean_text(path.name, 1000)
    if len(name) <= width:
        return name
    tail = (width - 1) * 2 // 3
    return name[: width - 1 - tail] + "…" + name[-tail:]


def replay_note(replay: Any) -> str:
    """``4/12 polls ×2``, ``4/12 polls paused`` or ``12/12 polls, recording ended``."""
    done, total = replay.position
    if getattr(replay, "ended", False):
        return f"{done}/{total} polls, recording ended"
    return f"{done}/{total} polls " + ("paused" if replay.paused else f"×{replay.speed:g}")
