"""Helpers shared by the bottleneck rules (:mod:`cmdare.planner.bottlenecks`).

Reading ``ctx.extras`` (thresholds, speed model, predictions, rate window), the up nodes of a job,
predictions of other shapes, prices from the price book (USD/h) and the ``+12%`` wording of a gain.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from cmdare.planner.alerts import AlertContext
from cmdare.planner.gpu_catalog import UnknownGpuError, get_gpu
from cmdare.planner.job_plan import network_of
from cmdare.planner.overview import RATE_WINDOW_S, JobView, NodeView
from cmdare.planner.speed_model import SpeedModel, SpeedPrediction
from cmdare.planner.thresholds import DEFAULT_THRESHOLDS, Thresholds


# ----------------------------------------------------------------------------------- context extras
def thresholds_of(ctx: AlertContext) -> Thresholds:
    """The rules' thresholds: ``ctx.extras["thresholds"]``, else the defaults."""
    return ctx.extras.get("thresholds") or DEFAULT_THRESHOLDS


def speed_model_of(ctx: AlertContext) -> SpeedModel:
    """The speed model: ``ctx.extras["model"]``, else the shipped one."""
    return ctx.extras.get("model") or SpeedModel.load()


def rate_window_s(ctx: AlertContext) -> float:
    """The window (seconds) the job and node rates were measured over."""
    return float(ctx.extras.get("rate_window_s", RATE_WINDOW_S))


def current_prediction(ctx: AlertContext, job: JobView) -> SpeedPrediction | None:
    """The speed model's prediction for the job's current shape (``ctx.extras["predicted"]``)."""
    return ctx.extras.get("predicted", {}).get(job.name)


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
def canonical_gpu(gpu: str) -> str:
    """The catalogue name of a GPU (as the speed model keys it), or the name as given when unknown."""
    try:
        return get_gpu(gpu).name
    except UnknownGpuError:
        return gpu


def up_workers(job: JobView) -> list[NodeView]:
    """The job's workers that are up."""
    return [n for n in job.workers() if n.status == "up"]


def up_ps_nodes(job: JobView) -> list[NodeView]:
    """The job's parameter servers that are up."""
    return [n for n in job.nodes if n.role == "ps" and n.status == "up"]


def up_gpu_counts(job: JobView) -> dict[str, int]:
    """GPU type → number of up workers with it."""
    return dict(Counter(n.gpu for n in up_workers(job) if n.gpu))


# ----------------------------------------------------------------------------------- prices, words
def price_usd_per_hour(book: Any, fn: str, *args: str | int) -> float | None:
    """A price from the book, or None when the book is missing or has no price."""
    if book is None:
        return None
    try:
        return float(getattr(book, fn)(*args).usd_per_hour)
    except (KeyError, ValueError):
        return None


def node_usd_per_hour(book: Any, n: NodeView) -> float | None:
    """What one node costs (USD/h): a PS node or a one-GPU worker, by region and provisioning."""
    if n.role == "ps":
        return price_usd_per_hour(book, "ps_node_price", n.region, n.provisioning or "standard")
    return price_usd_per_hour(book, "node_price", n.gpu, 1, n.region, n.provisioning or "standard")


def signed_pct(x: float) -> str:
    """A share as a signed percentage: 0.7 → ``+70%``."""
    return f"{x:+.0%}"
