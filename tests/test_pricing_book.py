"""Offline and study-era price books: checked against a sample of the GCP extract and the vendored CM-DARE runs.

The GCP extract the offline book was derived from is reference data that is not vendored: the tests read
``tests/fixtures/gcp_catalog_sample.csv`` (written by ``scripts/derive_gcp_catalog_sample.py``): for every GPU and
region of the book the largest-count row of the region's last zone — not the row the book was derived from — and
one row per book region of each a2/a3 host type the book prices."""

from __future__ import annotations

import csv
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from cmdare.collectors.pricing import PriceNotFound, load_offline_book, load_study_era_book
from cmdare.collectors.pricing.offline import read_book_csv
from tests.conftest import CMDARE

SAMPLE = Path(__file__).resolve().parent / "fixtures" / "gcp_catalog_sample.csv"
TRAINING = CMDARE / "icac2019_transient-deep-learning" / "data" / "training"


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


def test_offline_gpu_prices_within_1pct_of_sampled_zones_of_the_extract() -> None:
    rates, _ = read_book_csv("gcp_offline_book.csv")
    gpu_rates = {k: v for k, v in rates.items() if k[0] == "gpu"}
    extract = [r for r in _rows(SAMPLE) if r["AcceleratorName"]]
    checked = 0
    for row in extract:
        for prov, col in (("standard", "Price"), ("spot", "SpotPrice")):
            book = gpu_rates.get(("gpu", row["AcceleratorName"], row["Region"], prov))
            if book is None or not row[col]:
                continue
            zone_price = float(row[col])
            assert book * float(row["AcceleratorCount"]) == pytest.approx(zone_price, rel=0.01), row
            checked += 1
    assert checked >= 60  # one sampled zone row per book GPU/region, on-demand and spot
    assert len(gpu_rates) >= 60
    listed = {(r["AcceleratorName"], r["Region"]) for r in extract}
    assert all((k[1], k[2]) in listed for k in gpu_rates)  # every book GPU/region was checked


def test_offline_a2_a3_hosts_reproduce_extract_host_prices() -> None:
    book = load_offline_book()
    hosts = {(r["InstanceType"], r["Region"]): r for r in _rows(SAMPLE) if r["InstanceType"]}
    checked = 0
    for gpu, count, machine in (("A100", 1, "a2-highgpu-1g"), ("A100", 8, "a2-highgpu-8g"),
                                ("A100-80GB", 4, "a2-ultragpu-4g"), ("H100", 8, "a3-highgpu-8g"),
                                ("H200", 8, "a3-ultragpu-8g")):  # fmt: skip
        for region in book.regions():
            row = hosts.get((machine, region))
            if row is None or ("gpu", gpu, region, "standard") not in book.rates:
                continue
            node = book.node_price(gpu, count, region, "standard")
            assert node.host_usd_per_hour == pytest.approx(float(row["Price"]), rel=0.01)
            checked += 1
    assert checked >= 15


def test_offline_book_shapes_and_arithmetic() -> None:
    book = load_offline_book()
    assert book.source == "offline" and book.as_of
    v100 = book.node_price("v100", 4, "us-central1", "standard")
    # n1-standard-32 host (8 vCPU / 30 GiB per V100) = 32 × $0.031611 + 120 × $0.004237 ≈ $1.52/h
    assert v100.host_usd_per_hour == pytest.approx(32 * 0.031611 + 120 * 0.004237, rel=1e-3)
    assert v100.gpu_usd_per_hour == pytest.approx(4 * 2.48)
    assert v100.usd_per_hour == pytest.approx(v100.gpu_usd_per_hour + v100.host_usd_per_hour)
    spot = book.node_price("V100", 4, "us-central1", "spot")
    pre = book.node_price("V100", 4, "us-central1", "preemptible")
    assert spot.usd_per_hour == pre.usd_per_hour < v100.usd_per_hour
    assert pre.provisioning == "preemptible"
    ps = book.ps_node_price("us-central1")
    assert ps.count == 0 and ps.usd_per_hour == pytest.approx(8 * 0.031611 + 30 * 0.004237, rel=1e-3)
    assert {"A100", "H100", "L4", "T4", "V100"} <= set(book.gpus())
    assert "us-central1" in book.regions()
    provs = {r.provisioning for r in book.rows()}
    assert provs == {"standard", "spot", "preemptible"}


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("TPU9", 1, "us-central1", "standard"), "unknown GPU"),
        (("V100", 3, "us-central1", "standard"), "not 3"),
        (("V100", 1, "mars-north1", "standard"), "mars-north1"),
        (("V100", 1, "us-central1", "reserved"), "provisioning"),
        (("K80", 1, "us-central1", "spot"), "study_era"),
    ],
)
def test_price_not_found_is_a_keyerror_with_a_clear_message(args: tuple, fragment: str) -> None:
    with pytest.raises(KeyError) as info:
        load_offline_book().node_price(*args)
    assert isinstance(info.value, PriceNotFound)
    assert fragment in str(info.value)


def test_study_era_book_reproduces_cmdare_2019_costs() -> None:
    book = load_study_era_book()
    assert book.as_of.startswith("2019")
    k80 = book.node_price("K80", 1, "us-east1", "standard")
    assert k80.gpu_usd_per_hour == 0.45
    assert book.node_price("K80", 1, "us-east1", "spot").gpu_usd_per_hour == 0.135
    # one on-demand K80, ResNet-32, 64k steps: 14,078 s and $2.83 (background.md, k80-demand/cost.csv)
    assert k80.usd_per_hour * 14078 / 3600 == pytest.approx(2.83, rel=0.01)
    runs = _rows(TRAINING / "k80_spot" / "8-spot" / "agg_data.csv")
    ps = book.ps_node_price("us-east1")
    spot = book.node_price("K80", 1, "us-east1", "spot")
    predicted = [(8 * spot.usd_per_hour + ps.usd_per_hour) * float(r["Duration"]) / 3600 for r in runs]
    errors = [abs(p - float(r["Cost"])) / float(r["Cost"]) for p, r in zip(predicted, runs, strict=True)]
    assert statistics.median(errors) < 0.01
    # an n1-standard-4 host at its list price ($0.19/h) would understate the study's cost by > 10 %
    assert (0.45 + 0.19) * 14078 / 3600 < 0.9 * 2.83


def test_collectors_pricing_stays_headless() -> None:
    code = (
        "import sys, cmdare.collectors.pricing as p; p.load_offline_book().rows();"
        "bad=[m for m in ('textual','rich','pandas','sklearn','scipy') if m in sys.modules];"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
