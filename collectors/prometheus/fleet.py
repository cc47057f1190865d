"""A large fleet through Prometheus (above :data:`FOCUS_FROM` tasks): the figures the server gives for
every task at once, and which tasks a refresh reads in detail.

Reading every task's values on every refresh costs the dashboard and Prometheus more than a screen is
worth at 10,000 tasks (~70,000 rows a refresh; each query selecting 10,000 series costs the server
~0.1 s of CPU, a join with the task-info series ~0.3 s more). So above :data:`FOCUS_FROM` tasks:

* **columns** (read between refreshes: all of them once as soon as the tasks are known, then one at
  most every :data:`COLUMNS_EVERY_S` seconds, in the turns of :data:`TURNS`: preemptions every other
  read, each rate once in six): Prometheus' own
  per-task rates over :data:`RATE_WINDOW` (``max by (instance) (rate(…[1m]))``: steps, compute
  seconds a step, examples) and the tasks whose cloud reports a preemption, one query each, joined
  with nothing below the tasks cap (past it, with the capped task set; the selector
  applies to the value series when its labels are the targets' own, else every series of the metric
  is read and the tasks are picked here by instance). :class:`FleetColumns` lays them out as arrays
  over the known tasks, so the per-job and per-role figures (:class:`~cmdare.collectors.samples.RoleFigures`:
  sums and quantiles of Prometheus' per-task rates) and the outliers (slowest workers by step rate,
  slowest by compute time per step, preempted) come from a few vectorised passes;
* **detail** (every refresh) only for the focus: the tasks the screen shows, the outliers, the tasks
  the alerts name, and a sweep that reads every other task once every :data:`SWEEP_S` seconds
  (:class:`Sweep`); by explicit instances (:func:`detail_query`: an index lookup for the server),
  folded here per task exactly as :func:`~cmdare.collectors.prometheus.aggregate.values_query` folds
  them on the server, so the store and the panes take them unchanged.

Pure functions and plain state: no I/O (``source`` sends the queries).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass
from itertools import chain, repeat
from typing import TYPE_CHECKING, Any

from cmdare.collectors import metrics as M
from cmdare.collectors.prometheus.aggregate import KEY_LABEL, T_KEY, metric_selector
from cmdare.collectors.prometheus.answers import LabelledQuery, LabelledRows, Pairs, labels_of
from cmdare.collectors.prometheus.hosts import exact_instances, promql_string
from cmdare.collectors.prometheus.query_url import encoded
from cmdare.collectors.samples import RoleFigures, TaskInfo

if TYPE_CHECKING:  # numpy loads with the first large fleet's columns, not with the Prometheus source
    import numpy as np

FOCUS_FROM = 2000  # tasks above which a refresh reads per-task detail for the focus only
SWEEP_S = 120.0  # every task's detail is read at least this often (assumption: rows this old are fine)
COLUMNS_FULL_TASKS = 30_000  # past this many tasks the columns are read less often, in proportion
# tasks a refresh's sweep reads at most (~6 rows each): past it the sweep period stretches. 500: at the app's
# default 2 s refresh the sweep stops growing with the fleet where the columns do (30,000 tasks x 2 s / 120 s), so
# past that size a refresh's work no longer grows with the fleet and both periods say how far they stretched (at
# 100,000 tasks each task's detail every 400 s; 800 a refresh read it every 250 s at 1.6x the sweep's CPU)
SWEEP_MAX = COLUMNS_FULL_TASKS * 2 // int(SWEEP_S)
# ... and while the first pass has not read every task yet (a task is listed once its detail has been read): the
# bound that was the steady one before, 800 a refresh (0.13 s of CPU a refresh at 100,000 tasks, measured): the
# fleet is listed whole after 250 s at 100,000 tasks, not 400 s
FIRST_SWEEP_MAX = 800
COLUMNS_EVERY_S = 10.0  # Prometheus' per-task rates are read at most this often (it scrapes every 5-15 s)
RATE_WINDOW = "1m"  # the rates' window: four samples at a 15 s scrape
RATE_WINDOW_S = 60.0
SLOWEST = 10  # per job: the slowest workers by step rate, and by compute time per step, read in detail
FOCUS_MAX = 500  # tasks in the focus (screen, outliers, alerts) read in one refresh
DETAIL_URL_BUDGET = 7000  # characters of a detail query's URL (GET limit 8000: source.MAX_GET_URL)
WORKERS = ("worker", "chief")

# the detail query's metrics, and how a task's series of each fold into one value (as the server folds
# them in values_query: sum per scrape job, the largest over scrape jobs); labels that split a metric
_SUMMED = (
    *M.STEP_COUNTER_KEYS,
    M.PS_BYTES_SAMPLE,
    M.K_STAGE_COMPUTE,
    M.K_STAGE_WAIT,
    M.K_STAGE_MICROBATCHES,
    M.STAGE_BYTES_SAMPLE,
    M.K_PROCESS_CPU,
)
_LARGEST = (M.K_GLOBAL_STEP, M.K_PREEMPTED, M.K_PROCESS_START)
DETAIL_METRICS = _SUMMED + _LARGEST


COLUMNS = ("steps", "compute", "examples", "preempted")
# a detail answer: its rows, or its rows' labels and values as text (decode_labelled)
Detail = list[dict[str, Any]] | LabelledRows
# the order the columns are read in, one a turn: preemption notices every other turn (a revocation is
# what a spot-fleet operator must see first), each rate column once in six turns
TURNS = ("steps", "preempted", "compute", "preempted", "examples", "preempted")


def column_queries(selector: str, tasks: str | None = None) -> dict[str, str]:
    """One query per column, each Prometheus' own per-task figure folded per instance; ``selector``
    (the inside of the braces, "" for none) applies to the value series directly. ``tasks``: past the
    tasks cap, the capped task set (``aggregate.capped_tasks``): each column is joined with
    it, so an answer never holds more tasks than the cap (a join costs the server, past the cap only)."""

    def rate(metric: str) -> str:
        return f"max by (instance) (rate({metric_selector(metric, selector)}[{RATE_WINDOW}]))"

    cols = {
        "steps": rate(M.K_WORKER_STEPS),
        "compute": f"{rate(M.K_STEP_SECONDS_SUM)} / {rate(M.K_STEP_SECONDS_COUNT)}",  # s a step, per task
        "examples": rate(M.K_EXAMPLES),
        "preempted": f"max by (instance) ({metric_selector(M.K_PREEMPTED, selector)}) == 1",
    }
    return cols if tasks is None else {k: f"({q}) and on (instance) {tasks}" for k, q in cols.items()}


def detail_query(instances: Iterable[str]) -> str:
    """The raw series of :data:`DETAIL_METRICS` of these instances, and each one's last scrape time (its
    task-info sample's timestamp, tagged ``cmdare_key="__scrape_time"``). The instances' dots are left
    unescaped (a dot matches itself too): ~40% shorter URLs, whose every character httpx checks in
    Python; another known task's instance that happens to match is read as that task's detail (an
    instance not known makes the refresh ask who it is)."""
    inst = loose_instances(instances)
    names = "|".join(DETAIL_METRICS)
    stamp = f"max by (instance) (timestamp({M.TASK_INFO.name}{{{inst}}}))"
    return f'{{__name__=~"{names}",{inst}}} or label_replace({stamp}, "{KEY_LABEL}", "{T_KEY}", "", "")'


class DetailQuery(LabelledQuery):
    """A detail query (:func:`detail_query`): its answer is read as :class:`~.answers.LabelledRows`."""

    __slots__ = ()


def detail_queries(instances: Sequence[str], budget: int = DETAIL_URL_BUDGET) -> list[str]:
    """:func:`detail_query` over ``instances`` in as few queries as keep each one's URL (encoded as it is
    sent: :func:`~.query_url.encoded`, the instances listed twice) under ``budget`` characters, so each
    goes as a GET."""
    out: list[str] = []
    chunk: list[str] = []
    used = len(encoded(detail_query([])))
    for inst in instances:
        cost = 2 * len(encoded(promql_string(_loose(inst)) + "|"))
        if chunk and used + cost > budget:
            out.append(DetailQuery(detail_query(chunk)))
            chunk, used = [], len(encoded(detail_query([])))
        chunk.append(inst)
        used += cost
    if chunk:
        out.append(DetailQuery(detail_query(chunk)))
    return out


def _loose(instance: str) -> str:
    """``instance`` as a regex with its dots left as they are (see :func:`detail_query`)."""
    return re.escape(instance).replace("\\.", ".")


def loose_instances(instances: Iterable[str]) -> str:
    """``instance=~"a|b"`` for these instances, dots unescaped (see :func:`detail_query`)."""
    return exact_instances(instances, escape=_loose)


def _key(name: str, labels: Mapping[str, str]) -> str | None:
    """The series key a raw detail series feeds (None: a series the store does not take)."""
    if name == M.PS_BYTES_SAMPLE:
        d = labels.get("direction")
        return M.K_PS_IN if d == "in" else M.K_PS_OUT if d == "out" else None
    if name == M.STAGE_BYTES_SAMPLE:
        peer = labels.get("peer")
        return M.stage_bytes_key(peer) if peer else None
    return name if name in DETAIL_METRICS else None


@dataclass(frozen=True, slots=True)
class FoldedDetail:
    """A refresh's detail answers folded per task: each instance's scrape time (the raw ``value`` text of
    its scrape-time row) and its values by series key (what ``values_query`` would answer)."""

    times: dict[str, Any]
    values: dict[str, dict[str, float]]


# A detail row, as :func:`fold_by_task` reads it: (name, instance, job) of a row whose labels are exactly those three,
# (key label, instance) of a scrape-time row whose labels are exactly those two, else the row's labels (text from
# :class:`LabelledRows` or a decoded row's mapping; empty: no labels), then the value as the server wrote it
Row = tuple[tuple[str, str, str, str, str, "str | Mapping[str, str]"], Any]

# Each line of a detail answer's labels text (joined by newlines: no label text holds one, see
# :class:`LabelledRows`) in the two shapes nearly every row has (engines write labels sorted by name), else whole
_SHAPES = re.compile(
    r'^(?:"__name__":"([^"\n]*)","instance":"([^"\n]*)","job":"([^"\n]*)"'
    rf'|"{KEY_LABEL}":"([^"\n]*)","instance":"([^"\n]*)"|(.*))$',
    re.MULTILINE,
)


def _labelled(answers: Iterable[Detail]) -> Iterator[Row]:
    """Each row of the detail answers (:data:`Row`): iterators made in C (``zip``, ``map``, chained), with
    no Python frame resumed and no dict made for a row of the usual shapes (~9,000 rows a refresh)."""
    return chain.from_iterable(map(_rows_of, answers))


def _rows_of(answer: Detail) -> Iterator[Row]:
    """One answer's rows (:data:`Row`): a :class:`LabelledRows` answer's labels read in one regex pass over
    them all (each row's own labels text when that pass does not find one line a row)."""
    if isinstance(answer, LabelledRows):
        shaped = _SHAPES.findall("\n".join(answer.labels))
        if len(shaped) == len(answer.labels):
            return zip(shaped, answer.values, strict=True)
        return zip(map(_unshaped, answer.labels), answer.values, strict=True)
    return ((_unshaped(r["metric"]), r["value"][1]) for r in answer)


def _unshaped(labels: str | Mapping[str, str]) -> tuple[str, str, str, str, str, str | Mapping[str, str]]:
    """A row read through its labels (:data:`Row`'s last field)."""
    return "", "", "", "", "", labels


_NO_LABELS: Mapping[str, str] = {}


def fold_by_task(answers: Iterable[Detail]) -> FoldedDetail:
    """Raw detail rows folded per task: summed per scrape job, the largest over scrape jobs (the global
    step, preemption and start time: the largest throughout). Rows are well formed (decoded). One pass a
    row, one dict a task and scrape job (~15,000 rows a refresh at 100,000 tasks: no object kept a row)."""
    plain, largest, special = _PLAIN_KEYS, _LARGEST_SET, _SPECIAL
    times: dict[str, Any] = {}
    by_job: dict[str, dict[str, dict[str, float]]] = {}  # instance -> scrape job -> key -> value
    for (name, inst, job, stamp, stamped, other), text in _labelled(answers):
        labels = _NO_LABELS
        if other:  # a row of another shape: read through its labels
            labels = labels_of(other) if isinstance(other, str) else other
            got = labels.get("__name__")
            if got is None:  # the scrape-time row
                if labels.get(KEY_LABEL) == T_KEY:
                    times[labels.get("instance", "")] = text
                continue
            name, inst, job = got, labels.get("instance", ""), labels.get("job", "")
        elif not name:  # the scrape-time row (or a row with no labels, or an empty name: not read)
            if stamp == T_KEY:
                times[stamped] = text
            continue
        key = plain.get(name)
        if key is None:
            key = _key(name, labels) if name in special else None
            if key is None:
                continue
        try:
            value = float(text)
        except (TypeError, ValueError):
            continue
        if value - value != 0.0:  # inf or NaN
            continue
        jobs = by_job.get(inst)
        if jobs is None:
            jobs = by_job[inst] = {}
        held = jobs.get(job)
        if held is None:
            held = jobs[job] = {}
        was = held.get(key)
        if was is None:
            held[key] = value
        elif name in largest:
            if value > was:
                held[key] = value
        else:
            held[key] = was + value
    values: dict[str, dict[str, float]] = {}
    for inst, jobs in by_job.items():
        if len(jobs) == 1:  # one scrape job reads the task (the usual case): its sums as they are
            (values[inst],) = jobs.values()
            continue
        out: dict[str, float] = {}
        for held in jobs.values():
            for key, value in held.items():
                was = out.get(key)
                if was is None or value > was:
                    out[key] = value
        values[inst] = out
    return FoldedDetail(times, values)


_PLAIN_KEYS = {name: name for name in DETAIL_METRICS if name not in (M.PS_BYTES_SAMPLE, M.STAGE_BYTES_SAMPLE)}
_SPECIAL = frozenset((M.PS_BYTES_SAMPLE, M.STAGE_BYTES_SAMPLE))  # keyed by a label (_key)
_LARGEST_SET = frozenset(_LARGEST)


def _float(text: object) -> float | None:
    try:
        x = float(text)  # type: ignore[arg-type]  # any value: what float() refuses raises TypeError, caught below
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


@dataclass(frozen=True)
class Fleet:
    """What the columns read so far say: per (job, role) figures, and the outliers to read in
    detail (instance → why: ``slowest``, ``slowest compute``, ``preempted``)."""

    roles: tuple[RoleFigures, ...]
    outliers: Mapping[str, str]
    t: float  # the steps column's evaluation time (server clock, s): what the rates are as of


@dataclass(frozen=True, slots=True)
class ColumnValues:
    """A column's answer as the fleet keeps it (:meth:`FleetColumns.lay_out`): its values over the
    slots of the columns it was laid over (NaN where a task had no row or a value not a rate), the rows
    of instances not known there (kept apart, in order: a new read of who the tasks are may know them
    by the time the answer is taken), and how many values were implausible."""

    over: FleetColumns
    values: np.ndarray
    stray_keys: list[str]
    stray_values: np.ndarray
    implausible: int


# a column's answer: its rows, its instances and values read without an object a row (decode_pairs), or
# laid out over the known tasks as it was read (FleetColumns.lay_out: what a large fleet's reads give)
Column = list[dict[str, Any]] | Pairs | ColumnValues


def _moved(values: np.ndarray, old: np.ndarray) -> np.ndarray:
    """``values`` over another read's slots moved over these (``old``: :meth:`FleetColumns._slots_in`;
    NaN where a task was not there)."""
    import numpy as np

    return np.where(old >= 0, np.append(values, np.nan)[old], np.nan)


class FleetColumns:
    """The known tasks laid out as arrays (one slot an instance), filled from the column answers.
    Built once per read of who the tasks are; each read of the columns is then a few array passes."""

    def __init__(
        self,
        tasks: Mapping[str, TaskInfo],
        carry: FleetColumns | None = None,
        slots: tuple[list[str], dict[str, int]] | None = None,
    ) -> None:
        """``carry``: the columns read for the tasks known before, kept for those still known (the
        others NaN), so a new read of who the tasks are does not wait for every column again.
        ``slots``: ``tasks``' instances in their order and each one's position, when the caller holds
        them already (the Prometheus source's books: a dict of 100,000 keys not made twice, ~6 MiB);
        held as they are, never changed here."""
        import numpy as np

        if slots is not None:
            self.instances, self.index = slots
        else:
            self.instances = list(tasks)
            self.index = {inst: i for i, inst in enumerate(self.instances)}
        groups: dict[tuple[str, str], list[int]] = {}
        for i, info in enumerate(tasks.values()):
            groups.setdefault((info.job, info.role), []).append(i)
        self.groups = {k: np.array(v, dtype=np.intp) for k, v in sorted(groups.items())}
        workers: dict[str, list[int]] = {}
        for (job, role), idx in self.groups.items():
            if role in WORKERS:
                workers.setdefault(job, []).extend(idx.tolist())
        self.workers = {job: np.array(v, dtype=np.intp) for job, v in workers.items()}
        self.arrays: dict[str, np.ndarray] = {}  # column name -> values over the tasks' slots
        self.times: dict[str, float] = {}  # column name -> its evaluation time (server clock)
        self.implausible = 0  # values of the last column answer ignored (negative, non-finite, past 1e30)
        if carry is not None and carry.arrays:
            old = self._slots_in(carry)
            for name, values in carry.arrays.items():
                self.arrays[name] = _moved(values, old)
            self.times = dict(carry.times)

    def column(self, answer: Column) -> np.ndarray:
        """One answer as an array over the known tasks (NaN where a task had no row, or a value that
        is not a number in 0..:data:`~cmdare.collectors.metrics.MAX_ABS_VALUE`: counted in
        :attr:`implausible`). ``answer``: its rows (well formed, decoded: metric a dict of str, value a
        pair), its instances and values as :class:`~cmdare.collectors.prometheus.answers.Pairs`
        (``decode_pairs``), or :class:`ColumnValues` (:meth:`lay_out`)."""
        laid = self._laid(answer)
        self.implausible = laid.implausible
        return self._on_slots(laid)

    def lay_out(self, chunks: Iterable[Pairs]) -> ColumnValues:
        """A column's rows (instances and values, a chunk at a time: ``answers.read_pairs``) laid out
        over these slots as they come: what the fleet keeps of the answer, no text of it. Values are
        converted a chunk at a time in one pass (one by one only when one is not a number: then every
        value of the answer reads as by :func:`_float`, as when converted whole)."""
        import numpy as np

        n = len(self.instances)
        out = np.full(n + 1, np.nan)  # the last slot takes the rows of instances not known
        stray_keys: list[str] = []
        stray_values: list[np.ndarray] = []
        bad = infinite = 0  # values out of 0..MAX_ABS_VALUE: finite, and infinite (numpy's reading only)
        one_by_one = False
        for chunk in chunks:
            keys, texts = chunk.keys, chunk.values
            idx = np.fromiter(map(self.index.get, keys, repeat(n)), np.intp, len(keys))
            vals = None
            if not one_by_one:
                try:
                    vals = np.array(texts, dtype=float) if texts else np.empty(0)
                except (TypeError, ValueError):
                    one_by_one = True
            if vals is None:
                vals = np.array([_float(x) for x in texts], dtype=float)  # None -> NaN
            finite = np.isfinite(vals)
            with np.errstate(invalid="ignore"):
                ok = finite & (vals >= 0) & (vals <= M.MAX_ABS_VALUE)  # 1e308 summed overflows
            bad += int(np.count_nonzero(finite & ~ok))
            infinite += int(np.count_nonzero(np.isinf(vals)))
            vals = np.where(ok, vals, np.nan)
            out[idx] = vals
            strays = np.flatnonzero(idx == n)
            if len(strays):
                stray_keys.extend(keys[i] for i in strays.tolist())
                stray_values.append(vals[strays])
        kept = np.concatenate(stray_values) if stray_values else np.empty(0)
        return ColumnValues(self, out[:n], stray_keys, kept, bad + (0 if one_by_one else infinite))

    def take(self, name: str, answer: Column, t: float) -> None:
        """One column's answer, evaluated at server time ``t``."""
        self.arrays[name], self.times[name] = self.column(answer), t

    def _laid(self, answer: Column) -> ColumnValues:
        """``answer`` as :class:`ColumnValues` (laid out over these slots when it is not yet)."""
        if isinstance(answer, ColumnValues):
            return answer
        if isinstance(answer, Pairs):
            return self.lay_out((answer,))
        return self.lay_out(
            (Pairs([r["metric"].get("instance", "") for r in answer], [r["value"][1] for r in answer]),)
        )

    def _on_slots(self, laid: ColumnValues) -> np.ndarray:
        """A column laid out over these slots: as it is when laid over them, else moved over (a new read
        of who the tasks are came between the answer and this refresh: its rows as if read here)."""
        import numpy as np

        if laid.over is self:
            return laid.values
        n = len(self.instances)
        out = np.append(_moved(laid.values, self._slots_in(laid.over)), np.nan)
        out[np.fromiter(map(self.index.get, laid.stray_keys, repeat(n)), np.intp, len(laid.stray_keys))] = (
            laid.stray_values
        )
        return out[:n]

    def _slots_in(self, other: FleetColumns) -> np.ndarray:
        """Where each of these slots' instance sits in ``other``'s slots (-1: not there)."""
        import numpy as np

        return np.array([other.index.get(i, -1) for i in self.instances], dtype=np.intp)

    def fleet(self) -> Fleet | None:
        """The per-role figures and the outliers from the columns read so far (a column not read yet
        counts as unknown for every task; None before any), at the steps column's time."""
        import numpy as np

        if not self.arrays:
            return None
        unknown = np.full(len(self.instances), np.nan)
        steps, compute, examples = (
            self.arrays.get(name, unknown) for name in ("steps", "compute", "examples")
        )
        roles = tuple(_role(job, role, idx, steps, examples) for (job, role), idx in self.groups.items())
        preempted = np.nonzero(self.arrays.get("preempted", unknown) >= 1)[0]
        outliers = {self.instances[i]: "preempted" for i in preempted}
        for idx in self.workers.values():
            for i in _extreme(steps, idx, SLOWEST, largest=False):
                outliers.setdefault(self.instances[i], "slowest")
            for i in _extreme(compute, idx, SLOWEST, largest=True):
                outliers.setdefault(self.instances[i], "slowest compute")
        return Fleet(roles, outliers, self.times.get("steps", math.nan))


def _role(job: str, role: str, idx: np.ndarray, steps: np.ndarray, examples: np.ndarray) -> RoleFigures:
    """One role's figures from the columns at its tasks' slots ``idx``."""
    import numpy as np

    rated = steps[idx][np.isfinite(steps[idx])]
    ex = examples[idx][np.isfinite(examples[idx])]
    q = np.quantile(rated, (0.1, 0.5, 0.9)) if len(rated) else (math.nan,) * 3
    return RoleFigures(
        job=job,
        role=role,
        tasks=len(idx),
        rated=len(rated),
        steps_per_sec=float(rated.sum()) if len(rated) else None,
        examples_per_sec=float(ex.sum()) if len(ex) else None,
        p10=_or_none(q[0]),
        p50=_or_none(q[1]),
        p90=_or_none(q[2]),
        window_s=RATE_WINDOW_S,
        examples_rated=len(ex),
    )


def _extreme(values: np.ndarray, idx: np.ndarray, k: int, *, largest: bool) -> list[int]:
    """The slots (of ``idx``) of the ``k`` smallest (or largest) finite ``values``."""
    import numpy as np

    idx = idx[np.isfinite(values[idx])]
    if not len(idx):
        return []
    k = min(k, len(idx))
    part = np.argpartition(-values[idx] if largest else values[idx], k - 1)[:k]
    return [int(i) for i in idx[part]]


def _or_none(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


class Sweep:
    """Every known task once every :data:`SWEEP_S` seconds, a slice at a time: each call takes the
    share of the tasks that the time elapsed since the last call stands for (measured, not nominal),
    at most :data:`SWEEP_MAX` a call (:data:`FIRST_SWEEP_MAX` until the first pass has read as many tasks as
    the fleet holds): a refresh's detail stays bounded however large the fleet (past 30,000 tasks at a 2 s
    refresh the period stretches; :attr:`period` says by how much)."""

    def __init__(
        self, period: float = SWEEP_S, most: int | None = None, first_most: int | None = None
    ) -> None:
        self.nominal = self.period = period  # period: the one in force (stretched past SWEEP_MAX a call)
        self.most = SWEEP_MAX if most is None else most
        # the bound of the first pass, until as many tasks as the fleet holds have been taken
        self.first_most = max(self.most, FIRST_SWEEP_MAX if first_most is None else first_most)
        self._pos = 0
        self._taken = 0  # tasks taken until the first pass ends (then no longer counted)
        self._first_pass = True
        self._last: float | None = None

    def take(self, instances: Sequence[str], now: float) -> list[str]:
        """The next slice of ``instances`` (in a stable order: the same list from one call to the next
        while the fleet does not change); nothing on the first call (a full read has just run)."""
        last, self._last = self._last, now
        if last is None or not instances:
            return []
        n = len(instances)
        dt = max(0.0, now - last)
        most = self.first_most if self._first_pass else self.most
        k = min(n, most, math.ceil(n * dt / self.nominal))
        # how long a whole sweep takes at this pace (a slow refresh never makes the next one read more);
        # changed only when 25% off, so that what rests on it (the store's sparse window, set on every
        # task when it changes: 0.18 s at 100,000 tasks) does not move with each refresh's jitter
        period = max(self.nominal, n * dt / k) if k else self.nominal
        if abs(period - self.period) > 0.25 * self.period:
            self.period = period
        start = self._pos % n
        self._pos = start + k
        if self._first_pass:
            self._taken += k
            self._first_pass = self._taken < n
        picked = list(instances[start : start + k])
        return picked + list(instances[: max(0, start + k - n)])


def direct_probe(selector: str) -> str:
    """How many instances carry a step counter under ``selector`` itself (one row): none means the
    selector names the exporter's own labels (on its task-info series only), so the column queries
    read every series of a metric and the tasks are picked here by instance."""
    return f"count(max by (instance) ({metric_selector(M.K_WORKER_STEPS, selector)}))"


class FleetReader:
    """What a large fleet's refresh reads, and what the answers tell (see the module docstring):
    :meth:`know` after each read of who the tasks are, :meth:`plan` before a refresh's queries,
    :meth:`read` with their answers. ``focus``: task keys to read in detail (the session sets it:
    the rows on screen, the tasks the alerts name)."""

    def __init__(
        self, selector: str, sweep_s: float = SWEEP_S, columns_every_s: float = COLUMNS_EVERY_S
    ) -> None:
        self.selector = selector
        self.columns_every_s = columns_every_s
        self.focus: set[str] = set()
        self.direct: bool | None = True if not selector else None  # the selector on value series? (probed)
        self.fleet: Fleet | None = None  # the figures of the latest read of the columns
        self.note: str | None = None  # what this refresh read, for the status line
        self._sweep = Sweep(sweep_s)
        self._columns: FleetColumns | None = None
        self.implausible = 0  # column values the last column read ignored (FleetColumns.column)
        self._columns_at = -math.inf
        self._turn = 0  # the next column to read
        self._order: list[str] = []  # the known instances, sorted (the sweep's order)
        # the known tasks' keys (``job/name``) by their hash, sorted, and each one's instance: the focus's
        # keys (a few hundred) are looked up here (_keyed), where a dict of task key → instance held a key
        # a task (~3.7 MiB at 100,000 tasks; these two arrays 1.6 MB)
        self._key_hashes: np.ndarray | None = None
        self._key_instances: list[str] = []
        # the last look-up (keys, their instances): the focus is mostly the same from one refresh to the next
        # (the rows on screen), and a look-up by hash costs ~80 µs for 300 keys against ~5 µs to compare sets
        self._keyed_last: tuple[frozenset[str], list[str]] | None = None
        self._new: set[str] = set()  # instances named since their detail was last read
        self._first_due = True  # every column at once, once the tasks are known (first_columns)

    def know(
        self, tasks: Mapping[str, TaskInfo], slots: tuple[list[str], dict[str, int]] | None = None
    ) -> None:
        """Who the tasks are now (instance → identity); a task not known before is read at once.
        ``slots``: their instances in order and each one's position, held by the caller
        (:class:`FleetColumns`)."""
        if self._order:
            self._new |= set(tasks).difference(self._order)
        self._new.intersection_update(tasks)
        self._order = sorted(tasks)
        self._know_keys(tasks)
        self._columns = FleetColumns(tasks, carry=self._columns, slots=slots)

    @property
    def sweep_period(self) -> float:
        """Seconds in which the sweep reads every task once."""
        return self._sweep.period

    @property
    def first_due(self) -> bool:
        """Whether the tasks are known and no column has been asked for yet (:meth:`first_columns`)."""
        return self._first_due and self._columns is not None

    def first_columns(self, now: float, tasks: str | None = None) -> dict[str, str]:
        """Every column at once (name → PromQL), for the first read once the tasks are known: the job's
        figures and the preempted tasks join the next refresh, not one column a turn later (the
        examples column would come ~10 s after the steps one, the figures meanwhile a few tasks' sample).
        ``now``: monotonic seconds (the turns go on from it); ``tasks``: the capped task set, past the tasks cap."""
        self._first_due = False
        self._columns_at = now
        return column_queries(self.selector if self.direct else "", tasks)

    def columns_due(self, now: float) -> bool:
        """Whether this refresh reads a column (``now``: monotonic seconds): one column at a time, in
        turns, so that each is read every ``columns_every_s`` and the server's work is spread out."""
        every = self.columns_period / len(TURNS)
        return self._columns is not None and now - self._columns_at >= every

    @property
    def columns_period(self) -> float:
        """Seconds in which every column is read once: ``columns_every_s``, stretched past
        :data:`COLUMNS_FULL_TASKS` tasks in proportion (a column is one row a task: at 100,000 tasks
        each read costs ~0.1 s of decoding; Prometheus' rates span :data:`RATE_WINDOW`, longer still)."""
        return self.columns_every_s * max(1.0, len(self._order) / COLUMNS_FULL_TASKS)

    def plan(
        self, now: float, busy: bool = False, tasks: str | None = None
    ) -> tuple[list[str], dict[str, str]]:
        """This refresh's detail queries, and the column queries (name → PromQL) when they are due and
        no read of them is ``busy`` (``tasks``: the capped task set, past the tasks cap)."""
        wanted = self._wanted()
        chosen = set(wanted)
        swept = [i for i in self._sweep.take(self._order, now) if i not in chosen]
        cols: dict[str, str] = {}
        if self.columns_due(now) and not busy:
            self._columns_at = now
            name = TURNS[self._turn % len(TURNS)]
            self._turn += 1
            selector = self.selector if self.direct else ""  # not on the value series: every series
            cols = {name: column_queries(selector, tasks)[name]}
        self.note = (
            f"{len(self._order):,} tasks: detail for {len(wanted):,} (on screen, outliers, new, alerts) and "
            f"{len(swept):,} swept (each task every {self._sweep.period:.0f} s); job totals: Prometheus' "
            f"per-task rates over {RATE_WINDOW}"
        )
        if self.columns_period > self.columns_every_s:  # a very large fleet: said, as the sweep's period is
            self.note += f", each read every {self.columns_period:.0f} s"
        return detail_queries([*wanted, *swept]), cols

    def _wanted(self) -> list[str]:
        """The focus, most urgent first, at most :data:`FOCUS_MAX`: preempted, new, on screen or
        named by an alert, then the slowest."""
        outliers = self.fleet.outliers if self.fleet is not None else {}
        preempted = [i for i, why in outliers.items() if why == "preempted"]
        keyed = self._keyed(self.focus)
        slow = [i for i, why in outliers.items() if why != "preempted"]
        return list(dict.fromkeys([*preempted, *sorted(self._new), *keyed, *slow]))[:FOCUS_MAX]

    def _know_keys(self, tasks: Mapping[str, TaskInfo]) -> None:
        """The tasks' keys by hash (:meth:`_keyed`): one sort at each read of who the tasks are."""
        import numpy as np

        hashes = np.fromiter((hash(info.key) for info in tasks.values()), np.int64, len(tasks))
        order = np.argsort(hashes, kind="stable")
        instances = list(tasks)
        self._key_hashes = hashes[order]
        self._key_instances = [instances[i] for i in order.tolist()]
        self._keyed_last = None

    def _keyed(self, keys: Set[str]) -> list[str]:
        """The instances of the known tasks with these keys (``job/name``), in the keys' order (the last
        answer again when the keys and the tasks are the same). Keys are matched by hash (Python's: 64 bits,
        seeded at random per process, so a label cannot be made to match another's): two tasks' keys of one
        hash both come, one more task read, never one less."""
        import numpy as np

        last = self._keyed_last
        if last is not None and last[0] == keys:
            return last[1]
        hashes = self._key_hashes
        order = list(keys)
        if hashes is None or not len(hashes) or not order:
            return []
        wanted = np.fromiter(map(hash, order), np.int64, len(order))
        lo = np.searchsorted(hashes, wanted, "left").tolist()
        hi = np.searchsorted(hashes, wanted, "right").tolist()
        found = [inst for a, b in zip(lo, hi, strict=True) for inst in self._key_instances[a:b]]
        self._keyed_last = (frozenset(order), found)
        return found

    def read(
        self,
        detail: Iterable[Detail],
        columns: Mapping[str, Column] | None,
        t: float,
    ) -> FoldedDetail:
        """The detail answers folded per task; the column answers (when read) as the fleet's figures, at
        server time ``t``."""
        rows = fold_by_task(detail)
        self._new.difference_update(rows.times)
        if columns and self._columns is not None:
            self.implausible = 0
            for name, answer in columns.items():
                self._columns.take(name, answer, t)
                self.implausible += self._columns.implausible
            self.fleet = self._columns.fleet()
        return rows

    def lay_out(self, chunks: Iterable[Pairs]) -> ColumnValues:
        """A column's rows laid out over the known tasks as they are read (:meth:`FleetColumns.lay_out`;
        before the tasks are known, every row is kept apart for the columns to come)."""
        return (self._columns or FleetColumns({})).lay_out(chunks)

    def set_direct(self, rows: list[dict[str, Any]]) -> None:
        """The answer of :func:`direct_probe`: the selector applies to the value series when any has it."""
        self.direct = bool(rows) and (_float(rows[0]["value"][1]) or 0.0) > 0
