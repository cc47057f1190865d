"""The price books shipped as package data (``cmdare.collectors.pricing/data/*.csv``).

Each CSV has ``#`` comment lines (source, derivation, ``# as_of: <ISO date>``) and the columns
``kind,name,region,provisioning,usd`` (see :mod:`cmdare.collectors.pricing.book` for the kinds).
Both files are written by ``scripts/derive_price_book.py``.
"""

from __future__ import annotations

import csv
import re
from importlib import resources

from cmdare.collectors.pricing.book import PriceBook, RateKey
from cmdare.collectors.pricing.shapes import HostShape

__all__ = ["load_offline_book", "load_study_era_book", "read_book_csv", "STUDY_ERA_SHAPES", "STUDY_ERA_PS"]

OFFLINE_FILE = "gcp_offline_book.csv"
STUDY_ERA_FILE = "gcp_study_era_2019.csv"

#: Hosts of the CM-DARE / ICAC'19 workers: one GPU each, custom machine types with 61 GiB
#: (upstream code/resource_acquisition.py: custom-4-62464-ext for K80, custom-8-62464-ext otherwise).
STUDY_ERA_SHAPES: dict[str, dict[int, HostShape]] = {
    "K80": {1: HostShape("custom-4-62464-ext", "custom", 4, 61)},
    "P100": {1: HostShape("custom-8-62464-ext", "custom", 8, 61)},
    "V100": {1: HostShape("custom-8-62464-ext", "custom", 8, 61)},
}
#: The study's parameter server: custom-N-16384-ext (16 GiB; N vCPUs not recorded in the data).
STUDY_ERA_PS = HostShape("custom-ps-16384-ext", "custom", 0, 16)


def read_book_csv(name: str) -> tuple[dict[RateKey, float], str]:
    """(rates, as_of) of a packaged book CSV."""
    text = resources.files("cmdare.collectors.pricing").joinpath("data", name).read_text("utf-8")
    as_of = ""
    body: list[str] = []
    for line in text.splitlines():
        if line.startswith("#"):
            key, _, value = line.lstrip("# ").partition(":")
            if key.strip() == "as_of":
                as_of = value.strip()
        elif line.strip():
            body.append(line)
    rates = {
        (row["kind"], row["name"], row["region"], row["provisioning"]): float(row["usd"])
        for row in csv.DictReader(body)
    }
    return rates, as_of


def price_date_note(name: str, as_of: str) -> str:
    """'price date unknown (derived DATE from SOURCE)' when the book's header says its source rows carry
    no price date (``as_of`` is then the day the book was derived), else ''."""
    text = resources.files("cmdare.collectors.pricing").joinpath("data", name).read_text("utf-8")
    header = " ".join(line for line in text.splitlines() if line.startswith("#"))
    if "price date unknown" not in header:
        return ""
    via = re.search(r"via (\S+)", header)
    return f"price date unknown (derived {as_of} from {via.group(1) if via else 'the source'})"


def load_offline_book(reason: str | None = None) -> PriceBook:
    """The shipped book of current GCP list prices (no I/O beyond package data)."""
    rates, as_of = read_book_csv(OFFLINE_FILE)
    note = price_date_note(OFFLINE_FILE, as_of)
    return PriceBook(rates, source="offline", as_of=as_of, reason=reason, notes=(note,) if note else ())


def load_study_era_book() -> PriceBook:
    """2019 prices and host rates of the CM-DARE / ICAC'19 experiments (K80, P100, V100; one GPU
    per node; us-east1, us-central1, us-west1), for reproducing the study's cost figures."""
    rates, as_of = read_book_csv(STUDY_ERA_FILE)
    return PriceBook(
        rates,
        source="offline",
        as_of=as_of,
        reason="study-era book (2019 list prices)",
        shapes=STUDY_ERA_SHAPES,
        ps_shape=STUDY_ERA_PS,
    )
