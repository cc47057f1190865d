"""``cmdare-tui plan --geo FILE.toml [--json]``: the geo-distributed pipeline model and placement search.

The ``plan`` command (another module) calls :func:`run_geo` when ``--geo`` is given. Output: JSON with
the iteration model of the file's layout (or of the best placement when the file fixes none), its WAN
boundaries, prefill capacity, the ranked placements and the multi-connection / temporal-sharing gains;
or the same as Rich tables.
"""

from __future__ import annotations

import json
from typing import Any

from cmdare.planner.geo.geo_model import GeoJob, GeoResult, evaluate
from cmdare.planner.geo.geo_placement import Placement, SearchResult, gains, search
from cmdare.planner.geo.geo_workload import GeoWorkload, GeoWorkloadError, load_geo_workload
from cmdare.tui.commands import UsageError

__all__ = ["run_geo", "geo_report"]


def _boundary_rows(result: GeoResult) -> list[dict[str, Any]]:
    keys = ("stage", "from_dc", "to_dc", "wan", "bytes_per_microbatch", "link_gbps", "single_tcp_gbps", "n_conn",
            "effective_gbps", "latency_seconds", "transfer_seconds", "link_busy_seconds", "wan_bound",
            "egress_gb_per_iteration", "egress_usd_per_iteration")  # fmt: skip
    return [{k: getattr(b, k) for k in keys} for b in result.boundaries]


def geo_report(work: GeoWorkload, top: int | None = None) -> dict[str, Any]:
    """The JSON-ready report of a parsed workload (pure: no printing)."""
    n = top if top is not None else work.top
    ranked: SearchResult = search(work.job, work.global_batch, max(n, 1), work.max_pp, work.max_orders)
    job: GeoJob = work.job
    if not work.fixed_layout:
        if not ranked.by_time:
            raise ValueError("no placement fits: every DC is smaller than one stage of dp × tp GPUs")
        best: Placement = ranked.by_time[0]
        job = GeoJob(
            model=job.model,
            dcs=job.dcs,
            links=job.links,
            layout=best.layout,
            mfu=job.mfu,
            stage_compute_s=None,
            activation_bytes=job.activation_bytes,
            prefill=job.prefill,
        )
    r = evaluate(job)
    lay = job.layout
    return {
        "source": work.source,
        "layout": {
            "pp": lay.pp,
            "dp": lay.dp,
            "tp": lay.tp,
            "n_microbatches": lay.n_microbatches,
            "stage_dcs": list(lay.placement),
            "schedule": lay.schedule,
            "sharing": lay.sharing,
            "chosen_by": "file" if work.fixed_layout else "search",
        },  # fmt: skip
        "iteration_seconds": r.iteration_seconds,
        "pipeline_seconds": r.pipeline_seconds,
        "allreduce_seconds": r.allreduce_seconds,
        "period_seconds": r.period_seconds,
        "bound": r.bound,
        "bubble_fraction": r.bubble_fraction,
        "bubble_floor": r.bubble_floor,
        "gpu_utilization": r.gpu_utilization,
        "gpu_utilization_with_prefill": r.gpu_utilization_with_prefill,
        "stage_compute_seconds": list(r.stage_compute_seconds),
        "boundaries": _boundary_rows(r),
        "prefill_request_seconds": r.prefill_request_seconds,
        "prefill_requests_per_iteration": r.prefill_requests_per_iteration,
        "prefill_capacity": r.prefill_capacity,
        "idle_gpu_seconds": r.idle_gpu_seconds,
        "fillable_gpu_seconds": r.fillable_gpu_seconds,
        "usd_per_iteration": r.usd_per_iteration,
        "gains": gains(job).to_dict(),
        "placements": [p.to_dict() for p in ranked.by_time[:n]],
        "placements_by_cost": [p.to_dict() for p in ranked.by_cost[:n]],
        "placements_evaluated": ranked.evaluated,
    }


ALL_PLACEMENTS = 1000  # what ``--top 0`` ("all") shows at most


def run_geo(path: str, as_json: bool, top: int | None) -> int:
    """Print the geo plan of ``path``: ``top`` placements (``None``: the file's ``[search] top``;
    0: all); bad files raise :class:`UsageError` naming file and key."""
    try:
        work = load_geo_workload(path)
        report = geo_report(work, ALL_PLACEMENTS if top == 0 else top)
    except GeoWorkloadError as exc:
        raise UsageError(str(exc)) from exc
    except ValueError as exc:  # a layout the model rejects (e.g. missing link): still the file's fault
        raise UsageError(f"{path}: {exc}") from exc
    if as_json:
        print(json.dumps(report, indent=2))
    else:
        _print_tables(report)
    return 0


def _print_tables(rep: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text  # names from the file are data, never markup

    lay = rep["layout"]
    head = Table(
        title=Text(f"geo plan: {rep['source']}  (layout from {lay['chosen_by']})"), show_header=False
    )
    head.add_row("layout", Text(f"pp={lay['pp']} dp={lay['dp']} tp={lay['tp']} m={lay['n_microbatches']} "
                 f"{lay['schedule']} / {lay['sharing']}: {' → '.join(lay['stage_dcs'])}"))  # fmt: skip
    head.add_row("iteration", f"{rep['iteration_seconds']:.3f} s ({rep['bound']}-bound, model)")
    head.add_row("bubble", f"{rep['bubble_fraction']:.1%} (floor {rep['bubble_floor']:.1%})")
    head.add_row("GPU utilisation", f"{rep['gpu_utilization']:.1%} → {rep['gpu_utilization_with_prefill']:.1%} "
                 "with prefill")  # fmt: skip
    head.add_row("prefill capacity", f"{rep['prefill_capacity']:.1f} req/s")
    g = rep["gains"]
    head.add_row("multi-connection gain", f"×{g['multi_connection_speedup']:.2f} vs one TCP flow per link")
    head.add_row("temporal sharing gain", f"×{g['temporal_speedup']:.2f} vs spatial")
    bt = Table(title="stage boundaries")
    for col in ("stage", "link", "Gbit/s eff (1 TCP)", "per mb s", "link busy s", "verdict"):
        bt.add_column(col)
    for b in rep["boundaries"]:
        verdict = Text("WAN-bound", style="red") if b["wan_bound"] else ("ok" if b["wan"] else "intra-DC")
        bt.add_row(str(b["stage"]), Text(f"{b['from_dc']} → {b['to_dc']}"),
                   f"{b['effective_gbps']:.3g} ({b['single_tcp_gbps']:.3g})", f"{b['transfer_seconds']:.3f}",
                   f"{b['link_busy_seconds']:.3f}", verdict)  # fmt: skip
    pt = Table(title="placements (fastest first)")
    for col in ("#", "pp×dp×tp", "stages", "iter s", "tokens/s", "$/M tok", "util"):
        pt.add_column(col)
    for i, p in enumerate(rep["placements"], 1):
        pt.add_row(str(i), f"{p['pp']}×{p['dp']}×{p['tp']}", Text(" ".join(p["stage_dcs"])), f"{p['iteration_seconds']:.2f}",
                   f"{p['tokens_per_second']:.0f}", f"{p['usd_per_million_tokens']:.3f}", f"{p['gpu_utilization']:.0%}")  # fmt: skip
    console = Console()
    for table in (head, bt, pt):
        console.print(table)
