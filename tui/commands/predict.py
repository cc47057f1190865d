"""``cmdare-tui predict --input FILE.csv [--output FILE.csv]``: batch speed predictions (issue 5).

Reads the input CSV, appends the predicted columns, and writes the result to ``--output`` (through
:mod:`cmdare.collectors.writes`: atomic, never through a symlink or over a non-regular file, refused
in read-only mode) or stdout. Bad input exits 2 with the file and row named.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

from cmdare.collectors import writes
from cmdare.tui.commands import UsageError

__all__ = ["register", "run", "HELP"]

MAX_INPUT_BYTES = 64 * 1024 * 1024  # a prediction table, not a data set: larger input is refused

HELP = """\
Predict the training speed of the cluster shape on each row of a CSV file (UTF-8).

input columns (header row required; other columns are kept as they are):
  model        a free name (may be empty)
  model_flops  the network's FLOPs per training step, as CM-DARE counts them (> 0)
  params       parameter count (> 0)
  batch_size   examples per step on each worker (integer >= 1)
  gpu          a GPU type (K80, P100, V100, T4, ...) or a mix such as V100:1+P100:1+K80:2
  workers      worker count (equals the mix's total when gpu is a mix)
  ps           parameter-server count (integer >= 1)

output: every input column, then
  steps_per_sec, examples_per_sec, bottleneck (gpu | ps | network), ps_utilization (0-1)

example: cmdare-tui predict --input examples/predict.csv
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``predict`` sub-command."""
    parser = subparsers.add_parser(
        "predict",
        help="predict cluster training speed for the shapes in a CSV file",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--input", required=True, type=Path, metavar="FILE.csv", help="input CSV (UTF-8)")
    parser.add_argument(
        "--output",
        type=Path,
        metavar="FILE.csv",
        help="output CSV, replaced atomically (default: stdout; refused in read-only mode)",
    )
    parser.add_argument("--follow-symlinks", action="store_true",
                        help="if --output is a symlink, replace the file it points to (refused otherwise)")  # fmt: skip
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Predict every row of ``args.input``; 0 on success, UsageError (exit 2) on bad input.

    The input is read through the bounded reader (a FIFO or a device is refused at once, a file over
    :data:`MAX_INPUT_BYTES` before a byte is read) a chunk of rows at a time; ``--output`` is written
    atomically once every row predicted (a bad row leaves it untouched), stdout a chunk at a time."""
    from cmdare.collectors.textfile import TextFileError, open_small_text
    from cmdare.planner.predict_csv import PredictInputError, predict_csv_lines

    follow = getattr(args, "follow_symlinks", False)
    if args.output is not None:
        if getattr(args, "read_only", False) or writes.is_read_only():
            raise UsageError(
                "predict --output writes a file: not in read-only mode (print to stdout instead)"
            )
        _check_output(args.output, follow)
    try:
        with open_small_text(args.input, MAX_INPUT_BYTES, encoding="utf-8-sig") as lines:
            if args.output is None:
                predict_csv_lines(lines, sys.stdout.write)
                return 0
            with writes.open_atomic(args.output, follow_symlinks=follow) as fh:
                predict_csv_lines(lines, lambda text: fh.write(text.encode("utf-8")))
    except TextFileError as exc:
        raise UsageError(str(exc)) from None
    except csv.Error as exc:  # e.g. a field over the csv module's limit, a NUL byte
        raise UsageError(f"{args.input}: not a readable CSV ({exc})") from None
    except PredictInputError as exc:
        raise UsageError(f"{args.input}: {exc}") from None
    except (ValueError, OverflowError) as exc:  # a value the model cannot use (e.g. too large)
        raise UsageError(f"{args.input}: {exc}") from None
    except writes.UnsafeTargetError as exc:
        raise UsageError(str(exc)) from None
    except BrokenPipeError:  # `predict … | head`: the command line says nothing (exit 141)
        raise
    except OSError as exc:
        raise UsageError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    return 0


def _check_output(path: Path, follow_symlinks: bool) -> None:
    """Refuse a bad ``--output`` before any work (a directory, a device, a symlink unless followed,
    a missing folder)."""
    try:
        real = writes.check_target(path, follow_symlinks=follow_symlinks)
    except writes.UnsafeTargetError as exc:
        hint = " (--follow-symlinks to write through it)" if "symlink" in str(exc) else ""
        raise UsageError(f"{exc}{hint}") from None
    if not real.parent.is_dir():
        raise UsageError(f"cannot write {path}: no folder {real.parent}")
