"""The overview as a plain report (``snapshot`` without ``--json``): scripts, cron, TERM=dumb.

Readable at 80 columns: tables wrap their cells and lines wrap at the width, nothing is cut with ``…``.
On a terminal the report takes its width; piped, it takes ``COLUMNS`` (default 80). ``TERM=dumb`` →
ASCII borders and no colour. States are symbols *and* words, as in the app. Per job it says what the
planner knows: cost (accrued, rate, price source and date), the predicted speed with its band and model
source, and the top plans — the same fields as ``snapshot --json`` (:class:`~cmdare.planner.view.PlannerView`).
Data is printed as rich ``Text``, never parsed as markup (the console has markup and emoji codes off)."""

from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from cmdare.collectors.observed import RATE_WINDOW_S, JobView
from cmdare.planner.view import JobPlannerView, PlannerView
from cmdare.planner.view_json import ranked_indices, shape_deltas
from cmdare.tui.format import (
    SEVERITY_SYMBOL,
    STATUS_SYMBOL,
    bytes_rate,
    calibration_words,
    duration,
    gpu_label,
    hours,
    money,
    num,
    rate,
    region_code,
    risk_words,
    stalled_phrase,
)
from cmdare.tui.session import MonitorState

if TYPE_CHECKING:
    from cmdare.planner.risk_cost.shapes import ShapeTable

PIPE_WIDTH = 80  # columns when stdout is not a terminal and COLUMNS is not set
MIN_WIDTH, MAX_WIDTH = 40, 1000  # COLUMNS outside these bounds is taken as the nearer bound
TOP_PLANS = 3  # plans shown per job (the JSON has more)


def report_width() -> int | None:
    """The report's width: the terminal's (None: Rich asks it), else ``COLUMNS`` (bounded), else 80."""
    if sys.stdout.isatty():
        return None
    try:
        return min(max(int(os.environ.get("COLUMNS", "")), MIN_WIDTH), MAX_WIDTH)
    except ValueError:
        return PIPE_WIDTH


def plain_console() -> Console:
    """A Rich console for plain output: no colour or markup on a dumb terminal or a pipe."""
    dumb = os.environ.get("TERM", "") in ("dumb", "")
    tty = sys.stdout.isatty()
    return Console(width=report_width(), no_color=dumb or not tty, highlight=False,
                   force_terminal=False if dumb else None, markup=False, emoji=False)  # fmt: skip


def _table(title: str, columns: tuple[str, ...]) -> Table:
    """A table whose cells wrap (words, else characters) rather than being cut."""
    dumb = os.environ.get("TERM", "") in ("dumb", "")
    t = Table(title=title, title_justify="left", box=box.ASCII if dumb else box.SIMPLE_HEAD,
              padding=(0, 0), show_edge=False)  # fmt: skip
    for col in columns:
        t.add_column(col, overflow="fold")
    return t


def _row(table: Table, *cells: str) -> None:
    """A row of data cells, as text (a str cell would be parsed as markup)."""
    table.add_row(*map(Text, cells))


_TRAILING = re.compile(r" +((?:\x1b\[[0-9;]*m)*)$")  # spaces at a line's end, before its closing style codes


def print_overview(state: MonitorState, console: Console | None = None) -> None:
    """Print the overview of a state as a report, for cron jobs and dumb terminals; no line ends in
    spaces (Rich pads wrapped lines and table cells to the width)."""
    console = console or plain_console()
    with console.capture() as cap:
        _overview(state, console)
    lines = (_TRAILING.sub(r"\1", line) for line in cap.get().splitlines())
    console.file.write("".join(f"{line}\n" for line in lines))


def _overview(state: MonitorState, console: Console) -> None:
    """The report's parts, printed to ``console`` (captured by :func:`print_overview`)."""
    if state.read_only:
        console.print("READ-ONLY: nothing is written")
    if state.demo:
        console.print("DEMO: simulated cluster on loopback, calibrated from CM-DARE measurements")
    for job in state.jobs:
        print_job(console, job, state.planner, state.t)
    a = _table("Alerts", ("Severity", "Kind", "Subject", "Message"))
    for al in state.alerts:
        _row(
            a,
            f"{SEVERITY_SYMBOL.get(al.severity, '?')} {al.severity}",
            al.kind,
            al.subject,
            al.message + (f" → {al.fix}" if al.fix else ""),
        )
    console.print(a if state.alerts else "Alerts: none")
    for s in state.sources:
        console.print(Text(f"source: {s.message}"))


def print_job(console: Console, job: JobView, planner: PlannerView, now: float) -> None:
    """One job: its figures, what the planner says of it, its top plans and its tasks (uptimes at ``now``)."""
    console.print(Text(
        f"Job {job.name} ({job.facts.model.name or 'unknown network'}): {speed_phrase(job)}"
        f"{f' ({job.sync}, {job.sync_how})' if job.sync else ''}, global step "
        f"{num(job.global_step, 0)}, ETA {_eta(job)}"
    ))  # fmt: skip
    view = planner.job(job.name)
    if view is not None:
        for line in planner_lines(view, planner):
            console.print(Text(line))
    tr = job.training
    if tr is not None:
        lr = "–" if tr.learning_rate is None else f"{tr.learning_rate:.3g}"
        console.print(
            Text(
                f"Logged: loss {num(tr.loss, 4)}, learning rate {lr}, examples/s {num(tr.examples_per_sec, 0)}"
            )
        )
    plans = plans_table(view) if view is not None else None
    if plans is not None:
        console.print(plans)
        if view is not None and view.ranked is not None and view.ranked.search_note:
            console.print(Text(view.ranked.search_note))
    if view is not None and view.pipeline is not None and view.pipeline.boundaries:
        console.print(pipeline_table(view))
    console.print(cluster_table(job, now))


def _eta(job: JobView) -> str:
    """The ETA, or why there is none (a stalled or finished job has no speed to finish at)."""
    if job.stalled:
        return "none (finished)" if job.finished else "none (stalled)"
    return duration(job.eta_seconds)


def speed_phrase(job: JobView) -> str:
    """'42.2 steps/s measured'; a pipeline whose iteration outlasts a second says s/iteration, and one whose
    rate window saw no iteration finish says so instead of "0.0 steps/s" (as the Job pane does)."""
    if job.stalled:
        return stalled_phrase(job)
    sps = job.steps_per_sec
    part = job.coverage_note()
    if part:  # summed over part of the tasks (a fleet's first refreshes): said, with how much
        return f"{rate(sps)} steps/s measured ({part})"
    if job.sync != "pipeline" or sps is None or sps >= 1:
        return f"{rate(sps)} steps/s measured"
    if sps > 0:
        return f"{1 / sps:.1f} s/iteration measured"
    return f"no iteration finished in the rate window (≤ {RATE_WINDOW_S:.0f} s)"


def planner_lines(view: JobPlannerView, planner: PlannerView) -> list[str]:
    """The job's predicted speed (band, model source) and cost (accrued, rate, price source and date)."""
    out = [] if view.prediction is None else [prediction_line(view)]
    c, prices = view.cost, planner.prices
    dated = f"{prices.source} prices, {prices.date}" if prices is not None else "no price book"
    if c is not None and c.usd_per_hour is not None:
        unpriced = f"; {c.unpriced_tasks:,} task(s) unpriced" if c.unpriced_tasks else ""
        budget = f"; budget {money(c.budget_usd)}" if c.budget_usd is not None else ""
        assumed = "".join(f"; {a}" for a in c.assumed)
        out.append(
            f"Cost {money(c.accrued_usd)} accrued while monitored, {money(c.usd_per_hour)}/h "
            f"({dated}){unpriced}{budget}{assumed}"
        )
    elif c is not None:
        out.append(f"Cost unknown: {c.unpriced[0] if c.unpriced else 'no price yet'} ({dated})")
    if view.checkpoint is not None:
        value, note = risk_words(view.checkpoint)
        out.append(f"At risk since the last checkpoint: {value} ({note})")
    if (
        view.pipeline is not None
    ):  # a pipeline job: its measured WAN boundaries (pipeline_table), as the Planner
        p = view.pipeline
        out.append(f"Pipeline: {len(p.boundaries)} WAN boundaries measured, {p.wan_bound} WAN-bound "
                   "(cmdare-tui plan --geo ranks placements)" if p.boundaries else
                   "Pipeline: no WAN boundary measured yet (the stages' compute and bytes sent need more polls)")  # fmt: skip
    elif view.plan is not None and view.plan.table is None and view.plan.note:
        out.append(f"Plans: none ({view.plan.note})")
    return out


def prediction_line(view: JobPlannerView) -> str:
    """'Predicted 48.0 steps/s (P10–P90 43.1–51.3) for 8×P100 · 1 PS, ps-bound; model: …'."""
    p, b = view.prediction, view.band
    assert p is not None
    band = "band: n/a" if b is None else f"P10–P90 {rate(b.p10)}–{rate(b.p90)}"
    if b is not None and b.extrapolation != "none":
        band += f", beyond the measured domain: {b.extrapolation}"
    shape = view.shape.label if view.shape is not None else "this shape"
    return f"Predicted {rate(p.steps_per_sec)} steps/s ({band}) for {shape}, {p.bottleneck}-bound; model: {p.source}"


def plans_table(view: JobPlannerView) -> Table | None:
    """The current shape and the top plans: shape, place, Δ time, Δ cost, P(≥1 revocation)."""
    plan, table = view.plan, view.ranked
    if plan is None or table is None:
        return None
    calibrated = calibration_words(plan)
    t = _table(
        f"Top {TOP_PLANS} plans (ranked by {table.objective}; {calibrated})",
        ("", "Shape", "Where", "Time", "Δ time", "Δ cost", "P(≥1 rev)"),
    )
    for k, i in enumerate(ranked_indices(table, TOP_PLANS + 1)):
        r = table.ranked_row(i)
        dt, dc, dr = shape_deltas(table, i)
        cur = i == 0
        risk = table.risk_cell(i) + ("" if cur else f" ({dr:+.2f})".replace("-", "−"))
        _row(
            t,
            "now" if cur else f"#{k}" + ("" if _worth(table, i) else " ✗ not worth switching"),
            r.shape,
            f"{r.region} {r.provisioning}" + (" (a move)" if r.region_note else ""),
            hours(r.hours_p50),
            "–" if cur else _pct(dt),
            "–" if cur else ("n/a" if dc is None else _pct(dc)),
            risk,
        )
    return t


def _worth(table: ShapeTable, i: int) -> bool:
    """Whether switching to row ``i`` pays for itself (True without switching figures)."""
    c = table.columns.get("worth_switching")
    return True if c is None else bool(c[i])


def pipeline_table(view: JobPlannerView) -> Table:
    """A pipeline job's measured WAN boundaries, the Planner pane's pipeline columns: the datacenters
    (region codes, as in the app),
    the verdict, megabytes a micro-batch, the link's Gbit/s (or ≥ what was sent), wire and compute
    seconds a micro-batch, the receiver's wait and what was sent."""
    assert view.pipeline is not None
    dc = dict(view.pipeline.dc)
    t = _table("WAN boundaries", ("Boundary", "DCs", "Verdict", "MB/mb", "Link Gb/s", "Wire s/mb", "Compute s",
                                  "Wait", "Sent Gb/s"))  # fmt: skip
    for b in view.pipeline.boundaries:
        link = f"{b.link_gbps:.2f}" if b.link_gbps is not None else f"≥{b.measured_gbps:.2f}"
        _row(
            t,
            f"{b.from_stage}->{b.to_stage}",
            f"{region_code(dc.get(b.from_stage, '?'))}→{region_code(dc.get(b.to_stage, '?'))}",
            "WAN-bound" if b.wan_bound else "ok",
            f"{b.bytes_per_microbatch / 1e6:.1f}",
            link,
            ("≤" if b.link_gbps is None else "") + f"{b.transfer_seconds:.3f}",
            f"{b.max_stage_compute_seconds:.3f}",
            "–" if b.wait_share is None else f"{b.wait_share:.0%}",
            f"{b.measured_gbps:.2f}",
        )
    return t


def _pct(x: float) -> str:
    """A signed relative change: ``−38%``, ``+12%``."""
    return f"{x:+.0%}".replace("-", "−")


def cluster_table(job: JobView, now: float) -> Table:
    """One row per task of the job (uptimes at ``now``)."""
    t = _table("Cluster", ("Status", "Task", "Role", "GPU", "Where", "Steps/s", "Step ms", "Net in", "Up"))
    for n in job.nodes:
        _row(
            t,
            f"{STATUS_SYMBOL.get(n.status, '?')} {n.status}",
            n.name,
            n.role,
            gpu_label(n.gpu, n.owns_gpu, n.role),
            f"{n.region or '–'} {n.provisioning or '–'}",
            rate(n.steps_per_sec),
            num(n.step_seconds * 1000 if n.step_seconds else None, 0),
            bytes_rate(n.net_in_bps),
            duration(n.uptime_s(now)),
        )
    return t
