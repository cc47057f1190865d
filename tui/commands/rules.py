"""``cmdare-tui rules``: write the bottleneck rules as a Prometheus rule file (see ``docs/rules.md``).

cmdare-tui rules [--selector 'exported_job="resnet"'] [--output DIR] [--interval 15s] [--window 1m]
                 [--engine prometheus|vmalert]

Writes ``DIR/cmdare-rules.yml`` (default: the current directory) and prints its path; ``--output -`` or
``--read-only`` prints the file on stdout instead and writes nothing. The thresholds are the app's own
(:mod:`cmdare.planner.rules.thresholds`); ``--interval`` is the engine's evaluation interval (set it to the
app's refresh so that ``for:`` means the same number of refreshes) and ``--window`` the rate window
(at least twice the scrape interval).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cmdare.tui.commands import UsageError
from cmdare.tui.source_flags import selector

FILE_NAME = "cmdare-rules.yml"


def register(subparsers: Any) -> None:
    """Add the ``rules`` sub-command."""
    p = subparsers.add_parser(
        "rules", help="write the bottleneck rules as a Prometheus / VictoriaMetrics rule file (alerting)"
    )
    p.add_argument("--selector", type=selector, default="",
                   help='label selector on cmdare_task_info choosing the tasks, e.g. exported_job="resnet"')  # fmt: skip
    p.add_argument("--output", default=".", metavar="DIR",
                   help=f"folder to write {FILE_NAME} into (default: .); '-' prints it on stdout")  # fmt: skip
    p.add_argument("--interval", default="15s", help="evaluation interval, ≈ the app's refresh (default 15s)")
    p.add_argument("--window", default="1m", help="rate window, ≥ 2 scrape intervals (default 1m)")
    p.add_argument("--engine", choices=("prometheus", "vmalert"), default="prometheus",
                   help="vmalert: leave out keep_firing_for (older vmalert releases refuse it)")  # fmt: skip
    p.set_defaults(func=run)


def _seconds(flag: str, text: str) -> float:
    from cmdare.planner.rules.engine_rules import duration_seconds

    try:
        return duration_seconds(text)
    except ValueError as exc:
        raise UsageError(f"rules: {flag}: {exc}") from None


def run(args: argparse.Namespace) -> int:
    """Entry point of ``rules``; returns the exit status."""
    from cmdare.collectors import writes
    from cmdare.collectors.prometheus.aggregate import selector_matchers
    from cmdare.planner.rules.engine_rules import RuleOptions, render

    interval, window = _seconds("--interval", args.interval), _seconds("--window", args.window)
    if window < 2 * interval:
        raise UsageError(
            f"rules: --window ({args.window}) must be at least twice --interval ({args.interval})"
        )
    text = render(
        RuleOptions(
            selector=selector_matchers(args.selector),
            interval_s=interval,
            window_s=window,
            engine=args.engine,
        )
    )
    if args.output == "-" or writes.is_read_only():
        print(text, end="")
        return 0
    folder = Path(args.output)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"rules: --output must be a folder: {args.output}")
    writes.make_dirs(folder)
    target = writes.write_text(folder / FILE_NAME, text)
    print(target)
    return 0
