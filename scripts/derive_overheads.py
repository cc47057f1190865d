"""Derive revocation overheads from the CM-DARE data → planner/data/overheads.json.

Sources (under ``--shared``, default this repository, folder ``data/cmdare/``, the vendored copy):

* server start = Provisioning + Staging + Booting, ``data/processed_data/startup_time/{pre,on_demand}_{east,west}/*.csv``
  (preemptible 80–92 s vs on-demand 69–76 s);
* replacement worker join, ``derived/replacement_worker_join_time_seconds.csv`` (immediate request);
* framework restart cold/warm, ``derived/tf_restart_cold_warm_seconds.csv``;
* work lost when the chief restarts from its checkpoint, ``derived/chief_restart_overhead_seconds.csv``
  (least-squares slope of extra time vs steps since the checkpoint; ≈58 s per 500 steps);
* checkpoint cost vs size, ``data/processed_data/checkpoint/whole_data.csv`` (t = a + b·MB) and checkpoint MB
  per parameter, ``data/processed_data/checkpoint/aggregated.csv``.
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

BASE = Path("data/cmdare")
STARTUP = BASE / "data/processed_data/startup_time"
JOIN = BASE / "derived/replacement_worker_join_time_seconds.csv"
TF = BASE / "derived/tf_restart_cold_warm_seconds.csv"
CHIEF = BASE / "derived/chief_restart_overhead_seconds.csv"
CKPT = BASE / "data/processed_data/checkpoint/whole_data.csv"
CKPT_AGG = BASE / "data/processed_data/checkpoint/aggregated.csv"


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


def server_start(shared: Path) -> dict[str, dict[str, float]]:
    """Mean server start (s) by provisioning and GPU; ``*`` pools every measurement of that provisioning."""
    out: dict[str, dict[str, list[float]]] = {"preemptible": {}, "standard": {}}
    for path in sorted((shared / STARTUP).glob("*/*.csv")):
        prov = "preemptible" if path.parent.name.startswith("pre") else "standard"
        gpu = "K80" if "k80" in path.name else "P100"
        totals = [sum(float(v) for v in r.values()) for r in _rows(path)]
        out[prov].setdefault(gpu, []).extend(totals)
        out[prov].setdefault("*", []).extend(totals)
    return {p: {g: round(float(np.mean(v)), 2) for g, v in d.items()} for p, d in out.items()}


def replacement_join(shared: Path) -> dict[str, float]:
    return {
        r["gpu"]: round(float(r["mean_s"]), 2) for r in _rows(shared / JOIN) if r["request"] == "immediate"
    }


def tf_restart(shared: Path) -> dict[str, float]:
    rows = _rows(shared / TF)
    return {
        k: round(float(np.mean([float(r["seconds"]) for r in rows if r["start_type"] == k])), 2)
        for k in ("cold", "warm")
    }


def chief_lost(shared: Path) -> dict[str, float]:
    rows = _rows(shared / CHIEF)
    base = np.mean(
        [float(r["training_time_s"]) for r in rows if r["steps_since_last_checkpoint"] == "baseline"]
    )
    x = np.array(
        [
            float(r["steps_since_last_checkpoint"])
            for r in rows
            if r["steps_since_last_checkpoint"] != "baseline"
        ]
    )
    y = (
        np.array(
            [float(r["training_time_s"]) for r in rows if r["steps_since_last_checkpoint"] != "baseline"]
        )
        - base
    )
    slope, intercept = np.polyfit(x, y, 1)
    return {"s_per_step": round(float(slope), 5), "s_per_500_steps": round(float(slope * 500), 2),
            "intercept_s": round(float(intercept), 2),
            "implied_steps_per_sec": round(float(1 / slope), 2)}  # fmt: skip


def checkpoint(shared: Path) -> dict[str, float]:
    rows = _rows(shared / CKPT)
    mb = np.array([float(r["Checkpoint Size (MB)"]) for r in rows])
    secs = np.array([float(r["Duration"]) for r in rows])
    per_mb, fixed = np.polyfit(mb, secs, 1)
    agg = _rows(shared / CKPT_AGG)
    agg = [r for r in agg if r["Number of Parameters"] and r["Checkpoint Size (MB)"]]
    params = np.array([float(r["Number of Parameters"]) for r in agg])
    size = np.array([float(r["Checkpoint Size (MB)"]) for r in agg])
    mb_per_param = float(np.sum(params * size) / np.sum(params * params))  # LSQ through the origin
    return {"fixed_s": round(float(fixed), 3), "s_per_mb": round(float(per_mb), 5),
            "mb_per_param": float(f"{mb_per_param:.4g}")}  # fmt: skip


def git_commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()  # fmt: skip
    except (subprocess.CalledProcessError, OSError):
        return "uncommitted"


def derive(shared: Path) -> dict:
    return {
        "provenance": {
            "script": "scripts/derive_overheads.py",
            "sources": [str(p) for p in (STARTUP, JOIN, TF, CHIEF, CKPT, CKPT_AGG)],
            "data": "cake-lab/CM-DARE @ 263b7f1 (data/ d091f72)",
            "commit": git_commit(),
            "date": dt.date.today().isoformat(),
        },
        "server_start_s": server_start(shared),
        "replacement_join_s": replacement_join(shared),
        "framework_restart_s": tf_restart(shared),
        "chief_lost": chief_lost(shared),
        "checkpoint": checkpoint(shared),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--shared", type=Path, default=REPO, help="directory holding data/cmdare (default: the vendored copy)"
    )
    ap.add_argument("--out", type=Path, default=REPO / "planner/data/overheads.json")
    args = ap.parse_args(argv)
    data = derive(args.shared)
    write_text(args.out, json.dumps(data, indent=1) + "\n")
    print(json.dumps({k: v for k, v in data.items() if k != "provenance"}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
