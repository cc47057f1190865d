"""What it costs a running job to move from its current shape to another (issue 30), per ranked row (vectorised).

A row's P50 / P90 / expected time and cost include its switching cost, so a row whose saving is smaller than
what the move costs ranks below "stay" (the current shape, row 0, which costs nothing to keep) and is marked
"not worth switching". Three ways to move, the cheapest the change allows:

* **restart** (any change of GPU type, region or provisioning, of the PS count, of a sync job's GPUs per node,
  or of a sync job that is not elastic): the job stops, the new servers start — while, for a region move, the
  dataset is copied to the new region —, the framework restarts cold from the last checkpoint, and the steps
  since that checkpoint are trained again::

      T = max(server start, dataset copy) + framework restart (cold) + redo

* **scale** a PS job's workers (same GPU, region, provisioning and PS count): the job keeps training; a new
  worker trains after the request overhead (server start + join), the study's time-to-finish estimator
  (:func:`~cmdare.planner.risk_cost.overheads.degraded_wait`)::

      T = request × (1 − v_now / v_new)      (0 when workers are only removed)

* **elastic** (a sync job with ``[parallel] elastic``, same GPU, region, provisioning and GPUs per node): the
  new nodes start while the job trains, then one warm re-rendezvous from the last checkpoint (torchrun
  elastic)::

      T = framework restart (warm) + redo

``redo`` = the steps since the job's last checkpoint ÷ the new shape's speed: measured on a live job
(``[options] since_checkpoint_s`` × its speed), else half a checkpoint interval (the expected value).
Cost = the new shape's nodes billed for ``T`` (scale: the added workers for the request overhead) + for a
region move the dataset's egress, which the row's ``egress_usd`` already carries. Server start, framework
restart and the request overhead are the CM-DARE measurements in ``planner/data/overheads.json``; the dataset
copy runs at the low end of the published GCP inter-region rate (``planner/data/wan_links.csv``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from cmdare.planner.risk_cost.overheads import Overheads, degraded_wait
from cmdare.planner.risk_cost.time_cost import TimeCost
from cmdare.planner.risk_cost.workload import Workload

#: The published inter-region rate a region move copies its dataset at (low end: a planning figure).
COPY_LINK = "gcp-uscentral1-uswest1"

KINDS = ("stay", "restart", "scale", "elastic")


@dataclass(frozen=True)
class CopyRate:
    """The rate (Gbit/s) a region move copies the dataset at, and where the figure comes from."""

    gbps: float
    source: str

    @classmethod
    def published(cls) -> CopyRate:
        """The low end of the published GCP inter-region figure (``planner/data/wan_links.csv``)."""
        from cmdare.planner.geo.wan import public_links

        link = public_links()[COPY_LINK]
        return cls(link.gbps_low, f"planner/data/wan_links.csv {COPY_LINK} (low end): {link.source}")


@dataclass(frozen=True, kw_only=True)
class Switching:
    """Per-row switching terms (seconds, USD) and how the move is made (``kind``: one of :data:`KINDS`)."""

    seconds: np.ndarray
    usd: np.ndarray
    kind: np.ndarray
    start_s: np.ndarray  # server start (restart) or request overhead (scale) the job waits for
    restart_s: np.ndarray  # framework restart, cold (restart) or warm (elastic)
    redo_s: np.ndarray  # the steps since the last checkpoint, trained again on the new shape
    copy_s: np.ndarray  # the dataset's copy to a new region (overlaps the server start)
    redo_steps: float  # steps since the last checkpoint
    redo_basis: str  # "measured …" or "expected: half the … interval"
    copy: CopyRate

    def columns(self) -> dict[str, np.ndarray]:
        """The switching columns a ranked table carries."""
        return {
            "switch_s": self.seconds,
            "switch_usd": self.usd,
            "switch_kind": self.kind,
            "switch_start_s": self.start_s,
            "switch_restart_s": self.restart_s,
            "switch_redo_s": self.redo_s,
            "switch_copy_s": self.copy_s,
        }


def steps_since_checkpoint(workload: Workload, steps_per_sec_now: float) -> tuple[float, str]:
    """(steps since the job's last checkpoint, what that rests on): measured when the workload says how long
    ago the last checkpoint was, else half the checkpoint interval (the expected value at a random moment)."""
    o = workload.options
    v = max(float(steps_per_sec_now), 1e-12)
    if o.since_checkpoint_s is not None:
        return o.since_checkpoint_s * v, f"measured: last checkpoint {o.since_checkpoint_s:.0f} s ago"
    if o.checkpoint_interval_steps:
        return o.checkpoint_interval_steps / 2.0, (
            f"expected: half the {o.checkpoint_interval_steps}-step checkpoint interval"
        )
    return o.checkpoint_interval_s / 2.0 * v, (
        f"expected: half the {o.checkpoint_interval_s:.0f} s checkpoint interval"
    )


def switching(
    workload: Workload,
    cols: dict[str, np.ndarray],
    steps_per_sec: np.ndarray,
    hourly_usd: np.ndarray,
    unit_usd: np.ndarray,
    overheads: Overheads,
    copy: CopyRate | None = None,
) -> Switching:
    """Switching terms of every row (row 0 is the current shape: "stay", nothing). ``steps_per_sec`` in the
    target's steps; ``hourly_usd`` the whole shape's price, ``unit_usd`` one worker's (PS) or node's (sync).
    ``cols`` has gpu, region, provisioning and either workers + ps (PS) or nodes + gpus_per_node (sync)."""
    copy = copy or CopyRate.published()
    cur, o = workload.current, workload.options
    v = np.maximum(np.asarray(steps_per_sec, dtype=float), 1e-12)
    redo_steps, basis = steps_since_checkpoint(workload, float(v[0]))
    n = cols["gpu"].size
    gpu, region, prov = (cols[k].astype(str) for k in ("gpu", "region", "provisioning"))
    # spot and preemptible are one GCP mechanism (same SKUs, same VMs): no move between them
    same_place = (
        (gpu == cur.gpu) & (region == cur.region) & (_kind(prov) == _kind(np.array([cur.provisioning]))[0])
    )
    sync = "nodes" in cols
    if sync:
        gpn = workload.parallel.gpus_per_node
        units = cols["nodes"].astype(float)
        now_units = float(max(cur.workers // gpn, 1))
        gentle = same_place & (cols["gpus_per_node"] == gpn) & bool(workload.parallel.elastic)
        same = same_place & (cols["gpus_per_node"] == gpn) & (units == now_units)
    else:
        units = cols["workers"].astype(float)
        now_units = float(cur.workers)
        gentle = same_place & (cols["ps"] == cur.ps)
        same = gentle & (units == now_units)
    start = _per_gpu_prov(gpu, prov, overheads.server_start)
    moving = region != (o.data_region or cur.region)
    copy_s = np.where(moving, o.dataset_gb * 8.0 / copy.gbps, 0.0)
    redo = np.full(n, redo_steps) / v
    cold, warm = overheads.framework_restart(False), overheads.framework_restart(True)
    kind = np.where(gentle, "elastic" if sync else "scale", "restart").astype(object)
    kind[0] = "stay"
    kind[same] = "stay"  # the current shape, or its spot/preemptible twin
    start_s = np.where(gentle, 0.0, start)
    restart_s = np.where(gentle, warm if sync else 0.0, cold)
    redo_s = np.where(gentle & (not sync), 0.0, redo)
    added = np.maximum(units - now_units, 0.0)
    if not sync:  # scale: added workers train after the request overhead; the job trains meanwhile
        request = _per_gpu_prov(gpu, prov, overheads.request_overhead)
        wait = degraded_wait(request, v, np.full(n, float(v[0])))
        start_s = np.where(gentle, np.where(added > 0, wait, 0.0), start_s)
    seconds = np.maximum(start_s, np.where(kind == "restart", copy_s, 0.0)) + restart_s + redo_s
    usd = hourly_usd * seconds / 3600.0
    if not sync:  # the added workers are billed from their request, before they train
        request = _per_gpu_prov(gpu, prov, overheads.request_overhead)
        usd = np.where(gentle, added * unit_usd * request / 3600.0, usd)
    elif np.any(gentle):  # elastic: the added nodes are billed while they start
        usd = np.where(gentle, usd + added * unit_usd * start / 3600.0, usd)
    stay = kind == "stay"
    for arr in (seconds, usd, start_s, restart_s, redo_s, copy_s):
        arr[stay] = 0.0
    return Switching(
        seconds=seconds,
        usd=usd,
        kind=kind,
        start_s=start_s,
        restart_s=restart_s,
        redo_s=redo_s,
        copy_s=copy_s,
        redo_steps=redo_steps,
        redo_basis=basis,
        copy=copy,
    )


def _kind(prov: np.ndarray) -> np.ndarray:
    return np.where(np.isin(prov, ("spot", "preemptible")), "transient", prov)


def _per_gpu_prov(gpu: np.ndarray, prov: np.ndarray, fn: Callable[[str, str], float]) -> np.ndarray:
    """``fn(gpu, provisioning)`` per row, one call per distinct pair."""
    keys = np.char.add(np.char.add(gpu, "|"), prov)
    uniq, inverse = np.unique(keys, return_inverse=True)
    values = np.array([fn(*k.rsplit("|", 1)) for k in uniq], dtype=float)
    return values[inverse.ravel()]


def with_switching(tc: TimeCost, sw: Switching) -> TimeCost:
    """``tc`` with each row's switching time and cost added to its expected, P50 and P90 figures."""
    return replace(
        tc,
        seconds_expected=tc.seconds_expected + sw.seconds,
        seconds_p50=tc.seconds_p50 + sw.seconds,
        seconds_p90=tc.seconds_p90 + sw.seconds,
        cost_expected=tc.cost_expected + sw.usd,
        cost_p50=tc.cost_p50 + sw.usd,
        cost_p90=tc.cost_p90 + sw.usd,
    )


def worth_switching(c: dict[str, np.ndarray]) -> np.ndarray:
    """Per row: True for "stay" (row 0) and for a row that, its switching cost included, beats staying on the
    table's objective (its ``score`` below row 0's); where either price is unknown, on P50 time alone."""
    score, t = c["score"].astype(float), c["hours_p50"].astype(float)
    cost = c["cost_usd_p50"].astype(float)
    priced = np.isfinite(cost) & np.isfinite(cost[0]) & np.isfinite(score) & np.isfinite(score[0])
    out: np.ndarray = np.where(priced, score < score[0], t < t[0])
    out[0] = True
    return out
