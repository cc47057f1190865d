"""A modal explaining one Planner row: where the time goes and what bounds the speed."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from cmdare.tui.format import duration, money, pct, rate

if TYPE_CHECKING:  # the planner's models load after the first frame (start-up, issue 20)
    from cmdare.planner.geo.geo_live import LiveBoundary
    from cmdare.planner.live.outlook import ShapeOutlook
    from cmdare.planner.risk_cost.shapes import ShapeTable


class _Grid(Table):
    """Label / value rows; both are shown as plain text (data is never parsed as markup)."""

    def add_row(self, *cells: Any, **kw: Any) -> None:
        super().add_row(*(c if isinstance(c, Text) else Text(str(c)) for c in cells), **kw)


def band_scope(extrapolation: str) -> str:
    """What a band's ``extrapolation`` says after its P10–P90: nothing inside the measured domain; for a sync
    row ("allreduce") that the band covers compute and scaling (published residuals, the job's calibration)."""
    if extrapolation == "none":
        return ""
    if extrapolation == "allreduce":
        return (", compute and scaling band (published scaling residuals; links at published achieved bandwidth, "
                "scaled by the job's calibration)")  # fmt: skip
    return f", beyond the measured domain: {extrapolation}"


def _grid() -> Table:
    t = _Grid.grid(padding=(0, 2))
    t.add_column(style="bold", no_wrap=True)
    t.add_column()
    return t


def detail_grid(rows: list[tuple[str, str]]) -> Table:
    """Label / value rows (values wrap)."""
    t = _grid()
    for k, v in rows:
        t.add_row(k, v)
    return t


class ExplainScreen(ModalScreen[None]):
    """A modal window explaining one row: a title, a grid of figures and a footnote on their basis."""

    DEFAULT_CSS = """
    ExplainScreen { align: center middle; background: $background; }
    /* opaque: a see-through modal re-tints every cell of the screen below it at each paint (issue 28) */
    ExplainScreen > Vertical { width: 74; max-width: 100%; height: auto; max-height: 90vh;
        border: round $accent; background: $surface; padding: 0 1; }
    ExplainScreen VerticalScroll { height: auto; max-height: 65vh; }
    ExplainScreen .explain-title, ExplainScreen .explain-hint { height: auto; }
    """
    BINDINGS = [Binding("escape,q,enter", "close", "Close", id="explain.close")]

    def __init__(self, title: str, body: Table, footnote: str) -> None:
        super().__init__()
        self._title, self._body, self._foot = title, body, footnote

    def compose(self) -> ComposeResult:
        """Title and close hint stay on screen at 80x24; the body between them scrolls (issue 18)."""
        with Vertical():
            yield Static(Text(self._title, style="bold"), classes="explain-title")
            with VerticalScroll():
                yield Static(self._body)
                yield Static(Text("\n" + self._foot, style=""))
            yield Static(Text("esc closes · ↑↓ scroll", style="dim"), classes="explain-hint")

    def action_close(self) -> None:
        """Close the window."""
        self.dismiss(None)

    @classmethod
    def for_outlook(cls, row: ShapeOutlook, current: ShapeOutlook) -> ExplainScreen:
        """Why a speed-only outlook row predicts what it does (against the current shape)."""
        p = row.prediction
        t = _grid()
        t.add_row("Predicted", f"{rate(p.steps_per_sec)} steps/s ({rate(p.examples_per_sec)} images/s)")
        t.add_row("Bound by", p.bottleneck)
        t.add_row("Without PS limit", f"{rate(p.compute_bound_steps_per_sec)} steps/s (compute-bound)")
        t.add_row("PS load", pct(p.ps_utilization))
        step = sum(p.terms.values()) or 1.0
        for k, v in sorted(p.terms.items(), key=lambda kv: -kv[1]):
            t.add_row(f"  {k}", f"{1000 * v:.1f} ms/step ({v / step:.0%})")
        base = current.prediction.steps_per_sec
        if not row.current and base:
            t.add_row("vs current", f"{p.steps_per_sec / base - 1:+.0%} steps/s")
        return cls(f"Why {row.shape.label}", t, f"model: {p.source}")

    @classmethod
    def for_boundary(cls, b: LiveBoundary, dc: Mapping[str, str]) -> ExplainScreen:
        """A pipeline's WAN boundary: its wire time per micro-batch, worked out from the link's capacity,
        and why the rate it sends says nothing of that capacity (issue 18)."""
        t = _grid()
        t.add_row("Boundary", f"stage {b.from_stage} ({dc.get(b.from_stage, '?')}) → stage {b.to_stage} "
                          f"({dc.get(b.to_stage, '?')})")  # fmt: skip
        for label, value in boundary_wire_rows(b):
            t.add_row(label, value)
        t.add_row("Compute s", f"{b.max_stage_compute_seconds:.3f} s: the slowest stage per micro-batch")
        verdict = (
            "WAN-bound: the wire takes longer than the slowest stage"
            if b.wan_bound
            else "ok: compute is slower"
        )
        t.add_row("Verdict", verdict)
        return cls(f"Why {b.from_stage}->{b.to_stage}", t, "measured: stage counters over the rate window")

    @classmethod
    def for_ranked(cls, table: ShapeTable, i: int) -> ExplainScreen:
        """Why row ``i`` of a ranked shape table costs and takes what it does (model terms)."""
        r = table.ranked_row(i)
        t = _grid()
        if (
            r.sync
        ):  # synchronous all-reduce: nodes × GPUs per node, the all-reduce share, the revocation policy
            t.add_row("Shape", f"{r.nodes} nodes × {r.gpus_per_node} {r.gpu} ({r.workers} GPUs, all-reduce), "
                      f"{r.region}, {r.provisioning}")  # fmt: skip
            t.add_row("All-reduce", f"{r.comm_share:.0%} of a step exposed; on revocation: {r.policy}")
        else:
            t.add_row("Shape", f"{r.workers}×{r.gpu} + {r.ps} PS, {r.region}, {r.provisioning}")
        band = table.band(i)
        t.add_row("Steps/s", f"{rate(r.steps_per_sec)} expected; " + (
            f"P10–P90 {rate(band.p10)}–{rate(band.p90)}"
            + band_scope(band.extrapolation)
            if band else "band: n/a in this build"))  # fmt: skip
        t.add_row("Time", f"p50 {duration(r.hours_p50 * 3600)}, p90 {duration(r.hours_p90 * 3600)}")
        t.add_row("Cost", f"p50 {money(r.cost_usd_p50)}, p90 {money(r.cost_usd_p90)}"
                  if r.cost_usd_p50 is not None else "price unknown in this book")  # fmt: skip
        t.add_row("Revocation", f"{table.risk_words(i)}; expected revocations {r.expected_revocations:.2f}")
        if r.region_note:
            t.add_row("Region move", r.region_note)
        regions = list(table.columns["regions"][i]) if "regions" in table.columns else []
        if len(regions) > 1:
            t.add_row("Regions", f"the same figures in {', '.join(regions)} (one row; x lists them)")
        t.add_row("vs current", "this is the current shape" if i == 0 else table.delta(i))
        for label, value in switching_rows(table, i):
            t.add_row(label, value)
        if table.checkpoint_words(i):
            t.add_row("Checkpoints", checkpoint_explained(table, i))
        try:
            ex = table.explain(i)
        except ValueError as exc:
            return cls("Why this shape", t, str(exc))
        for k in sorted(ex.shares, key=lambda k: ex.shares[k], reverse=True):
            t.add_row(f"  {k}", f"{duration(ex.seconds[k])} ({ex.shares[k]:.0%})")
        return cls(
            "Why this shape",
            t,
            ex.text() + f"\n{r.price_source} prices, {r.price_date}",
        )


def checkpoint_explained(table: ShapeTable, i: int) -> str:
    """Row ``i``'s optimum checkpoint interval, how it is made and what it rests on."""
    from cmdare.planner.risk_cost.checkpointing import METHOD

    c = table.columns
    mtbf, write = float(c["ckpt_mtbf_s"][i]), float(c["ckpt_write_s"][i])
    if not math.isfinite(mtbf):
        return table.checkpoint_words(i)
    return (f"{table.checkpoint_words(i)} · {METHOD}: a restart-forcing revocation every {duration(mtbf)} "
            f"expected, {write:.1f} s to write one")  # fmt: skip


def switching_rows(table: ShapeTable, i: int) -> list[tuple[str, str]]:
    """What moving the job to row ``i`` costs — the verdict, then each term with its source (issue 30); the
    row's time and cost above include it."""
    words = table.switch_words(i)
    if not words:
        return []
    out = [("Switching", words + ("" if i == 0 else " — included in the time and cost above"))]
    out += [(f"  {name}", f"{duration(sec)} · {source}") for name, sec, source in table.switch_terms(i)]
    if table.egress_words(i):
        out.append(("  egress", table.egress_words(i)))
    return out


def boundary_wire_rows(b: LiveBoundary) -> list[tuple[str, str]]:
    """How a boundary's wire time per micro-batch is made: bytes × 8 ÷ the link's capacity (from [links]),
    or ÷ the measured rate when the capacity is unknown (then an upper bound)."""
    mb = b.bytes_per_microbatch / 1e6
    if b.link_gbps is None:
        link = (f"unknown (no [links] entry for this DC pair): the measured {b.measured_gbps:.2f} Gbit/s stands "
                "in, a lower bound on the capacity, so the wire time is an upper bound")  # fmt: skip
        divisor = b.measured_gbps
    else:
        link, divisor = f"{b.link_gbps:.2f} Gbit/s capacity ([links])", b.link_gbps
    return [
        ("Per micro-batch", f"{mb:.1f} MB across this boundary (all pipelines' activations)"),
        ("Capacity", link),
        ("Wire s/mb", f"{mb:.1f} MB × 8 ÷ {divisor:.2f} Gbit/s = {b.transfer_seconds:.3f} s"),
        ("Sent", f"{b.measured_gbps:.2f} Gbit/s on average: the pipeline's pace × {mb:.1f} MB. The slowest "
                 "boundary paces every stage, so each boundary sends about the same whatever its link; a "
                 "faster link carries it in less of the period and idles the rest"),
    ]  # fmt: skip
