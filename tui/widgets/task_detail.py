"""A Cluster row opened (``enter``): one task whole, as the JSON export has it — where it answers, its
labels, its state and last error, its restarts and lifetimes, and each series it exports with its newest
value and a sparkline of its recent points (counters as their rate per second)."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text

from cmdare.tui.format import duration
from cmdare.tui.widgets.explain import ExplainScreen, detail_grid

if TYPE_CHECKING:
    from cmdare.collectors.lifecycle import Lifecycle, NodeStatus
    from cmdare.collectors.observed import NodeView
    from cmdare.collectors.samples import Lifetime
    from cmdare.collectors.store import TaskSeries

BARS = "▁▂▃▄▅▆▇█"
SPARK_POINTS = 40  # the newest points a sparkline shows
MAX_SERIES = 60  # series listed at most (a task may export hundreds; the rest are counted)
COUNTER_SUFFIXES = ("_total", "_sum", "_count")
LABELS = ("job", "task", "role", "gpu", "region", "zone", "provisioning", "dc", "stage", "gpu_ids", "rank",
          "local_rank")  # fmt: skip


def sparkline(values: Sequence[float]) -> str:
    """``values`` as block characters scaled between their least and greatest (a gap for NaN)."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return ""
    low, high = min(finite), max(finite)
    span = high - low
    out = []
    for v in values:
        if not math.isfinite(v):
            out.append(" ")
        else:
            out.append(BARS[0 if span == 0 else min(len(BARS) - 1, int((v - low) / span * len(BARS)))])
    return "".join(out)


def per_second(times: Sequence[float], values: Sequence[float]) -> list[float]:
    """A counter's rate between successive points (NaN across a reset or a gap)."""
    out = []
    for (t0, v0), (t1, v1) in zip(zip(times, values, strict=True), zip(times[1:], values[1:], strict=True),
                                  strict=False):  # fmt: skip
        dt = t1 - t0
        out.append((v1 - v0) / dt if dt > 0 and v1 >= v0 else math.nan)
    return out


def figure(value: float) -> str:
    """A series' value in at most ~9 characters."""
    if not math.isfinite(value):
        return "–"
    if value != 0 and (abs(value) >= 1e6 or abs(value) < 1e-3):
        return f"{value:.3g}"
    return f"{value:,.3f}".rstrip("0").rstrip(".") if value != int(value) else f"{value:,.0f}"


def series_rows(ts: TaskSeries) -> Table:
    """Each series: name, newest value (a counter: its rate /s), sparkline of its recent points."""
    table = Table.grid(padding=(0, 2))
    for style in ("bold", "", "cyan"):
        table.add_column(style=style, no_wrap=True, overflow="ellipsis")
    times = ts.times.tail(SPARK_POINTS + 1)
    keys = ts.keys()
    for key in keys[:MAX_SERIES]:
        values = ts.values[key].tail(len(times))
        if key.split("{", 1)[0].endswith(COUNTER_SUFFIXES):
            values, name = per_second(times[-len(values) :], values), f"{key} /s"
        else:
            name, values = key, values[-SPARK_POINTS:]
        last = next((v for v in reversed(values) if math.isfinite(v)), math.nan)
        table.add_row(Text(name), Text(figure(last)), Text(sparkline(values)))
    if len(keys) > MAX_SERIES:
        table.add_row(Text(f"… {len(keys) - MAX_SERIES} more series"), Text(""), Text(""))
    return table


def clock(t: float | None) -> str:
    """A Unix time as local HH:MM:SS (a date when not today)."""
    if t is None or not math.isfinite(t) or t <= 0:
        return "–"
    fmt = "%H:%M:%S" if time.localtime(t)[:3] == time.localtime()[:3] else "%Y-%m-%d %H:%M"
    return time.strftime(fmt, time.localtime(t))


def lifetime_words(lifetimes: Sequence[Lifetime]) -> str:
    """Past lifetimes: from–to and how each ended."""
    return "; ".join(f"{clock(lt.start)}–{clock(lt.end)} {lt.cause}" for lt in lifetimes[-5:]) or "none"


def task_rows(view: NodeView, job: str, status: NodeStatus | None, source: str | None,
              past: Sequence[Lifetime], now: float) -> list[tuple[str, str]]:  # fmt: skip
    """The label / value rows of one task's detail."""
    from cmdare.collectors.prometheus.auth import public_url

    rows = [("Address", public_url(source) if source else "– (not polled by address)")]
    if status is not None:
        info = status.info
        labels = [f"{k}={getattr(info, k)}" for k in LABELS if getattr(info, k, "")]
        rows.append(("Labels", ", ".join(labels) or "none"))
    else:
        rows.append(("Labels", f"job={job}, task={view.name}, role={view.role}"))
    if view.host:
        rows.append(("Host", view.host))
    state = view.status + (f" ({view.cause})" if view.cause else "")
    if status is not None:
        state += f" since {clock(status.since)}"
        if status.failures:
            state += f", {status.failures} failed polls in a row"
    rows += [
        ("State", state),
        ("Last error", view.last_error or "none"),
        (
            "Lifetime",
            f"up {duration(view.uptime_s(now))} since {clock(view.started_at)}"
            if view.started_at is not None
            else "not running",
        ),  # fmt: skip
        ("Restarts", str(view.restarts)),
        ("Past lifetimes", f"{len(past)}: {lifetime_words(past)}" if past else "none"),
    ]
    if view.flags:
        rows.append(("Flags", ", ".join(view.flags)))
    return rows


def task_detail_screen(view: NodeView, job: str, lifecycle: Lifecycle, ts: TaskSeries | None,
                       now: float) -> ExplainScreen:  # fmt: skip
    """The window ``enter`` opens on a Cluster row."""
    key = f"{job}/{view.name}"
    found = lifecycle.nodes.get(key)
    lkey = key
    if found is None:  # a pending target: keyed by its address
        lkey, found = next(((k, n) for k, n in lifecycle.nodes.items()
                            if n.info.job == job and n.info.name == view.name), (key, None))  # fmt: skip
    past = [lt for lt in lifecycle.lifetimes if lt.task == key]
    grid = detail_grid(task_rows(view, job, found, lifecycle.source_of(lkey), past, now))
    body = Table.grid()
    body.add_column()
    body.add_row(grid)
    if ts is not None and ts.keys():
        body.add_row(Text(f"\nSeries (newest value; the last {SPARK_POINTS} points)", style="bold"))
        body.add_row(series_rows(ts))
    else:
        body.add_row(Text("\nNo series read from this task yet.", style="dim"))
    return ExplainScreen(f"Task {key}", body, "as polled; counters shown as their rate per second")
