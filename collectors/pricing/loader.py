"""``load_price_book``: live Catalog prices → on-disk cache → shipped offline book.

Blocking (network calls of up to ``timeout`` s per page): call it from a worker thread. It never
raises for network, credential or API errors; the returned book's ``source`` says where the prices
came from and ``reason`` why it fell back (no secrets in it).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cmdare.collectors import writes
from cmdare.collectors.pricing.book import PriceBook, RateKey
from cmdare.collectors.pricing.cache import (
    CachedRates,
    cache_path,
    default_cache_dir,
    read_cache,
    write_cache,
)
from cmdare.collectors.pricing.catalog import CatalogError, fetch_rates, scrub
from cmdare.collectors.pricing.offline import load_offline_book, load_study_era_book
from cmdare.collectors.textfile import file_problem
from cmdare.collectors.untrusted import clean_text

__all__ = ["load_book", "load_price_book", "default_credentials"]

_LOG = logging.getLogger(__name__)
_SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
CREDENTIALS_LIMIT = 1024 * 1024  # a credentials file larger than this is refused before google.auth reads it


def default_credentials() -> tuple[Any | None, str | None]:
    """Application Default Credentials (``GOOGLE_APPLICATION_CREDENTIALS``, gcloud, metadata
    server) → ``(credentials, None)``, or ``(None, reason)`` when there are none."""
    import google.auth
    from google.auth import exceptions as gauth_exc

    named = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
    if named:  # google.auth opens it plainly: a FIFO would block for ever, /dev/zero never end
        problem = file_problem(named)
        if problem is None and os.stat(named).st_size > CREDENTIALS_LIMIT:
            problem = f"larger than {CREDENTIALS_LIMIT // 1024} KiB"
        if problem is not None:
            return (
                None,
                f"no Google credentials (GOOGLE_APPLICATION_CREDENTIALS {clean_text(named)}: {problem})",
            )
    try:
        credentials, _project = google.auth.default(scopes=list(_SCOPES))
    except gauth_exc.DefaultCredentialsError:
        return None, "no Google credentials"
    except Exception as exc:  # noqa: BLE001 - a broken credentials file must not crash the app
        return None, f"no Google credentials ({scrub(type(exc).__name__ + ': ' + str(exc))[:200]})"
    return credentials, None


def _cache_book(cached: CachedRates, reason: str | None) -> PriceBook:
    as_of = cached.fetched_at.isoformat(timespec="seconds")
    return PriceBook(cached.rates, source="cache", as_of=as_of, reason=reason)


def _fallback(cached: CachedRates | None, why: str, say: Callable[[str], None]) -> PriceBook:
    if cached is not None:
        age = cached.age_hours()
        say(f"Using cached prices ({age:.1f} h old)")
        return _cache_book(cached, f"{why}; using cached prices from {age:.1f} h ago")
    say("Using offline prices")
    return load_offline_book(reason=f"{why}; using the offline price book")


def _store(path: Path, rates: dict[RateKey, float], fetched_at: datetime) -> str | None:
    if writes.is_read_only():
        return "live prices not cached: read-only mode"
    try:
        write_cache(path, rates, fetched_at)
    except OSError as exc:
        return f"live prices not cached: {type(exc).__name__}"
    return None


def load_price_book(
    *,
    endpoint: str | None = None,
    credentials: Any = None,
    cache_dir: Path | None = None,
    max_age_hours: float = 24,
    timeout: float = 20,
    progress: Callable[[str], None] | None = None,
) -> PriceBook:
    """Prices from the Catalog API, a fresh cache, a stale cache or the offline book, in that order
    of preference (a cache younger than ``max_age_hours`` is used without a network call).

    ``credentials=None`` uses Application Default Credentials; ``endpoint`` overrides the API
    endpoint (e.g. ``http://127.0.0.1:8123`` for tests, with ``AnonymousCredentials``).
    """
    say = progress or (lambda _msg: None)
    try:
        path = cache_path(cache_dir or default_cache_dir(), endpoint)
        cached = read_cache(path)
        if cached is not None and cached.age_hours() < max_age_hours:
            say(f"Using cached prices ({cached.age_hours():.1f} h old)")
            return _cache_book(cached, None)
        if credentials is None:
            credentials, why = default_credentials()
            if credentials is None:
                return _fallback(cached, why or "no Google credentials", say)
        say("Fetching prices from the Cloud Billing Catalog API…")
        try:
            parsed = fetch_rates(credentials, endpoint=endpoint, timeout=timeout, progress=say)
        except CatalogError as exc:
            return _fallback(cached, f"live prices unavailable: {exc}", say)
        fetched_at = datetime.now(UTC).replace(microsecond=0)
        notes = [n for n in (*parsed.notes, _store(path, parsed.rates, fetched_at)) if n]
        say(f"Live prices: {len(parsed.rates)} rates")
        return PriceBook(
            parsed.rates, source="live", as_of=fetched_at.isoformat(), reason="; ".join(notes) or None
        )
    except Exception as exc:  # noqa: BLE001 - contract: never raise; fall back with a reason
        _LOG.warning("price book: unexpected %s", type(exc).__name__)
        return load_offline_book(reason=f"unexpected {type(exc).__name__}; using the offline price book")


def load_book(mode: str, progress: Callable[[str], None] | None = None) -> PriceBook:
    """The book a ``--prices`` mode names: ``offline`` (shipped), ``live`` (:func:`load_price_book`:
    blocking, never raises) or ``study-era`` (the 2019 CM-DARE prices)."""
    if mode == "live":
        return load_price_book(progress=progress)
    if mode == "study-era":
        return load_study_era_book()
    if mode != "offline":
        raise ValueError(f"unknown price mode {mode!r} (offline, live, study-era)")
    return load_offline_book()
