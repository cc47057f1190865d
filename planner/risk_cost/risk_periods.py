"""Revocation risk that admits its period (issue 30): P(≥1 revocation) of each ranked shape under every vendored
lifetime period, each fitted on its own data alone (``planner/data/revocation_params.json`` ``periods``:
CM-DARE's 2020 CDFs and the Feb 2019 ICAC log), as a band from the lowest to the highest. Every period's curves
are scaled by the hazard learned from this cluster's own lifetimes (:meth:`RevocationModel.update`), so the band
moves toward what the cluster sees as its lifetimes accrue. The headline figure stays the main period's
(``RevocationModel.period_``); the band says how far another period's measurements put it. Vectorised."""

from __future__ import annotations

import numpy as np

from cmdare.planner.risk_cost.revocation import RevocationModel
from cmdare.planner.risk_cost.time_cost import revocation_curves


def period_risks(
    model: RevocationModel,
    cols: dict[str, np.ndarray],
    hours: np.ndarray,
    units: np.ndarray,
    ps: np.ndarray | None = None,
    ps_provisioning: str = "standard",
) -> dict[str, np.ndarray]:
    """Per period name, each row's P(≥1 revocation) over ``hours``: 1 − S(hours)^units × S_ps(hours)^ps
    (``units``: workers of a PS shape, nodes of a synchronous one; ``ps``: PS count, None for sync)."""
    out: dict[str, np.ndarray] = {}
    for name in model.periods_:
        m = model.for_period(name)
        surv, _ = revocation_curves(m, cols["gpu"], cols["region"], cols["provisioning"])(hours)
        p_all = surv ** units.astype(float)
        if ps is not None:
            n = cols["gpu"].size
            ps_surv, _ = revocation_curves(m, np.full(n, "*"), cols["region"], np.full(n, ps_provisioning))(
                hours
            )
            p_all = p_all * ps_surv ** ps.astype(float)
        out[name] = 1.0 - p_all
    return out


def band_columns(main: np.ndarray, risks: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``p_revocation_low`` / ``_high`` (the main figure with every period's) and ``p_revocation_periods`` (per row
    a dict period → figure, for the JSON and the explanation)."""
    stack = np.vstack([main, *risks.values()]) if risks else main[None, :]
    per = np.empty(main.size, dtype=object)
    names = list(risks)
    for i in range(main.size):
        per[i] = {n: round(float(risks[n][i]), 4) for n in names}
    return {
        "p_revocation_low": stack.min(axis=0),
        "p_revocation_high": stack.max(axis=0),
        "p_revocation_periods": per,
    }
