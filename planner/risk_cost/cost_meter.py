"""Cost accrued by a monitored job: each refresh adds price × elapsed time for every task that is up.

Prices come from a :class:`~cmdare.collectors.pricing.PriceBook` (the shipped offline book unless the
caller hands another). A task whose price is unknown is *not* guessed: the job's figure is then
marked incomplete and says why. A task that names no region is priced in
:data:`~cmdare.planner.risk_cost.workload.ASSUMED_REGION`, as the planner plans it (one price for one
shape), and the view says so (``assumed``). Time is the monitoring clock's, so the figure is "accrued while
monitored", not the bill since the job began."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import TYPE_CHECKING

from cmdare.collectors.observed import JobView
from cmdare.planner.live.outlook import owns_gpu
from cmdare.planner.risk_cost.workload import ASSUMED_REGION

if TYPE_CHECKING:
    from cmdare.collectors.pricing.book import PriceBook

UNPRICED_NAMED = 10  # unpriced tasks named in a cost view (the rest are counted): 10,000 would cost a refresh


@dataclass(frozen=True, kw_only=True)
class CostView:
    """USD accrued while monitored, the current burn rate (USD/h), the budget (USD, or None)."""

    job: str
    accrued_usd: float
    usd_per_hour: float | None  # None when no task could be priced
    budget_usd: float | None
    unpriced: tuple[str, ...] = ()  # "task: reason" for the first UNPRICED_NAMED tasks left out
    price_source: str = ""
    unpriced_tasks: int = 0  # how many up tasks were left out in all
    assumed: tuple[str, ...] = ()  # what the figure assumes (a region for tasks that named none)

    @property
    def complete(self) -> bool:
        return not self.unpriced_tasks

    @property
    def budget_left_hours(self) -> float | None:
        """Hours until the budget is spent at the current burn rate."""
        if self.budget_usd is None or not self.usd_per_hour:
            return None
        return max(self.budget_usd - self.accrued_usd, 0.0) / self.usd_per_hour


@dataclass
class CostMeter:
    """Integrates node prices over time (step function: the rate seen at a refresh holds until the next)."""

    book: PriceBook
    budget_usd: float | None = None
    _accrued: dict[str, float] = field(default_factory=dict)
    _last: dict[str, tuple[float, float]] = field(default_factory=dict)  # job -> (t, usd/h)

    def kind_rate(self, cpu_only: bool, gpu: str, region: str, prov: str) -> tuple[float | None, str | None]:
        """USD/h of a node of this kind (a PS or CPU-only node, or one GPU), or (None, why)."""
        try:
            if cpu_only:
                p = self.book.ps_node_price(region, prov or "standard")
            else:
                p = self.book.node_price(gpu, 1, region, prov or "standard")
        except (KeyError, ValueError) as exc:
            return None, str(exc)
        return float(p.usd_per_hour), None

    def update(self, jobs: list[JobView], now: float) -> dict[str, CostView]:
        """Accrue up to ``now`` (seconds) and return each job's cost view."""
        out: dict[str, CostView] = {}
        seen: dict[tuple[bool, str, str, str], tuple[float | None, str | None]] = {}  # one book lookup a kind
        for job in jobs:
            rate, priced, missing, bad, unlabelled = 0.0, 0, 0, {}, 0
            for (role, gpu, region, prov, up), count in job.kinds.items():  # one price lookup a kind
                if not up:
                    continue
                unlabelled += count if not region else 0
                kind = (role == "ps" or not owns_gpu(gpu), gpu, region or ASSUMED_REGION, prov)
                found = seen.get(kind)
                if found is None:
                    found = seen[kind] = self.kind_rate(*kind)
                r, why = found
                if r is None:
                    bad[(role, gpu, region, prov)] = why
                    missing += count
                else:
                    rate += r * count
                    priced += count
            unpriced = list(islice(_named(job, bad), UNPRICED_NAMED)) if bad else []
            t0, r0 = self._last.get(job.name, (now, 0.0))
            self._accrued[job.name] = self._accrued.get(job.name, 0.0) + r0 * max(now - t0, 0.0) / 3600.0
            self._last[job.name] = (now, rate)
            assumed = (
                (f"{ASSUMED_REGION} assumed ({unlabelled:,} task(s) name no region)",) if unlabelled else ()
            )
            out[job.name] = CostView(
                job=job.name,
                accrued_usd=self._accrued[job.name],
                usd_per_hour=rate if priced else None,
                budget_usd=self.budget_usd,
                unpriced=tuple(unpriced),
                price_source=self.book.source,
                unpriced_tasks=missing,
                assumed=assumed,
            )
        return out


def _named(job: JobView, bad: dict[tuple[str, str, str, str], str | None]) -> Iterator[str]:
    """``task: reason`` for the job's up tasks of an unpriced kind, in the nodes' order."""
    for n in job.nodes:
        why = bad.get((n.role, n.gpu, n.region, n.provisioning), "") if n.status == "up" else ""
        if why != "":
            yield f"{n.name}: {why}"
