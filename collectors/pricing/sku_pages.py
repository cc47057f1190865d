"""A Catalog answer's SKU page, read as untrusted before the Catalog client parses it.

The client parses a page whole: one SKU whose price it cannot hold (``units`` past int64, as a
price of 1e300 is written; ``nanos`` past int32; a conversion rate that is no number) fails the
page, and with it every live price. :func:`install` hooks the client's HTTP session so that such a
SKU is dropped before parsing, counted and named in a note, and the rest of the page is kept."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from cmdare.collectors.untrusted import clean_text

__all__ = ["install", "parsable"]

_INT64 = 2**63
_INT32 = 2**31


def _int_within(value: object, bound: int) -> bool:
    """A JSON integer (or its decimal text, as int64s are sent) within ±``bound``."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return -bound <= value < bound
    if isinstance(value, str) and len(value) <= 20:
        try:
            return -bound <= int(value) < bound
        except ValueError:
            return False
    return isinstance(value, float) and value.is_integer() and -bound <= value < bound


def parsable(sku: object) -> bool:
    """Whether every price of ``sku`` (a page's JSON object) is one the client can hold."""
    if not isinstance(sku, dict):
        return True  # not ours to judge: the client says what it makes of it
    for info in sku.get("pricingInfo") or []:
        if not isinstance(info, dict):
            continue
        rate = info.get("currencyConversionRate")
        if rate is not None and not (isinstance(rate, int | float) and math.isfinite(rate)):
            return False
        expr = info.get("pricingExpression") or {}
        for tier in (expr.get("tieredRates") or []) if isinstance(expr, dict) else []:
            money = tier.get("unitPrice") if isinstance(tier, dict) else None
            if not isinstance(money, dict):
                continue
            if "units" in money and not _int_within(money["units"], _INT64):
                return False
            if "nanos" in money and not _int_within(money["nanos"], _INT32):
                return False
    return True


def _keep_parsable(content: bytes, dropped: list[str]) -> bytes | None:
    """The page without its unparsable SKUs (None when it has none, or is no SKU page)."""
    try:
        doc = json.loads(content)
    except ValueError:  # not JSON: the client's own error says so
        return None
    skus = doc.get("skus") if isinstance(doc, dict) else None
    if not isinstance(skus, list):
        return None
    keep = [s for s in skus if parsable(s)]
    if len(keep) == len(skus):
        return None
    dropped += [clean_text(s.get("description", "?"), 80) for s in skus if not parsable(s)]
    doc["skus"] = keep
    return json.dumps(doc).encode()


def install(client: Any, dropped: list[str]) -> None:
    """Drop the unparsable SKUs of every page ``client`` (a REST ``CloudCatalogClient``) reads,
    appending each one's description to ``dropped``."""

    def hook(response: Any, *args: object, **kwargs: object) -> Any:
        if response.status_code == 200:
            fixed = _keep_parsable(response.content, dropped)
            if fixed is not None:
                response._content = fixed  # what requests' Response.content returns
        return response

    hooks: list[Callable[..., Any]] = client._transport._session.hooks["response"]
    hooks.append(hook)
