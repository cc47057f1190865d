"""Live pricing through the real google-cloud-billing client against a local Catalog server."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from google.auth.credentials import AnonymousCredentials, Credentials

from cmdare.collectors import writes
from cmdare.collectors.pricing import load_price_book
from cmdare.collectors.pricing.cache import cache_path, read_cache, write_cache
from tests.catalog_server import CatalogServer, gpu_sku, host_sku, sku

pytestmark = pytest.mark.slow

US = ["us-central1", "us-east1"]


def _catalog() -> list[dict[str, Any]]:
    return [
        gpu_sku("V100", 2.48, US),
        gpu_sku("V100", 1.0885, US, spot=True),
        gpu_sku("T4", 0.35, ["us-central1"]),
        gpu_sku("V100", 2.604, ["europe-west4"]),
        host_sku("n1", "Core", 0.031611, US + ["europe-west4"]),
        host_sku("n1", "Ram", 0.004237, US + ["europe-west4"]),
        host_sku("n1", "Core", 0.00882, US, spot=True),
        host_sku("n1", "Ram", 0.00113, US, spot=True),
        sku("Storage PD Capacity", 0.04, US, family="Storage", unit="GiBy.mo"),
        sku("Commitment v1: Nvidia Tesla V100 GPU running in Americas", 1.0, US, usage="Commit1Yr"),
        sku("Nvidia Tesla T4 Virtual Workstation GPU running in Americas", 9.9, ["us-central1"]),
        sku("Nvidia Quantum Q9000 GPU running in Americas", 99.0, US),
    ]


@pytest.fixture(autouse=True)
def _writable() -> Any:
    writes.set_read_only(False)
    yield
    writes.set_read_only(False)


def _live(server: CatalogServer, tmp_path: Path, **kw: Any) -> Any:
    kw.setdefault("timeout", 2.0)
    return load_price_book(
        endpoint=server.endpoint, credentials=AnonymousCredentials(), cache_dir=tmp_path, **kw
    )


def test_pagination_spot_regions_and_unknown_skus(tmp_path: Path) -> None:
    with CatalogServer(_catalog(), page_size=3) as server:
        book = _live(server, tmp_path)
    assert book.source == "live" and book.reason is None
    assert len(server.requests) == 4  # 12 SKUs / 3 per page
    assert all(r["path"] == "/v1/services/6F81-5844-456A/skus" for r in server.requests)
    assert "enum-encoding" in server.requests[0]["query"] and "pageToken=3" in server.requests[-1]["query"]
    on_demand = book.node_price("V100", 1, "us-east1", "standard")
    assert on_demand.usd_per_hour == pytest.approx(2.48 + 8 * 0.031611 + 30 * 0.004237)
    spot = book.node_price("V100", 2, "us-central1", "spot")
    assert spot.gpu_usd_per_hour == pytest.approx(2 * 1.0885)
    assert spot.host_usd_per_hour == pytest.approx(16 * 0.00882 + 60 * 0.00113)
    assert book.node_price("V100", 1, "europe-west4", "standard").gpu_usd_per_hour == pytest.approx(2.604)
    assert book.regions() == ["europe-west4", "us-central1", "us-east1"]
    assert book.gpus() == ["T4", "V100"]  # commitment, workstation and unknown GPUs ignored
    assert book.node_price("T4", 1, "us-central1", "standard").gpu_usd_per_hour == pytest.approx(0.35)
    assert datetime.fromisoformat(book.as_of).tzinfo is not None
    assert read_cache(cache_path(tmp_path, server.endpoint)) is not None


def test_tiers_nanos_units_and_malformed_pricing(tmp_path: Path) -> None:
    skus = [
        sku("Nvidia Tesla V100 GPU running in Americas", 0.0, US, tiers=[(0, (2, 480_000_000)), (100, 1.0)]),
        sku("Nvidia Tesla P100 GPU running in Americas", 0.0, US, tiers=[]),  # no tiers → ignored
        sku("Nvidia Tesla T4 GPU running in Americas", (0, 350_000_000), US),  # nanos only
        sku("Nvidia L4 GPU running in Americas", 0.56004 / 60, US, unit="min"),
        sku("Nvidia Tesla P4 GPU running in Americas", 0.6, US, unit="furlong"),  # unknown unit
        host_sku("n1", "Core", 0.031611, US),
        sku("N1 Predefined Instance Ram running in Americas", 0.004237 / 1024, US, unit="MiBy.h"),
        sku("G2 Instance Core running in Americas", 0.024988, US),
        sku("G2 Instance Ram running in Americas", 0.002927, US, unit="GiBy.h"),
    ]
    with CatalogServer(skus) as server:
        book = _live(server, tmp_path)
    assert book.node_price("V100", 1, "us-central1", "standard").gpu_usd_per_hour == pytest.approx(2.48)
    assert book.node_price("T4", 1, "us-central1", "standard").gpu_usd_per_hour == pytest.approx(0.35)
    assert book.node_price("L4", 1, "us-central1", "standard").gpu_usd_per_hour == pytest.approx(0.56004)
    assert book.node_price("L4", 1, "us-central1", "standard").host_usd_per_hour == pytest.approx(
        4 * 0.024988 + 16 * 0.002927
    )
    assert book.node_price("V100", 1, "us-central1", "standard").host_usd_per_hour == pytest.approx(
        8 * 0.031611 + 30 * 0.004237,
        rel=1e-4,  # RAM priced per MiB-hour, rounded to whole nanos
    )
    assert set(book.gpus()) == {"L4", "T4", "V100"}


def test_non_usd_is_converted_with_rate_or_refused(tmp_path: Path) -> None:
    skus = [
        sku("Nvidia Tesla V100 GPU running in Americas", 2.232, US, currency="EUR", conversion_rate=0.9),
        sku("Nvidia Tesla T4 GPU running in Americas", 0.3, US, currency="EUR"),
        host_sku("n1", "Core", 0.031611, US),
        host_sku("n1", "Ram", 0.004237, US),
    ]
    with CatalogServer(skus) as server:
        book = _live(server, tmp_path)
    assert book.source == "live"
    assert book.node_price("V100", 1, "us-east1", "standard").gpu_usd_per_hour == pytest.approx(2.48)
    assert "T4" not in book.gpus()
    assert "refused 1 SKU(s) priced in EUR" in book.reason and "converted EUR" in book.reason
    with CatalogServer([skus[1]]) as server:
        refused = _live(server, tmp_path)
    assert refused.source == "offline" and "EUR" in refused.reason


@pytest.mark.parametrize(
    ("status", "label"), [(403, "HTTP 403"), (429, "TooManyRequests"), (500, "HTTP 500")]
)
def test_http_errors_fall_back_to_offline_then_cache(tmp_path: Path, status: int, label: str) -> None:
    with CatalogServer(_catalog(), status=status) as server:
        book = _live(server, tmp_path, timeout=1.0)
        assert book.source == "offline" and label in book.reason and "offline" in book.reason
        assert book.node_price("V100", 1, "us-central1", "standard").source == "offline"
        stale = datetime.now(UTC) - timedelta(hours=30)
        write_cache(
            cache_path(tmp_path, server.endpoint), {("gpu", "V100", "us-central1", "standard"): 9.0}, stale
        )
        cached = _live(server, tmp_path, timeout=1.0)
    assert cached.source == "cache" and label in cached.reason and "cached prices" in cached.reason
    assert cached.as_of.startswith(stale.date().isoformat())


def test_error_on_a_later_page_and_malformed_body_fall_back(tmp_path: Path) -> None:
    with CatalogServer(_catalog(), page_size=3, status=500, fail_page=2) as server:
        book = _live(server, tmp_path)
    assert book.source == "offline" and "HTTP 500" in book.reason
    with CatalogServer(_catalog(), raw_body="{not json") as server:
        bad = _live(server, tmp_path)
    assert bad.source == "offline" and bad.reason


def test_timeout_falls_back_quickly(tmp_path: Path) -> None:
    with CatalogServer(_catalog(), delay=1.5) as server:
        book = _live(server, tmp_path, timeout=0.3)
        asked = len(server.requests)
    # the client's timeout ended the wait, not the server's answer (1.5 s later), and it was not retried
    assert book.source == "offline" and "timed out" in book.reason.lower()
    assert asked == 1, server.requests


def test_fresh_cache_is_used_without_a_request(tmp_path: Path) -> None:
    with CatalogServer(_catalog()) as server:
        first = _live(server, tmp_path)
        n = len(server.requests)
        second = _live(server, tmp_path)
        assert second.source == "cache" and len(server.requests) == n
        assert second.node_price("V100", 1, "us-east1", "standard").usd_per_hour == pytest.approx(
            first.node_price("V100", 1, "us-east1", "standard").usd_per_hour
        )
        third = _live(server, tmp_path, max_age_hours=0)
    assert third.source == "live" and len(server.requests) > n


def test_read_only_mode_skips_the_cache_write(tmp_path: Path) -> None:
    writes.set_read_only(True)
    try:
        with CatalogServer(_catalog()) as server:
            book = _live(server, tmp_path)
    finally:
        writes.set_read_only(False)
    assert book.source == "live" and "read-only" in book.reason
    assert list(tmp_path.iterdir()) == []


def test_missing_credentials_mean_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import google.auth
    from google.auth import exceptions

    def no_creds(**_kw: Any) -> Any:
        raise exceptions.DefaultCredentialsError("none")

    monkeypatch.setattr(google.auth, "default", no_creds)
    book = load_price_book(cache_dir=tmp_path)
    assert book.source == "offline" and book.reason.startswith("no Google credentials")


class _SentinelCredentials(Credentials):
    """Credentials whose bearer token is a sentinel that must never be printed or logged."""

    TOKEN = "ya29.SENTINEL-SECRET-TOKEN-0123456789"

    def __init__(self) -> None:
        super().__init__()
        self.token = self.TOKEN
        self.expiry = None

    def refresh(self, request: Any) -> None:
        self.token = self.TOKEN

    @property
    def expired(self) -> bool:
        return False

    @property
    def valid(self) -> bool:
        return True


def test_sentinel_token_never_reaches_logs_or_reasons(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG)
    progress: list[str] = []
    creds = _SentinelCredentials()
    with CatalogServer(_catalog(), status=403) as server:  # the fake server echoes the header back
        book = load_price_book(
            endpoint=server.endpoint,
            credentials=creds,
            cache_dir=tmp_path,
            timeout=1,
            progress=progress.append,
        )
    assert any(creds.TOKEN in r["auth"] for r in server.requests)  # the token really was sent
    assert book.source == "offline" and "HTTP 403" in book.reason
    out = capsys.readouterr()
    blob = "\n".join([book.reason, *progress, caplog.text, out.out, out.err])
    assert creds.TOKEN not in blob and "SENTINEL" not in blob
