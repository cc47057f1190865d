"""A running synchronous all-reduce job as the sync model sees it: its shape read off the ranks, its
measured compute / exposed all-reduce split, and the all-reduce model calibrated on them. Pure computation.

* shape: GPUs per node = the most ranks sharing one ``local_rank`` numbering (max ``local_rank`` + 1), nodes =
  ranks ÷ that (ranks without a ``local_rank`` count one node each); GPU = the ranks' most common label;
* measured: the medians over up ranks of ``cmdare_step_seconds`` (compute) and ``cmdare_allreduce_seconds``
  (exposed all-reduce), each the histogram's mean over the step window; a rank whose compute and
  exposed all-reduce add up to more than the time between its steps (its own steps/s over the same
  window, :data:`STEP_PERIOD_SLACK` allowed) measured neither: it is refused, and said
  (:func:`allreduce_refusals`);
* calibration (:func:`~cmdare.planner.speed.allreduce.calibrate`): the scales that make the model's current
  shape show exactly the measured split, so alternative shapes are predicted from this job's own times.
"""

from __future__ import annotations

import statistics
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cmdare.collectors.observed import JobView, NodeView

if TYPE_CHECKING:  # the model (and numpy) load with the planner, not with the Job pane (start-up)
    import numpy as np
    import numpy.typing as npt

    from cmdare.planner.rules.worker_columns import JobColumns
    from cmdare.planner.speed.allreduce import SyncParams, SyncTerms

_COLUMNS = "cmdare.planner.rules.worker_columns"  # loaded with the planner (numpy): not by the Job pane


def _kept(job: JobView) -> JobColumns | None:
    """The planner's columns of the job while its refresh runs (:func:`~cmdare.planner.rules.worker_columns.
    kept_columns`), read instead of the views; None before the planner has loaded, or elsewhere."""
    columns = sys.modules.get(_COLUMNS)
    found: JobColumns | None = (
        columns.kept_for(job) if columns is not None else None
    )  # a module found by name
    return found


SYNC = "sync-allreduce"
# assumption: compute + exposed all-reduce a step (histogram means over the step window) may exceed the
# time between a rank's steps (1 / its steps/s over the same window) by this factor at most: steps
# straddling the window's edges, not more. An all-reduce 50x the step time (issue 27) is far past it.
STEP_PERIOD_SLACK = 1.5


@dataclass(frozen=True)
class SyncShape:
    gpu: str
    nodes: int
    gpus_per_node: int

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node


@dataclass(frozen=True)
class MeasuredSplit:
    """Medians over the up ranks, seconds per step, and how many ranks measured both."""

    compute_s: float
    exposed_s: float
    ranks: int
    refused: int = 0  # ranks whose figures did not fit their own step period (allreduce_refusals)

    @property
    def share(self) -> float:
        """The exposed all-reduce's share of a step."""
        return self.exposed_s / (self.compute_s + self.exposed_s)


def is_sync(job: JobView) -> bool:
    return job.sync == SYNC


def ranks(job: JobView, *, up_only: bool = True) -> tuple[NodeView, ...]:
    """The job's training ranks (chief and workers), up ones only by default (found once per view)."""
    return job.up_workers() if up_only else job.workers()


def sync_shape(job: JobView) -> SyncShape | None:
    """The job's nodes × GPUs per node and GPU label, counting every rank (down ones too: the shape
    paid for); once per view."""
    return job.memo(_sync_shape)


def _sync_shape(job: JobView) -> SyncShape | None:
    cols = _kept(job)
    if cols is not None:
        return _sync_shape_of(cols)
    rs = ranks(job, up_only=False)
    if not rs:
        return None
    local = [int(n.local_rank) for n in rs if n.local_rank.isdigit()]
    g = max(local) + 1 if local and len(local) == len(rs) else 1
    nodes = max(1, -(-len(rs) // g))
    gpu = Counter(n.gpu or "" for n in rs).most_common(1)[0][0]
    return SyncShape(gpu, nodes, g)


def _sync_shape_of(cols: JobColumns) -> SyncShape | None:
    """:func:`_sync_shape` from the job's columns."""
    import numpy as np

    from cmdare.planner.rules.worker_columns import BAD_LOCAL_RANK

    count = int(np.count_nonzero(cols.worker))
    if not count:
        return None
    local = cols.local[cols.worker]
    if (local == BAD_LOCAL_RANK).any():  # as int() of such a local rank does
        raise ValueError("a local rank of digits int() does not read")
    numbered = local[local >= 0]
    g = int(numbered.max()) + 1 if len(numbered) and len(numbered) == count else 1
    nodes = max(1, -(-count // g))
    gpu = cols.counter(cols.gpu[cols.worker]).most_common(1)[0][0]
    return SyncShape(gpu, nodes, g)


def placement(job: JobView) -> tuple[str, str]:
    """(region, provisioning) most of the job's ranks declare ("" when none does); once per view."""
    return job.memo(_placement)


def _placement(job: JobView) -> tuple[str, str]:
    cols = _kept(job)
    if cols is not None:
        return cols.dominant(cols.region[cols.worker]), cols.dominant(cols.prov[cols.worker])
    rs = ranks(job, up_only=False)
    region = Counter(n.region for n in rs if n.region).most_common(1)
    prov = Counter(n.provisioning for n in rs if n.provisioning).most_common(1)
    return (region[0][0] if region else "", prov[0][0] if prov else "")


def measured_split(job: JobView) -> MeasuredSplit | None:
    """The job's measured compute and exposed all-reduce per step (medians over up ranks), or None;
    once per view."""
    return job.memo(_measured_split)


def rank_split(n: NodeView) -> tuple[float, float] | None:
    """A rank's (compute, exposed all-reduce) seconds of a step, when both are measured (a compute time > 0)."""
    if n.step_seconds and n.allreduce_seconds is not None:
        return n.step_seconds, n.allreduce_seconds
    return None


def _measured_split(job: JobView) -> MeasuredSplit | None:
    cols = _kept(job)
    if cols is not None:
        return _measured_split_of(cols)
    measured = [(n, s) for n in ranks(job) if (s := rank_split(n)) is not None]
    both = [s for n, s in measured if _fits_its_steps(n)]
    if not both:
        return None
    c = statistics.median(b[0] for b in both)
    e = statistics.median(b[1] for b in both)
    return MeasuredSplit(float(c), float(e), len(both), len(measured) - len(both))


def split_ranks(cols: JobColumns) -> npt.NDArray[np.bool_]:
    """Where the up ranks that measured both their compute and their exposed all-reduce are
    (:func:`rank_split` of each)."""
    import numpy as np

    from cmdare.planner.rules.worker_columns import given

    return cols.up_worker & given(cols.step) & ~np.isnan(cols.allreduce)


def _fitting(cols: JobColumns) -> npt.NDArray[np.bool_]:
    """:func:`_fits_its_steps` of every task (read where both times are measured)."""
    import numpy as np

    from cmdare.planner.rules.worker_columns import given

    rate = cols.sps
    with np.errstate(divide="ignore", invalid="ignore"):
        within = np.nan_to_num(cols.step) + np.nan_to_num(cols.allreduce) <= STEP_PERIOD_SLACK / rate
    return ~given(rate) | (rate <= 0) | within


def _measured_split_of(cols: JobColumns) -> MeasuredSplit | None:
    """:func:`_measured_split` from the job's columns."""
    import numpy as np

    from cmdare.planner.rules.worker_columns import median_of

    measured = split_ranks(cols)
    both = measured & _fitting(cols)
    if not both.any():
        return None
    c, e = median_of(cols.step[both]), median_of(cols.allreduce[both])
    count = int(np.count_nonzero(both))
    return MeasuredSplit(c, e, count, int(np.count_nonzero(measured)) - count)


def _fits_its_steps(n: NodeView) -> bool:
    """Whether a rank's compute and exposed all-reduce a step fit the time between its steps (True
    when it has no step rate to compare with)."""
    rate = n.steps_per_sec
    return (
        not rate
        or rate <= 0
        or (n.step_seconds or 0.0) + (n.allreduce_seconds or 0.0) <= STEP_PERIOD_SLACK / rate
    )


def allreduce_refusals(job: JobView) -> tuple[str, ...]:
    """One line per rank whose all-reduce figures were refused (see :func:`measured_split`); once per view."""
    return job.memo(_allreduce_refusals)


def _allreduce_refusals(job: JobView) -> tuple[str, ...]:
    cols = _kept(job)
    if cols is not None:
        from cmdare.planner.rules.worker_columns import given

        refused: Sequence[NodeView] = cols.views(split_ranks(cols) & given(cols.sps) & ~_fitting(cols))
    else:
        refused = ranks(job)
    return tuple(
        f"{n.name}: compute {n.step_seconds * 1e3:,.0f} ms + all-reduce {n.allreduce_seconds * 1e3:,.0f} ms a step"
        f" beside {n.steps_per_sec:.3g} steps/s ({1e3 / n.steps_per_sec:,.0f} ms a step)"
        for n in refused
        if n.step_seconds and n.allreduce_seconds is not None and n.steps_per_sec and not _fits_its_steps(n)
    )


def refusal_note(job: JobView) -> str | None:
    """The all-reduce figures refused, in one line (the first rank named), or None."""
    refused = allreduce_refusals(job)
    if not refused:
        return None
    return f"all-reduce of {len(refused)} rank(s) refused, longer than their steps ({refused[0]})"


def shape_terms(
    shape: SyncShape, params: float, compute_s: float, p: SyncParams, tier: str = "default"
) -> SyncTerms:
    """The all-reduce model's terms for one shape (one row)."""
    import numpy as np

    from cmdare.planner.speed.allreduce import sync_step
    from cmdare.planner.speed.interconnect import node_links

    links = node_links(shape.gpu, shape.gpus_per_node, tier)

    def a(x: float) -> np.ndarray:  # one row
        return np.array([x], dtype=float)

    return sync_step(a(compute_s), params, a(shape.nodes), a(shape.gpus_per_node), a(links.intra_bus_gbps),
                     a(links.nic_bus_gbps), a(links.intra_latency_s), a(links.nic_latency_s), p)  # fmt: skip


def calibrated(
    job: JobView, shape: SyncShape, split: MeasuredSplit, p: SyncParams | None = None
) -> SyncParams:
    """The all-reduce model anchored on the job: its own compute as the compute term (``compute_scale``
    relative to a model compute of 1 s) and the comm scale that reproduces the measured exposed time."""
    from dataclasses import replace

    from cmdare.planner.speed.allreduce import SyncParams, calibrate

    base = p or SyncParams()
    raw = shape_terms(shape, job.facts.model.params, 1.0, replace(base, compute_scale=1.0, comm_scale=1.0))
    return calibrate(split.compute_s, split.exposed_s, raw, base)
