"""On-disk cache of live Catalog rates (JSON in the platformdirs user cache dir ``cmdare-tui``).

One file per endpoint (the default Google endpoint or an override), holding the rates and the
UTC time they were fetched. Written only through :mod:`cmdare.collectors.writes`, so read-only
mode refuses it. No credentials are ever stored.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from cmdare.collectors import writes
from cmdare.collectors.pricing.book import RateKey
from cmdare.collectors.pricing.skus import MAX_USD_PER_UNIT_HOUR

__all__ = ["CachedRates", "cache_path", "default_cache_dir", "read_cache", "write_cache"]

_VERSION = 1


@dataclass(frozen=True)
class CachedRates:
    """Rates read back from the cache; ``fetched_at`` is an aware UTC datetime."""

    rates: dict[RateKey, float]
    fetched_at: datetime

    def age_hours(self, now: datetime | None = None) -> float:
        """Hours since the fetch."""
        return ((now or datetime.now(UTC)) - self.fetched_at).total_seconds() / 3600.0


def default_cache_dir() -> Path:
    """``platformdirs.user_cache_dir("cmdare-tui")``."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("cmdare-tui"))


CACHE_LIMIT = (
    16 * 1024 * 1024
)  # a larger file is not a cache the app wrote: refused, the prices fetched again


def cache_path(cache_dir: Path, endpoint: str | None) -> Path:
    """Cache file for ``endpoint`` (``None`` = Google's default endpoint)."""
    tag = "default" if not endpoint else hashlib.sha256(endpoint.encode()).hexdigest()[:12]
    return cache_dir / f"gcp_prices_{tag}.json"


def read_cache(path: Path) -> CachedRates | None:
    """The cached rates, or ``None`` if the file is missing or unreadable."""
    from cmdare.collectors.textfile import read_small_text

    try:
        data = json.loads(read_small_text(path, limit=CACHE_LIMIT))  # a FIFO or device there: refused
        if data.get("version") != _VERSION:
            return None
        fetched = datetime.fromisoformat(data["fetched_at"])
        rates = {(k, n, r, p): float(v) for k, n, r, p, v in data["rates"]}
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None
    # a rate no SKU could have (a file edited by hand, say) goes alone, never the cache
    rates = {k: v for k, v in rates.items() if math.isfinite(v) and 0.0 <= v <= MAX_USD_PER_UNIT_HOUR}
    if fetched.tzinfo is None:
        fetched = fetched.replace(tzinfo=UTC)
    return CachedRates(rates, fetched) if rates else None


def write_cache(path: Path, rates: dict[RateKey, float], fetched_at: datetime) -> Path:
    """Write the rates atomically; raises :class:`writes.ReadOnlyError` in read-only mode."""
    payload = {
        "version": _VERSION,
        "fetched_at": fetched_at.isoformat(timespec="seconds"),
        "rates": [[*key, value] for key, value in sorted(rates.items())],
    }
    return writes.write_text(path, json.dumps(payload, indent=0) + "\n")
