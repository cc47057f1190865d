"""The HTTP clients the collectors poll with. Plain-HTTP targets (loopback exporters, a Prometheus
on the head node) never pay for TLS: the TLS context, whose CA bundle takes ~80 ms to load (a tenth
of the first frame), is built on the first ``https://`` request only, once per process, and always
verifies certificates."""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The one verifying TLS context every client shares (certifi's CA bundle)."""
    return httpx.create_ssl_context()


class _TLSOnFirstUse(httpx.AsyncBaseTransport):
    """An ``https://`` transport built when the first https request is sent."""

    def __init__(self, limits: httpx.Limits) -> None:
        self._limits = limits
        self._inner: httpx.AsyncHTTPTransport | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._inner is None:
            self._inner = httpx.AsyncHTTPTransport(verify=tls_context(), limits=self._limits)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        if self._inner is not None:
            await self._inner.aclose()


def new_client(limits: httpx.Limits) -> httpx.AsyncClient:
    """A client for polling: no redirects, no proxy settings from the environment, TLS on first use."""
    return httpx.AsyncClient(
        transport=httpx.AsyncHTTPTransport(verify=False, limits=limits),  # serves http:// only: no TLS there
        mounts={"https://": _TLSOnFirstUse(limits)},
        follow_redirects=False,
        trust_env=False,
    )
