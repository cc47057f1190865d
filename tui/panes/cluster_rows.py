"""What the Cluster pane's table shows of each task, and how its rows are kept from one refresh to the
next (:class:`TaskRows`): a task's row is the very same object while the overview hands over the same
view of it (collectors/observed.py keeps a task's ``NodeView`` while nothing about it changed) and the
flags raised on it stay; its cells are made only when the row is drawn (or filtered on), its uptime
counted to the time the pane shows (:class:`ShownAt`), so the row need not change as time passes."""

from __future__ import annotations

import math
import operator
import time
from collections.abc import Callable, Sequence
from itertools import chain, compress, count
from typing import TYPE_CHECKING

from rich.text import Text

from cmdare.collectors.clock import clock_time
from cmdare.collectors.observed import JobView, NodeView
from cmdare.tui.format import (
    STATUS_SYMBOL,
    bytes_rate,
    gpu_label,
    num,
    provisioning,
    rate,
    region_code,
    uptime,
    uptime_until,
)
from cmdare.tui.session import MonitorState
from cmdare.tui.widgets.table import Row

if TYPE_CHECKING:
    from cmdare.planner.rules.alerts import Alert

COLUMNS = (("Status", 9), ("Job", 6), ("Task", 9), ("Role", 6), ("Steps/s", 7), ("GPU", 5), ("CPU", 4), ("Mem", 7),
           ("GPU%", 4), ("Prov", 7), ("Flag", 18), ("GPU mem", 8), ("Up", 6), ("Region", 12), ("Step ms", 7),
           ("Net in", 9))  # fmt: skip
# Widths are floors: a column is as wide as its cells (tui/widgets/column_fit.py) and gives up cells down to
# its floor only when the pane is too narrow. The Flag column takes no room while no task is flagged; the
# Job column is shown while the cluster holds more than one job.
COLLAPSE = ("Flag",)
FIT_THROUGH = "Prov"  # the columns up to this one share the pane's width; the rest scroll into view
STATUS_STYLE = {
    "up": "green",
    "silent": "yellow",
    "revoked": "red bold",
    "pending": "dim",
    "finished": "blue",
}


def gpu_name(n: NodeView) -> str:
    """The task's GPU: its ``gpu`` label or the DCGM model's short name, else :func:`gpu_label`'s words."""
    return gpu_label(n.gpu, n.owns_gpu, n.role)


def used_of(used: float | None, total: float | None, unit: float) -> str:
    """``1.4/24G``: used of total, in units of ``unit`` bytes (or MiB)."""
    if used is None or total is None or not (math.isfinite(used) and math.isfinite(total)):
        return "–"
    return f"{used / unit:.1f}/{total / unit:.0f}G"


def up_cell(n: NodeView, now: float) -> str:
    """The Up column: the uptime, or ``@10:42`` (its last event) for a finished log run."""
    return uptime(n.uptime_s(now)) if n.ended_at is None else f"@{clock_time(n.ended_at)}"


def node_cells(n: NodeView, marks: Sequence[str], now: float, job: str = "") -> tuple[object, ...]:
    """The cells of a task's row in ``job`` (made when the row is painted; uptime at ``now``)."""
    again = f" ↻{n.restarts}" if n.restarts else ""  # came back after a revocation, or restarted (its logs)
    status = Text(
        f"{STATUS_SYMBOL.get(n.status, '○')} {n.status}{again}", style=STATUS_STYLE.get(n.status, "")
    )
    flag = Text(("⚑ " + ",".join(marks)) if marks else "", style="bold yellow")
    step_ms = n.step_seconds * 1000 if n.step_seconds else None
    cpu = f"{n.cpu_pct:.0f}%" if n.cpu_pct is not None else "–"
    gpu_pct = f"{n.gpu_util:.0f}%" if n.gpu_util is not None else "–"
    cells = (status, job, n.name, n.role, rate(n.steps_per_sec), gpu_name(n), cpu,
             used_of(n.mem_used_bytes, n.mem_total_bytes, 2**30), gpu_pct, provisioning(n.provisioning), flag,
             used_of(n.gpu_mem_used_mib, n.gpu_mem_total_mib, 1024), up_cell(n, now), region_code(n.region),
             num(step_ms, 0), bytes_rate(n.net_in_bps))  # fmt: skip
    return cells


def _step_ms(n: NodeView, _: Sequence[str]) -> float | None:
    return n.step_seconds * 1000 if n.step_seconds else None


# what each column of COLUMNS sorts by (a task's view and the flags raised on it -> a raw value)
SORT_BY: tuple[Callable[[NodeView, Sequence[str]], object], ...] = (
    lambda n, _: n.status,
    lambda n, _: None,  # the job: TaskSort answers it
    lambda n, _: n.name,
    lambda n, _: n.role,
    lambda n, _: n.steps_per_sec,
    lambda n, _: gpu_name(n),
    lambda n, _: n.cpu_pct,
    lambda n, _: n.mem_used_bytes,
    lambda n, _: n.gpu_util,
    lambda n, _: n.provisioning,
    lambda _, marks: ",".join(marks),
    lambda n, _: n.gpu_mem_used_mib,
    lambda n, _: None if n.started_at is None else -n.started_at,
    lambda n, _: n.region,
    _step_ms,
    lambda n, _: n.net_in_bps,
)


class TaskSort(Sequence[object]):
    """A task's sort values as a row's ``sort``: each column's value made only when the table sorts
    by that column (the table reads one; a 10,000-task sort need not make 150,000)."""

    __slots__ = ("view", "marks", "job")

    def __init__(self, view: NodeView, marks: Sequence[str], job: str = "") -> None:
        self.view, self.marks, self.job = view, marks, job

    def __len__(self) -> int:
        return len(SORT_BY)

    def __getitem__(self, col: int) -> object:  # type: ignore[override]  # one column's sort key; never sliced
        return self.job if col == JOB else SORT_BY[col](self.view, self.marks)


class ShownAt:
    """The time the pane shows uptimes at: one object read by every row's cells when they are made,
    so a row can stay the same object from one refresh to the next while its uptime counts on."""

    __slots__ = ("now",)

    def __init__(self, now: float) -> None:
        self.now = now


UP = next(i for i, (label, _) in enumerate(COLUMNS) if label == "Up")
JOB = next(i for i, (label, _) in enumerate(COLUMNS) if label == "Job")
Facts = tuple[str, bool, float | None]  # what the summary counts of a task: role, up, finite steps/s


def task_facts(n: NodeView) -> Facts:
    """What the summary line counts of a task."""
    value = n.steps_per_sec
    return n.role, n.status == "up", value if value is not None and math.isfinite(value) else None


def steady_from(now: float, up: float | None) -> tuple[float, float]:
    """The times, from ``now``, over which an uptime of ``up`` at ``now`` reads the same."""
    if up is None or not math.isfinite(up):
        return -math.inf, math.inf  # "–" at any time
    return now, now + uptime_until(up) - up


class TaskCells:
    """A task's cells as a row's cells function: made when first drawn, then the very same tuple
    until the uptime shown at :class:`ShownAt`'s time reads differently (then only it is made again),
    so that the table tells a changed line from an unchanged one by identity; while the time stays
    within the span the uptime reads the same, a call costs a comparison."""

    __slots__ = ("view", "marks", "shown", "job", "_cells", "_steady")

    def __init__(self, view: NodeView, marks: Sequence[str], shown: ShownAt, job: str = "") -> None:
        self.view, self.marks, self.shown, self.job = view, marks, shown, job
        self._cells: tuple[object, ...] | None = None
        self._steady = (math.inf, -math.inf)  # times at which the uptime shown reads as in _cells

    def __call__(self) -> tuple[object, ...]:
        now = self.shown.now
        low, high = self._steady
        if self._cells is not None and low <= now < high:
            return self._cells
        up = self.view.uptime_s(now)
        self._steady = steady_from(now, up)
        if self._cells is None:
            self._cells = node_cells(self.view, self.marks, now, self.job)
        elif (text := uptime(up)) != self._cells[UP]:
            self._cells = (*self._cells[:UP], text, *self._cells[UP + 1 :])
        return self._cells


def node_row(
    job: JobView, n: NodeView, marks: Sequence[str], now: float | None = None, shown: ShownAt | None = None
) -> Row:
    """One task's table row (cells made when painted, sort values when sorting), uptime at
    ``shown``'s time then, else at ``now``, else at the wall clock's; ``marks`` are the flags raised
    on it besides its own."""
    marks = (*n.flags, *marks)
    at = shown if shown is not None else ShownAt(time.time() if now is None else now)
    return Row(f"{job.name}/{n.name}", TaskCells(n, marks, at, job.name), TaskSort(n, marks, job.name))


class _JobRows:
    """One job's views, their rows and what the summary counts of them, position for position."""

    __slots__ = ("nodes", "rows", "facts", "at")

    def __init__(self, nodes: list[NodeView], rows: list[Row], facts: list[Facts]) -> None:
        self.nodes, self.rows, self.facts = nodes, rows, facts
        self.at: dict[str, int] | None = None  # row key -> position (made when a task's flags change)

    def position(self, key: str) -> int | None:
        """Where the task whose row key (``job/task``, an alert's subject) is ``key`` is: the map is made
        once from the rows' keys in one C-level pass (the views are not looked into; at 100,000 tasks
        31 ms where a pass over the views' names took 37, same run)."""
        if self.at is None:
            self.at = dict(zip(map(operator.itemgetter(0), self.rows), count(), strict=False))
        return self.at.get(key)


class TaskRows:
    """The Cluster table's rows, one per task: a task's row stays the very same object while its view
    (the overview hands over the same NodeView while nothing about the task changed) and the flags
    raised on it do; cells, made only for rows on screen, count uptimes to :attr:`shown`'s time.

    A job's views are compared with the last ones position for position in one C-level pass (no view
    is looked into: at 10,000 tasks they lie all over memory and one pass over them costs ~15 ms);
    rows are made again where the view is another object or the task's flags changed (when a job's
    task count changes, each view is looked up by identity instead). What the summary counts of the
    views replaced and of their replacements is in :attr:`gone` and :attr:`new`."""

    def __init__(self) -> None:
        self.shown = ShownAt(0.0)
        self.made = 0  # rows made anew by the last update (the others were the previous objects)
        self.gone: list[Facts] = []  # of the views the last update no longer shows (replaced or left)
        self.new: list[Facts] = []  # of the views it shows first (replacements or arrivals)
        self._jobs: dict[str, _JobRows] = {}
        self._flags: dict[str, tuple[str, ...]] = {}

    def update(self, state: MonitorState) -> list[Row]:
        """The rows of ``state`` (a list of the caller's own), a new one only for a task whose view
        or flags are new."""
        self.shown.now = state.t
        flags = alert_flags(state.alerts)
        moved = {s for s in flags.keys() | self._flags.keys() if flags.get(s) != self._flags.get(s)}
        self._flags, self.made, self.gone, self.new = flags, 0, [], []
        jobs = [(job.name, self._job_rows(job, moved)) for job in state.jobs]
        left = self._jobs.keys() - {name for name, _ in jobs}
        self.gone += chain.from_iterable(self._jobs[name].facts for name in left)
        self._jobs = dict(jobs)
        return list(chain.from_iterable(j.rows for _, j in jobs))

    def _job_rows(self, job: JobView, moved: set[str]) -> _JobRows:
        """One job's rows: the last ones, made again in place where the view or the flags are new.
        Nothing is copied (a copy of 10,000 references touches 10,000 objects: ~1 ms): the state's
        lists are never changed once made, and the table keeps its own copy of the rows."""
        was, nodes = self._jobs.get(job.name), job.nodes
        if was is None or len(was.nodes) != len(nodes):
            return self._all_rows(job, list(nodes), was, moved)
        swapped = list(compress(range(len(nodes)), map(operator.is_not, nodes, was.nodes)))
        stale = sorted({*swapped, *self._flagged(job, was, moved)}) if moved else swapped
        self.gone += map(was.facts.__getitem__, swapped)
        if was.at is not None and any(was.rows[i].key != f"{job.name}/{nodes[i].name}" for i in stale):
            was.at = None  # a task moved: where each task is is found again when asked
        for i in stale:
            was.rows[i], was.facts[i] = self._made(job, nodes[i])
        self.new += map(was.facts.__getitem__, swapped)
        was.nodes = nodes
        return was

    def _all_rows(
        self, job: JobView, nodes: list[NodeView], was: _JobRows | None, moved: set[str]
    ) -> _JobRows:
        """Every row of a job whose task count changed: the last row of a view kept when its flags are."""
        last = {id(v): i for i, v in enumerate(was.nodes)} if was is not None else {}
        rows, facts = [], []
        for n in nodes:
            i = last.get(id(n))
            if i is None or was is None or was.rows[i].key in moved or (n.role == "ps" and job.name in moved):
                row, fact = self._made(job, n)
            else:
                row, fact = was.rows[i], was.facts[i]
            rows.append(row)
            facts.append(fact)
        if was is not None:
            kept = {id(n) for n in nodes}
            self.gone += (f for v, f in zip(was.nodes, was.facts, strict=True) if id(v) not in kept)
        self.new += (f for n, f in zip(nodes, facts, strict=True) if id(n) not in last)
        return _JobRows(nodes, rows, facts)

    def _flagged(self, job: JobView, was: _JobRows, moved: set[str]) -> list[int]:
        """The positions of the tasks whose flags changed (every PS when the job's own did)."""
        prefix = f"{job.name}/"
        found = [was.position(s) for s in moved if s.startswith(prefix)]
        if job.name in moved:
            found += [i for i, n in enumerate(was.nodes) if n.role == "ps"]
        return [i for i in found if i is not None]

    def _made(self, job: JobView, n: NodeView) -> tuple[Row, Facts]:
        """A task's row made now, with the alerts raised on it (a job's PS saturation on its PS rows),
        and what the summary counts of it."""
        self.made += 1
        marks = self._flags.get(f"{job.name}/{n.name}", ()) if self._flags else ()
        if n.role == "ps" and self._flags:
            marks = (*marks, *(k for k in self._flags.get(job.name, ()) if k == "ps-saturation"))
        return node_row(job, n, marks, shown=self.shown), task_facts(n)


def alert_flags(alerts: Sequence[Alert]) -> dict[str, tuple[str, ...]]:
    """The kinds of the alerts raised on each subject (a task ``job/task``, or a job)."""
    flags: dict[str, tuple[str, ...]] = {}
    for a in alerts:
        flags[a.subject] = (*flags.get(a.subject, ()), a.kind)
    return flags
