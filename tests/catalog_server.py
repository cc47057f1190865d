"""A local HTTP server speaking the Cloud Billing Catalog REST API, for pricing tests.

Serves ``GET /v1/services/{id}/skus`` (``pageToken``, ``pageSize``, the client's
``$alt=json;enum-encoding=int``) from a list of SKU dicts in REST JSON form, on 127.0.0.1 with an
ephemeral port, in a daemon thread. Faults: ``status`` (e.g. 403/429/500 for every request, or
only for ``fail_page``), ``delay`` (s, to trigger client timeouts), ``raw_body`` (malformed JSON).
Every request's path, query and Authorization header are recorded in ``requests``.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

__all__ = ["CatalogServer", "gpu_sku", "host_sku", "sku"]


def sku(
    description: str,
    price: float | tuple[int, int],
    regions: list[str],
    *,
    usage: str = "OnDemand",
    unit: str = "h",
    family: str = "Compute",
    currency: str = "USD",
    tiers: list[tuple[float, float | tuple[int, int]]] | None = None,
    conversion_rate: float | None = None,
) -> dict[str, Any]:
    """A SKU in REST JSON form; ``price`` is dollars or ``(units, nanos)``."""

    def money(value: float | tuple[int, int]) -> dict[str, Any]:
        units, nanos = value if isinstance(value, tuple) else (int(value), round((value - int(value)) * 1e9))
        out: dict[str, Any] = {"currencyCode": currency, "nanos": nanos}
        if units:
            out["units"] = str(units)
        return out

    rates = [
        {"startUsageAmount": start, "unitPrice": money(p)}
        for start, p in (tiers if tiers is not None else [(0, price)])
    ]
    info: dict[str, Any] = {"pricingExpression": {"usageUnit": unit, "tieredRates": rates}}
    if conversion_rate is not None:
        info["currencyConversionRate"] = conversion_rate
    return {
        "name": f"services/6F81-5844-456A/skus/{abs(hash((description, usage, tuple(regions)))) % 10**8}",
        "description": description,
        "category": {"resourceFamily": family, "resourceGroup": "GPU", "usageType": usage},
        "serviceRegions": regions,
        "pricingInfo": [info],
    }


def gpu_sku(gpu: str, price: float, regions: list[str], spot: bool = False, **kw: Any) -> dict[str, Any]:
    """A GPU SKU described the way the real catalog does."""
    prefix = "Nvidia Tesla " if gpu in ("K80", "P100", "P4", "T4", "V100", "A100") else "Nvidia "
    spot_txt = " attached to Spot Preemptible VMs" if spot else ""
    usage = "Preemptible" if spot else "OnDemand"
    return sku(f"{prefix}{gpu} GPU{spot_txt} running in Americas", price, regions, usage=usage, **kw)


def host_sku(series: str, part: str, price: float, regions: list[str], spot: bool = False) -> dict[str, Any]:
    """vCPU (``part="Core"``) or RAM (``part="Ram"``, per GiB-hour) SKU of a host series."""
    name = "N1 Predefined" if series == "n1" else series.upper()
    text = f"{'Spot Preemptible ' if spot else ''}{name} Instance {part} running in Americas"
    unit = "GiBy.h" if part == "Ram" else "h"
    return sku(text, price, regions, usage="Preemptible" if spot else "OnDemand", unit=unit)


@dataclass
class CatalogServer:
    """Fake Catalog API; use as a context manager, point the client at ``endpoint``."""

    skus: list[dict[str, Any]]
    page_size: int = 2
    status: int | None = None
    fail_page: int | None = None
    delay: float = 0.0
    raw_body: str | None = None
    requests: list[dict[str, str]] = field(default_factory=list)

    def __enter__(self) -> CatalogServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server API
                server._handle(self)

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        url = urlparse(h.path)
        query = parse_qs(url.query)
        token = query.get("pageToken", ["0"])[0] or "0"
        self.requests.append(
            {"path": url.path, "query": url.query, "auth": h.headers.get("Authorization", "")}
        )
        if self.delay:
            time.sleep(self.delay)
        if not (url.path.startswith("/v1/services/") and url.path.endswith("/skus")):
            return self._send(
                h, 404, {"error": {"code": 404, "message": "no such path", "status": "NOT_FOUND"}}
            )
        page = int(token)
        if self.status and (self.fail_page is None or self.fail_page == page):
            message = f"fault {self.status} (request had Authorization: {h.headers.get('Authorization', '')})"
            return self._send(h, self.status, {"error": {"code": self.status, "message": message}})
        if self.raw_body is not None:
            return self._send_raw(h, 200, self.raw_body)
        start = page * self.page_size
        body: dict[str, Any] = {"skus": self.skus[start : start + self.page_size]}
        if start + self.page_size < len(self.skus):
            body["nextPageToken"] = str(page + 1)
        self._send(h, 200, body)

    def _send(self, h: BaseHTTPRequestHandler, code: int, body: dict[str, Any]) -> None:
        self._send_raw(h, code, json.dumps(body))

    def _send_raw(self, h: BaseHTTPRequestHandler, code: int, text: str) -> None:
        data = text.encode()
        try:
            h.send_response(code)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            h.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
