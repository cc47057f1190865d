"""``cmdare-tui predict --input FILE.csv [--output FILE.csv]``: batch speed predictions (issue 5).

Reads the input CSV, appends the predicted columns, and writes the result to ``--output`` (through
:mod:`cmdare.collectors.writes`: atomic, never through a symlink or over a non-regular file, refused
in read-only mode) or stdout. Bad input exits 2 with the file and row named.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cmdare.collectors import writes
from cmdare.tui.commands import UsageError

__all__ = ["register", "run", "OUTPUT_HELP"]

MAX_INPUT_BYTES = 64 * 1024 * 1024  # a prediction table, not a data set: larger input is refused

# What each output column means, in the order they are written (planner/predict_csv.py OUTPUT_COLUMNS, then
# the sync column; a test holds the two together): ``predict --help`` lists them without loading the models
OUTPUT_HELP = {
    "steps_per_sec": "predicted cluster steps/s (the expected value)",
    "steps_per_sec_p10": "P10 of the band (out-of-sample residuals)",
    "steps_per_sec_p90": "P90 of the band",
    "extrapolation": "none | network | gpu | ps | workers (| allreduce): how the shape lies outside the measured domain",
    "examples_per_sec": "steps/s × batch_size (sync rows: × workers, every GPU takes a batch a step)",
    "bottleneck": "gpu | ps | network (sync rows: compute | network | interconnect)",
    "ps_utilization": "the parameter servers' busy share, 0-1 (empty on sync rows)",
    "allreduce_share": "sync rows: the share of a step spent in all-reduce, 0-1 (only with a mode column)",
}


def _help() -> str:
    """The command's description: its input columns, its output columns and examples."""
    outputs = "\n".join(f"  {c:<18} {what}" for c, what in OUTPUT_HELP.items())
    return f"""\
Predict the training speed of the cluster shape on each row of a CSV file (UTF-8).

input columns (header row required; other columns are kept as they are):
  model        a free name (may be empty)
  model_flops  the network's FLOPs per training step, as CM-DARE counts them (> 0)
  params       parameter count (> 0)
  batch_size   examples per step on each worker (integer >= 1)
  gpu          a GPU type (K80, P100, V100, T4, ...) or a mix such as V100:1+P100:1+K80:2
  workers      worker count (equals the mix's total when gpu is a mix; sync rows: GPUs in all)
  ps           parameter-server count (integer >= 1; sync rows: 0)
optional (synchronous all-reduce rows): mode (sync), gpus_per_node, nic_gbps

output: every input column, then
{outputs}

examples: cmdare-tui predict --input examples/predict.csv
          cmdare-tui predict --input examples/predict-sync.csv
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``predict`` sub-command."""
    parser = subparsers.add_parser(
        "predict",
        help="predict cluster training speed for the shapes in a CSV file",
        description=_help(),
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


def read_input(path: Path) -> str:
    """The text of the input CSV; unreadable, oversized or non-UTF-8 input raises UsageError."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_INPUT_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_INPUT_BYTES:
        raise UsageError(f"{path}: larger than {MAX_INPUT_BYTES // 2**20} MiB")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text (byte {exc.start}); save the CSV as UTF-8") from None


def run(args: argparse.Namespace) -> int:
    """Predict every row of ``args.input``; 0 on success, UsageError (exit 2) on bad input."""
    from cmdare.planner.predict_csv import PredictInputError, predict_csv_text

    if args.output is not None:
        if getattr(args, "read_only", False) or writes.is_read_only():
            raise UsageError(
                "predict --output writes a file: not in read-only mode (print to stdout instead)"
            )
        _check_output(args.output, getattr(args, "follow_symlinks", False))
    text = read_input(args.input)
    try:
        result = predict_csv_text(text)
    except PredictInputError as exc:
        raise UsageError(f"{args.input}: {exc}") from None
    except (ValueError, OverflowError) as exc:  # a value the model cannot use (e.g. too large)
        raise UsageError(f"{args.input}: {exc}") from None
    if args.output is None:
        sys.stdout.write(result)
    else:
        try:
            writes.write_text(args.output, result, follow_symlinks=getattr(args, "follow_symlinks", False))
        except writes.UnsafeTargetError as exc:
            raise UsageError(str(exc)) from None
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
