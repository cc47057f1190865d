"""Planner pane. Two views of the same question, "what shape should this job have?":

* ranked shapes (``state.planner.job(name).ranked``, a :class:`~cmdare.planner.risk_cost.shapes.ShapeTable`):
  time, cost and revocation risk of each shape, best first;
* for a pipeline job (stages across datacenters): each measured WAN boundary with its transfer time
  per micro-batch against the slowest stage's compute, and the WAN-bound verdict;
* otherwise the speed-only outlook: the speed model's prediction for the current shape and nearby ones.

``enter`` on a row opens its explanation (which terms dominate). Figures are model predictions; the
subtitle names the model and the price source."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable

from cmdare.planner.view import JobPlannerView
from cmdare.planner.view_json import ranked_indices
from cmdare.planner.view_json import shape_deltas as deltas
from cmdare.tui.format import (
    calibration_words,
    clock,
    delta_pct,
    hours,
    pct,
    provisioning_code,
    rate,
    region_code,
    signed_pct,
)
from cmdare.tui.session import MonitorState
from cmdare.tui.widgets.quiet import set_subtitle
from cmdare.tui.widgets.table import FilterTable, Row, TableBox

if TYPE_CHECKING:  # the planner's models load after the first frame (start-up, issue 20)
    from cmdare.planner.geo.geo_live import LiveBoundary
    from cmdare.planner.live.outlook import ShapeOutlook
    from cmdare.planner.live.plan import LivePlan
    from cmdare.planner.risk_cost.shapes import RankedRow, ShapeTable

OUTLOOK_COLUMNS = (("Shape", 18), ("Steps/s", 7), ("Δ speed", 7), ("Bound", 7), ("PS load", 7))
# Columns by priority, so that Shape → Bound fit the pane at 120×40 (68 cells): Δ is three short columns
# (time, cost, risk) against the current shape; regions and provisioning are compact codes (format.region_code;
# the row's explanation names both in full). "P(≥1 rev)" is the chance of at least one revocation during the
# run. A region marked † is a move (egress for the stated dataset, capacity not guaranteed: see its explanation).
# Shape's first mark: ▶ the current shape, ★ on the Pareto front, ✗ not worth switching (with its switching cost
# the row does not beat staying). A Region ending in "+" stands for more regions with the same figures: ``x`` lists
# them beneath it (└), ``enter`` names them.
RANKED_COLUMNS = (("Shape", 13), ("Time", 6), ("Cost", 7), ("Δtime", 5), ("Δcost", 5), ("Region", 6),
                  ("Prov", 5), ("Bound", 5), ("Δrisk", 5), ("P(≥1 rev)", 9), ("Steps/s", 7))  # fmt: skip
BOUND_CODE = {"compute": "comp", "network": "net"}
# A pipeline boundary: its verdict, then its wire time read left to right — MB per micro-batch × 8 ÷ the
# link's capacity (Link Gb/s; "≥" the measured rate when [links] does not know it) = Wire s/mb — against the
# slowest stage's compute (Boundary → Wire s/mb fit at 120×40, → Compute s at 80×24). DCs are region codes
# (the explanation names them in full). "Sent Gb/s" is what the boundary carried on average: the pipeline's
# pace × MB/mb, alike on every boundary of a pipeline whatever its link.
PIPELINE_COLUMNS = (("Boundary", 8), ("DCs", 13), ("Verdict", 9), ("MB/mb", 6), ("Link Gb/s", 9),
                    ("Wire s/mb", 9), ("Compute s", 9), ("Wait", 5), ("Sent Gb/s", 9))  # fmt: skip
TOP_N = 30  # rows of the ranking in all, the current shape's among them (as `snapshot` counts them)


def link_cell(b: LiveBoundary) -> str:
    """The capacity the wire time divides by: ``5.00``, or ``≥0.40`` (the measured rate) when unknown."""
    return f"≥{b.measured_gbps:.2f}" if b.link_gbps is None else f"{b.link_gbps:.2f}"


def pipeline_rows(boundaries: Sequence[LiveBoundary], dc: Mapping[str, str]) -> list[Row]:
    """One row per measured WAN boundary of a pipeline job (``planner.wan_rules.pipelines``)."""
    out = []
    for b in boundaries:
        key = f"{b.from_stage}->{b.to_stage}"
        verdict = Text("WAN-bound", style="bold yellow") if b.wan_bound else Text("ok")
        wait = "–" if b.wait_share is None else pct(b.wait_share)
        wire = ("≤" if b.link_gbps is None else "") + f"{b.transfer_seconds:.3f}"
        dcs = f"{region_code(dc.get(b.from_stage, '?'))}→{region_code(dc.get(b.to_stage, '?'))}"
        cells = (key, dcs, verdict, f"{b.bytes_per_microbatch / 1e6:.1f}", link_cell(b), wire,
                 f"{b.max_stage_compute_seconds:.3f}", wait, f"{b.measured_gbps:.2f}")  # fmt: skip
        sort = (key, dcs, b.wan_bound, b.bytes_per_microbatch, b.link_gbps or b.measured_gbps, b.transfer_seconds,
                b.max_stage_compute_seconds, b.wait_share or 0.0, b.measured_gbps)  # fmt: skip
        out.append(Row(key, cells, sort))
    return out


def outlook_rows(rows: list[ShapeOutlook]) -> list[Row]:
    """Rows of the speed-only outlook: the current shape first, each with its change against it."""
    base = rows[0].prediction.steps_per_sec
    out = []
    for r in rows:
        p = r.prediction
        label = Text(("▶ " if r.current else "  ") + r.shape.label, style="bold" if r.current else "")
        change = p.steps_per_sec / base - 1 if base else None
        delta = "now" if r.current else signed_pct(change)
        out.append(
            Row(
                r.shape.label,
                (label, rate(p.steps_per_sec), delta, p.bottleneck, pct(p.ps_utilization)),
                (r.shape.label, p.steps_per_sec, change, p.bottleneck, p.ps_utilization),
            )
        )
    return out


def ranked_rows(table: ShapeTable, n: int = TOP_N, expanded: frozenset[int] = frozenset()) -> list[Row]:
    """The current shape first (the reference row, ▶), then the ranking, ``n`` rows in all (the planner's
    :func:`ranked_indices`, as ``snapshot`` lists them); ★ marks the Pareto front of (time, cost, risk), ✗ a
    row not worth switching to. A row standing for other regions lists them beneath it (└) when its index is
    in ``expanded``."""
    out = []
    for i in ranked_indices(table, n):
        out.append(_ranked_row(table, i))
        if i in expanded:
            out += [_ranked_row(table, j, member=True) for j in table.members(i)]
    return out


def _ranked_row(table: ShapeTable, i: int, member: bool = False) -> Row:
    r = table.ranked_row(i)
    cur = i == 0
    worth = bool(table.columns["worth_switching"][i]) if "worth_switching" in table.columns else True
    mark = "└" if member else ("▶" if cur else ("✗" if not worth else ("★" if r.pareto else " ")))
    shape = f"{mark} {r.shape}"
    more = len(table.columns["regions"][i]) - 1 if "regions" in table.columns and not member else 0
    move = "†" if r.region_note else ""
    region = region_code(r.region) + ("+" if more else "") + move
    if len(region) > 6:  # a long code: the explanation and ``x`` still name the other regions
        region = region_code(r.region) + move
    prov = "s/pre" if r.also_provisioning else provisioning_code(r.provisioning)
    bound = r.bottleneck
    dt, dc, dr = deltas(table, i)
    style = "bold" if cur else ("dim" if not worth else "")
    cells = (Text(shape, style=style), hours(r.hours_p50), short_money(r.cost_usd_p50),
             "now" if cur else delta_pct(dt), "now" if cur else ("n/a" if dc is None else delta_pct(dc)), region, prov,
             BOUND_CODE.get(bound, bound[:5]), "now" if cur else f"{dr:+.2f}".replace("-", "−"),
             table.risk_cell(i), rate(r.steps_per_sec))  # fmt: skip
    sort = (shape[2:], r.hours_p50, r.cost_usd_p50 or 0.0, dt, dc, r.region, r.provisioning,
            bound, dr, r.p_revocation, r.steps_per_sec)  # fmt: skip
    return Row(str(i), cells, sort)


def stay_rank(table: ShapeTable) -> str:
    """'stay #5': where keeping the current shape ranks (switching costs counted); '' when it is not ranked."""
    at = (table.view == 0).nonzero()[0]
    return f"stay #{int(at[0]) + 1}" if at.size else ""


def short_money(usd: Any) -> str:
    """Cost in at most 6 characters: ``$2.88``, ``$123``, ``$1,234``; "unknown" without a price."""
    if usd is None or not math.isfinite(float(usd)):
        return "unknown"
    return f"${float(usd):.2f}" if float(usd) < 100 else f"${float(usd):,.0f}"


def price_notes(row: RankedRow) -> tuple[str, ...]:
    """The prices' source and date in the words every view uses, longest first: 'offline prices, price
    date unknown (derived 2026-11-30 from …)', then without the source of the derivation, then without
    the derivation, then without 'prices' ('offline prices, prices of 2019-02-15' has one form)."""
    full = f"{row.price_source} prices, {row.price_date}"
    if not row.price_date.startswith("price date unknown"):
        return (full,)
    return (
        full,
        f"{row.price_source} prices, price date unknown (derived {row.price_as_of})",
        (f"{row.price_source} prices, price date unknown"),
    )


def calibration_notes(plan: LivePlan | None) -> tuple[str, ...]:
    """'calibrated on N samples (residual x%)' (a sync job: on its ranks' measured split) or 'model not
    yet calibrated on this job', then shorter forms."""
    words = calibration_words(plan)
    if "not yet" in words:
        return words, "not calibrated"
    return words, words.split(" (", 1)[0], "calibrated"


def ps_search_notes(ranked: ShapeTable) -> tuple[str, ...]:
    """The PS counts a ranking tried (a job with many PSs), longest form first (see :func:`fit_subtitle`)."""
    top = int(ranked.col("ps").max())
    return ranked.search_note, f"PS counts 1–16, then ~25% apart to {top:,}", "not every PS count tried"


def fit_subtitle(parts: Sequence[tuple[str, ...]], width: int) -> str:
    """``parts`` (each: its forms, longest first; an empty form leaves the part out) joined by ' · ', each part
    as long as the width lets it be: the last parts give way first, so that the subtitle is never cut by the
    border."""
    chosen = [0] * len(parts)

    def text() -> str:
        return " · ".join(x for x in (p[i] for p, i in zip(parts, chosen, strict=True)) if x)  # "": left out

    for level in range(1, max(map(len, parts), default=1)):  # one step shorter at a time, last part first
        for k in reversed(range(len(parts))):
            if len(text()) > width and level < len(parts[k]):
                chosen[k] = level
    for k in range(len(parts)):  # then what room is left goes back to the first parts
        while chosen[k] > 0:
            chosen[k] -= 1
            if len(text()) > width:
                chosen[k] += 1
                break
    return text()


class PlannerPane(Vertical):
    """The Planner pane: ranked shapes, the speed-only outlook or the geo pipeline, whichever the job has."""

    KEYS_HELP = (("enter", "Explain the row"), ("x", "List the regions a row stands for"))
    BINDINGS = [
        Binding(
            "x",
            "expand",
            "Regions",
            tooltip="List the regions a row stands for",
            show=False,
            id="planner.expand",
        )
    ]

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.mode = "outlook"
        self._state: MonitorState | None = None
        self._subtitle: list[tuple[str, ...]] = []  # the ranked subtitle's parts (fitted to the width)
        self._expanded: frozenset[int] = frozenset()  # ranked rows whose folded regions are listed

    def action_expand(self) -> None:
        """``x``: list (or fold again) the regions the ranked row under the cursor stands for."""
        if self.mode != "ranked" or self._state is None:
            return
        ranked = self._ranked(self._state)
        key = self.query_one("#ranked-table", FilterTable).current_key()
        if ranked is None or key is None:
            return
        i = int(key)
        rep = ranked.columns.get("folded_into")
        i = int(rep[i]) if rep is not None and i < rep.size else i
        if not ranked.members(i):
            self.app.notify("this row stands for its own region only", timeout=3)
            return
        self._expanded = self._expanded ^ {i}
        self.query_one("#ranked-table", FilterTable).set_rows(ranked_rows(ranked, expanded=self._expanded))

    def compose(self) -> ComposeResult:
        yield TableBox(FilterTable(OUTLOOK_COLUMNS, id="planner-table"), id="planner-outlook")
        box = TableBox(FilterTable(RANKED_COLUMNS, id="ranked-table"), id="planner-ranked")
        box.display = False
        yield box
        box = TableBox(FilterTable(PIPELINE_COLUMNS, id="pipeline-table"), id="planner-pipeline")
        box.display = False
        yield box

    def _view(self, state: MonitorState) -> JobPlannerView | None:
        """The planner's answer for the job the pane follows."""
        job = state.job()
        return state.planner.job(job.name) if job else None

    def _ranked(self, state: MonitorState) -> ShapeTable | None:
        view = self._view(state)
        return view.ranked if view is not None else None

    def update_state(self, state: MonitorState) -> None:
        """Show the ranking (or outlook, or pipeline) of the selected job of ``state``."""
        self._state = state
        ranked = self._ranked(state)
        if ranked is not None:
            self._set_mode("ranked")
            self.query_one("#ranked-table", FilterTable).set_rows(
                ranked_rows(ranked, expanded=self._expanded)
            )
            view = self._view(state)
            stay = stay_rank(ranked)
            self._subtitle = [
                (f"ranked by {ranked.objective}", f"by {ranked.objective}"),
                *([(stay, "")] if stay else []),  # where "stay" ranks: left out when the width is short
                *(
                    []
                    if ranked.current_priced
                    else [("current shape: price unknown", "current: price unknown")]
                ),
                price_notes(ranked.ranked_row(0)),
                calibration_notes(view.plan if view is not None else None),
                *([ps_search_notes(ranked)] if ranked.search_note else []),
            ]
            self._fit()
            return
        view = self._view(state)
        pipeline = view.pipeline if view is not None else None
        if pipeline is not None:
            self._set_mode("pipeline")
            self.query_one("#pipeline-table", FilterTable).set_rows(
                pipeline_rows(list(pipeline.boundaries), dict(pipeline.dc))
            )
            set_subtitle(
                self,
                f"pipeline · {len(pipeline.boundaries)} WAN boundaries measured, {pipeline.wan_bound} WAN-bound"
                " · cmdare-tui plan --geo ranks placements",
            )
            return
        self._set_mode("outlook")
        rows: list[ShapeOutlook] = list(view.outlook) if view is not None else []
        self.query_one("#planner-table", FilterTable).set_rows(outlook_rows(rows) if rows else [])
        job = state.job()
        stalled = ""
        if job is not None and job.stalled:
            stalled = "finished" if job.finished else f"stalled since {clock(job.stalled_since)}"
            stalled += ": no new plans · "
        set_subtitle(
            self,
            Text(
                stalled
                + (
                    ("speed only · " + rows[0].prediction.source)
                    if rows
                    else "needs the job's network and shape"
                )
            ),
        )

    def _fit(self) -> None:
        """The ranked subtitle at the pane's width (its border and corners take 6 columns)."""
        width = self.size.width - 6 if self.size.width > 6 else 1000
        set_subtitle(self, Text(fit_subtitle(self._subtitle, width)))

    def on_resize(self) -> None:
        """Fit the ranked subtitle again to the new width."""
        if self.mode == "ranked" and self._subtitle:
            self._fit()

    def _set_mode(self, mode: str) -> None:
        if mode == self.mode:
            return
        had_focus = self.query_one(f"#planner-{self.mode}").has_focus_within
        self.mode = mode
        for name in ("outlook", "ranked", "pipeline"):
            self.query_one(f"#planner-{name}").display = mode == name
        if had_focus:
            self.query_one(f"#planner-{mode} FilterTable").focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """``enter`` on a row: explain it."""
        if self._state is None or event.row_key.value is None:
            return
        from cmdare.tui.widgets.explain import ExplainScreen  # on enter only, not at start-up

        key = str(event.row_key.value)
        ranked = self._ranked(self._state)
        if ranked is not None and self.mode == "ranked":
            self.app.push_screen(ExplainScreen.for_ranked(ranked, int(key)))
            return
        view = self._view(self._state)
        pipeline = view.pipeline if view is not None else None
        if pipeline is not None and self.mode == "pipeline":
            b = next((b for b in pipeline.boundaries if f"{b.from_stage}->{b.to_stage}" == key), None)
            if b is not None:
                self.app.push_screen(ExplainScreen.for_boundary(b, dict(pipeline.dc)))
            return
        rows = list(view.outlook) if view is not None else []
        row = next((r for r in rows if r.shape.label == key), None)
        if row is not None:
            self.app.push_screen(ExplainScreen.for_outlook(row, rows[0]))
