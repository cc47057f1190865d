"""CSV batch prediction behind ``cmdare-tui predict`` (issue 5's CLI contract).

Input columns: ``model`` (free name, may be empty/unknown), ``model_flops``, ``params``, ``batch_size``,
``gpu`` (a catalog name or a mix ``V100:1+P100:1+K80:2``), ``workers`` (total; must equal the mix
count), ``ps``. Output: every input column plus ``steps_per_sec`` (the expected value),
``steps_per_sec_p10`` and ``steps_per_sec_p90`` (the P10–P90 band from the model's out-of-sample
residuals, :mod:`cmdare.planner.speed.speed_band`), ``extrapolation`` (``none`` | ``network`` | ``gpu`` | ``ps`` |
``workers``: how the shape lies outside the measured domain; the one that sets the band),
``examples_per_sec``, ``bottleneck`` and ``ps_utilization``. Bad input raises :class:`PredictInputError`
naming the row.

Synchronous rows (:mod:`cmdare.planner.predict.sync`): optional columns ``mode`` (``sync`` | ``fsdp`` |
``zero1`` | ``zero2``), ``gpus_per_node``, ``nic_gbps``, ``transport``, ``precision``, ``bucket_mb``, ``hop_us``,
``activation_gb``, ``recompute``; ``workers`` = GPUs in all, ``ps`` = 0. A file with a ``mode`` column gets the
output columns ``allreduce_share``, ``compute_s``, ``algorithm``, ``memory_gb`` and ``memory`` too; files
without one are read and written as before. An optional ``tensors`` column (parameter tensors) is read by both
models: the PS model otherwise estimates it from the study's CIFAR networks.

A header that names a column twice is refused (which of the two would a row mean?). Rows are read in
chunks of :data:`CHUNK_ROWS`, each checked whole before any of it is written, and predicted on arrays:
one :meth:`~cmdare.planner.speed.speed_model.SpeedModel.predict_shapes` and one
:func:`~cmdare.planner.speed.speed_band.shape_bands` per network in the chunk for one-GPU-type rows;
GPU mixes and sync rows one at a time, each distinct shape once.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable, Iterator

import numpy as np

from cmdare.collectors.samples import ModelSpec
from cmdare.collectors.untrusted import clean_text
from cmdare.planner.predict.sync import PS_MODES, SYNC_COLUMNS, SyncRowError, is_sync, predict_sync_row
from cmdare.planner.speed.gpu_catalog import UnknownGpuError, get_gpu
from cmdare.planner.speed.speed_band import mix_bands, shape_bands, speed_band
from cmdare.planner.speed.speed_model import SpeedModel

__all__ = [
    "PredictInputError",
    "REQUIRED_COLUMNS",
    "OUTPUT_COLUMNS",
    "parse_gpu_mix",
    "predict_csv_lines",
    "predict_csv_text",
]

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
CHUNK_ROWS = 20_000  # rows checked, predicted and written together (memory stays that of one chunk)
ROW_LIMIT = 1024 * 1024  # characters of one row, its lines together (a predict row is a few dozen)
MEMO_LIMIT = 20_000  # distinct mixed or sync shapes remembered (~1 kB each; the memo starts again past it)

# Upper bounds of a plausible row (beyond them the model only extrapolates into overflow).
LIMITS = {"model_flops": 1e16, "params": 1e13, "batch_size": 1e6, "workers": 1e4, "ps": 1e3, "tensors": 1e7}
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


def _network(row: dict[str, str], where: str) -> ModelSpec:
    return ModelSpec(
        name=(row.get("model") or "").strip(),
        model_flops=_number(row, "model_flops", where),
        params=_number(row, "params", where),
        batch_size=int(_number(row, "batch_size", where, integer=True)),
        tensors=int(_number(row, "tensors", where, integer=True))
        if (row.get("tensors") or "").strip()
        else None,
    )


def _fields(x: float, p10: float, p90: float, extrapolation: str, examples: float, bottleneck: str,
            ps_utilization: float) -> dict[str, str]:  # fmt: skip
    """A PS row's output columns, formatted."""
    return {
        "steps_per_sec": f"{x:.6g}",
        "steps_per_sec_p10": f"{p10:.6g}",
        "steps_per_sec_p90": f"{p90:.6g}",
        "extrapolation": extrapolation,
        "examples_per_sec": f"{examples:.6g}",
        "bottleneck": bottleneck,
        "ps_utilization": f"{ps_utilization:.4f}",
    }


def _predict_mix(model: SpeedModel, network: ModelSpec, mix: dict[str, int], ps: int) -> dict[str, str]:
    """A PS row of a GPU mix, one at a time (the vectorised path takes one GPU type a row)."""
    pred = model.predict(network, mix, ps=ps)
    band = speed_band(model, network, mix, ps=ps, prediction=pred)
    return _fields(pred.steps_per_sec, band.p10, band.p90, band.extrapolation, pred.examples_per_sec,
                   pred.bottleneck, pred.ps_utilization)  # fmt: skip


class _Chunk:
    """One chunk's rows, checked, and their outputs filled in by network on arrays."""

    def __init__(self, model: SpeedModel, memo: dict[tuple[object, ...], dict[str, str]]) -> None:
        self.model, self.memo = model, memo
        self.rows: list[dict[str, str]] = []
        self.out: list[dict[str, str] | None] = []
        self.groups: dict[
            tuple[str, float, float, int, int | None], tuple[ModelSpec, list[tuple[int, str, int, int]]]
        ] = {}

    def add(self, row: dict[str, str], where: str) -> None:
        """Check one (cleaned) row and plan its prediction; raises :class:`PredictInputError`."""
        network = _network(row, where)
        key = (network.name, network.model_flops, network.params, network.batch_size, network.tensors)
        try:
            sync = is_sync(row)
        except SyncRowError as exc:
            raise PredictInputError(f"{where}: {exc}") from None
        i = len(self.rows)
        self.rows.append(row)
        if sync:
            shape: tuple[object, ...] = (
                "sync",
                tuple(row.items()),
            )  # every column a sync row may read, and the rest
            self.out.append(self._memo(shape, lambda: predict_sync_row(self.model, network, row), where))
            return
        mix, workers, ps = _shape(row, where)
        if len(mix) == 1:
            self.groups.setdefault(key, (network, []))[1].append((i, next(iter(mix)), workers, ps))
            self.out.append(None)
        else:
            shape = ("mix", key, tuple(sorted(mix.items())), ps)
            self.out.append(self._memo(shape, lambda: _predict_mix(self.model, network, mix, ps), where))

    def _memo(
        self, key: tuple[object, ...], make: Callable[[], dict[str, str]], where: str
    ) -> dict[str, str]:
        if key not in self.memo:
            if len(self.memo) >= MEMO_LIMIT:
                self.memo.clear()
            try:
                self.memo[key] = make()
            except SyncRowError as exc:
                raise PredictInputError(f"{where}: {exc}") from None
        return self.memo[key]

    def results(self) -> Iterator[dict[str, str]]:
        """Each row with its output columns, in order."""
        for network, members in self.groups.values():
            idx, gpu, workers, ps = (np.array(c) for c in zip(*members, strict=True))
            with np.errstate(all="ignore"):  # bounded inputs; an overflow shows as inf in its cell
                pred = self.model.predict_shapes(network, gpu, workers, ps)
                band = shape_bands(self.model, network, gpu, workers, ps, steps_per_sec=pred["steps_per_sec"])
            cols = zip(pred["steps_per_sec"].tolist(), band["steps_per_sec_p10"].tolist(),
                       band["steps_per_sec_p90"].tolist(), band["extrapolation"].tolist(),
                       pred["examples_per_sec"].tolist(), pred["bottleneck"].tolist(),
                       pred["ps_utilization"].tolist(), strict=True)  # fmt: skip
            for i, values in zip(idx.tolist(), cols, strict=True):
                self.out[i] = _fields(*values)
        for row, out in zip(self.rows, self.out, strict=True):
            yield {**row, **(out or {})}


def _check_header(header: list[str]) -> None:
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise PredictInputError(f"header (line 1): missing column(s) {', '.join(missing)}")
    seen: dict[str, int] = {}
    for n, name in enumerate(header, start=1):
        if name in seen:
            raise PredictInputError(
                f"header (line 1): column {name!r} appears twice (columns {seen[name]} and {n}): "
                "which one a row means is not known"
            )
        seen[name] = n


def predict_csv_lines(
    lines: Iterable[str], write: Callable[[str], object], model: SpeedModel | None = None
) -> int:
    """Predict every row of the CSV ``lines``, handing the output CSV to ``write`` a chunk at a time
    (``\\n`` line ends); returns the rows predicted. A bad row raises :class:`PredictInputError`
    before anything of its chunk is written."""
    model = model or SpeedModel.load()
    fed = _Fed(lines)
    reader = csv.reader(fed)
    header = [clean_text(h, FIELD_LIMIT) for h in next(reader, None) or []]
    _check_header(header)
    extra = SYNC_COLUMNS if "mode" in header else ()
    out_cols = header + [c for c in (*OUTPUT_COLUMNS, *extra) if c not in header]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(out_cols)
    memo: dict[tuple[object, ...], dict[str, str]] = {}
    n = 0
    while True:
        batch: list[tuple[str, list[str]]] = []  # (where, fields)
        for fields in reader:
            fed.chars = 0  # each row's own text is bounded, however many lines it spans
            if not fields:  # a blank line is no row
                continue
            n += 1
            where = f"row {n} (line {reader.line_num})"
            if len(fields) > len(header):
                raise PredictInputError(f"{where}: more fields than header columns")
            batch.append((where, fields))
            if len(batch) == CHUNK_ROWS:
                break
        writer.writerows(_chunk(model, header, out_cols, batch, memo))
        write(buf.getvalue())
        buf.seek(0)
        buf.truncate()
        if len(batch) < CHUNK_ROWS:
            return n


class _Fed:
    """The lines the csv reader takes, counted: a row whose text passes :data:`ROW_LIMIT` characters
    (a quoted field open across a million lines makes a million fields) is refused as it grows."""

    def __init__(self, lines: Iterable[str]) -> None:
        self.lines, self.chars, self.line = iter(lines), 0, 0

    def __iter__(self) -> _Fed:
        return self

    def __next__(self) -> str:
        line = next(self.lines)
        self.chars += len(line)
        self.line += 1
        if self.chars > ROW_LIMIT:
            raise PredictInputError(
                f"line {self.line}: a row longer than {ROW_LIMIT:,} characters (a quoted field left open?)"
            )
        return line


_NUMBERS = ("model_flops", "params", "batch_size", "workers", "ps")
_INTEGERS = ("batch_size", "workers", "ps")


def _clean_fields(fields: list[str], width: int) -> list[str]:
    """A row's fields as text safe on a terminal (control, bidi and zero-width characters shown visibly,
    each field at most :data:`FIELD_LIMIT` characters: input fields are copied to the output), padded to
    ``width`` with empty ones; a row of printable ASCII within the field limit (almost every row) is
    told by one scan and kept."""
    joined = "".join(fields)
    if not (joined.isascii() and joined.isprintable() and len(joined) <= FIELD_LIMIT):
        fields = [clean_text(f, FIELD_LIMIT) for f in fields]
    return fields + [""] * (width - len(fields))


def _chunk(
    model: SpeedModel,
    header: list[str],
    out_cols: list[str],
    batch: list[tuple[str, list[str]]],
    memo: dict[tuple[object, ...], dict[str, str]],
) -> list[list[str]]:
    """The output rows of one chunk. The rows of one GPU type are checked and predicted on arrays;
    GPU mixes and sync rows one at a time (memoised). Any row the array path cannot take as it is
    sends the whole chunk down the row-by-row path, which names the first bad row exactly."""
    rows = [_clean_fields(f, len(header)) for _, f in batch]
    try:
        out = _chunk_on_arrays(model, header, out_cols, batch, rows, memo)
    except (ValueError, KeyError, OverflowError):
        out = None
    if out is not None:
        return out
    chunk = _Chunk(model, memo)  # row by row: raises PredictInputError naming the row
    for (where, _), fields in zip(batch, rows, strict=True):
        chunk.add(dict(zip(header, fields, strict=True)), where)
    return [[r.get(c, "") for c in out_cols] for r in chunk.results()]


def _chunk_on_arrays(
    model: SpeedModel,
    header: list[str],
    out_cols: list[str],
    batch: list[tuple[str, list[str]]],
    rows: list[list[str]],
    memo: dict[tuple[object, ...], dict[str, str]],
) -> list[list[str]] | None:
    """:func:`_chunk` for rows that need no message: None (or a ValueError) when one of them is bad."""
    pos = {c: i for i, c in enumerate(header)}
    mode_at, gpu_at, tensors_at = pos.get("mode"), pos["gpu"], pos.get("tensors")
    fast: list[int] = []  # PS mode: one GPU type or a mix
    slow: list[int] = []  # a sync row, a row with its own tensor count
    for k, r in enumerate(rows):
        if (mode_at is not None and r[mode_at].strip().lower() not in PS_MODES) or (
            tensors_at is not None and r[tensors_at].strip()
        ):
            slow.append(k)
        else:
            fast.append(k)
    values = {c: np.array([float(rows[k][pos[c]]) for k in fast], dtype=float) for c in _NUMBERS}
    for c, v in values.items():
        ok = (v > 0) & (v <= LIMITS.get(c, np.inf)) & (v >= MINIMUMS.get(c, 0.0))  # NaN fails, inf is over
        if c in _INTEGERS:
            ok &= v == np.floor(v)
        if not ok.all():
            return None
    workers_of = values["workers"].astype(int).tolist()
    found = [_mix(rows[k][gpu_at].strip(), n) for k, n in zip(fast, workers_of, strict=True)]
    mixes = [m for m in found if m is not None]
    if len(mixes) < len(found):
        return None  # a mix that does not add up to its workers: the row-by-row path says so
    out = [r + [""] * (len(out_cols) - len(r)) for r in rows]
    put = [out_cols.index(c) for c in OUTPUT_COLUMNS]
    groups: dict[tuple[str, float, float, int], list[int]] = {}
    names = [rows[k][pos["model"]].strip() for k in fast]
    for j, key in enumerate(zip(names, values["model_flops"].tolist(), values["params"].tolist(),
                                values["batch_size"].astype(int).tolist(), strict=True)):  # fmt: skip
        groups.setdefault(key, []).append(j)
    for (name, flops, params, batch_size), members in groups.items():
        network = ModelSpec(name=name, model_flops=flops, params=params, batch_size=batch_size)
        one = [j for j in members if len(mixes[j]) == 1]
        many = [j for j in members if len(mixes[j]) > 1]
        with np.errstate(all="ignore"):  # bounded inputs; an overflow shows as inf in its cell
            for part, outputs in ((one, _one_type), (many, _mixed)):
                if part:
                    cells = outputs(model, network, [mixes[j] for j in part], values["ps"][part])
                    for j, row_cells in zip(part, cells, strict=True):
                        row = out[fast[j]]
                        for i, cell in zip(put, row_cells, strict=True):
                            row[i] = cell
    if slow:
        chunk = _Chunk(model, memo)
        for k in slow:
            chunk.add(dict(zip(header, rows[k], strict=True)), batch[k][0])
        for k, got in zip(slow, chunk.results(), strict=True):
            out[k] = [got.get(c, "") for c in out_cols]
    return out


def _cells(pred: dict[str, np.ndarray], band: dict[str, np.ndarray]) -> list[tuple[str, ...]]:
    """The output cells of predicted rows, in :data:`OUTPUT_COLUMNS`' order."""
    cols = zip(pred["steps_per_sec"].tolist(), band["steps_per_sec_p10"].tolist(),
               band["steps_per_sec_p90"].tolist(), band["extrapolation"].tolist(),
               pred["examples_per_sec"].tolist(), pred["bottleneck"].tolist(),
               pred["ps_utilization"].tolist(), strict=True)  # fmt: skip
    return [(f"{x:.6g}", f"{p10:.6g}", f"{p90:.6g}", ext, f"{ex:.6g}", bn, f"{util:.4f}")
            for x, p10, p90, ext, ex, bn, util in cols]  # fmt: skip


def _one_type(
    model: SpeedModel, network: ModelSpec, mixes: list[dict[str, int]], ps: np.ndarray
) -> list[tuple[str, ...]]:
    """Rows of one GPU type each: :meth:`~SpeedModel.predict_shapes` and :func:`shape_bands`."""
    gpu = np.array([next(iter(m)) for m in mixes])
    workers = np.array([next(iter(m.values())) for m in mixes])
    ps_i = ps.astype(int)
    pred = model.predict_shapes(network, gpu, workers, ps_i)
    return _cells(pred, shape_bands(model, network, gpu, workers, ps_i, steps_per_sec=pred["steps_per_sec"]))


def _mixed(
    model: SpeedModel, network: ModelSpec, mixes: list[dict[str, int]], ps: np.ndarray
) -> list[tuple[str, ...]]:
    """Rows of GPU mixes: :meth:`~SpeedModel.predict_mixes` and :func:`mix_bands`, each row's GPUs in
    its own order (the order :meth:`~SpeedModel.predict` sums them in)."""
    names = sorted({g for m in mixes for g in m})
    index = {g: i for i, g in enumerate(names)}
    width = max(len(m) for m in mixes)
    gpu_at, count_at = np.zeros((len(mixes), width), dtype=int), np.zeros((len(mixes), width))
    for i, m in enumerate(mixes):
        for j, (g, c) in enumerate(m.items()):
            gpu_at[i, j], count_at[i, j] = index[g], c
    ps_i = ps.astype(int)
    pred = model.predict_mixes(network, names, gpu_at, count_at, ps_i)
    return _cells(pred, mix_bands(model, network, names, gpu_at, count_at, ps_i, pred["steps_per_sec"]))


_MIXES: dict[str, dict[str, int]] = {}


def _mix(text: str, workers: int) -> dict[str, int] | None:
    """The GPUs of a row as ``{name: count}`` (a bare name: ``workers`` of it), or None when a mix's
    counts do not add up to ``workers``; raises ValueError (UnknownGpuError) for a bad name."""
    if ":" not in text and "+" not in text:
        return {_one_gpu(text): workers}
    mix = _MIXES.get(text)
    if mix is None:
        mix = parse_gpu_mix(text)
        if len(_MIXES) < 10_000:
            _MIXES[text] = mix
    if len(mix) == 1 and ":" not in text:
        return {next(iter(mix)): workers}
    return mix if sum(mix.values()) == workers else None


_GPU_NAMES: dict[str, str] = {}


def _one_gpu(text: str) -> str:
    """The catalogue name of one GPU type (remembered); raises UnknownGpuError (a ValueError)."""
    name = _GPU_NAMES.get(text)
    if name is None:
        if not text:
            raise ValueError("missing gpu")
        name = get_gpu(text).name
        if len(_GPU_NAMES) < 10_000:
            _GPU_NAMES[text] = name
    return name


def predict_csv_text(text: str, model: SpeedModel | None = None) -> str:
    """Predict every row of CSV ``text``; returns the output CSV text (``\\n`` line ends)."""
    out: list[str] = []
    predict_csv_lines(io.StringIO(text), out.append, model)
    return "".join(out)
