"""P10–P90 band of a synchronous shape's speed: the compute term's spread and the communication model's.

* compute: a network of the CM-DARE study on a GPU: the speed model's one-worker band
  (:func:`cmdare.planner.speed.speed_band.speed_band`); any other network: the out-of-sample spread of the
  published single-GPU efficiencies (``gpu_efficiency.csv``: P10/P90 of log(row / median of the other rows of
  its GPU and precision)); a live job's measured compute: none (it is measured);
* scaling: the P10/P90 of log(published / predicted) scaling efficiency over the fit half of the published
  scaling results (``sync_validation.json``, benchmarks/allreduce_public.py) — it covers the collective,
  the overlap and the wait for the slowest GPU. A one-GPU shape has none.

The two add in log space (a conservative sum, not a convolution). A live calibration narrows the band: the
compute part is gone (measured), and with ``samples`` ranks measuring the split the scaling part shrinks as
the standard error of a mean over them, ``1/sqrt(1 + samples)``.
"""

from __future__ import annotations

import functools
import json
import math
import statistics
from dataclasses import dataclass
from importlib import resources

import numpy as np

from cmdare.planner.speed.sync_compute import efficiency_rows

__all__ = ["SyncBand", "compute_spread", "scaling_spread", "sync_band"]


@dataclass(frozen=True)
class SyncBand:
    """Multipliers of the expected speed at P10 and P90, and what they rest on."""

    low: float
    high: float
    basis: str


@functools.cache
def scaling_spread() -> tuple[float, float, int]:
    """(P10, P90, n) log residuals of the scaling model on the fit half (``sync_validation.json``)."""
    text = resources.files("cmdare.planner").joinpath("data/sync_validation.json").read_text("utf-8")
    d = json.loads(text)
    return float(d.get("log_residual_p10", 0.0)), float(d.get("log_residual_p90", 0.0)), int(d.get("n", 0))


@functools.cache
def compute_spread() -> tuple[float, float, int]:
    """(P10, P90, n) out-of-sample log residuals of the FLOPs-based compute: each published single-GPU rate
    against the median efficiency of the *other* rows of its GPU and precision (leave one out)."""
    rows = efficiency_rows()
    res = []
    for r in rows:
        others = [o.efficiency for o in rows if o is not r and (o.gpu, o.precision) == (r.gpu, r.precision)]
        if others:
            res.append(math.log(r.efficiency / statistics.median(others)))
    return float(np.quantile(res, 0.1)), float(np.quantile(res, 0.9)), len(res)


def sync_band(compute_log_band: tuple[float, float] | None, gpus: int, samples: int = 0) -> SyncBand:
    """The band of a shape of ``gpus`` GPUs whose compute band is ``compute_log_band`` (log P10, log P90;
    None = measured) after a live calibration on ``samples`` measuring ranks (0 = none)."""
    c10, c90 = compute_log_band or (0.0, 0.0)
    s10, s90, n = scaling_spread()
    if gpus <= 1:
        s10 = s90 = 0.0
    shrink = 1.0 / math.sqrt(1.0 + max(samples, 0))
    lo, hi = min(c10 + s10 * shrink, 0.0), max(c90 + s90 * shrink, 0.0)
    parts = ["compute measured" if compute_log_band is None else "compute spread"]
    if gpus > 1:
        parts.append(
            f"scaling residuals of {n} published points" + (f", {samples} live ranks" if samples else "")
        )
    return SyncBand(math.exp(lo), math.exp(hi), " + ".join(parts))
