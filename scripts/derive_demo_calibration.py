#!/usr/bin/env python3
"""Derive the demo cluster's calibration (demo/data/demo_calibration.json) from the CM-DARE data.

Usage: python scripts/derive_demo_calibration.py [--shared DIR]  (DIR holds data/cmdare; default: this repository)

Every number in the output comes from a measured file named in its ``provenance`` entry; the demo's
only free choices (when to revoke, the time factor) are scenario settings, listed under ``scenario``.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "demo" / "data" / "demo_calibration.json"


def single_worker(base: Path, folder: str) -> tuple[float, float]:
    """Mean and std of the measured single-worker steps/s (speed_data_base, measurement rows only)."""
    rows = list(csv.DictReader(open(base / folder / "data.csv")))
    vals = [float(r["Value"]) for r in rows if r["Step"].strip()]
    return statistics.fmean(vals), statistics.stdev(vals)


def curve(derived: Path, gpu: str, model: str) -> list[list[float]]:
    rows = csv.DictReader(open(derived / "cluster_speed_vs_workers.csv"))
    return [
        [int(r["num_workers"]), float(r["speed_steps_per_sec_mean"]), float(r["speed_steps_per_sec_std"])]
        for r in rows
        if r["gpu"] == gpu and r["model"] == model and r["num_ps"] == "1"
    ]


def facts(speed_data: Path, model_tag: str) -> dict[str, float]:
    for r in csv.DictReader(open(speed_data / "0latency_p100_new2.csv")):
        if r["Model (temp)"] == model_tag:
            return {"model_flops": float(r["Model FLOPs"]), "params": float(r["Number of Parameters"])}
    raise SystemExit(f"model {model_tag} not found")


def join_time(derived: Path, gpu: str) -> tuple[float, float]:
    for r in csv.DictReader(open(derived / "replacement_worker_join_time_seconds.csv")):
        if r["gpu"] == gpu and r["request"] == "immediate":
            return float(r["mean_s"]), float(r["std_s"])
    raise SystemExit(f"no join time for {gpu}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--shared", type=Path, default=REPO, help="directory holding data/cmdare (default: the vendored copy)"
    )
    args = ap.parse_args()
    root = args.shared / "data" / "cmdare"
    if not root.is_dir():
        print(f"error: {root} not found", file=sys.stderr)
        return 2
    pp = root / "data" / "processed_data"
    derived = root / "derived"
    mean, std = single_worker(pp / "speed_data_base", "res32p100")
    join_mean, join_std = join_time(derived, "P100")
    out = {
        "job": "resnet32-p100",
        "model": "ResNet-32",
        **facts(pp / "speed_data", "Res32"),
        "batch_size": 128,
        "target_steps": 64000,
        "gpu": "P100",
        "worker_steps_per_sec_mean": round(mean, 4),
        "worker_steps_per_sec_std": round(std, 4),
        "cluster_curve_1ps": curve(derived, "P100", "ResNet-32"),
        "replacement_join_seconds_mean": round(join_mean, 3),
        "replacement_join_seconds_std": round(join_std, 3),
        "gce_preemption_notice_seconds": 30.0,
        "provenance": {
            "worker_steps_per_sec": "data/processed_data/speed_data_base/res32p100/data.csv (single-worker P100 ResNet-32)",
            "model_flops,params": "data/processed_data/speed_data/0latency_p100_new2.csv (Res32 row)",
            "cluster_curve_1ps": "derived/cluster_speed_vs_workers.csv (P100, 1 PS, ResNet-32, mean/std steps/s)",
            "replacement_join_seconds": "derived/replacement_worker_join_time_seconds.csv (P100, immediate)",
            "gce_preemption_notice_seconds": "GCE documentation: preemption notice is 30 s",
            "target_steps": "icac2019 training runs: ResNet-32 for 64k steps",
            "source": "cake-lab/CM-DARE @ 263b7f1 (Apache-2.0), via data/cmdare (vendored)",
            "script": "scripts/derive_demo_calibration.py",
        },
    }
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
