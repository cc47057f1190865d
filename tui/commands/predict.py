"""``cmdare-tui predict --input FILE.csv [--output FILE.csv]``: batch speed predictions (issue 5).

Reads the input CSV (columns model, model_flops, params, batch_size, gpu, workers, ps), appends
steps_per_sec, examples_per_sec, bottleneck and ps_utilization, and writes the result to ``--output``
(through :mod:`cmdare.collectors.writes`) or stdout. Bad input exits 2 with the row named.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cmdare.collectors.writes import write_text
from cmdare.planner.predict_csv import PredictInputError, predict_csv_text
from cmdare.tui.commands import UsageError

__all__ = ["register", "run"]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``predict`` sub-command."""
    parser = subparsers.add_parser(
        "predict",
        help="predict cluster training speed for the shapes in a CSV file",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    parser.add_argument("--input", required=True, type=Path, metavar="FILE.csv", help="input CSV")
    parser.add_argument("--output", type=Path, metavar="FILE.csv", help="output CSV (default: stdout)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Predict every row of ``args.input``; 0 on success, UsageError (exit 2) on bad input."""
    try:
        text = Path(args.input).read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise UsageError(f"cannot read {args.input}: {exc.strerror or exc}") from None
    try:
        result = predict_csv_text(text)
    except PredictInputError as exc:
        raise UsageError(f"{args.input}: {exc}") from None
    if args.output is None:
        sys.stdout.write(result)
    else:
        write_text(args.output, result)
    return 0
