#!/usr/bin/env python3
"""Write the small GCP price fixture the price-book tests check against (``tests/fixtures/gcp_catalog_sample.csv``).

The GCP extract (``../shared/data/gcp-catalog``) is reference data and is not vendored. The offline price book was
derived from the smallest-count accelerator row of each GPU and region; this fixture holds, for every GPU and region
of the book, the *largest*-count row of the region's *last* zone — a different row from the one the book came from —
plus, for the a2/a3 host machine types the book prices, the last zone's row of each book region. Only the columns
the tests read are kept (about 80 rows, 5 KB).

Usage: ``.venv/bin/python scripts/derive_gcp_catalog_sample.py [--catalog DIR]``
(default ``<repo>/../shared/data/gcp-catalog``).
"""

from __future__ import annotations

import argparse
import csv
import io
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "fixtures" / "gcp_catalog_sample.csv"
REGIONS = ("us-central1", "us-east1", "us-west1", "us-east4", "europe-west1", "europe-west4", "asia-east1")
GPUS = ("A100", "A100-80GB", "B200", "H100", "H200", "L4", "P100", "P4", "T4", "V100")
HOSTS = ("a2-highgpu-1g", "a2-highgpu-8g", "a2-ultragpu-4g", "a3-highgpu-8g", "a3-ultragpu-8g")
COLUMNS = (
    "InstanceType",
    "AcceleratorName",
    "AcceleratorCount",
    "Region",
    "AvailabilityZone",
    "Price",
    "SpotPrice",
)


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def sample(catalog: Path) -> str:
    """The fixture's CSV text from the extract folder ``catalog``."""
    pick: dict[tuple[str, str], dict[str, str]] = {}
    for row in _rows(catalog / "gcp_gpu_accelerators.csv"):
        key = (row["AcceleratorName"], row["Region"])
        if key[0] in GPUS and key[1] in REGIONS:
            old = pick.get(key)
            rank = (row["AvailabilityZone"], float(row["AcceleratorCount"]))
            if old is None or rank > (old["AvailabilityZone"], float(old["AcceleratorCount"])):
                pick[key] = row
    for row in _rows(catalog / "gcp_gpu_host_vms_a2_a3_a4.csv"):
        key = (row["InstanceType"], row["Region"])
        if key[0] in HOSTS and key[1] in REGIONS:
            if key not in pick or row["AvailabilityZone"] > pick[key]["AvailabilityZone"]:
                pick[key] = row
    out = io.StringIO()
    writer = csv.DictWriter(out, COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for key in sorted(pick):
        writer.writerow(pick[key])
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--catalog", type=Path, default=REPO.parent / "shared" / "data" / "gcp-catalog")
    args = parser.parse_args()
    OUT.write_text(sample(args.catalog))
    print(f"wrote {OUT.relative_to(REPO)}")


if __name__ == "__main__":
    main()
