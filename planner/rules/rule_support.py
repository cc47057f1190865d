"""Helpers shared by the bottleneck rules (:mod:`cmdare.planner.rules.bottlenecks`).

Reading ``ctx.inputs`` (thresholds, speed model, predictions, rate window), the up nodes of a job,
predictions of other shapes, prices from the price book (USD/h) and the ``+12%`` wording of a gain.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from cmdare.collectors.observed import JobView, NodeView
from cmdare.planner.live.outlook import network_of, owns_gpu
from cmdare.planner.rules.alerts import AlertContext
from cmdare.planner.rules.thresholds import DEFAULT_THRESHOLDS, Thresholds
from cmdare.planner.rules.worker_columns import JobColumns, canonical_gpu
from cmdare.planner.speed.speed_model import SpeedModel, SpeedPrediction

if TYPE_CHECKING:
    from cmdare.collectors.pricing.book import PriceBook


# ----------------------------------------------------------------------------------- context inputs
def thresholds_of(ctx: AlertContext) -> Thresholds:
    """The rules' thresholds: ``ctx.inputs.thresholds``, else the defaults."""
    return ctx.inputs.thresholds or DEFAULT_THRESHOLDS


def speed_model_of(ctx: AlertContext) -> SpeedModel:
    """The speed model: ``ctx.inputs.model``, else the shipped one."""
    return ctx.inputs.model or SpeedModel.load()


def columns_of(ctx: AlertContext, job: JobView) -> JobColumns:
    """The job's tasks as columns: the planner's kept ones (``ctx.inputs.columns``) when read from this
    very node list, else read from the job's nodes once per view."""
    kept = ctx.inputs.columns.get(job.name)
    if kept is not None and kept.nodes is job.nodes:
        return kept
    return job.memo(JobColumns.of)


def rate_window_s(ctx: AlertContext) -> float:
    """The window (seconds) the job and node rates were measured over."""
    return float(ctx.inputs.rate_window_s)


def current_prediction(ctx: AlertContext, job: JobView) -> SpeedPrediction | None:
    """The speed model's prediction for the job's current shape (``ctx.inputs.predicted``)."""
    return ctx.inputs.predicted.get(job.name)


def predict_shape(ctx: AlertContext, job: JobView, gpus: dict[str, int], ps: int) -> SpeedPrediction | None:
    """The prediction for the job's network on ``gpus`` (GPU → workers) and ``ps`` parameter servers,
    or None when the network is unknown, the shape is empty or the model cannot predict it."""
    net = network_of(job)
    if net is None or not gpus or ps < 1:
        return None
    try:
        return speed_model_of(ctx).predict(net, gpus, ps=ps)
    except (ValueError, KeyError):
        return None


# ----------------------------------------------------------------------------------- nodes
def up_gpu_counts(job: JobView, cols: JobColumns | None = None) -> dict[str, int]:
    """GPU type → number of up workers with it (CPU-only workers are not counted), in the order the
    workers show them; from ``cols`` (the job's columns) when given."""
    if cols is not None:
        return cols.up_gpu_counts()
    return dict(Counter(n.gpu for n in job.up_workers() if owns_gpu(n.gpu)))


def compute_share(w: NodeView, pred: SpeedPrediction | None = None) -> tuple[float | None, str]:
    """(share of wall time the worker computes, the measurement it comes from): DCGM GPU utilisation,
    else measured step seconds × the worker's own steps/s, else (with a model) own steps/s ÷ predicted."""
    if w.gpu_util is not None and owns_gpu(w.gpu):
        return w.gpu_util / 100.0, "GPU utilisation (DCGM)"
    if w.step_seconds and w.steps_per_sec:
        return w.step_seconds * w.steps_per_sec, "step compute share"
    own = pred.worker_steps_per_sec.get(canonical_gpu(w.gpu)) if pred else None
    if own and w.steps_per_sec:
        return w.steps_per_sec / own, "own steps/s ÷ predicted"
    return None, ""


def compute_shares(
    workers: Sequence[NodeView], pred: SpeedPrediction | None = None
) -> tuple[list[float], str, bool]:
    """(:func:`compute_share` of every worker that has one, the signal of the first of them in order,
    whether any came from DCGM), taken signal by signal over the workers: a 10,000-worker job is read
    in a few comprehensions, not 10,000 calls (the shares come grouped by signal, not in order)."""
    shares = [w.gpu_util / 100.0 for w in workers if w.gpu_util is not None and owns_gpu(w.gpu)]
    dcgm = bool(shares)
    if len(shares) < len(workers):  # the others: measured compute time × own rate, else vs the model
        rest = [w for w in workers if w.steps_per_sec and (w.gpu_util is None or not owns_gpu(w.gpu))]
        shares += [s * r for w in rest if (s := w.step_seconds) and (r := w.steps_per_sec)]
        if pred is not None and len(shares) < len(workers):
            rest = [w for w in rest if not w.step_seconds]
            own = {g: pred.worker_steps_per_sec.get(canonical_gpu(g)) for g in {w.gpu for w in rest}}
            shares += [r / o for w in rest if (o := own[w.gpu]) and (r := w.steps_per_sec)]
    first = next((sig for s, sig in (compute_share(w, pred) for w in workers) if s is not None), "")
    return shares, first, dcgm


def ps_traffic_gbps(job: JobView, ps: Sequence[NodeView] | None = None) -> float | None:
    """The busiest up PS's traffic, Gbit/s, in its busier direction (measured), or None unmeasured;
    ``ps``: the job's up PSs when the caller has them."""
    rates = [
        max(n.net_in_bps or 0.0, n.net_out_bps or 0.0) * 8 / 1e9
        for n in (job.up_ps_nodes() if ps is None else ps)
        if n.net_in_bps is not None or n.net_out_bps is not None
    ]
    return max(rates) if rates else None


def basis(
    measured: list[str], model: list[str] | None = None, missing: list[str] | None = None
) -> dict[str, list[str]]:
    """The evidence keys every verdict carries: what was ``measured``, which ``model`` terms it used and
    what it could ``not_measured`` (so no verdict claims a cause it never measured)."""
    return {"measured": measured, "model": model or [], "not_measured": missing or []}


# ----------------------------------------------------------------------------------- prices, words
def price_usd_per_hour(
    book: PriceBook | None, fn: Literal["node_price", "ps_node_price"], *args: str | int
) -> float | None:
    """A price from the book, or None when the book is missing or has no price."""
    if book is None:
        return None
    try:
        return float(getattr(book, fn)(*args).usd_per_hour)
    except (KeyError, ValueError):
        return None


def node_usd_per_hour(book: PriceBook | None, n: NodeView) -> float | None:
    """What one node costs (USD/h): a PS node or a one-GPU worker, by region and provisioning."""
    if n.role == "ps":
        return price_usd_per_hour(book, "ps_node_price", n.region, n.provisioning or "standard")
    return price_usd_per_hour(book, "node_price", n.gpu, 1, n.region, n.provisioning or "standard")


def signed_pct(x: float) -> str:
    """A share as a signed percentage: 0.7 → ``+70%``."""
    return f"{x:+.0%}"


@dataclass(frozen=True)
class PredictedGain:
    """A predicted relative gain (0.7 = +70%) and its P10–P90 band when the speed model gives one.

    ``known_error`` is the model's known out-of-sample error for this kind of change (2-PS: ~20%); with
    no band, a gain within it is uncertain and may be none. A band (``p10``/``p90``) takes precedence."""

    point: float
    p10: float | None = None
    p90: float | None = None
    known_error: float | None = None
    caveat: str = ""  # what is known of the model's error here, said when there is no band

    @property
    def has_band(self) -> bool:
        return self.p10 is not None and self.p90 is not None

    @property
    def may_be_none(self) -> bool:
        """True when the evidence allows "no gain at all"."""
        if self.p10 is not None and self.p90 is not None:  # has_band
            return self.p10 <= 0.0
        return self.known_error is not None and self.point <= self.known_error

    def words(self, unit: str = "steps/s") -> str:
        """'predicted +70% steps/s (band: n/a until calibrated; ...)'."""
        band = (
            f"P10–P90 {signed_pct(self.p10)}…{signed_pct(self.p90)}"
            if self.p10 is not None and self.p90 is not None  # has_band
            else "band: n/a until calibrated"
        )
        out = f"predicted {signed_pct(self.point)} {unit} ({band})"
        if self.may_be_none:
            out += "; uncertain: the gain may be none"
        elif self.known_error is not None and not self.has_band:
            out += (
                f"; {self.caveat}"
                if self.caveat
                else f"; such predictions are off by ~{self.known_error:.0%}"
            )
        return out

    def to_evidence(self) -> dict[str, float | bool | None]:
        return {
            "fix_predicted_gain": round(self.point, 3),
            "fix_gain_p10": self.p10 if self.p10 is None else round(self.p10, 3),
            "fix_gain_p90": self.p90 if self.p90 is None else round(self.p90, 3),
            "fix_gain_may_be_none": self.may_be_none,
        }
