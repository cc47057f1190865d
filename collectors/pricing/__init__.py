"""GCP GPU node prices: live Cloud Billing Catalog → on-disk cache → shipped offline book.

Public API::

    from cmdare.collectors.pricing import load_price_book, load_offline_book, load_study_era_book
    book = load_price_book()              # blocking; run in a worker thread; never raises
    book.node_price("V100", 4, "us-central1", "spot").usd_per_hour
    book.ps_node_price("us-central1")     # CPU-only parameter server (n1-standard-8)

Spot and preemptible nodes are priced alike: GCP bills both from the "Preemptible" SKUs.
"""

from cmdare.collectors.pricing.book import NodePrice, PriceBook, PriceNotFound
from cmdare.collectors.pricing.loader import load_book, load_price_book
from cmdare.collectors.pricing.offline import load_offline_book, load_study_era_book

__all__ = [
    "NodePrice",
    "PriceBook",
    "PriceNotFound",
    "load_book",
    "load_offline_book",
    "load_price_book",
    "load_study_era_book",
]
