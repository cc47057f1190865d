"""What the bottleneck rules read beyond the job views: one typed, immutable record (with the two value
types it holds that the rules' modules share: a job's goal and a pipeline stage's rates).

A rule reads ``ctx.inputs.price_book``, never a string key: a renamed field fails at import and type-check
time instead of silently reading a default. Built each refresh by :class:`cmdare.planner.analysis.Analysis`
(:func:`cmdare.planner.rules.bottlenecks.rule_inputs` supplies the store-derived fields). Every field has
the default a rule assumed when the value was missing, so a partial record (a test, a benchmark) behaves
as before."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from cmdare.collectors.observed import RATE_WINDOW_S, STEP_WINDOW_S

if TYPE_CHECKING:  # annotations only: the rule modules import this one
    from cmdare.collectors.pricing.book import PriceBook
    from cmdare.planner.risk_cost.checkpointing import WorkAtRisk
    from cmdare.planner.risk_cost.overheads import Overheads
    from cmdare.planner.rules.thresholds import Thresholds
    from cmdare.planner.rules.worker_columns import JobColumns
    from cmdare.planner.speed.speed_model import SpeedModel, SpeedPrediction


@dataclass(frozen=True)
class JobGoal:
    """What the user asked of a job: a deadline (epoch seconds), a budget (USD), money spent so far."""

    deadline_at: float | None = None
    budget_usd: float | None = None
    spent_usd: float | None = None


@dataclass(frozen=True, kw_only=True)
class StageRates:
    """Per-second rates of one pipeline-stage task over the rate window."""

    task: str
    stage: str
    dc: str
    compute: float  # seconds computing per second
    wait: float  # seconds waiting for peers per second
    microbatches: float  # micro-batches per second
    sent: dict[str, float]  # peer → bytes per second


#: A pair of datacenters (``frozenset``, config ``[links]``) → the link's capacity, Gbit/s.
LinkCapacities = Mapping[frozenset[str], float]


def frozen_map(d: Mapping[Any, Any] | None = None) -> Mapping[Any, Any]:
    """A read-only view of ``d`` (a copy: later changes to ``d`` do not show)."""
    return MappingProxyType(dict(d or {}))


@dataclass(frozen=True, kw_only=True)
class RuleInputs:
    """The rules' inputs for one refresh (rates in steps/s, prices USD/h, times in seconds).

    ``predicted``: job → speed prediction of its current shape; ``model``: the speed model (None: the
    shipped one); ``price_book``: ``node_price`` / ``ps_node_price``; ``thresholds`` (None: the defaults);
    ``overheads``: the CM-DARE overheads; ``replacement_seconds``: GPU (``"CPU"``) → measured seconds until a
    replacement trained; ``goals``: job → deadline and budget; ``stages``: job → pipeline-stage rates;
    ``ps_cpu``: ``job/task`` → busy CPUs of a PS; ``link_capacity_gbps``: known WAN capacities; the windows
    the rates were measured over; ``work_at_risk``: job → its checkpoint figures; ``columns``: job → its
    tasks as columns (:mod:`~cmdare.planner.rules.worker_columns`)."""

    predicted: Mapping[str, SpeedPrediction] = field(default_factory=frozen_map)
    model: SpeedModel | None = None
    price_book: PriceBook | None = None
    thresholds: Thresholds | None = None
    overheads: Overheads | None = None
    replacement_seconds: Mapping[str, float] = field(default_factory=frozen_map)
    goals: Mapping[str, JobGoal] = field(default_factory=frozen_map)
    stages: Mapping[str, Sequence[StageRates]] = field(default_factory=frozen_map)
    stage_window_s: float = STEP_WINDOW_S
    ps_cpu: Mapping[str, float] = field(default_factory=frozen_map)
    rate_window_s: float = RATE_WINDOW_S
    link_capacity_gbps: LinkCapacities = field(default_factory=frozen_map)
    work_at_risk: Mapping[str, WorkAtRisk] = field(
        default_factory=frozen_map
    )  # job → since its last checkpoint
    # job → its tasks as columns, kept from refresh to refresh by the planner (read only while they were
    # read from the very node list the job holds: else the rules read the job's own, once per view)
    columns: Mapping[str, JobColumns] = field(default_factory=frozen_map)
