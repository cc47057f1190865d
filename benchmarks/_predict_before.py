"""``planner/predict/batch.py`` as it was before issue 27 (main at 64b15e7): one ``SpeedModel.predict`` and one
``speed_band`` per row, the whole output built in memory. Kept as the baseline of benchmarks/predict_rows.py
(measured in the same run); nothing in the app imports it.

Its own docstring then:

Input columns: ``model`` (free name, may be empty/unknown), ``model_flops``, ``params``, ``batch_size``,
``gpu`` (a catalog name or a mix ``V100:1+P100:1+K80:2``), ``workers`` (total; must equal the mix
count), ``ps``. Output: every input column plus ``steps_per_sec`` (the expected value),
``steps_per_sec_p10`` and ``steps_per_sec_p90`` (the P10–P90 band from the model's out-of-sample
residuals, :mod:`cmdare.planner.speed.speed_band`), ``extrapolation`` (``none`` | ``network`` | ``gpu`` | ``ps`` |
``workers``: how the shape lies outside the measured domain; the one that sets the band),
``examples_per_sec``, ``bottleneck`` and ``ps_utilization``. Bad input raises :class:`PredictInputError`
naming the row.

Synchronous rows (:mod:`cmdare.planner.predict.sync`): optional columns ``mode`` (``sync``),
``gpus_per_node`` and ``nic_gbps``; ``workers`` = GPUs in all, ``ps`` = 0. A file with a ``mode`` column
gets an ``allreduce_share`` output column too; files without one are read and written as before.
"""

from __future__ import annotations

import csv
import io

from cmdare.collectors.samples import ModelSpec
from cmdare.collectors.untrusted import clean_text
from cmdare.planner.predict.sync import SyncRowError, is_sync, predict_sync_row
from cmdare.planner.speed.gpu_catalog import UnknownGpuError, get_gpu
from cmdare.planner.speed.speed_band import speed_band
from cmdare.planner.speed.speed_model import SpeedModel

__all__ = ["PredictInputError", "REQUIRED_COLUMNS", "OUTPUT_COLUMNS", "parse_gpu_mix", "predict_csv_text"]

REQUIRED_COLUMNS = ("model", "model_flops", "params", "batch_size", "gpu", "workers", "ps")
OUTPUT_COLUMNS = (
    "steps_per_sec",
    "steps_per_sec_p10",
    "steps_per_sec_p90",
    "extrapolation",
    "examples_per_sec",
    "bottleneck",
    "ps_utilization",
)


FIELD_LIMIT = 1000  # characters kept of one CSV field (the rest is cut, with an ellipsis)

# Upper bounds of a plausible row (beyond them the model only extrapolates into overflow).
LIMITS = {"model_flops": 1e16, "params": 1e13, "batch_size": 1e6, "workers": 1e4, "ps": 1e3}
# Lower bounds of counts: a parameter count below one took the speed model to 0 steps/s (and 0/0 in its band)
MINIMUMS = {"params": 1.0}


class PredictInputError(ValueError):
    """Invalid predict input; the message names the row (data rows count from 1, line = file line)."""


def parse_gpu_mix(text: str) -> dict[str, int]:
    """``"V100:1+P100:1+K80:2"`` -> {"V100": 1, "P100": 1, "K80": 2}; a part without ``:n`` counts 0
    (a single bare name takes the row's ``workers``).

    Raises ValueError / UnknownGpuError on malformed parts or unknown GPU names.
    """
    mix: dict[str, int] = {}
    for part in text.split("+"):
        name, sep, count = part.strip().partition(":")
        if not name.strip():
            raise ValueError(f"empty GPU name in {text!r}")
        n = int(count) if sep else 0
        if sep and n < 1:
            raise ValueError(f"GPU count must be >= 1 in {text!r}")
        canonical = get_gpu(name).name
        mix[canonical] = mix.get(canonical, 0) + n
    return mix


def _number(row: dict[str, str], col: str, where: str, integer: bool = False) -> float:
    raw = (row.get(col) or "").strip()
    if not raw:
        raise PredictInputError(f"{where}: missing value for {col!r}")
    try:
        value = float(raw)
    except ValueError:
        raise PredictInputError(f"{where}: {col}={raw!r} is not a number") from None
    if not value > 0 or value != value or value == float("inf"):
        raise PredictInputError(f"{where}: {col}={raw!r} must be a positive number")
    if value > LIMITS.get(col, float("inf")):
        raise PredictInputError(f"{where}: {col}={raw!r} is implausibly large (at most {LIMITS[col]:g})")
    if value < MINIMUMS.get(col, 0.0):
        raise PredictInputError(f"{where}: {col}={raw!r} is implausibly small (at least {MINIMUMS[col]:g})")
    if integer and value != int(value):
        raise PredictInputError(f"{where}: {col}={raw!r} must be a whole number")
    return value


def _shape(row: dict[str, str], where: str) -> tuple[dict[str, int], int, int]:
    workers = int(_number(row, "workers", where, integer=True))
    ps = int(_number(row, "ps", where, integer=True))
    text = (row.get("gpu") or "").strip()
    if not text:
        raise PredictInputError(f"{where}: missing value for 'gpu'")
    try:
        mix = parse_gpu_mix(text)
    except UnknownGpuError as exc:
        raise PredictInputError(f"{where}: {exc}") from None
    except ValueError as exc:
        raise PredictInputError(f"{where}: bad gpu {text!r}: {exc}") from None
    if len(mix) == 1 and ":" not in text:
        mix = {next(iter(mix)): workers}
    elif sum(mix.values()) != workers:
        raise PredictInputError(
            f"{where}: gpu mix {text!r} has {sum(mix.values())} workers but workers={workers}"
        )
    return mix, workers, ps


def _predict_row(model: SpeedModel, row: dict[str, str], where: str) -> dict[str, str]:
    network = ModelSpec(
        name=(row.get("model") or "").strip(),
        model_flops=_number(row, "model_flops", where),
        params=_number(row, "params", where),
        batch_size=int(_number(row, "batch_size", where, integer=True)),
    )
    try:
        if is_sync(row):
            return {**row, **predict_sync_row(model, network, row)}
    except SyncRowError as exc:
        raise PredictInputError(f"{where}: {exc}") from None
    mix, _, ps = _shape(row, where)
    pred = model.predict(network, mix, ps=ps)
    band = speed_band(model, network, mix, ps=ps, prediction=pred)
    return {
        **row,
        "steps_per_sec": f"{pred.steps_per_sec:.6g}",
        "steps_per_sec_p10": f"{band.p10:.6g}",
        "steps_per_sec_p90": f"{band.p90:.6g}",
        "extrapolation": band.extrapolation,
        "examples_per_sec": f"{pred.examples_per_sec:.6g}",
        "bottleneck": pred.bottleneck,
        "ps_utilization": f"{pred.ps_utilization:.4f}",
    }


def clean_row(row: dict[str, str]) -> dict[str, str]:
    """The row's fields as text safe on a terminal (control, bidi and zero-width characters shown
    visibly, each field at most :data:`FIELD_LIMIT` characters): input fields are copied to the output."""
    return {k: clean_text(v, FIELD_LIMIT) if v is not None else v for k, v in row.items()}


def predict_csv_text(text: str, model: SpeedModel | None = None) -> str:
    """Predict every row of CSV ``text``; returns the output CSV text (``\\n`` line ends)."""
    model = model or SpeedModel.load()
    reader = csv.DictReader(io.StringIO(text))
    header = [clean_text(h, FIELD_LIMIT) for h in reader.fieldnames or []]
    reader.fieldnames = header
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise PredictInputError(f"header (line 1): missing column(s) {', '.join(missing)}")
    extra = ("allreduce_share",) if "mode" in header else ()
    out_cols = header + [c for c in (*OUTPUT_COLUMNS, *extra) if c not in header]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=out_cols, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    for i, row in enumerate(reader, start=1):
        where = f"row {i} (line {reader.line_num})"
        if None in row:
            raise PredictInputError(f"{where}: more fields than header columns")
        writer.writerow(_predict_row(model, clean_row(row), where))
    return out.getvalue()
