"""``cmdare-tui prices``: print the GCP GPU node price book (table or JSON rows).

``--prices live`` (the default here) asks the Cloud Billing Catalog API, through a cache that is
written unless read-only (``--read-only``, ``CMDARE_READ_ONLY=1``, ``read_only = true``);
``--prices offline`` (or ``--offline``) prints the shipped book, ``--prices study-era`` the 2019 one."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from cmdare.tui.cli_args import PRICE_MODES
from cmdare.tui.commands import UsageError

if TYPE_CHECKING:
    from cmdare.tui.config import Config

__all__ = ["dated_prices", "fallback_line", "register", "run"]

_FIELDS = (
    "gpu",
    "count",
    "region",
    "provisioning",
    "usd_per_hour",
    "gpu_usd_per_hour",
    "host_usd_per_hour",
    "source",
    "as_of",
)


def register(subparsers: Any) -> None:
    """Add the ``prices`` sub-command."""
    p = subparsers.add_parser("prices", help="GCP GPU node prices (live, cached or offline)")
    p.add_argument("--gpu", help="only this GPU type, e.g. V100, A100-80GB")
    p.add_argument("--region", help="only this region, e.g. us-central1")
    p.add_argument("--spot", action="store_true", help="spot/preemptible prices only")
    p.add_argument("--json", action="store_true", help="print JSON rows instead of a table")
    p.add_argument("--billing-endpoint", metavar="URL", help="Catalog API endpoint (anonymous credentials)")
    p.add_argument("--prices", choices=PRICE_MODES, default="live",
                   help="live (default: Catalog API, cached unless read-only), offline (shipped book) or "
                        "study-era (2019 CM-DARE prices)")  # fmt: skip
    p.add_argument("--offline", action="store_true", help="same as --prices offline")
    p.add_argument(
        "--max-age-hours", type=float, default=24.0, metavar="H", help="refresh cache older than H"
    )
    p.set_defaults(func=run)


def _check_endpoint(url: str) -> str:
    try:
        parsed = urlparse(url)
        host = parsed.hostname  # an unclosed IPv6 bracket raises (in one of the two)
    except ValueError:
        raise UsageError(f"--billing-endpoint must be an http(s) URL with a host, not {url!r}") from None
    if parsed.scheme not in ("http", "https") or not host:
        raise UsageError(f"--billing-endpoint must be an http(s) URL with a host, not {url!r}")
    try:
        parsed.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        raise UsageError(f"--billing-endpoint has a bad port: {url!r}") from exc
    return url.rstrip("/")


def _load(args: argparse.Namespace) -> Any:
    from cmdare.collectors.pricing import load_offline_book, load_price_book, load_study_era_book

    if args.offline or args.prices == "offline":
        return load_offline_book(reason="--prices offline" if not args.offline else "--offline")
    if args.prices == "study-era":
        return load_study_era_book()
    if args.billing_endpoint:
        from google.auth.credentials import AnonymousCredentials

        endpoint = _check_endpoint(args.billing_endpoint)
        return load_price_book(
            endpoint=endpoint, credentials=AnonymousCredentials(), max_age_hours=args.max_age_hours
        )
    return load_price_book(max_age_hours=args.max_age_hours)


def _select(book: Any, args: argparse.Namespace) -> list[Any]:
    from cmdare.collectors.pricing.book import canonical_gpu

    gpu = canonical_gpu(args.gpu) if args.gpu else None
    if gpu is not None and gpu not in book.gpus():
        raise UsageError(f"unknown GPU {args.gpu!r}; known: {', '.join(book.gpus())}")
    wanted = ("spot",) if args.spot else ("standard", "spot")
    return [
        r
        for r in book.rows()
        if (gpu is None or r.gpu == gpu)
        and (args.region is None or r.region == args.region)
        and r.provisioning in wanted
    ]


def _table(book: Any, rows: list[Any]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text  # names from a price source are data, never markup

    title = f"GCP GPU node prices, USD/h — {dated_prices(book)}"
    table = Table(title=Text(title), caption=Text(book.reason or "preemptible = spot price (same SKUs)"))
    for name in ("GPU", "×", "region", "provisioning", "node $/h", "GPU $/h", "host $/h"):
        table.add_column(name, justify="right" if "$" in name or name == "×" else "left")
    for r in rows:
        table.add_row(
            Text(r.gpu),
            str(r.count),
            Text(r.region),
            Text(r.provisioning),
            f"{r.usd_per_hour:.4f}",
            f"{r.gpu_usd_per_hour:.4f}",
            f"{r.host_usd_per_hour:.4f}",
        )
    Console(markup=False, emoji=False).print(table)  # region names come from the Catalog API


def run(args: argparse.Namespace, config: Config | None = None) -> int:
    """Print the selected rows; JSON rows carry the public ``NodePrice`` field names."""
    if args.billing_endpoint and not args.offline:
        _check_endpoint(args.billing_endpoint)
    if not 0 <= args.max_age_hours < float("inf"):
        raise UsageError("--max-age-hours must be a finite number ≥ 0")
    book = _load(args)
    rows = _select(book, args)
    if args.region is not None and not rows and args.region not in book.regions():
        raise UsageError(f"unknown region {args.region!r}; known: {', '.join(book.regions())}")
    if args.json:
        json.dump([{k: r.as_dict()[k] for k in _FIELDS} for r in rows], sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        _table(book, rows)
    live = not args.offline and args.prices == "live"
    if live and book.source != "live" and (book.source != "cache" or book.reason):  # fell back: say so
        print(fallback_line(book), file=sys.stderr)
    elif book.reason and args.json:  # the table has it as its caption
        print(f"prices: {dated_prices(book)}: {book.reason}", file=sys.stderr)
    return 0


def fallback_line(book: Any) -> str:
    """The stderr line of a command that asked for live prices and got another book."""
    return f"prices: live prices not used: {book.reason or 'unavailable'} ({dated_prices(book)})"


def dated_prices(book: Any) -> str:
    """'offline prices, price date unknown (derived …)' / 'live prices, fetched …': the words every view
    uses for a book's source and the date of its prices."""
    from cmdare.planner.view import PriceSource

    src = PriceSource.of(book)
    return f"{src.source} prices, {src.date}" if src is not None else "no price book"
