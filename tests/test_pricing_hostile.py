"""Hostile prices through the real google-cloud-billing client against a local Catalog server
(issue 27): one SKU priced 1e300 (``units`` past int64, which the client cannot parse), 9e18 $/h or
2e300 $/h through a tiny conversion rate is refused alone, with a note; every other live price stays."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from catalog_server import CatalogServer, gpu_sku, host_sku, sku
from google.auth.credentials import AnonymousCredentials

from cmdare.collectors import writes
from cmdare.collectors.pricing import load_price_book
from cmdare.collectors.pricing.cache import read_cache

US = ["us-central1"]


@pytest.fixture(autouse=True)
def _writable() -> Any:
    writes.set_read_only(False)
    yield
    writes.set_read_only(False)


def _healthy() -> list[dict[str, Any]]:
    return [
        gpu_sku("V100", 2.48, US),
        host_sku("n1", "Core", 0.031611, US),
        host_sku("n1", "Ram", 0.004237, US),
    ]


@pytest.mark.parametrize(
    ("bad", "note"),
    [
        (
            gpu_sku("T4", (10**300, 0), US),
            "refused 1 SKU(s) with an unreadable price (e.g. Nvidia Tesla T4 GPU",
        ),
        (gpu_sku("T4", (9 * 10**18, 0), US), "refused 1 SKU price(s) outside $0–1,000 an hour (e.g. gpu T4"),
        (
            sku("Nvidia Tesla T4 GPU running in Americas", 2.0, US, currency="EUR", conversion_rate=1e-300),
            "$2e+300/h",
        ),
    ],
    ids=["units-1e300", "9e18-per-hour", "tiny-conversion-rate"],
)
def test_one_absurd_price_is_refused_alone(tmp_path: Path, bad: dict[str, Any], note: str) -> None:
    with CatalogServer([*_healthy(), bad], page_size=2) as server:  # the bad SKU shares a page
        book = load_price_book(
            endpoint=server.endpoint, credentials=AnonymousCredentials(), cache_dir=tmp_path, timeout=2.0
        )
    assert book.source == "live", book.reason
    assert note in (book.reason or "")
    assert book.gpus() == ["V100"]  # the T4 refused, the rest kept
    assert book.node_price("V100", 1, "us-central1", "standard").gpu_usd_per_hour == pytest.approx(2.48)


def test_an_absurd_cached_rate_goes_alone(tmp_path: Path) -> None:
    path = tmp_path / "gcp_prices_default.json"
    rates = [
        ["gpu", "V100", "us-central1", "standard", 2.48],
        ["gpu", "T4", "us-central1", "standard", 1e300],
    ]
    path.write_text(json.dumps({"version": 1, "fetched_at": "2026-01-01T00:00:00+00:00", "rates": rates}))
    cached = read_cache(path)
    assert cached is not None and list(cached.rates.values()) == [2.48]
