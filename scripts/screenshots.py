"""Drive the real app on the demo cluster with Textual's Pilot and write SVG screenshots.

    .venv/bin/python scripts/screenshots.py [--out screenshots]

Writes overview-120x40.svg, overview-80x24.svg, job-80x24.svg, planner-120x40.svg,
planner-explain-120x40.svg, alerts-80x24.svg, help-80x24.svg, read-only-80x24.svg. The demo runs
with a faster clock and an early revocation (DemoCluster's own knobs) so one screen shows it."""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Sequence
from pathlib import Path

from cmdare.collectors import writes
from cmdare.demo.cluster import DemoCluster
from cmdare.tui.app import CmdareApp
from cmdare.tui.options import SessionOptions
from cmdare.tui.session import MonitorSession

REPO = Path(__file__).resolve().parents[1]
SHOTS: list[tuple[str, tuple[int, int], Sequence[str], bool]] = [
    ("overview-120x40", (120, 40), (), False),
    ("overview-80x24", (80, 24), (), False),
    ("job-80x24", (80, 24), ("2",), False),
    ("planner-120x40", (120, 40), ("3",), False),
    ("planner-explain-120x40", (120, 40), ("3", "j", "enter"), False),
    ("alerts-80x24", (80, 24), ("4",), False),
    ("help-80x24", (80, 24), ("question_mark",), False),
    ("read-only-80x24", (80, 24), (), True),
]


def demo_app(read_only: bool) -> CmdareApp:
    # the options a newcomer's `cmdare-tui` starts with (default refresh, no budget): only the demo's clock is faster
    opts = SessionOptions(demo=True, read_only=read_only)
    # time_factor 30: 30 simulated seconds per second; the first revocation after 2 s
    session = MonitorSession(opts, demo_factory=lambda: DemoCluster(first_revocation_s=2.0, time_factor=30.0))
    return CmdareApp(opts, session)


async def shoot(name: str, size: tuple[int, int], keys: Sequence[str], read_only: bool, out: Path) -> Path:
    app = demo_app(read_only)
    async with app.run_test(size=size) as pilot:
        loop = asyncio.get_running_loop()
        end = loop.time() + 60
        while loop.time() < end and not (app.state and app.state.cycles >= 6 and app.state.alerts):
            await pilot.pause(0.2)
        await pilot.press(*keys)
        await pilot.pause(0.3)
        svg = app.export_screenshot(title=f"cmdare-tui — {name}")
        await pilot.press("escape") if keys and keys[-1] in ("enter", "question_mark") else None
        await app.action_quit()
    return writes.write_text(out / f"{name}.svg", svg)


async def main(out: Path) -> None:
    for name, size, keys, ro in SHOTS:
        path = await shoot(name, size, keys, ro, out)
        print(f"wrote {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "screenshots")
    args = ap.parse_args()
    os.environ.pop("NO_COLOR", None)
    asyncio.run(main(args.out))
