"""Fit the bathtub revocation model to the CM-DARE lifetime data → planner/data/revocation_params.json.

Inputs (under ``--shared``, default this repository: the vendored copy), all from ``data/cmdare/derived/``:

* ``lifetime_cdf_by_gpu_region.csv``   — hourly lifetime CDFs per GPU × region (fitted per region);
* ``revocations_by_hours_after_start.csv`` — revocation counts per hour of age (checks the GPU-level shape);
* ``revocations_by_hour_of_day.csv``   — revocation counts per hour of day (hazard multipliers);
* ``lifetimes_seconds_128.csv``        — exact lifetimes: the shape of revocations inside the first hour.

GPU-level curves are fitted to the mean of that GPU's regional CDFs, the provisioning-level curve
(``*/*``) to the mean of all of them. Hour-of-day multipliers are the counts smoothed with a circular
3-hour moving average and normalised to mean 1 (smoothing is a modelling choice: 2–5 events per hour).
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import subprocess
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]

from cmdare.collectors.writes import write_text  # noqa: E402
from cmdare.planner.risk_cost.revocation import Bathtub  # noqa: E402

DERIVED = Path("data/cmdare/derived")
CDF_FILE = "lifetime_cdf_by_gpu_region.csv"
AGE_FILE = "revocations_by_hours_after_start.csv"
TOD_FILE = "revocations_by_hour_of_day.csv"
SECONDS_FILE = "lifetimes_seconds_128.csv"


def first_hour_tau(path: Path) -> tuple[float, int]:
    """MLE scale (hours) of an exponential truncated to [0, 1 h] for the lifetimes under one hour in
    ``lifetimes_seconds_128.csv`` (the only lifetimes with sub-hour resolution); returns (tau, n)."""
    from scipy.optimize import brentq

    secs = np.loadtxt(path, delimiter=",", skiprows=1)
    x = secs[secs < 3600] / 3600.0
    mean = float(x.mean())
    # mean of Exp(tau) truncated to [0, 1]: tau − 1 / (e^(1/tau) − 1); solve for the sample mean.
    tau = brentq(lambda tau: tau - 1.0 / np.expm1(1.0 / tau) - mean, 0.01, 1000.0)
    return float(tau), int(x.size)


def read_cdfs(path: Path) -> dict[str, np.ndarray]:
    """``{"GPU/region": cdf at ages 1..24 h}`` (hour_index h = revoked within h+1 hours; index 24 dropped:
    it is the 24 h kill, not a revocation)."""
    out: dict[str, list[tuple[int, float]]] = {}
    with path.open() as fh:
        for row in csv.DictReader(fh):
            h = int(row["hour_index"])
            if h < 24:
                out.setdefault(f"{row['gpu']}/{row['region']}", []).append((h, float(row["cdf"])))
    return {k: np.array([c for _, c in sorted(v)]) for k, v in out.items()}


def fit_bathtub(cdf: np.ndarray) -> tuple[Bathtub, float]:
    """Least-squares bathtub fit to a CDF sampled at ages 1..len h; returns the curve and its MAE."""
    from scipy.optimize import curve_fit

    t = np.arange(1, cdf.size + 1, dtype=float)

    def f(x: np.ndarray, a: float, tau1: float, b: float, tau2: float) -> np.ndarray:
        return Bathtub(a, tau1, b, tau2).cdf(x)

    best: tuple[Bathtub, float] | None = None
    for tau1 in (0.3, 1.0, 3.0, 10.0):
        for b in (20.0, 30.0, 45.0):
            try:
                p, _ = curve_fit(f, t, cdf, p0=(max(cdf[-1], 0.05), tau1, b, 2.0),
                                 bounds=([0, 0.05, 0, 0.1], [1, 100, 60, 50]), maxfev=20000)  # fmt: skip
            except RuntimeError:
                continue
            curve = Bathtub(*map(float, p))
            mae = float(np.mean(np.abs(curve.cdf(t) - cdf)))
            if best is None or mae < best[1]:
                best = (curve, mae)
    assert best is not None, "no bathtub fit converged"
    return best


def hour_of_day_factors(path: Path) -> dict[str, list[float]]:
    """Per-GPU (and pooled ``*``) hazard multipliers per hour of day, mean 1."""
    with path.open() as fh:
        rows = list(csv.DictReader(fh))
    gpus = [c for c in rows[0] if c != "hour_of_day"]
    counts = {g: np.array([float(r[g]) for r in rows]) for g in gpus}
    counts["*"] = sum(counts.values())
    out = {}
    for g, c in counts.items():
        smooth = (np.roll(c, 1) + c + np.roll(c, -1)) / 3.0
        out[g] = [round(float(x), 4) for x in smooth / smooth.mean()]
    return out


def git_commit(repo: Path) -> str:
    try:
        return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()  # fmt: skip
    except (subprocess.CalledProcessError, OSError):
        return "uncommitted"


def fit_all(shared: Path) -> dict:
    cdfs = read_cdfs(shared / DERIVED / CDF_FILE)
    curves: dict[str, dict] = {}
    groups: dict[str, list[np.ndarray]] = {}
    for key, cdf in cdfs.items():
        groups.setdefault(key.split("/")[0] + "/*", []).append(cdf)
        groups.setdefault("*/*", []).append(cdf)
    for key, cdf in [*cdfs.items(), *((k, np.mean(v, axis=0)) for k, v in groups.items())]:
        curve, mae = fit_bathtub(cdf)
        curves[key] = {"a": curve.a, "tau1": curve.tau1, "b": curve.b, "tau2": curve.tau2,
                       "mae": round(mae, 4), "p_revoked_24h": round(float(cdf[-1]), 4)}  # fmt: skip
    age = np.loadtxt(shared / DERIVED / AGE_FILE, delimiter=",", skiprows=1)
    tau0, n0 = first_hour_tau(shared / DERIVED / SECONDS_FILE)
    first_hour_share = {
        g: round(float(age[0, i + 1] / age[:, i + 1].sum()), 3) for i, g in enumerate(("K80", "P100", "V100"))
    }
    return {
        "provenance": {
            "script": "scripts/fit_revocation_model.py",
            "sources": [str(DERIVED / f) for f in (CDF_FILE, AGE_FILE, TOD_FILE, SECONDS_FILE)],
            "first_hour_tau_from": f"{n0} lifetimes < 1 h in {SECONDS_FILE} (truncated-exponential MLE)",
            "data": "cake-lab/CM-DARE @ 263b7f1 (Sigmetrics2020_redraws.ipynb cells 13-15, 20, 24)",
            "model": "F(t)=A(1-exp(-t/tau1)+exp((t-b)/tau2)-exp(-b/tau2)), t hours < 24",
            "first_hour_share_of_revocations": first_hour_share,
            "commit": git_commit(REPO),
            "date": dt.date.today().isoformat(),
        },
        "first_hour_tau_h": round(tau0, 4),
        "curves": curves,
        "hour_of_day": hour_of_day_factors(shared / DERIVED / TOD_FILE),
    }


def parse_icac_lifetime_log(text: str) -> list:
    """Lifetimes of the GPU sections (K80, P100, V100) of the ICAC 2019 log
    ``icac2019_transient-deep-learning/data/lifetime/lifetime.csv`` (preemptible VMs, Feb 2019).

    VM names encode GPU and zone (``a-p100-us-central1-c-0``); a lifetime shorter than 24 h − 15 min
    counts as revoked (longer ones hit the 24 h limit)."""
    import re

    from cmdare.collectors.samples import Lifetime
    from cmdare.planner.risk_cost.revocation import KILL_EPS_H, LIMIT_H

    out, gpu = [], None
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if cells[0] in ("K80", "P100", "V100"):
            gpu = cells[0]
            continue
        if cells[0].startswith("Previous experiments"):
            break
        m = re.search(r"([a-z]+-[a-z]+\d)-[a-z]-", cells[0])
        if gpu is None or m is None or len(cells) < 3 or not cells[2]:
            continue
        start = dt.datetime.strptime(cells[1], "%m/%d/%y %H:%M").timestamp()
        end = dt.datetime.strptime(cells[2], "%m/%d/%y %H:%M").timestamp()
        cause = (
            "preempted" if (end - start) / 3600.0 < LIMIT_H - KILL_EPS_H else "stopped"
        )  # at the 24 h limit
        out.append(
            Lifetime(
                task=cells[0],
                start=start,
                end=end,
                cause=cause,
                gpu=gpu,
                region=m.group(1),
                provisioning="preemptible",
            )
        )
    return out


#: The lifetime periods the package ships, each fitted on its own data alone (issue 30: risk drifts).
PERIODS = {
    "cmdare-2020": "CM-DARE (ICDCS 2020)",
    "icac-2019-02": "Feb 2019 (ICAC 2019 log)",
}
ICAC_LOG = Path("data/cmdare/icac2019_transient-deep-learning/data/lifetime/lifetime.csv")


def hourly_cdf(hours: np.ndarray, revoked: np.ndarray) -> np.ndarray:
    """Share revoked within h+1 hours, h = 0..23, of lifetimes given in hours (``revoked``: not the 24 h kill)."""
    return np.array([np.mean(revoked & (hours <= h + 1)) for h in range(24)])


def cell_counts(cdf: np.ndarray, min_n: int = 10, max_n: int = 100) -> int:
    """The smallest sample size (from ``min_n``: every cell whose count the CDF pins down had 15 or more
    servers — an assumption for the others) whose multiples hold every value of a published CDF: how many
    servers the cell had."""
    for n in range(min_n, max_n + 1):
        if np.all(np.abs(cdf * n - np.round(cdf * n)) < 0.02):
            return n
    return max_n


def fit_periods(shared: Path, main_curves: dict[str, dict]) -> dict:
    """Each period's curves, fitted on its own data, with each cell's servers ``n`` and revoked before 24 h
    ``k``: CM-DARE 2020 (the main fit, its counts read off the CDFs) and the Feb 2019 log."""
    cdfs = read_cdfs(shared / DERIVED / CDF_FILE)
    cmdare = {}
    for key, c in main_curves.items():
        cell = dict(c)
        if key in cdfs:
            n = cell_counts(cdfs[key])
            cell.update(n=n, k=int(round(cdfs[key][-1] * n)))
        cmdare[key] = cell
    lives = parse_icac_lifetime_log((shared / ICAC_LOG).read_text())
    cells: dict[str, list] = {}
    for lt in lives:
        cells.setdefault(f"{lt.gpu}/{lt.region}", []).append(lt)
    icac, groups, raw = {}, {}, {}
    for key, group in sorted(cells.items()):
        hours = np.array([(lt.end - lt.start) / 3600.0 for lt in group])
        revoked = np.array([lt.revoked for lt in group])
        raw[key] = (hourly_cdf(hours, revoked), int(hours.size), int(revoked.sum()))
        groups.setdefault(key.split("/")[0] + "/*", []).append(raw[key][0])
        groups.setdefault("*/*", []).append(raw[key][0])
    means = {k: np.mean(v, axis=0) for k, v in groups.items()}
    for key, (cdf, n, k) in raw.items():
        if (
            k == 0
        ):  # none of n revoked: the period's GPU curve scaled to the Jeffreys estimate ½ / (n + 1), not 0
            gpu = means[key.split("/")[0] + "/*"]
            cdf = gpu * (0.5 / (n + 1)) / max(float(gpu[-1]), 1e-9)
        icac[key] = _curve_entry(cdf) | {"n": n, "k": k}
    for key, cdf in means.items():
        icac[key] = _curve_entry(cdf)
    return {
        "cmdare-2020": {"label": PERIODS["cmdare-2020"], "source": str(DERIVED / CDF_FILE), "curves": cmdare},
        "icac-2019-02": {"label": PERIODS["icac-2019-02"], "source": str(ICAC_LOG), "curves": icac},
    }


def _curve_entry(cdf: np.ndarray) -> dict:
    if cdf[-1] <= 0:  # nothing revoked before 24 h in this cell: a flat curve (the 24 h kill only)
        return {"a": 0.0, "tau1": 1.0, "b": 60.0, "tau2": 1.0, "mae": 0.0, "p_revoked_24h": 0.0}
    curve, mae = fit_bathtub(cdf)
    return {"a": curve.a, "tau1": curve.tau1, "b": curve.b, "tau2": curve.tau2, "mae": round(mae, 4),
            "p_revoked_24h": round(float(cdf[-1]), 4)}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--shared", type=Path, default=REPO, help="directory holding data/cmdare (default: the vendored copy)"
    )
    ap.add_argument("--out", type=Path, default=REPO / "planner/data/revocation_params.json")
    args = ap.parse_args(argv)
    params = fit_all(args.shared)
    params["periods"] = fit_periods(args.shared, params["curves"])
    params["main_period"] = "cmdare-2020"
    write_text(args.out, json.dumps(params, indent=1) + "\n")
    for key, c in params["curves"].items():
        print(f"{key:22s} MAE {c['mae']:.3f}  P(revoked<24h) {c['p_revoked_24h']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
