"""Turn Cloud Billing Catalog SKUs (Compute Engine) into per-unit rates for the price book.

Kept: GPU SKUs ("Nvidia Tesla V100 GPU running in Americas", "Nvidia L4 GPU …", …) and the
vCPU/RAM SKUs of the host series n1 ("N1 Predefined Instance Core/Ram"), a2, a3, a4, g2
("A2 Instance Core", "Spot Preemptible G2 Instance Ram", …) whose ``category.resourceFamily`` is
``Compute`` and ``category.usageType`` is ``OnDemand`` (→ ``standard``) or ``Preemptible``
(→ ``spot``). Everything else (commitments, DWS/reservations, custom shapes, virtual
workstations, unknown GPUs) is ignored. Price = first tier's ``units + nanos/1e9`` converted to
USD per hour (per GiB-hour for RAM).

Currency: USD is used as is; another currency is converted with the SKU's
``currencyConversionRate`` (USD → that currency, so USD = price / rate) when the rate is > 0,
otherwise the SKU is refused and a note says so.

Plausibility: a rate outside $0–:data:`MAX_USD_PER_UNIT_HOUR` per unit-hour (a price of 1e300, or
one inflated by a tiny conversion rate) is refused alone, with a note naming it; the others stay.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from cmdare.collectors.pricing.book import RateKey

__all__ = ["ParsedCatalog", "classify", "parse_skus", "unit_factor"]

_SKIP = re.compile(
    r"commitment|reserv|virtual workstation|\bdws\b|calendar|flex|sole tenan|custom|extended|premium|licen",
    re.IGNORECASE,
)
_GPUS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, re.IGNORECASE))
    for name, pattern in (
        ("A100-80GB", r"\bA100 80GB\b"),
        ("A100", r"\bA100\b"),
        ("H100-MEGA", r"\bH100 80GB Plus\b|\bH100 Mega\b"),
        ("H100", r"\bH100\b"),
        ("H200", r"\bH200\b"),
        ("B200", r"\bB200\b"),
        ("L4", r"\bL4\b"),
        ("K80", r"\bK80\b"),
        ("P100", r"\bP100\b"),
        ("P4", r"\bP4\b"),
        ("T4", r"\bT4\b"),
        ("V100", r"\bV100\b"),
    )
)
_HOST = re.compile(
    r"^(?:spot preemptible |preemptible )?(n1 predefined|a2|a3|a4|g2) instance (core|ram)\b", re.IGNORECASE
)
_USAGE = {"OnDemand": "standard", "Preemptible": "spot"}
# assumption: no GPU, vCPU or GiB of RAM costs more an hour: ~80x the dearest rate of the offline
# book (an H100 in europe-west4, $12.74/h: collectors/pricing/data/gcp_offline_book.csv)
MAX_USD_PER_UNIT_HOUR = 1000.0
# usageUnit → factor to multiply a per-unit price by to get USD per hour (per GiB-hour).
_TIME = {"h": 1.0, "hr": 1.0, "min": 60.0, "s": 3600.0, "d": 1.0 / 24.0}
_SIZE = {"GiBy": 1.0, "MiBy": 1024.0, "GBy": 1.073741824}  # per unit → per GiB


@dataclass
class ParsedCatalog:
    """Rates found in a SKU listing plus bookkeeping for the report."""

    rates: dict[RateKey, float] = field(default_factory=dict)
    seen: int = 0
    used: int = 0
    notes: list[str] = field(default_factory=list)


def classify(description: str) -> tuple[str, str] | None:
    """``(kind, name)`` for a SKU description — ``("gpu", "V100")``, ``("cpu", "n1")``,
    ``("ram", "a2")`` — or ``None`` if the SKU is not one we price."""
    if _SKIP.search(description):
        return None
    host = _HOST.match(description.strip())
    if host:
        series = host.group(1).split()[0].lower()
        return ("cpu" if host.group(2).lower() == "core" else "ram", series)
    if "GPU" not in description.upper():
        return None
    for name, pattern in _GPUS:
        if pattern.search(description):
            return ("gpu", name)
    return None


def unit_factor(usage_unit: str, kind: str) -> float | None:
    """Multiplier from a price per ``usage_unit`` to USD per hour (GPU/vCPU) or per GiB-hour
    (RAM); ``None`` for a unit we do not understand."""
    if kind == "ram":
        size, _, time = usage_unit.partition(".")
        if size not in _SIZE or time not in _TIME:
            return None
        return _SIZE[size] * _TIME[time]
    return _TIME.get(usage_unit)


def _first_tier_price(expr: Any) -> tuple[float, str] | None:
    tiers = list(expr.tiered_rates)
    if not tiers:
        return None
    money = tiers[0].unit_price
    return float(money.units) + float(money.nanos) / 1e9, money.currency_code or "USD"


def _sku_rates(
    sku: Any,
    kind: str,
    name: str,
    out: ParsedCatalog,
    refused: dict[str, int],
    converted: set[str],
    implausible: list[str],
) -> bool:
    prov = _USAGE.get(sku.category.usage_type)
    if prov is None or sku.category.resource_family != "Compute" or not sku.pricing_info:
        return False
    info = sku.pricing_info[0]
    expr = info.pricing_expression
    priced = _first_tier_price(expr)
    factor = unit_factor(expr.usage_unit, kind)
    if priced is None or factor is None:
        return False
    price, currency = priced
    if currency != "USD":
        rate = float(info.currency_conversion_rate)
        if rate <= 0:
            refused[currency] = refused.get(currency, 0) + 1
            return False
        price /= rate
        converted.add(currency)
    regions = [r for r in sku.service_regions if r]
    rate = price * factor
    if regions and not (math.isfinite(rate) and 0.0 <= rate <= MAX_USD_PER_UNIT_HOUR):
        implausible.append(f"{kind} {name} in {regions[0]}: ${rate:.3g}/h")
        return False
    for region in regions:
        out.rates.setdefault((kind, name, region, prov), rate)
    return bool(regions)


def parse_skus(skus: Iterable[Any]) -> ParsedCatalog:
    """Rates from Catalog API ``Sku`` messages (proto-plus objects from ``list_skus``).

    The first SKU seen for a (kind, name, region, provisioning) wins; later duplicates are ignored.
    """
    out = ParsedCatalog()
    refused: dict[str, int] = {}
    converted: set[str] = set()
    implausible: list[str] = []
    for sku in skus:
        out.seen += 1
        kind_name = classify(sku.description)
        if kind_name is None:
            continue
        if _sku_rates(sku, *kind_name, out, refused, converted, implausible):
            out.used += 1
    if implausible:
        out.notes.append(
            f"refused {len(implausible)} SKU price(s) outside $0–{MAX_USD_PER_UNIT_HOUR:,.0f} an hour"
            f" (e.g. {implausible[0]})"
        )
    for currency, n in sorted(refused.items()):
        out.notes.append(f"refused {n} SKU(s) priced in {currency} without a currency conversion rate")
    for currency in sorted(converted):
        out.notes.append(f"converted {currency} prices to USD with the SKU's currencyConversionRate")
    return out
