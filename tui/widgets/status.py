"""The status line (the app's top line): badges first (they must survive 80 columns), then the
last problem, the poll count and every source's message. Built as rich ``Text``: source messages
quote remote text, which is never parsed as markup."""

from __future__ import annotations

from typing import Any

from rich.text import Text

BADGE = "reverse bold"


def status_line(*, read_only: bool, demo: bool, replay: Any | None, problem: str | None,
                state: Any | None, refresh: float) -> Text:  # fmt: skip
    """The line for these facts (``replay``: a ReplaySource or None; ``state``: a MonitorState)."""
    line = Text()
    if read_only:
        line.append(" READ-ONLY ", BADGE).append(" ")
    if demo:
        line.append(" DEMO ", BADGE).append(" ")
    if replay is not None:
        done, total = replay.position
        how = "paused" if replay.paused else f"×{replay.speed:g}"
        line.append(" REPLAY ", BADGE).append(f" {done}/{total} polls {how} ")
    if problem:
        line.append(f"⚠ {problem}", "bold red").append(" · ")
    if state is not None:
        line.append(
            f"poll #{state.cycles} every {refresh:g}s · " + " · ".join(s.message for s in state.sources)
        )
    else:
        line.append(f"polling every {refresh:g}s…")
    if demo:
        line.append(" simulated cluster on loopback, calibrated from CM-DARE measurements")
    return line
