#!/usr/bin/env python3
"""Derive cmdare-tui's shipped GCP price books from the shared reference data.

Writes (through cmdare.collectors.writes):

* ``collectors/pricing/data/gcp_offline_book.csv`` — GPU $/GPU-hour for a handful of regions from
  ``gcp-catalog/gcp_gpu_accelerators.csv`` (per-zone prices; every zone of a region agrees) and host
  vCPU/RAM rates: a2/a3 solved from ``gcp_gpu_host_vms_a2_a3_a4.csv``, n1/g2 from the rows
  transcribed in ``scripts/price_host_rows_skypilot.csv`` (same catalog, same commit).
* ``collectors/pricing/data/gcp_study_era_2019.csv`` — 2019 GPU list prices (GCP GPU pricing page,
  US regions, as published Feb 2019) plus the host/PS rates the CM-DARE ICAC'19 study charged, fitted
  from its ``training/*/cost.csv`` against run durations.

Usage: ``.venv/bin/python scripts/derive_price_book.py [--shared DIR] [--catalog DIR]``. ``--shared`` is the
directory holding ``data/cmdare`` (default: this repository, whose vendored copy is ``data/cmdare``);
``--catalog`` is the GCP extract (default ``<repo>/../shared/data/gcp-catalog``; it is reference data and is
not vendored, so without it only the study-era book is rebuilt).
"""

from __future__ import annotations

import argparse
import csv
import statistics
from collections import defaultdict
from datetime import date
from pathlib import Path

import numpy as np

from cmdare.collectors import writes

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "collectors" / "pricing" / "data"
REGIONS = ("us-central1", "us-east1", "us-west1", "us-east4", "europe-west1", "europe-west4", "asia-east1")
GPUS = ("A100", "A100-80GB", "B200", "H100", "H200", "L4", "P100", "P4", "T4", "V100")
# GCP VM pricing page, G2 in us-central1: vCPU $0.02498835/h, memory $0.00292717/GiB·h. Only their
# split is used (all g2-standard shapes have 4 GiB/vCPU); check: 8 vCPU + 32 GiB = $0.293576/h =
# the catalog's g2-standard-8 us-central1 row 0.29358.
G2_REF = (0.02498835, 0.00292717)
# GCP GPU pricing page as published in early 2019 (US regions): on-demand, preemptible $/GPU-hour.
GPU_2019 = {"K80": (0.45, 0.135), "P100": (1.46, 0.43), "V100": (2.48, 0.74)}
STUDY_REGIONS = ("us-east1", "us-central1", "us-west1")


def _read_csv(path: Path) -> list[dict[str, str]]:
    with path.open() as fh:
        return list(csv.DictReader(line for line in fh if not line.startswith("#")))


def gpu_rates(extract: Path) -> list[tuple[str, str, str, float]]:
    """(gpu, region, prov, $/GPU-h) from the smallest-count row of each GPU and region."""
    best: dict[tuple[str, str], dict[str, str]] = {}
    for row in _read_csv(extract):
        key = (row["AcceleratorName"], row["Region"])
        if key[0] in GPUS and key[1] in REGIONS:
            if key not in best or float(row["AcceleratorCount"]) < float(best[key]["AcceleratorCount"]):
                best[key] = row
    out = []
    for (gpu, region), row in sorted(best.items()):
        n = float(row["AcceleratorCount"])
        for prov, col in (("standard", "Price"), ("spot", "SpotPrice")):
            if row[col]:
                out.append((gpu, region, prov, round(float(row[col]) / n, 6)))
    return out


def _solve(shapes: list[tuple[float, float, float]], ref: tuple[float, float] | None) -> tuple[float, float]:
    """vCPU and GiB rates from (vcpus, mem, price) rows: least squares when the rows hold two
    vCPU:RAM ratios, else split the price with the reference rates' shares (exact for the shape)."""
    ratios = {round(m / v, 4) for v, m, _ in shapes}
    if len(ratios) >= 2:
        a = np.array([[v, m] for v, m, _ in shapes])
        b = np.array([p for _, _, p in shapes])
        c, r = np.linalg.lstsq(a, b, rcond=None)[0]
        return float(c), float(r)
    if ref is None:
        raise ValueError("one vCPU:RAM ratio and no reference split")
    v, m, p = shapes[0]
    share = ref[0] * v / (ref[0] * v + ref[1] * m)
    return share * p / v, (1 - share) * p / m


def host_rates(host_rows: list[dict[str, str]], series: str, prefixes: tuple[str, ...]) -> dict:
    """{(region, prov): (cpu, ram)} for one host series; us-central1 first gives the reference split."""
    groups: dict[tuple[str, str], list[tuple[float, float, float]]] = defaultdict(list)
    for row in host_rows:
        name = row["InstanceType"]
        if row["Region"] in REGIONS and name.startswith(prefixes) and not name.endswith("nolssd"):
            for prov, col in (("standard", "Price"), ("spot", "SpotPrice")):
                if row[col] and float(row[col]) > 0:
                    groups[(row["Region"], prov)].append(
                        (float(row["vCPUs"]), float(row["MemoryGiB"]), float(row[col]))
                    )
    refs = {prov: (G2_REF if series == "g2" else None) for prov in ("standard", "spot")}
    out = {}
    for key in sorted(groups, key=lambda k: k[0] != "us-central1"):
        ref = refs[key[1]]
        out[key] = _solve(groups[key], ref)
        if ref is None:
            refs[key[1]] = out[key]
        worst = max(abs(v * out[key][0] + m * out[key][1] - p) / p for v, m, p in groups[key])
        print(
            f"  {series} {key[0]:13s} {key[1]:8s} vCPU {out[key][0]:.6f} GiB {out[key][1]:.6f}  max resid {worst:.2%}"
        )
    return out


def offline_book(cat: Path) -> str:
    """The offline book's CSV text from the GCP extract folder ``cat``."""
    lines = [
        "# cmdare-tui offline GCP price book. USD; gpu = per GPU-hour, cpu = per vCPU-hour, ram = per GiB-hour,",
        "# machine = per hour of the whole host. provisioning: standard = OnDemand SKUs, spot = Preemptible SKUs.",
        "# source: Google Cloud Billing Catalog list prices via skypilot-org/skypilot-catalog catalogs/v8/gcp/vms.csv",
        "#   @006059e0f18acb1341e22a27751e9f80df6ba92f (price date unknown; refreshed every 7 h upstream).",
        "#   GPU rows: ../shared/data/gcp-catalog/gcp_gpu_accelerators.csv; a2/a3: gcp_gpu_host_vms_a2_a3_a4.csv",
        "#   (rates solved from two vCPU:RAM ratios); n1/g2: scripts/price_host_rows_skypilot.csv.",
        "#   a4 machine = 0: the source prices a4-highgpu-8g at 0 and puts the whole node in the B200 rate.",
        f"# derived: {date.today().isoformat()} by scripts/derive_price_book.py. Excludes disks, egress, discounts.",
        f"# as_of: {date.today().isoformat()}",
        "kind,name,region,provisioning,usd",
    ]
    for gpu, region, prov, usd in gpu_rates(cat / "gcp_gpu_accelerators.csv"):
        lines.append(f"gpu,{gpu},{region},{prov},{usd}")
    hosts = _read_csv(cat / "gcp_gpu_host_vms_a2_a3_a4.csv")
    transcribed = _read_csv(REPO / "scripts" / "price_host_rows_skypilot.csv")
    plan = (
        ("n1", transcribed, ("n1-",)),
        ("g2", transcribed, ("g2-",)),
        ("a2", hosts, ("a2-",)),
        ("a3", hosts, ("a3-",)),
    )
    for series, rows, prefixes in plan:
        for (region, prov), (cpu, ram) in sorted(host_rates(rows, series, prefixes).items()):
            lines.append(f"cpu,{series},{region},{prov},{cpu:.6f}")
            lines.append(f"ram,{series},{region},{prov},{ram:.7f}")
    for row in hosts:
        if row["InstanceType"] == "a4-highgpu-8g" and row["Region"] in REGIONS:
            for prov in ("standard", "spot"):
                line = f"machine,a4-highgpu-8g,{row['Region']},{prov},0.0"
                if line not in lines:
                    lines.append(line)
    return "\n".join(lines) + "\n"


def _rates(folder: Path, cost_name: str = "agg_data.csv") -> list[float]:
    """Per-run $/h = cost / duration of each run in a training folder."""
    rows = _read_csv(folder / cost_name)
    if "Duration" not in rows[0]:
        durations = [float(r["Duration"]) for r in _read_csv(folder / "train_data_processed.csv")]
        return [float(r["Cost"]) / d * 3600 for r, d in zip(rows, durations, strict=True)]
    return [float(r["Cost"]) / float(r["Duration"]) * 3600 for r in rows]


def study_era_book(shared: Path) -> str:
    t = shared / "data" / "cmdare" / "icac2019_transient-deep-learning" / "data" / "training"
    k80_od = statistics.median(_rates(t / "k80_on_demand" / "k80-demand", "cost.csv"))
    ps = statistics.median(
        r - n * k80_od for n in (2, 4, 8) for r in _rates(t / "k80_on_demand" / f"{n}-demand")
    )
    k80_spot = statistics.median(
        (r - ps) / n for n in (2, 4, 8) for r in _rates(t / "k80_spot" / f"{n}-spot")
    )
    p100_spot = statistics.median(_rates(t / "p100_v100_spot" / "p100"))
    print(
        f"  study: K80 on-demand node {k80_od:.5f}, K80 spot node {k80_spot:.5f}, P100 spot node {p100_spot:.5f}, PS {ps:.5f} $/h"
    )
    host_od = k80_od - GPU_2019["K80"][0]
    lines = [
        "# cmdare-tui study-era GCP price book (CM-DARE / ICAC'19 experiments, Feb 2019). USD per hour.",
        "# gpu rows: GCP GPU pricing page as published in early 2019 (US regions): K80 0.45/0.135,",
        "#   P100 1.46/0.43, V100 2.48/0.74 $/GPU-h on-demand/preemptible.",
        "# machine rows: the hourly rate the study charged for its hosts, fitted (median of per-run cost/duration)",
        "#   from icac2019_transient-deep-learning/data/training/{k80_on_demand,k80_spot,p100_v100_spot}/ minus",
        "#   the GPU price. Workers were custom-4-62464-ext (K80) / custom-8-62464-ext (P100, V100) with",
        "#   100 GB boot disks (upstream code/resource_acquisition.py); PS = custom-N-16384-ext, on-demand.",
        "#   ASSUMPTION: custom-8 on-demand host = the K80 on-demand host rate (no on-demand P100/V100 runs).",
        f"# derived: {date.today().isoformat()} by scripts/derive_price_book.py",
        "# as_of: 2019-02-15",
        "kind,name,region,provisioning,usd",
    ]
    for region in STUDY_REGIONS:
        for gpu, (od, spot) in GPU_2019.items():
            lines += [f"gpu,{gpu},{region},standard,{od}", f"gpu,{gpu},{region},spot,{spot}"]
        lines += [
            f"machine,custom-4-62464-ext,{region},standard,{host_od:.6f}",
            f"machine,custom-4-62464-ext,{region},spot,{k80_spot - GPU_2019['K80'][1]:.6f}",
            f"machine,custom-8-62464-ext,{region},standard,{host_od:.6f}",
            f"machine,custom-8-62464-ext,{region},spot,{p100_spot - GPU_2019['P100'][1]:.6f}",
            f"machine,custom-ps-16384-ext,{region},standard,{ps:.6f}",
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=REPO, help="directory holding data/cmdare")
    parser.add_argument("--catalog", type=Path, default=REPO.parent / "shared" / "data" / "gcp-catalog")
    args = parser.parse_args()
    if (args.catalog / "gcp_gpu_accelerators.csv").is_file():
        print("offline book:")
        writes.write_text(OUT / "gcp_offline_book.csv", offline_book(args.catalog))
    else:
        print(f"offline book: not rebuilt (no GCP extract at {args.catalog}; pass --catalog DIR)")
    print("study-era book:")
    writes.write_text(OUT / "gcp_study_era_2019.csv", study_era_book(args.shared))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
