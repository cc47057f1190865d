"""Revocation risk across lifetime periods (issue 30): fit on one period, score on the other.

    python benchmarks/revocation_periods.py

The two vendored periods (``planner/data/revocation_params.json`` ``periods``, written by
``scripts/fit_revocation_model.py``, each fitted on its own data alone): CM-DARE's ICDCS 2020 lifetime CDFs
and the Feb 2019 ICAC log. The figure scored is each GPU × region cell's share of preemptible servers revoked
before 24 h (``k / n``), over the cells both periods measured.

A period's band for a cell: its fitted curve's P(revoked < 24 h) ``p``, widened by the sampling uncertainty
of the cell's ``n`` servers — the Jeffreys 10–90 % interval Beta(p·n + ½, (1 − p)·n + ½) — and, in the
second band, also by the period's spread over the regions of the same GPU (regions differ ~3×, the study
says; drift between periods may be of that size). In-period coverage: how many cells' own figure the band
holds (the fit and its uncertainty); cross-period coverage: how many of the *other* period's figures it holds
(the out-of-sample check). The band the planner shows (lowest to highest across both periods' curves) is
fitted on both, so only its width is printed. A third band scales the fitted period's figure by the drift the
*other* GPUs show between the periods (leave-one-GPU-out): what lifetimes of other GPUs seen on a cluster would
say of this one."""

from __future__ import annotations

import sys

import numpy as np
from scipy.stats import beta

from cmdare.planner.risk_cost.revocation import RevocationModel

LIMIT_H = 23.999  # just before the 24 h kill
LOW, HIGH = 0.10, 0.90


def cell_figures(model: RevocationModel, period: str) -> dict[str, tuple[float, int, float]]:
    """Per cell: (measured k/n, n, the period's fitted P(revoked < 24 h))."""
    p = model.periods_[period]
    out = {}
    for key, (n, k) in p.cells.items():
        out[key] = (k / n, n, float(p.curves[key].cdf(np.array(LIMIT_H))))
    return out


def band(fitted: float, n: int) -> tuple[float, float]:
    """Jeffreys 10–90 % interval around a fitted share for a cell of ``n`` servers."""
    a, b = fitted * n + 0.5, (1.0 - fitted) * n + 0.5
    return float(beta.ppf(LOW, a, b)), float(beta.ppf(HIGH, a, b))


def coverage(fit: str, score: str, cells: dict[str, dict], regional: bool) -> tuple[int, int, list[str]]:
    """(cells held, cells scored, the misses) of ``fit``'s bands against ``score``'s measured figures."""
    held, misses = 0, []
    common = sorted(set(cells[fit]) & set(cells[score]))
    for key in common:
        _, n, p = cells[fit][key]
        lo, hi = band(p, n)
        if regional:
            same = [v[2] for k, v in cells[fit].items() if k.split("/")[0] == key.split("/")[0]]
            lo, hi = min(lo, *same), max(hi, *same)
        x = cells[score][key][0]
        if lo - 1e-9 <= x <= hi + 1e-9:
            held += 1
        else:
            misses.append(f"{key} {x:.2f} outside {lo:.2f}–{hi:.2f}")
    return held, len(common), misses


def drift_coverage(fit: str, score: str, cells: dict[str, dict]) -> tuple[int, int, list[str]]:
    """Like :func:`coverage`, the band scaled by the drift between the periods seen on the *other* GPUs
    (leave-one-GPU-out: the ratio of their mean shares revoked before 24 h, lowest to highest) — what a
    cluster's own lifetimes of other GPUs would tell the planner about this one."""
    gpus = sorted({k.split("/")[0] for k in set(cells[fit]) & set(cells[score])})

    def mean(p: str, g: str) -> float:
        return float(np.mean([v[0] for k, v in cells[p].items() if k.startswith(g + "/")]))

    ratio = {g: mean(score, g) / max(mean(fit, g), 1e-9) for g in gpus}
    held, misses = 0, []
    common = sorted(set(cells[fit]) & set(cells[score]))
    for key in common:
        g = key.split("/")[0]
        others = [ratio[o] for o in gpus if o != g]
        _, n, p = cells[fit][key]
        lo, hi = band(min(p * min(others), 1.0), n)[0], band(min(p * max(others), 1.0), n)[1]
        x = cells[score][key][0]
        if lo - 1e-9 <= x <= hi + 1e-9:
            held += 1
        else:
            misses.append(f"{key} {x:.2f} outside {lo:.2f}–{hi:.2f}")
    return held, len(common), misses


def main() -> int:
    model = RevocationModel.load()
    names = list(model.periods_)
    cells = {p: cell_figures(model, p) for p in names}
    print("Revocation before 24 h by period (measured k/n; GPU level = the mean of its cells)")
    for gpu in ("K80", "P100", "V100"):
        parts = []
        for p in names:
            xs = [v[0] for k, v in cells[p].items() if k.startswith(gpu + "/")]
            parts.append(f"{model.period_label(p)} {np.mean(xs):.2f} ({len(xs)} cells)")
        print(f"  {gpu:5s} " + " · ".join(parts))
    for regional in (False, True):
        kind = "fit ± Jeffreys 10–90 %" + (" ∪ same-GPU regions" if regional else "")
        print(f"Band: {kind}")
        for fit in names:
            own, n_own, _ = coverage(fit, fit, cells, regional)
            for score in names:
                if score == fit:
                    continue
                cross, n_cross, misses = coverage(fit, score, cells, regional)
                print(f"  fit on {model.period_label(fit)}: in-period {own}/{n_own} cells, "
                      f"cross-period ({model.period_label(score)}) {cross}/{n_cross} cells")  # fmt: skip
                for m in misses:
                    print(f"    miss: {m}")
    print("Band: fit ± Jeffreys 10–90 %, scaled by the drift the other GPUs show between the periods")
    for fit in names:
        for score in names:
            if score != fit:
                held, n, misses = drift_coverage(fit, score, cells)
                print(f"  fit on {model.period_label(fit)}: cross-period ({model.period_label(score)}) {held}/{n} cells "
                      "(drift from the other GPUs)")  # fmt: skip
                for m in misses:
                    print(f"    miss: {m}")
    both = sorted(set(cells[names[0]]) & set(cells[names[-1]]))
    widths = [max(cells[p][k][2] for p in names) - min(cells[p][k][2] for p in names) for k in both]
    print(f"Shipped band (lowest–highest of the periods' fitted P(revoked < 24 h)), {len(both)} cells: "
          f"mean width {np.mean(widths):.2f}, widest {max(widths):.2f} — fitted on both periods (in-sample)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
