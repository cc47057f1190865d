"""A job's tasks as columns (numpy arrays, position for position with ``job.nodes``), kept from one refresh
to the next: what the rules and the planner read of every worker of a 100,000-task job (up or not, role,
GPU, region and provisioning labels, local rank, step time, steps/s, DCGM utilisation, exposed all-reduce,
checkpoints) without a Python pass over the views each refresh.

:meth:`JobColumns.update` compares the job's new node list with the one it last read, position for
position, in one C-level pass (``operator.is_not``: the overview hands over the same ``NodeView`` while
nothing about a task changed) and reads again only the views that are other objects (a 15 s scrape read
every 2 s: up to ~13% of them); a list of another length is read whole. When the job view says how its
list was made from the one last read (``JobView.change``: the positions of the views put in), only those
are read, without the pass over every position (~100,000 a refresh at 100,000 tasks). The columns are a function of the
list alone, so a kept and a fresh :class:`JobColumns` hold the same values (tests/test_worker_rules_passes.py).
The planner hands its kept columns to the rules (``RuleInputs.columns``), to what is asked of a job once per
view while its refresh runs (:func:`kept_columns`: a sync job's split and shape) and, as a copy, to the live
ranking's thread.

A missing figure (None) is NaN in a float column; "truthy" (:func:`given`) is the rules' own test of a
figure (``if w.step_seconds``: neither None nor 0). Order is the nodes' order throughout, so a verdict that
names "the first" task or sums in order reads the same as the per-view code it replaced."""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from itertools import compress
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from cmdare.collectors.observed import WORKER_ROLES, JobView, NodesChange, NodeView
from cmdare.planner.live.outlook import owns_gpu
from cmdare.planner.speed.gpu_catalog import UnknownGpuError, get_gpu

if TYPE_CHECKING:
    from cmdare.planner.speed.speed_model import SpeedPrediction

Floats = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]
Ints = npt.NDArray[np.intp]

_READ_FIELDS = (
    "role", "status", "gpu", "region", "provisioning", "local_rank", "step_seconds", "steps_per_sec", "gpu_util",
    "last_checkpoint_at", "checkpoint_seconds", "checkpoint_interval_s", "allreduce_seconds",
)  # fmt: skip
_FLOATS = ("step", "sps", "util", "ckpt_last", "ckpt_write", "ckpt_gap", "allreduce")
_FLOAT_FIELDS = _READ_FIELDS[6:]  # the views' fields of _FLOATS, in their order
_ARRAYS = ("up_worker", "up_ps", "worker", "chief", "gpu", "region", "prov", "local", *_FLOATS)
NO_LOCAL_RANK = -1  # ``local`` of a rank whose local rank is not digits
BAD_LOCAL_RANK = -2  # ``local`` of a rank whose local rank is digits int() does not read


def canonical_gpu(gpu: str) -> str:
    """The catalogue name of a GPU (as the speed model keys it), or the name as given when unknown."""
    try:
        return get_gpu(gpu).name
    except UnknownGpuError:
        return gpu


def _local_rank(text: str) -> int:
    """A local rank as the sync shape reads it (``int(x)`` where ``x.isdigit()``), else a marker."""
    if not text.isdigit():
        return NO_LOCAL_RANK
    try:
        return int(text)
    except ValueError:  # digits int() does not read ("²"): the shape's read raises on them too
        return BAD_LOCAL_RANK


_KEPT: ContextVar[Mapping[str, JobColumns]] = ContextVar("kept_columns", default=MappingProxyType({}))


@contextmanager
def kept_columns(columns: Mapping[str, JobColumns]) -> Iterator[None]:
    """While in this block, :func:`kept_for` finds these columns (job name → columns): the planner's
    refresh sets them around its rules, so what is asked of a job once per view (its sync split, its
    shape) is read from them; a ranking's thread does not see them (it reads what the rules left)."""
    token = _KEPT.set(columns)
    try:
        yield
    finally:
        _KEPT.reset(token)


def kept_for(job: JobView) -> JobColumns | None:
    """The job's kept columns (:func:`kept_columns`) when read from this very node list, else None."""
    cols = _KEPT.get().get(job.name)
    return cols if cols is not None and cols.nodes is job.nodes else None


def canonical_gpu_strict(gpu: str) -> str:
    """The catalogue name of a GPU; an unknown one raises ``UnknownGpuError`` (as a calibration does)."""
    return get_gpu(gpu).name


def given(x: Floats) -> Bools:
    """Where a float column holds a figure the rules count (``if x``: not None, not 0)."""
    out: Bools = ~np.isnan(x) & (x != 0)
    return out


def median_of(values: Floats) -> float:
    """``statistics.median`` of the values, in numpy: the middle one, or the mean of the middle two
    computed as ``(a + b) / 2`` (the same float as the standard library's)."""
    n = len(values)
    i = n // 2
    if n % 2:
        return float(np.partition(values, i)[i])
    low, high = np.partition(values, (i - 1, i))[i - 1 : i + 1]  # the two middle values, without a sort
    return float((low + high) / 2)


class JobColumns:
    """One job's tasks as columns (see the module's docstring). ``nodes`` is the list they were read
    from; ``labels`` the GPU and region strings, ``gpu`` / ``region`` their codes into it."""

    __slots__ = ("nodes", "labels", "_codes", "up_worker", "up_ps", "worker", "chief", "gpu", "region",
                 "prov", "local", "step", "sps", "util", "ckpt_last", "ckpt_write", "ckpt_gap", "allreduce",
                 "changed")  # fmt: skip

    def __init__(self, nodes: Sequence[NodeView]) -> None:
        self.nodes: Sequence[NodeView] = nodes
        self.labels: list[str] = []
        self._codes: dict[str, int] = {}
        n = len(nodes)
        self.up_worker: Bools = np.zeros(n, bool)  # up, role worker or chief
        self.up_ps: Bools = np.zeros(n, bool)
        self.worker: Bools = np.zeros(n, bool)  # role worker or chief, any status
        self.chief: Bools = np.zeros(n, bool)
        self.gpu: Ints = np.zeros(n, np.intp)
        self.region: Ints = np.zeros(n, np.intp)
        self.prov: Ints = np.zeros(n, np.intp)
        self.local: Ints = np.full(n, NO_LOCAL_RANK, np.intp)  # the local rank as a number
        self.step: Floats = np.full(n, np.nan)
        self.sps: Floats = np.full(n, np.nan)
        self.util: Floats = np.full(n, np.nan)
        self.ckpt_last: Floats = np.full(n, np.nan)
        self.ckpt_write: Floats = np.full(n, np.nan)
        self.ckpt_gap: Floats = np.full(n, np.nan)
        self.allreduce: Floats = np.full(n, np.nan)  # a sync rank's exposed all-reduce a step (s)
        self.changed = n  # views read by the last update
        self._read(range(n))

    @classmethod
    def of(cls, job: JobView) -> JobColumns:
        """The columns of a job's nodes, read whole."""
        return cls(job.nodes)

    def update(self, nodes: Sequence[NodeView], change: NodesChange | None = None) -> JobColumns:
        """These columns for ``nodes``: the views that are not the objects last read at their position
        read again, in place (a list of another length: new columns, read whole). ``change`` (the job
        view's): when it says ``nodes`` is the list last read with other views at its positions, only
        those are read (the same positions a comparison finds, without comparing every view). Columns
        handed to another thread are a :meth:`copy`."""
        if nodes is self.nodes:
            self.changed = 0
            return self
        if len(nodes) != len(self.nodes):
            return JobColumns(nodes)
        was, self.nodes = self.nodes, nodes
        if change is not None and change.base is was and change.nodes is nodes:
            self._read(change.positions)
        else:
            self._read(list(compress(range(len(nodes)), map(operator.is_not, nodes, was))))
        return self

    def copy(self) -> JobColumns:
        """A copy no later :meth:`update` changes (the live ranking reads it in a thread)."""
        out = JobColumns.__new__(JobColumns)
        out.nodes, out.labels, out._codes = self.nodes, list(self.labels), dict(self._codes)
        out.changed = self.changed
        for name in _ARRAYS:
            setattr(out, name, getattr(self, name).copy())
        return out

    def _code(self, label: str) -> int:
        code = self._codes.get(label)
        if code is None:
            code = self._codes[label] = len(self.labels)
            self.labels.append(label)
        return code

    def code_of(self, label: str) -> int:
        """The code of ``label`` in :attr:`gpu` / :attr:`region` (-1: no task has it)."""
        return self._codes.get(label, -1)

    def _read(self, at: Sequence[int]) -> None:
        """The views at positions ``at`` read into the columns, one field at a time: a list of that field
        (its values are the views' own objects), let go before the next. A whole read of 100,000 views
        held a tuple of 13 fields a view and their transposition at once (~0.3 kB a view: during a large
        fleet's first sweep, when its job grows each refresh and is read whole, the session's peak)."""
        self.changed = len(at)
        if not at:
            return
        nodes = self.nodes
        views = list(map(nodes.__getitem__, at)) if len(at) < len(nodes) else nodes
        idx, n = np.asarray(at, np.intp), len(at)

        def read(name: str) -> list[Any]:  # one field of the views read
            return list(map(operator.attrgetter(name), views))

        role = read("role")
        work = np.fromiter(map(WORKER_ROLES.__contains__, role), bool, n)
        up = np.fromiter(map("up".__eq__, read("status")), bool, n)
        self.worker[idx] = work
        self.up_worker[idx] = up & work
        self.up_ps[idx] = up & np.fromiter(map("ps".__eq__, role), bool, n)
        self.chief[idx] = np.fromiter(map("chief".__eq__, role), bool, n)
        del role, up, work
        codes = self._codes
        for name, attr in (("gpu", "gpu"), ("region", "region"), ("prov", "provisioning")):
            labels = read(attr)
            for label in dict.fromkeys(labels):  # each label once, first met first
                if label not in codes:
                    self._code(label)
            getattr(self, name)[idx] = np.fromiter(map(codes.__getitem__, labels), np.intp, n)
        self.local[idx] = np.fromiter(map(_local_rank, read("local_rank")), np.intp, n)
        for name, attr in zip(_FLOATS, _FLOAT_FIELDS, strict=True):
            getattr(self, name)[idx] = np.array(read(attr), dtype=float)  # None -> NaN

    # ------------------------------------------------------------------------------------- what is read
    def views(self, where: Bools) -> list[NodeView]:
        """The views where ``where`` holds, in the nodes' order."""
        nodes = self.nodes
        return [nodes[i] for i in np.flatnonzero(where).tolist()]

    def up_ps_nodes(self) -> list[NodeView]:
        """The parameter servers that are up, in the nodes' order (``JobView.up_ps_nodes``)."""
        return self.views(self.up_ps)

    def owns(self) -> Bools:
        """Per label code: whether it names a GPU (:func:`owns_gpu`)."""
        return np.fromiter((owns_gpu(x) for x in self.labels), bool, len(self.labels))

    def counter(self, codes: Ints) -> Counter[str]:
        """``Counter`` of the labels of ``codes`` in the order each was first met (as ``Counter`` over the
        views in order would hold them: ``most_common`` breaks ties by it)."""
        uniq, first, counts = np.unique(codes, return_index=True, return_counts=True)
        order = np.argsort(first, kind="stable")
        return Counter({self.labels[int(uniq[o])]: int(counts[o]) for o in order})

    def up_gpu_counts(self) -> dict[str, int]:
        """GPU type → up workers with it, GPU-less ones left out (``rule_support.up_gpu_counts``)."""
        codes = self.gpu[self.up_worker]
        return {g: c for g, c in self.counter(codes).items() if owns_gpu(g)}

    def dominant(self, codes: Ints) -> str:
        """The most common non-empty label of ``codes`` (ties: the first met), "" when there is none (as
        ``Counter(...).most_common(1)`` over the views in order)."""
        counts = Counter({k: v for k, v in self.counter(codes).items() if k})
        return counts.most_common(1)[0][0] if counts else ""

    def step_times(self) -> dict[str, list[float]]:
        """The up workers' step times (s) by the catalogue name of their GPU label, as a calibration takes
        them one worker after another: a positive, finite time of a worker with a GPU label, names in the
        order first met, times in the nodes' order (an unknown GPU label raises, as there, the first met)."""
        step = self.step
        with np.errstate(invalid="ignore"):
            take = self.up_worker & given(step) & (step > 0) & np.isfinite(step)
        take &= np.array([bool(x) for x in self.labels], bool)[self.gpu]
        codes = self.gpu[take]
        names = {
            label: canonical_gpu_strict(label) for label in self.counter(codes)
        }  # labels, first met first
        by_label = np.array([names.get(x, "") for x in self.labels], dtype=object)[codes]
        out: dict[str, list[float]] = {}
        values = step[take]
        for name in dict.fromkeys(by_label.tolist()):
            out[name] = values[by_label == name].tolist()
        return out

    def own_rates(self, pred: SpeedPrediction | None) -> Floats:
        """Per label code: the predicted steps/s of one worker of that GPU (NaN where none)."""
        rates = pred.worker_steps_per_sec if pred is not None else {}
        own = [rates.get(canonical_gpu(x)) for x in self.labels]
        return np.array(own, dtype=float)


def compute_shares_of(
    cols: JobColumns, where: Bools, pred: SpeedPrediction | None = None
) -> tuple[Floats, str, bool]:
    """:func:`~cmdare.planner.rules.rule_support.compute_shares` of the workers where ``where`` holds:
    (their shares, grouped by signal as there; the signal of the first worker in order that has one;
    whether any came from DCGM)."""
    owns = cols.owns()[cols.gpu]
    dcgm = where & ~np.isnan(cols.util) & owns
    rest = where & ~dcgm & given(cols.sps)
    timed = rest & given(cols.step)
    parts = [cols.util[dcgm] / 100.0, cols.step[timed] * cols.sps[timed]]
    modelled = np.zeros_like(where)
    if pred is not None:
        own = cols.own_rates(pred)[cols.gpu]
        modelled = rest & ~given(cols.step) & given(own)
        parts.append(cols.sps[modelled] / own[modelled])
    first = ""
    firsts = [(int(np.argmax(m)), sig) for m, sig in ((dcgm, "GPU utilisation (DCGM)"),
              (timed, "step compute share"), (modelled, "own steps/s ÷ predicted")) if m.any()]  # fmt: skip
    if firsts:
        first = min(firsts)[1]
    return np.concatenate(parts), first, bool(dcgm.any())
