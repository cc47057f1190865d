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
  model        a free name (may be empty); the study's CIFAR networks are recognised by name
  model_flops  FLOPs per training step (> 0): as CM-DARE counts them for a PS row or a study network; for
               any other network in a synchronous row, one GPU's forward + backward FLOPs on its batch
  params       parameter count (> 0)
  batch_size   examples per step on each worker/GPU (integer >= 1)
  gpu          a GPU type (K80, P100, V100, T4, ...); for a PS row also a mix such as V100:1+P100:1+K80:2
  workers      PS rows: worker count (the mix's total when gpu is a mix); synchronous rows: GPUs in all
  ps           parameter-server count (integer >= 1; 0 for a synchronous row)
  tensors      optional: parameter tensors (else the catalogue's count or the study's CIFAR rule)
synchronous rows (optional columns; a row with mode empty or ps is a PS row):
  mode           sync (DDP / Horovod all-reduce) | fsdp (ZeRO-3) | zero1 | zero2 | ps
  gpus_per_node  GPUs a node (default 1; workers must be a multiple)
  nic_gbps       the node's NIC line rate, Gbit/s (default: the GPU's usual GCP node)
  transport      tcp (default, GCP's VMs) | rdma (InfiniBand / RoCE / EFA)
  precision      fp32 (default) | tf32 | fp16 | bf16 (amp)
  bucket_mb      gradient bucket, MB (default 25, DDP's; Horovod's fusion buffer is 64)
  hop_us         per-step NIC latency, microseconds (default: the published figure of the transport)
  activation_gb  per-GPU activation peak, GB (default: a transformer estimate)
  recompute      1 = activation recomputation (for that estimate)
  measured_step_s  one GPU's measured seconds a step (a one-GPU run): the compute term, with no band of its own

output: every input column, then
  steps_per_sec                       expected global steps/s
  steps_per_sec_p10, steps_per_sec_p90  its P10-P90 band
  extrapolation                       none | network | gpu | ps | workers (outside the measured domain);
                                      allreduce (a sync row of a study network) | network (FLOPs-based)
  examples_per_sec                    steps/s x batch (x GPUs for a synchronous row)
  bottleneck                          compute | ps | network | interconnect | memory (does not fit)
  ps_utilization                      0-1 (empty for a synchronous row)
files with a mode column also get:
  allreduce_share  a rank's share of the step in the all-reduce call (collective + wait for the slowest)
  compute_s        one GPU's compute seconds a step
  algorithm        ring | tree | none (the collective NCCL would pick)
  memory_gb        per-GPU memory needed (model states + activations)
  memory           "fits: needs X GB a GPU, has Y" or "does not fit: ..." (then no speed is given)

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
    from cmdare.planner.predict.batch import PredictInputError, predict_csv_lines

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
