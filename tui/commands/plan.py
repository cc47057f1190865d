"""``cmdare-tui plan``: rank alternative cluster shapes for a workload file.

cmdare-tui plan --workload FILE.toml [--json] [--top N] [--objective time|cost|balanced]
                [--prices offline|live|study-era]
cmdare-tui plan --geo FILE.toml [--json] [--top N]        (geo-distributed plan, see plan_geo)

``--workload`` and ``--geo`` exclude each other, and ``--objective`` / ``--prices`` apply to
``--workload`` only (a geo file carries its own GPU prices): conflicting flags exit 2.
``--top`` defaults to 10, or to the geo file's ``[search] top``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmdare.tui.cli_args import PRICE_MODES
from cmdare.tui.commands import UsageError

if TYPE_CHECKING:
    from cmdare.planner.risk_cost.shapes import Row

JSON_KEYS = (
    "gpu", "workers", "ps", "region", "provisioning", "also_provisioning", "steps_per_sec", "hours_p50",
    "hours_p90", "cost_usd_p50", "cost_usd_p90", "p_revocation", "expected_revocations", "pareto",
    "price_source", "price_as_of", "price_date", "hours_expected", "cost_usd_expected", "per_node_risk",
    "bottleneck", "feasible", "egress_usd", "region_note", "steps_per_sec_p10", "steps_per_sec_p90",
    "extrapolation", "current", "delta", "regions", "switch_s", "switch_usd", "switch_kind", "worth_switching",
    "switch", "switch_terms", "switch_egress", "index", "ckpt_interval_s", "ckpt_optimal_s", "ckpt_mtbf_s", "ckpt_write_s", "ckpt_saves_s",
    "ckpt_saves_usd", "p_revocation_low", "p_revocation_high", "p_revocation_periods", "p_revocation_period",
)  # fmt: skip
SYNC_KEYS = ("nodes", "gpus_per_node", "comm_share", "policy", "memory")  # [parallel] mode = sync | fsdp
SYNC_NOTE = (
    "sync: steps/s of each shape's own global batch (its GPUs × batch); time and cost train the same examples; "
    "P10–P90 bands cover the compute term and the scaling (residuals of published multi-GPU results); links at "
    "their published achieved bus bandwidth (not measured here); shapes the model does not fit are not ranked"
)
#: Text columns, each with its unit: P(≥1 revocation) is the chance of at least one revocation in the run.
TEXT_HEADER = ("#", "gpu", "wrk", "ps", "region", "prov", "steps/s", "h p50", "h p90", "$ p50", "P(≥1 rev)",
               "vs current")  # fmt: skip


SYNC_HEADER = ("#", "gpu", "nod", "g/n", *TEXT_HEADER[4:])  # sync: nodes and GPUs per node instead of wrk, ps


def register(subparsers: Any) -> None:
    """Add the ``plan`` sub-command."""
    p = subparsers.add_parser("plan", help="rank alternative cluster shapes: time, cost and revocation risk")
    p.add_argument("--workload", type=Path, metavar="FILE.toml", help="workload file (see examples/)")
    p.add_argument("--geo", type=Path, metavar="FILE.toml", help="geo-distributed pipeline plan instead")
    p.add_argument("--json", action="store_true", help="print the ranked rows as JSON")
    p.add_argument("--top", type=int, default=None,
                   help="rows to show (0 = all; default 10, or the geo file's [search] top)")  # fmt: skip
    p.add_argument("--objective", choices=("time", "cost", "balanced"), default=None,
                   help="rank by time, cost or both (default balanced; --workload only)")  # fmt: skip
    p.add_argument("--prices", choices=PRICE_MODES, default=None,
                   help="price book for --workload: offline (shipped, default), live (Cloud Billing API, "
                        "cached unless read-only) or study-era (the 2019 CM-DARE prices)")  # fmt: skip
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``plan``; returns the exit status."""
    if args.top is not None and args.top < 0:
        raise UsageError("plan: --top must be >= 0")
    if args.geo is not None:
        from cmdare.tui.commands.plan_geo import run_geo

        if args.workload is not None:
            raise UsageError("plan: give --workload or --geo, not both")
        for flag, value in (("--objective", args.objective), ("--prices", _flag_prices(args))):
            if value is not None:
                raise UsageError(f"plan: {flag} applies to --workload only (a geo file carries its own prices "
                                 "and ranks by time and by cost)")  # fmt: skip
        return int(run_geo(args.geo, args.json, args.top) or 0)
    if args.workload is None:
        raise UsageError("plan: give --workload FILE.toml (or --geo FILE.toml)")
    table = build_table(args.workload, args.objective or "balanced", args.prices or "offline")
    top = 10 if args.top is None else args.top
    rows = plan_rows(table, top or None)
    if args.json:
        print(json.dumps([{k: v for k, v in r.items() if k != "index"} for r in rows], indent=1))
    else:
        notes = (_reference_note(table), table.search_note)  # an unpriced current shape; the PS counts tried
        print(render_text(table, rows, "\n".join(n for n in notes if n)))
    return 0


def _flag_prices(args: argparse.Namespace) -> str | None:
    """``--prices`` when given on the command line (a config's ``prices`` is no conflict)."""
    cfg = getattr(args, "app_config", None)
    from_config = cfg.prices if cfg is not None else None
    return None if args.prices == from_config else args.prices


def build_table(path: Path, objective: str, prices: str = "offline") -> Any:
    """Load the workload and the models, and rank the shapes (:class:`cmdare.planner.risk_cost.shapes.ShapeTable`)."""
    from cmdare.planner.risk_cost.revocation import RevocationModel
    from cmdare.planner.risk_cost.shapes import UnpricedShapeError, rank_shapes
    from cmdare.planner.risk_cost.sync_shapes import rank_sync_shapes
    from cmdare.planner.risk_cost.workload import WorkloadError, load_workload
    from cmdare.planner.speed.gpu_catalog import UnknownGpuError
    from cmdare.planner.speed.speed_model import SpeedModel

    try:
        workload = load_workload(path)
    except WorkloadError as exc:
        raise UsageError(str(exc)) from exc
    book = _price_book(prices)
    rank = rank_sync_shapes if workload.parallel.sync else rank_shapes
    try:
        return rank(workload, SpeedModel.load(), book, RevocationModel.load(), objective=objective)
    except UnknownGpuError as exc:
        raise UsageError(f"{path}: {exc}") from exc
    except UnpricedShapeError as exc:
        hint = " (try --prices study-era)" if prices == "offline" else ""
        raise UsageError(f"{path}: {exc}{hint}") from exc


def _price_book(which: str) -> Any:
    from cmdare.collectors import pricing

    return pricing.load_book(which)  # live never raises: falls back to the cache, then the offline book


def _reference_note(table: Any) -> str:
    """For a current shape the book cannot price: its study-era (2019) price, labelled, for reference."""
    if table.current_priced:
        return ""
    from cmdare.collectors import pricing
    from cmdare.planner.risk_cost.ranking_notes import price_date_label

    c, book = table.current, pricing.load_study_era_book()
    prices = str(c["price_source"])
    try:
        worker = book.node_price(str(c["gpu"]), 1, str(c["region"]), str(c["provisioning"])).usd_per_hour
        ps = book.ps_node_price(str(c["region"])).usd_per_hour
    except KeyError:
        return f"current shape: price unknown in the {prices} book"
    usd = int(c["workers"]) * worker + int(c["ps"]) * ps
    return (f"current shape: price unknown in the {prices} book; study-era book ({price_date_label(book)}): "
            f"${usd:.2f}/h, for reference only (not compared with today's prices)")  # fmt: skip


def plan_rows(table: Any, top: int | None) -> list[Row]:
    """Ranked rows (JSON-ready), each with ``current`` (bool) and ``delta`` against the current shape."""
    idx = table.view if top is None else table.view[:top]
    rows = []
    for i in idx:
        row = table.row(int(i))
        row["current"] = int(i) == 0
        row["delta"] = table.delta(int(i))
        row.update(band_keys(table, int(i)))
        row["regions"] = list(row["regions"])
        row["switch"] = table.switch_words(int(i))
        row["switch_terms"] = [
            {"term": k, "seconds": round(v, 1), "source": src} for k, v, src in table.switch_terms(int(i))
        ]
        row["switch_egress"] = table.egress_words(int(i)) or None
        row["index"] = int(i)
        row["p_revocation_period"] = table.risk_period_name
        rows.append({k: row[k] for k in JSON_KEYS + (SYNC_KEYS if _is_sync(table) else ())})
    return rows


def band_keys(table: Any, i: int) -> Row:
    """Row ``i``'s ``steps_per_sec_p10`` / ``_p90`` / ``extrapolation`` (None without the band API)."""
    band = table.band(i)
    if band is None:
        return {"steps_per_sec_p10": None, "steps_per_sec_p90": None, "extrapolation": None}
    return {"steps_per_sec_p10": round(band.p10, 4), "steps_per_sec_p90": round(band.p90, 4),
            "extrapolation": band.extrapolation}  # fmt: skip


def _is_sync(table: Any) -> bool:
    return "gpus_per_node" in table.columns


def _sync_words(r: Row) -> str:
    """' · all-reduce 12% of a step · on revocation: elastic' for a sync row."""
    if r.get("comm_share") is None:
        return ""
    return f" · all-reduce {float(r['comm_share']):.0%} of a step · on revocation: {r['policy']}"


def _band_words(r: Row) -> str:
    """' · P10–P90 60–85 steps/s[, beyond the measured domain: ps]' when the row has a band."""
    if r.get("steps_per_sec_p10") is None:
        return ""
    out = f" · P10–P90 {float(r['steps_per_sec_p10']):.3g}–{float(r['steps_per_sec_p90']):.3g} steps/s"
    ext = r.get("extrapolation")  # "allreduce": a sync row's band, said once under the table (SYNC_NOTE)
    return out if ext in (None, "none", "allreduce") else f"{out}, beyond the measured domain: {ext}"


def _price_words(cur: Row) -> str:
    """'offline prices, price date unknown (derived …)', 'study-era prices, prices of 2019-02-15': the
    words every view uses for the prices' source and date."""
    return f"{cur['price_source']} prices, {cur['price_date'] or cur['price_as_of']}"


def _prov_label(r: Row) -> str:
    return "spot/preempt" if r.get("also_provisioning") else str(r["provisioning"])


def _num(x: float | None, fmt: str, unknown: str = "unknown") -> str:
    return unknown if x is None else format(float(x), fmt)


ROW_FMT = "{:>3} {:<5} {:>3} {:>2} {:<15} {:<5} {:>7} {:>6} {:>6} {:>7} {:>9}"
DETAIL_INDENT = 6  # a row's details (vs current, switching, band) wrap beneath it, indented


def text_width() -> int:
    """The width ``plan`` wraps its text at: the terminal's, else ``COLUMNS`` (bounded), else 80 — as ``snapshot``."""
    import shutil

    from cmdare.tui.plain import report_width

    return report_width() or shutil.get_terminal_size((80, 24)).columns


def _wrap(text: str, width: int, indent: int = 0) -> list[str]:
    import textwrap

    pad = " " * indent
    return textwrap.wrap(text, width=max(width, indent + 20), initial_indent=pad, subsequent_indent=pad,
                         break_on_hyphens=False) or [pad]  # fmt: skip


def _prov_code(r: Row) -> str:
    from cmdare.tui.format import provisioning_code

    return "s/pre" if r.get("also_provisioning") else provisioning_code(str(r["provisioning"]))


def _region_cell(r: Row) -> str:
    """The row's region, ``+N`` when it stands for N other regions with the same figures, † for a move."""
    regions = list(r.get("regions") or [r["region"]])
    more = f"+{len(regions) - 1}" if len(regions) > 1 else ""
    return f"{r['region']}{more}" + ("†" if r.get("region_note") else "")


def _detail(table: Any, r: Row) -> str:
    """What a row's fixed columns do not say: its change against the current shape, what switching to it
    costs (or that it is not worth it), its speed band, the regions it stands for."""
    i = int(r["index"])
    words = [table.switch_words(i)]
    if r["delta"] == "current shape":  # the reference line: where "stay" ranks, when to checkpoint
        rank = next((k + 1 for k, x in enumerate(table.view) if int(x) == 0), None)
        words = [f"current shape, ranked #{rank}" if rank else "current shape", table.risk_words(0),
                 table.checkpoint_words(0)]  # fmt: skip
    elif i != 0:
        words.insert(0, ("★ " if r["pareto"] else "") + str(r["delta"]))
    regions = list(r.get("regions") or [])
    if len(regions) > 1:
        words.append("same figures in " + ", ".join(regions[1:]))
    if r.get("cost_usd_p50") is None:
        words.append("price unknown: ranked by time")
    text = " · ".join(w for w in words if w)
    return text + _band_words(r) + _sync_words(r)


def render_text(table: Any, rows: list[Row], note: str = "", width: int | None = None) -> str:
    """A plain-text table wrapped at ``width`` (default :func:`text_width`): the current shape first, then the
    ranked rows ("stay" among them), each row's details beneath it; † marks a region move, explained under the
    table (egress for the stated dataset, capacity not guaranteed)."""
    width = width or text_width()
    cur = table.current
    head = (
        f"objective {table.objective} · {len(table)} outcomes · {_price_words(cur)} · ★ = Pareto (time, cost, "
        "risk) · time and cost include switching to the shape"
    )
    if table.bander is None:
        head += " · steps/s: expected value (band: n/a in this build)"
    sync = _is_sync(table)
    lines = [*_wrap(head, width), *(_wrap(note, width) if note else [])]
    lines.append(ROW_FMT.format(*(SYNC_HEADER if sync else TEXT_HEADER)[:11]).rstrip())
    moves: dict[str, str] = {}
    first = {**cur, **band_keys(table, 0), "current": True, "delta": "current shape", "index": 0}
    for n, r in enumerate([first, *rows]):
        a, b = (r["nodes"], r["gpus_per_node"]) if sync else (r["workers"], r["ps"])
        if r.get("region_note"):
            moves[str(r["region"])] = str(r["region_note"])
        label = "cur" if n == 0 else str(n)
        lines.append(ROW_FMT.format(
            label, r["gpu"], a, b, _region_cell(r), _prov_code(r),
            f"{r['steps_per_sec']:.1f}", f"{r['hours_p50']:.2f}", f"{r['hours_p90']:.2f}",
            _num(r["cost_usd_p50"], ".2f"), table.risk_cell(int(r["index"])),
        ).rstrip())  # fmt: skip
        lines += _wrap(_detail(table, r), width, DETAIL_INDENT)
    for region, words in moves.items():
        lines += _wrap(f"† {region}: {words}", width)
    if sync:
        lines += _wrap(SYNC_NOTE, width)
        if getattr(table, "memory_note", ""):
            lines += _wrap(f"memory: {table.memory_note}", width)
    lines += _wrap(_unpriced_note(table, rows), width) if _unpriced_note(table, rows) else []
    if rows and all(r["region"] != cur["region"] for r in rows):
        lines += _wrap(_best_at_home(table), width)
    return "\n".join(lines)


def _unpriced_note(table: Any, rows: list[Row]) -> str:
    """Shapes kept for their revocation fit although the book has no price, when none of them is shown."""
    import numpy as np

    cost = table.columns["cost_usd_p50"].astype(float)
    unpriced = [int(x) for x in table.view if int(x) != 0 and not np.isfinite(cost[int(x)])]
    if not unpriced or any(r.get("cost_usd_p50") is None and not r.get("current") for r in rows):
        return ""
    r = table.row(unpriced[0])
    where = "among the priced ones" if table.objective == "time" else "after the priced ones"
    return (f"{len(unpriced)} shape(s) with a fitted revocation curve but no price in this book are ranked by time "
            f"{where} (--top 0 lists them): the best, {r['workers']}×{r['gpu']} {r['provisioning']} in {r['region']}, "
            f"{r['hours_p50']:.2f} h p50, "
            f"P(≥1 rev) {r['p_revocation']:.2f}, price unknown")  # fmt: skip


def _best_at_home(table: Any) -> str:
    """The best-ranked shape that stays in the current region (when none of the shown rows does)."""
    region = table.current["region"]
    i = next((int(i) for i in table.view if int(i) != 0 and table.row(int(i))["region"] == region), None)
    if i is None:
        return f"no alternative in the current region {region}"
    r = table.row(i)
    shape = (f"{r['nodes']} nodes × {r['gpus_per_node']} {r['gpu']}" if _is_sync(table)
             else f"{r['workers']}×{r['gpu']} + {r['ps']} PS")  # fmt: skip
    return f"best staying in {region}: {shape} {_prov_label(r)}, {table.delta(i)}"
