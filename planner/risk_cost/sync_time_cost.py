"""Time and cost of synchronous all-reduce training on transient nodes, with revocations (vectorised).

In synchronous training every GPU takes every step, so a revoked node stalls the whole job; the risk of
the job is the risk of *any* node: ``P(≥1 revocation) = 1 − S(T)^nodes``. Per revocation, the cheaper of:

* **restart** from the last checkpoint with a replacement node (the study's overheads, ``overheads.json``):
  the job stops while a server starts and joins (``request``), the framework restarts (cold) and the
  steps since the last checkpoint are redone (half an interval on average)::

      P_restart = request + restart_cold + redo

* **elastic** shrink and re-grow (``torchrun`` elastic, when ``[parallel] elastic``): the survivors
  re-rendezvous at once (a warm restart, no new server) and redo the steps since the checkpoint, train on
  ``nodes − 1`` nodes at ``v'`` while the replacement is requested, then re-rendezvous once more to grow
  back (another warm restart; the job checkpoints before it re-forms)::

      P_elastic = 2 × restart_warm + redo + request × (1 − v'/v)

  impossible on one node (nothing survives). The choice is made per shape. The restart times are the
  study's TensorFlow cold / warm restarts (``framework_restart_s``), taken for torchrun's restart and
  re-rendezvous of the worker processes (assumption: not measured for torchrun).

``E[T] = T0 + T_ckpt + K(E[T]) × P`` (fixed point, the one estimate PS shapes go through too:
:func:`~cmdare.planner.risk_cost.time_cost.estimate_nodes`, with one kind of node); P50/P90 with the revocation count
Poisson of mean ``K = nodes × m(E[T])`` (:func:`~cmdare.planner.risk_cost.time_cost.poisson_quantile`).
Per-node lifetimes are the revocation model's (fitted on one-GPU VMs: a node of several GPUs is assumed to
be revoked like one VM — assumption). Cost = nodes × node price × billed hours + one server start per node
+ the request overhead per replacement + egress.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cmdare.planner.risk_cost.overheads import Overheads, degraded_wait
from cmdare.planner.risk_cost.revocation import RevocationModel
from cmdare.planner.risk_cost.time_cost import (
    NodeKind,
    RunSettings,
    TimeCost,
    estimate_nodes,
    request_and_start_s,
    revocation_curves,
    run_seconds,
)


@dataclass(frozen=True, kw_only=True)
class SyncColumns:
    """Per-shape inputs of synchronous shapes (parallel arrays)."""

    gpu: np.ndarray
    region: np.ndarray
    provisioning: np.ndarray
    nodes: np.ndarray
    steps_per_sec: np.ndarray
    degraded_steps_per_sec: np.ndarray  # with one node fewer (0 for one node)
    node_usd_per_hour: np.ndarray  # one node with all its GPUs
    egress_usd: np.ndarray
    started: np.ndarray | None = None  # server starts billed per shape (1, None = all; 0 = billed elsewhere)


@dataclass(frozen=True)
class SyncTimeCost:
    """The PS-shape figures (:class:`TimeCost`) plus the revocation policy chosen per shape."""

    figures: TimeCost
    policy: np.ndarray  # restart | elastic
    penalty_restart_s: np.ndarray
    penalty_elastic_s: np.ndarray


def penalties(
    cols: SyncColumns, run: RunSettings, overheads: Overheads, elastic: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(restart penalty, elastic penalty, chosen penalty) in seconds per revocation, per shape."""
    v = np.maximum(cols.steps_per_sec, 1e-12)
    interval = run.checkpoint_interval_steps or run.checkpoint_interval_s * v
    redo = overheads.lost_work(interval / 2.0, v)
    request, _ = request_and_start_s(overheads, cols.gpu, cols.provisioning)
    restart = request + overheads.framework_restart(False) + redo
    warm = overheads.framework_restart(True)
    shrink = 2.0 * warm + redo + degraded_wait(request, v, cols.degraded_steps_per_sec)
    shrink = np.where((cols.nodes > 1) & elastic, shrink, np.inf)
    return restart, shrink, np.minimum(restart, shrink)


def estimate_sync(
    cols: SyncColumns,
    run: RunSettings,
    overheads: Overheads,
    revocations: RevocationModel,
    elastic: bool = True,
) -> SyncTimeCost:
    """Expected / P50 / P90 time and cost of every synchronous shape: one kind of node, through the same
    estimate as PS shapes (:func:`~cmdare.planner.risk_cost.time_cost.estimate_nodes`)."""
    _, _, base, ckpt = run_seconds(cols.steps_per_sec, run, overheads)
    pen_r, pen_e, pen = penalties(cols, run, overheads, elastic)
    request, start = request_and_start_s(overheads, cols.gpu, cols.provisioning)
    nodes = NodeKind(
        count=cols.nodes.astype(float),
        curves=revocation_curves(revocations, cols.gpu, cols.region, cols.provisioning),
        penalty_s=pen,
        usd_per_hour=cols.node_usd_per_hour,
        request_s=request,
        start_s=start,
        redo_share=1.0,  # every revocation stops the job: back to its last checkpoint
    )
    figures = estimate_nodes((nodes,), base, ckpt, cols.egress_usd, cols.started)
    policy = np.where(pen_e < pen_r, "elastic", "restart")
    return SyncTimeCost(figures, policy, pen_r, pen_e)
