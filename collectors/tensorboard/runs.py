"""Find the training runs under a TensorBoard log directory: one run per training process, whatever
writer layout it used, at any depth (within bounds).

A *run* is a folder of event files (``events.out.tfevents.*``). Folders that writers create *inside*
a run belong to that run, never become runs of their own:

* torch ``SummaryWriter.add_scalars("Loss", {...})`` writes ``<run>/Loss_train/``, ``<run>/Loss_val/``…
  and ``add_hparams`` a timestamped ``<run>/<time>/``; TF Estimator writes ``<model_dir>/eval/``. Rule:
  a folder below another folder holding event files belongs to the top-most such folder.
* Keras' ``TensorBoard`` callback writes ``<log_dir>/train/`` and ``<log_dir>/validation/`` with no
  event file in ``<log_dir>`` itself. Rule: a folder named ``train`` or ``validation`` belongs to its
  parent.

The walk is bounded (depth, folders, event files, runs); what a bound cut off is said in a note.
Symbolic links to folders are not followed (no loops).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

EVENT_PREFIX = "events.out.tfevents."
SPLIT_DIRS = frozenset({"train", "validation"})  # Keras' TensorBoard callback
MAX_DEPTH = 12  # folders below the log dir
MAX_DIRS = 20_000  # folders visited per walk
MAX_FILES = 2_000  # event files tailed
MAX_RUNS = 256  # runs (tasks) shown


@dataclass
class RunLayout:
    """The training runs found under a log dir, each with its event files."""

    runs: dict[Path, list[Path]] = field(default_factory=dict)  # run folder -> its event files
    notes: list[str] = field(default_factory=list)  # what a bound cut off


def _event_dirs(logdir: Path, notes: list[str]) -> dict[Path, list[Path]]:
    found: dict[Path, list[Path]] = {}
    stack, visited, files, too_deep = [(logdir, 0)], 0, 0, False
    while stack:
        folder, depth = stack.pop()
        visited += 1
        if visited > MAX_DIRS:
            notes.append(f"stopped after {MAX_DIRS:,} folders: some runs may be missing")
            break
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False):
                    too_deep |= depth >= MAX_DEPTH
                    if depth < MAX_DEPTH:
                        stack.append((Path(e.path), depth + 1))
                elif e.name.startswith(EVENT_PREFIX) and e.is_file():
                    files += 1
                    if files <= MAX_FILES:
                        found.setdefault(folder, []).append(Path(e.path))
            except OSError:
                continue
    if too_deep:
        notes.append(f"folders more than {MAX_DEPTH} levels deep not searched")
    if files > MAX_FILES:
        notes.append(f"{files:,} event files: only {MAX_FILES:,} tailed")
    return found


def run_of(folder: Path, logdir: Path, event_dirs: dict[Path, list[Path]]) -> Path:
    """The run ``folder`` (a folder holding event files) belongs to."""
    if folder == logdir:
        return folder
    owner = None
    for parent in folder.parents:
        if parent in event_dirs:
            owner = parent
        if parent == logdir:
            break
    if owner is not None:
        return owner
    if folder.name in SPLIT_DIRS:
        return folder.parent
    return folder


def find_runs(logdir: Path) -> RunLayout:
    """Every run under ``logdir`` and its event files (sorted), with notes on what was cut off."""
    layout = RunLayout()
    event_dirs = _event_dirs(logdir, layout.notes)
    for folder in sorted(event_dirs):
        layout.runs.setdefault(run_of(folder, logdir, event_dirs), []).extend(event_dirs[folder])
    if len(layout.runs) > MAX_RUNS:
        layout.notes.append(f"{len(layout.runs):,} runs: only the first {MAX_RUNS} shown")
        layout.runs = dict(sorted(layout.runs.items())[:MAX_RUNS])
    for files in layout.runs.values():
        files.sort(key=event_file_order)
    return layout


def event_file_order(path: Path) -> list[str | int]:
    """A run's event files in the order they were written: their names compared with every number as a number
    (``…tfevents.1796308021.host.3617.10`` after ``….9``; writers number the files of one process in turn, and
    two writers in one second differ only there: compared as text, a resumed run's new file came first)."""
    return [int(part) if k % 2 else part for k, part in enumerate(re.split(r"(\d+)", path.name))]


def run_name(run: Path, logdir: Path) -> str:
    """A run's task name: its path below the log dir, or the log dir's own name."""
    rel = run.relative_to(logdir).as_posix() if run != logdir else ""
    return rel or logdir.resolve().name or "tensorboard"


def sub_prefix(path: Path, run: Path) -> str:
    """The prefix of the tags of an event file in a writer subfolder of its run (``Loss_train/``,
    ``validation/``), empty for the run's own files: TensorBoard shows those as runs of their own,
    so the same tag in two of them stays two series."""
    rel = path.parent.relative_to(run).as_posix()
    return "" if rel in ("", ".") else rel + "/"
