"""``cmdare-tui snapshot``: poll N times and print the overview once — JSON for scripts, or the same
tables as the app for cron jobs and dumb terminals."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import replace
from typing import TYPE_CHECKING

from cmdare.tui.commands import UsageError
from cmdare.tui.source_flags import add_source_args, session_options

if TYPE_CHECKING:
    from cmdare.tui.config import Config


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``snapshot`` and its flags to the sub-command parsers."""
    p = subparsers.add_parser("snapshot", help="poll the sources N times and print one overview")
    add_source_args(p)
    p.add_argument(
        "--samples", type=int, default=3, metavar="N", help="polls to take (default 3; rates need >= 2)"
    )
    p.add_argument(
        "--interval",
        type=float,
        default=None,
        metavar="SECONDS",
        help="seconds between polls (default: --refresh)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=run)


async def _collect(args: argparse.Namespace, config: Config | None):
    from cmdare.collectors.pricing import load_book
    from cmdare.tui.session import MonitorSession

    session = MonitorSession(session_options(args, config))
    book = await asyncio.to_thread(load_book, args.prices)  # --prices, as the app does
    if args.prices == "live" and book.source != "live" and book.reason:  # fell back: say why on stderr
        from cmdare.tui.commands.prices import fallback_line

        print(fallback_line(book), file=sys.stderr)
    session.set_price_book(book)
    session.start()
    state = None
    try:
        for i in range(args.samples):
            state = await session.refresh()
            if i + 1 < args.samples:
                await asyncio.sleep(args.interval if args.interval is not None else args.refresh)
        if state is not None and session.analysis is not None:  # rank alternative shapes on the last poll
            await session.update_plans()
            state = replace(state, planner=state.planner.with_plans(session.analysis.live_plans))
    finally:
        await session.aclose()
    return state


def run(args: argparse.Namespace, config: Config | None = None) -> int:
    """Poll the sources, then print one overview (JSON or tables); the exit status."""
    from cmdare.collectors import writes

    if args.samples < 1:
        raise UsageError("--samples must be >= 1")
    if args.interval is not None and args.interval < 0:
        raise UsageError("--interval must be >= 0")
    writes.set_read_only(args.read_only)
    state = asyncio.run(_collect(args, config))
    assert state is not None
    if args.json:
        json.dump(state.to_json(), sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
    else:
        from cmdare.tui.plain import print_overview

        print_overview(state)
    answered = sum(
        1 for j in state.jobs for n in j.nodes if n.status in ("up", "finished")
    )  # a finished log was read
    return 0 if answered else 1
