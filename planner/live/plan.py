"""The planner for a running job: calibrate the speed model on the job's own measurements, then
rank alternative shapes (time, cost, revocation risk) with the same calls as ``cmdare-tui plan``.

Work is throttled: calibration at most every ``calibrate_every`` seconds and ranking when the
shape, the remaining work, the price book or the calibration changed noticeably (at most every
``min_interval``), or every ``rank_every`` while anything it rests on moved (an unchanged job, say
one whose targets answer the same page, keeps its ranking)."""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from cmdare.collectors.observed import JobView
from cmdare.collectors.samples import Lifetime
from cmdare.planner.live.outlook import current_shape, network_of
from cmdare.planner.live.sync_job import is_sync, measured_split, sync_shape
from cmdare.planner.live.sync_plan import live_scales, rank_live_sync
from cmdare.planner.risk_cost.checkpointing import CheckpointFacts
from cmdare.planner.risk_cost.ranking_notes import price_date_label
from cmdare.planner.risk_cost.revocation import RevocationModel
from cmdare.planner.risk_cost.shapes import ShapeTable, UnpricedShapeError, rank_shapes
from cmdare.planner.risk_cost.workload import ASSUMED_REGION, Allowed, Options, Shape, Target, Workload
from cmdare.planner.speed.calibration import Calibration
from cmdare.planner.speed.speed_model import SpeedModel

if TYPE_CHECKING:
    from cmdare.collectors.pricing.book import PriceBook
    from cmdare.planner.rules.worker_columns import JobColumns

log = logging.getLogger(__name__)

DEFAULT_MAX_PS = 4
STALLED_NOTE = "the job is stalled (no task up): no new plans until a task answers again"
FINISHED_NOTE = "the job finished (target step reached, no task up): nothing left to plan"


@dataclass(frozen=True, kw_only=True)
class LivePlan:
    job: str
    table: ShapeTable | None
    workload: Workload | None
    calibration_samples: int
    calibration_residual: float | None
    compute_scale: float
    ps_scale: float
    price_source: str
    price_as_of: str
    note: str | None = None  # why there is no table, or what was assumed
    price_date: str = ""  # the date of the prices ("price date unknown (derived …)" for an undated source)
    comm_scale: float | None = None  # sync jobs: the all-reduce model's calibration (measured ÷ link figures)


@dataclass
class _JobCache:
    key: tuple[object, ...] | None = None
    inputs: tuple[object, ...] | None = (
        None  # exactly what the last ranking rested on (its key's unrounded form)
    )
    ranked_at: float = -math.inf
    calibrated_at: float = -math.inf
    calibration: Calibration | None = None
    plan: LivePlan | None = None


def _dominant(counter: Counter[str]) -> str:
    return counter.most_common(1)[0][0] if counter else ""


def _provisionings(current: str) -> tuple[str, ...]:
    """The current provisioning and on-demand; a job on on-demand also sees spot. Spot and preemptible
    cost the same (one SKU), so listing both would only double every row."""
    transient = current if current in ("spot", "preemptible") else "spot"
    return ("standard", transient)


def workload_for_job(
    job: JobView,
    price_book: PriceBook,
    *,
    budget_usd: float | None = None,
    deadline_hours: float | None = None,
    cols: JobColumns | None = None,
) -> tuple[Workload | None, str | None]:
    """A workload for the remaining steps of a live job, or (None, why not); ``cols``: the job's tasks as
    columns (the same workload, read without a pass over the views)."""
    net, shape = network_of(job), current_shape(job)
    if net is None:
        return None, "the job does not say which network it trains (cmdare_job_info or config [model])"
    if shape is None:
        return None, "no workers with a GPU type and no parameter server seen yet"
    if not job.facts.target_steps:
        return None, "no target step count (cmdare_job_info target_steps or config) to plan time and cost for"
    remaining = max(1, int(job.facts.target_steps - (job.global_step or 0)))
    if cols is not None:
        region = cols.dominant(cols.region[cols.worker]) or ASSUMED_REGION
        prov = cols.dominant(cols.prov[cols.worker]) or "standard"
    else:
        workers = [n for n in job.nodes if n.role in ("worker", "chief")]
        region = _dominant(Counter(n.region for n in workers if n.region)) or ASSUMED_REGION
        prov = _dominant(Counter(n.provisioning for n in workers if n.provisioning)) or "standard"
    gpu, count = max(shape.gpus, key=lambda g: g[1])
    book_gpus = set(price_book.gpus())
    allowed_gpus = tuple(sorted(book_gpus | {gpu}))
    regions = tuple(sorted(set(price_book.regions()) | {region}))
    w = Workload(
        model=net,
        target=Target(steps=remaining, deadline_hours=deadline_hours, budget_usd=budget_usd),
        current=Shape(gpu, shape.workers, shape.ps, region, prov),
        allowed=Allowed(
            gpus=allowed_gpus,
            regions=regions,
            max_workers=max(16, 2 * shape.workers),
            max_ps=max(DEFAULT_MAX_PS, shape.ps),
            provisionings=_provisionings(prov),
        ),
        options=Options(),
        source=f"live job {job.name}",
    )
    return w, None


class LivePlanner:
    def __init__(
        self,
        speed_model: SpeedModel,
        price_book: PriceBook,
        revocation_model: RevocationModel | None = None,
        *,
        objective: str = "balanced",
        calibrate_every: float = 10.0,
        rank_every: float = 60.0,
        min_interval: float = 10.0,
    ) -> None:
        self.speed_model = speed_model
        self.price_book = price_book
        self._prior = revocation_model or RevocationModel.load()  # the published fit
        self.revocation = self._prior  # the fit updated with this cluster's own lifetimes
        self._ended_seen = 0
        self.objective = objective
        self.calibrate_every = calibrate_every
        self.rank_every = rank_every
        self.min_interval = min_interval  # never re-rank more often than this unless the prices changed
        self._jobs: dict[str, _JobCache] = {}

    def set_price_book(self, book: PriceBook) -> None:
        self.price_book = book
        for c in self._jobs.values():
            c.key = None  # re-rank with the new prices

    def learn(self, lifetimes: Sequence[Lifetime], now: float) -> None:
        """Update the revocation model with the lifetimes the collectors observed (published rates
        drift); re-rank when a new lifetime has ended. Running servers count as survived so far."""
        ended = sum(1 for lt in lifetimes if lt.end is not None)
        if ended == self._ended_seen:
            return
        self._ended_seen = ended
        self.revocation = self._prior.with_start_hour(self._prior.start_hour).update(lifetimes, now)
        for c in self._jobs.values():
            c.key = None

    def _calibrate(
        self, job: JobView, cache: _JobCache, now: float, cols: JobColumns | None = None
    ) -> Calibration | None:
        if now - cache.calibrated_at < self.calibrate_every and cache.calibration is not None:
            return cache.calibration
        net, shape = network_of(job), current_shape(job, include_down=False)
        if net is None or shape is None:
            return None
        cal = Calibration(self.speed_model, net, dict(shape.gpus), shape.ps)
        if cols is not None:  # the same samples, taken from the columns
            cal.step_times = cols.step_times()
        else:
            for n in job.workers():
                if n.status == "up" and n.step_seconds and n.gpu:
                    cal.add_worker_step_time(n.gpu, n.step_seconds)
        for x in job.history[-15:]:
            if math.isfinite(x) and x > 0:
                cal.add_cluster_rate(x)
        if cal.samples:
            try:
                cal.fit()
            except (ValueError, KeyError, ZeroDivisionError) as exc:
                log.warning("calibration of %s failed: %s", job.name, exc)
                return cache.calibration
        if cal.samples:  # an empty calibration is not worth keeping for calibrate_every seconds
            cache.calibration, cache.calibrated_at = cal, now
        return cal

    def _update_sync(self, job: JobView, cache: _JobCache, now: float) -> LivePlan:
        """A sync job: rank sync shapes with the all-reduce model calibrated on its measured split."""
        split = measured_split(job)
        key = (sync_shape(job), job.global_step and round(math.log(max(job.global_step, 1)) / 0.1),
               id(self.price_book), split and round(math.log(max(split.share, 1e-6)) / 0.1))  # fmt: skip
        age = now - cache.ranked_at
        fresh = age < self.rank_every and (key == cache.key or age < self.min_interval)
        inputs = (job.global_step, split)  # unchanged (a job that made no step): not ranked again
        if cache.plan is not None and (fresh or (key == cache.key and inputs == cache.inputs)):
            return cache.plan
        table, w, split, note = None, None, None, None
        try:
            table, w, split, note = rank_live_sync(
                job, self.speed_model, self.price_book, self.revocation, self.objective,
                CheckpointFacts.of(job).options(now),
            )  # fmt: skip
        except (ValueError, KeyError) as exc:  # UnpricedShapeError, an unknown GPU
            note = f"cannot rank sync shapes: {exc}"
        scales = live_scales(table)
        cache.plan = LivePlan(
            job=job.name,
            table=table,
            workload=w,
            calibration_samples=split.ranks if split else 0,
            calibration_residual=None,
            compute_scale=scales[0],
            ps_scale=1.0,
            price_source=self.price_book.source,
            price_as_of=self.price_book.as_of,
            note=note,
            price_date=price_date_label(self.price_book),
            comm_scale=scales[1],
        )
        cache.key, cache.inputs, cache.ranked_at = key, inputs, now
        return cache.plan

    def stalled_plan(self, job: JobView) -> LivePlan:
        """What the planner says of a stalled job (no task up): no ranking, and why."""
        return LivePlan(
            job=job.name,
            table=None,
            workload=None,
            calibration_samples=0,
            calibration_residual=None,
            compute_scale=1.0,
            ps_scale=1.0,
            price_source=self.price_book.source,
            price_as_of=self.price_book.as_of,
            note=FINISHED_NOTE if job.finished else STALLED_NOTE,
            price_date=price_date_label(self.price_book),
        )

    def update(self, job: JobView, now: float, cols: JobColumns | None = None) -> LivePlan:
        """The job's plan: ranked again when what it rests on changed (none while the job is stalled);
        ``cols``: the job's tasks as columns (read instead of its views: the same plan)."""
        if job.stalled:  # a dead job's rate is a past figure: nothing to calibrate or rank on
            self._jobs.pop(job.name, None)  # ranked afresh (calibrated anew) once a task answers again
            return self.stalled_plan(job)
        cache = self._jobs.setdefault(job.name, _JobCache())
        if is_sync(job):
            return self._update_sync(job, cache, now)
        cal = self._calibrate(job, cache, now, cols)
        c_scale = cal.compute_scale_ if cal and cal.samples else 1.0
        p_scale = cal.ps_scale_ if cal and cal.samples else 1.0
        w, why = workload_for_job(job, self.price_book, cols=cols)
        if w is not None:  # the job's measured checkpoints: the work a switch redoes, when to checkpoint
            facts = CheckpointFacts.of(job) if cols is None else CheckpointFacts.of_columns(cols)
            w = replace(w, options=facts.options(now, w.options))
        # what would change the ranking: the shape, the prices, the remaining work (10% steps) and
        # the calibration (20% steps); small drifts wait for rank_every
        remaining = round(math.log(w.target.steps) / math.log(1.1)) if w else None
        key = (
            w.current if w else None,
            remaining,
            id(self.price_book),
            round(math.log(c_scale) / 0.2),
            round(math.log(p_scale) / 0.2),
        )
        age = now - cache.ranked_at
        fresh = age < self.rank_every and (key == cache.key or age < self.min_interval)
        # an unchanged job (the same workload, calibration and prices) is not ranked again at rank_every:
        # the ranking would be the same (a new ended lifetime clears the key: learn())
        inputs = (w, why, c_scale, p_scale, id(self.price_book))
        fresh = fresh or (cache.key is not None and key == cache.key and inputs == cache.inputs)
        if cache.plan is not None and fresh and cache.key is not None:
            cache.plan = replace(
                cache.plan,
                calibration_samples=cal.samples if cal else 0,
                calibration_residual=cal.residual if cal and cal.samples else None,
            )
            return cache.plan
        table, note = None, why
        if w is not None:
            model = cal.calibrated_model() if cal and cal.samples else self.speed_model
            try:
                table = rank_shapes(w, model, self.price_book, self.revocation, self.objective)
            except UnpricedShapeError as exc:  # nothing priced at all (an unpriced current shape still ranks)
                note = str(exc)
            except (ValueError, KeyError) as exc:
                note = f"cannot rank shapes: {exc}"
            if table is not None and not table.current_priced:
                note = f"the {self.price_book.source} book has no price for the current shape: price unknown"
        cache.plan = LivePlan(
            job=job.name,
            table=table,
            workload=w,
            calibration_samples=cal.samples if cal else 0,
            calibration_residual=cal.residual if cal and cal.samples else None,
            compute_scale=c_scale,
            ps_scale=p_scale,
            price_source=self.price_book.source,
            price_as_of=self.price_book.as_of,
            note=note,
            price_date=price_date_label(self.price_book),
        )
        cache.key, cache.inputs, cache.ranked_at = key, inputs, now
        return cache.plan
