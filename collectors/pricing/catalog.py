"""Fetch Compute Engine SKUs from the Cloud Billing Catalog API (google-cloud-billing).

Uses the *sync* ``CloudCatalogClient`` with the REST transport — blocking, so call it from a
worker thread (the async REST client does not work). Every page request has a timeout, and
retries (429 / 503 only) are bounded by the same deadline, so a broken endpoint fails fast.
Errors come back as :class:`CatalogError` with a short message that never contains a credential.
A SKU whose price the client cannot parse is dropped alone, with a note (:mod:`sku_pages`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from cmdare.collectors.pricing import sku_pages
from cmdare.collectors.pricing.skus import ParsedCatalog, parse_skus
from cmdare.collectors.redaction import redact, remember

__all__ = ["COMPUTE_SERVICE", "CatalogError", "fetch_rates", "scrub"]

#: Compute Engine's service id in the Cloud Billing Catalog.
COMPUTE_SERVICE = "services/6F81-5844-456A"
_LOG = logging.getLogger(__name__)


class CatalogError(RuntimeError):
    """The Catalog API could not be read; ``str()`` is safe to show (no secrets)."""


def scrub(text: str, secrets: tuple[str, ...] = ()) -> str:
    """Remove bearer tokens, API keys and the given secret strings from ``text``."""
    return redact(text, secrets)


def _token_of(credentials: Any) -> tuple[str, ...]:
    token = getattr(credentials, "token", None)
    if isinstance(token, str) and token:
        remember(token)  # redacted from every text from now on
        return (token,)
    return ()


def _describe(exc: BaseException, secrets: tuple[str, ...]) -> str:
    from google.api_core import exceptions as gexc

    if isinstance(exc, gexc.GoogleAPICallError):
        code = getattr(exc, "code", None)
        status = f"HTTP {int(code)}" if code is not None else type(exc).__name__
        text = f"{status} {type(exc).__name__}: {exc.message}"
    elif isinstance(exc, gexc.RetryError):
        cause = exc.cause
        text = (
            f"gave up after retries ({type(cause).__name__ if cause else 'deadline'}: {cause or exc.message})"
        )
    else:
        text = f"{type(exc).__name__}: {exc}"
    return scrub(" ".join(text.split()), secrets)[:300]


def _make_client(credentials: Any, endpoint: str | None) -> Any:
    from google.cloud.billing_v1 import CloudCatalogClient

    options = {"api_endpoint": endpoint} if endpoint else None
    return CloudCatalogClient(transport="rest", credentials=credentials, client_options=options)


def _retry(timeout: float) -> Any:
    from google.api_core import exceptions as gexc
    from google.api_core import retry as gretry

    predicate = gretry.if_exception_type(gexc.TooManyRequests, gexc.ServiceUnavailable)
    return gretry.Retry(predicate=predicate, initial=0.2, maximum=2.0, multiplier=2.0, timeout=timeout)


def fetch_rates(
    credentials: Any,
    *,
    endpoint: str | None = None,
    timeout: float = 20.0,
    progress: Callable[[str], None] | None = None,
) -> ParsedCatalog:
    """List every SKU page of Compute Engine and parse it (blocking; seconds per page).

    ``timeout`` (s) bounds each page request and the retries of each page. Raises
    :class:`CatalogError` on any API, network or parse failure.
    """
    from google.cloud.billing_v1 import ListSkusRequest

    secrets = _token_of(credentials)
    say = progress or (lambda _msg: None)
    pages = 0
    unparsable: list[str] = []  # SKUs dropped from their page before the client parsed it
    try:
        client = _make_client(credentials, endpoint)
        sku_pages.install(client, unparsable)
        pager = client.list_skus(
            request=ListSkusRequest(parent=COMPUTE_SERVICE, page_size=5000),
            retry=_retry(timeout),
            timeout=timeout,
        )
        skus: list[Any] = []
        for page in pager.pages:
            pages += 1
            skus.extend(page.skus)
            say(f"Catalog API: page {pages}, {len(skus)} SKUs")
    except Exception as exc:  # noqa: BLE001 - every failure becomes a fallback reason
        secrets = secrets or _token_of(credentials)
        message = _describe(exc, secrets)
        _LOG.info("Catalog API fetch failed after %d page(s): %s", pages, message)
        raise CatalogError(message) from None
    parsed = parse_skus(skus)
    if unparsable:
        parsed.notes.append(
            f"refused {len(unparsable)} SKU(s) with an unreadable price (e.g. {unparsable[0]})"
        )
    _LOG.info("Catalog API: %d SKUs on %d page(s), %d priced", parsed.seen, pages, parsed.used)
    if not any(key[0] == "gpu" for key in parsed.rates):
        detail = "; ".join(parsed.notes) or f"{parsed.seen} SKUs, none a known GPU"
        raise CatalogError(f"catalog returned no usable GPU prices ({detail})")
    return parsed
