"""Cluster pane: a per-role summary line, then one row per task (status, task, role, steps/s, host CPU
and memory, GPU, GPU utilisation and memory, flags, provisioning, uptime, region, …).

A refresh costs what changed (issue 20): a task's row stays the same object while the overview hands
over the same view of it (:class:`~cmdare.tui.panes.cluster_rows.TaskRows`), the table orders again
only what changed and draws only the lines on screen (see :mod:`cmdare.tui.widgets.table`), and the
summary line is counted view by view (:class:`RoleTally`).

Columns are ordered by priority so that what matters fits in 80 columns (status, task, role,
steps/s, GPU, host CPU %, host memory, GPU %, provisioning); the rest scrolls sideways."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import Static

from cmdare.collectors.observed import JobView
from cmdare.tui.format import rate
from cmdare.tui.panes.cluster_rows import (
    COLLAPSE,
    COLUMNS,
    FIT_THROUGH,
    Facts,
    TaskRows,
    node_cells,
    node_row,
    task_facts,
)
from cmdare.tui.panes.ordered_values import OrderedValues, replaced
from cmdare.tui.session import MonitorState
from cmdare.tui.widgets.table import FilterTable, TableBox

__all__ = ["COLUMNS", "ClusterPane", "RoleTally", "node_cells", "node_row", "replaced", "role_summary"]


class RoleTally:
    """Per role: how many tasks, how many up, and their (finite) steps/s in order, kept up to date
    task by task (:meth:`swap`): at 10,000 tasks a pass over every view costs ~15 ms (they lie all
    over memory), so the summary line costs the tasks that changed. The rates are kept in order value by
    value (:class:`~cmdare.tui.panes.ordered_values.OrderedValues`: no pass over a role's rates unless
    an eighth of them moved), the median read from them as ``statistics.median`` gives it; roles are
    listed by count, ties in the order the roles were first seen."""

    def __init__(self) -> None:
        self.total: Counter[str] = Counter()
        self.up: Counter[str] = Counter()
        self.rates: dict[str, OrderedValues] = {}
        self.seen: dict[str, int] = {}  # role -> when it was first seen
        self._seen = 0

    def swap(self, gone: Sequence[Facts], new: Sequence[Facts]) -> None:
        """Count the tasks ``new`` in and ``gone`` out (what :func:`task_facts` reads of them). A task
        replaced by one of the same role and state moves only its rate; the others are counted in
        first, then out (a role replaced by itself keeps its place); rates move by role in one batch."""
        out: defaultdict[str, list[float]] = defaultdict(list)
        add: defaultdict[str, list[float]] = defaultdict(list)
        odd_gone, odd_new = _rates_moved(gone, new, out, add)
        for facts in odd_new:
            self._count(facts, 1, add)
        for facts in odd_gone:
            self._count(facts, -1, out)
        for role in out.keys() | add.keys():
            self.rates.setdefault(role, OrderedValues()).update(out.get(role, []), add.get(role, []))
        self._drop_empty()

    def _drop_empty(self) -> None:
        """Forget the roles no task has any more."""
        for role in [r for r, count in self.total.items() if count <= 0]:
            del self.total[role], self.up[role], self.seen[role]
            self.rates.pop(role, None)

    def _count(self, facts: Facts, sign: int, rates: defaultdict[str, list[float]]) -> None:
        """Count one task in (``sign`` 1) or out (-1); its rate joins ``rates`` (by role)."""
        role, up, value = facts
        if role not in self.seen:
            self.seen[role], self._seen = self._seen, self._seen + 1
        self.total[role] += sign
        self.up[role] += sign * up
        if value is not None:
            rates[role].append(value)

    def counts(self) -> tuple[int, int]:
        """How many tasks are up, and how many there are."""
        return sum(self.up.values()), sum(self.total.values())

    def line(self) -> Text:
        """Per role: how many tasks are up of all, and the median of their steps/s."""
        line = Text()
        for role in sorted(self.total, key=lambda r: (-self.total[r], self.seen[r])):
            total, up = self.total[role], self.up[role]
            line.append(f"{role} ", "bold").append(f"{up:,}/{total:,} up")
            if total > up:
                line.append(f" ({total - up:,} not)", "yellow")
            if rates := self.rates.get(role):
                line.append(f", median {rate(rates.median())} steps/s")
            line.append("  ")
        return line


def _rates_moved(
    gone: Sequence[Facts],
    new: Sequence[Facts],
    out: defaultdict[str, list[float]],
    add: defaultdict[str, list[float]],
) -> tuple[list[Facts], list[Facts]]:
    """Pair the tasks gone with the new ones (any pairing counts alike): where the role and state
    stay, only the rate moves (into ``out`` and ``add``); the tasks left unpaired, to count."""
    odd_gone, odd_new = list(gone[len(new) :]), list(new[len(gone) :])
    for was, now in zip(gone, new, strict=False):
        role, before, after = was[0], was[2], now[2]
        if role != now[0] or was[1] != now[1]:
            odd_gone.append(was)
            odd_new.append(now)
        elif before != after:
            if before is not None:
                out[role].append(before)
            if after is not None:
                add[role].append(after)
    return odd_gone, odd_new


def role_summary(jobs: list[JobView]) -> Text:
    """One line: per role, how many tasks are up of all, and the median of their (finite) steps/s;
    roles by count, ties in the order they first appear."""
    tally = RoleTally()
    tally.swap((), [task_facts(n) for job in jobs for n in job.nodes])
    return tally.line()


class ClusterPane(Vertical):
    """The Cluster pane: a per-role summary line, then one row per task of every job."""

    DEFAULT_CSS = "ClusterPane > #cluster-summary { height: 1; width: 1fr; }"
    KEYS_HELP = (("enter", "Task detail and its series"),)  # (the help screen)

    def __init__(self, *children: Widget, **kw: Any) -> None:
        super().__init__(*children, **kw)
        self._rows = TaskRows()
        self._tally = RoleTally()
        self._summary: Text | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="cluster-summary")
        yield TableBox(FilterTable(COLUMNS, collapse=COLLAPSE, fit_through=FIT_THROUGH, id="cluster-table"))

    def update_state(self, state: MonitorState) -> None:
        """Show the tasks of ``state`` with the flags raised on them; the border counts those up.
        Costs what changed: rows are made again for tasks whose view or flags are new, the lines on
        screen repainted where their cells (uptimes included) changed, the summary counted view by view."""
        rows = self._rows.update(state)
        table = self.query_one(FilterTable)
        table.set_absent(
            {"Job"} if len(state.jobs) < 2 else set()
        )  # one job: its name on every row says nothing
        table.set_rows(rows, recheck=True)  # uptimes count on in the same rows
        if self._rows.gone or self._rows.new or self._summary is None:
            self._tally.swap(self._rows.gone, self._rows.new)
            self._show_summary()

    def visible_keys(self) -> list[str]:
        """The tasks (keys ``job/task``) whose rows are on screen: a large fleet reads them in detail."""
        return self.query_one(FilterTable).visible_keys() if self.display else []

    def _show_summary(self) -> None:
        """The per-role line and the border's count, each redrawn only when it changed."""
        summary = self._tally.line()
        if summary != self._summary:
            self._summary = summary
            self.query_one("#cluster-summary", Static).update(summary, layout=False)  # one line, fixed
        up, total = self._tally.counts()
        if self.border_subtitle != f"{up}/{total} up":
            self.border_subtitle = f"{up}/{total} up"
