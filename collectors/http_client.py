"""The HTTP clients the collectors poll with. Plain-HTTP targets (loopback exporters, a Prometheus
on the head node) never pay for TLS: the TLS context, whose CA bundle takes ~80 ms to load (a tenth
of the first frame), is built on the first ``https://`` request only, once per process, and always
verifies certificates. Bodies are read through :func:`read_body`: one content coding at most, inflated in
bounded steps under the body cap."""

from __future__ import annotations

import asyncio
import functools
import ssl
import zlib

import httpx

from cmdare.collectors.redaction import redact_cut


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


def new_client(limits: httpx.Limits, timeout: float | None = None) -> httpx.AsyncClient:
    """A client for polling: no redirects, no proxy settings from the environment, TLS on first use.

    ``timeout`` (s) bounds each request's connect, read, write and pool wait; None: the client sets
    no bound of its own, and each request is bounded by the ``asyncio.timeout`` its caller runs it in
    (every request of the collectors is). Never httpx's default: its 5 s would cap a longer
    ``--timeout`` without a word."""
    return httpx.AsyncClient(
        timeout=httpx.Timeout(timeout),
        transport=httpx.AsyncHTTPTransport(verify=False, limits=limits),  # serves http:// only: no TLS there
        mounts={"https://": _TLSOnFirstUse(limits)},
        follow_redirects=False,
        trust_env=False,
        headers={"Accept-Encoding": ACCEPT_ENCODING},
    )


# --- bounded bodies -------------------------------------------------------------------------------
# httpx decodes every coding a server lists, each in one call without an output limit: a 3.5 kB
# answer labelled "gzip, gzip" inflates to gigabytes before any cap can look at it. Bodies are read
# raw here instead and decoded by us: at most one coding, in bounded pieces, under the same cap.
ACCEPT_ENCODING = "gzip, deflate"  # what we ask for; nothing else is decoded
_PIECE = 1024 * 1024  # inflate at most this much per step, then let the event loop run


class BodyError(Exception):
    """A body refused before or while it was read (too large, stacked or unknown coding)."""


class BodyTooLarge(BodyError):
    pass


class Budget:
    """A limit several reads share (the concurrent answers of one refresh): bytes, or JSON values."""

    __slots__ = ("limit", "used")

    def __init__(self, limit: int) -> None:
        self.limit, self.used = limit, 0

    def take(self, n: int) -> bool:
        """Count ``n`` more; False once the total is over the limit."""
        self.used += n
        return self.used <= self.limit


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):g} MiB"


def _decoder(encoding_header: str) -> zlib._Decompress | None:
    """A zlib decompressor for the response's one content coding (None: identity)."""
    codings = [c.strip() for c in encoding_header.split(",") if c.strip()]
    codings = [c for c in codings if c.lower() != "identity"]  # as sent: redacted before any change
    if len(codings) > 1:
        raise BodyError(f"stacked content codings ({redact_cut(', '.join(codings), 40)}) refused")
    if not codings:
        return None
    if codings[0].lower() in ("gzip", "x-gzip"):
        return zlib.decompressobj(zlib.MAX_WBITS | 16)
    if codings[0].lower() == "deflate":
        return zlib.decompressobj()
    raise BodyError(f"unsupported content coding {redact_cut(codings[0], 20)!r}")


async def read_body(resp: httpx.Response, max_bytes: int, budget: Budget | None = None) -> bytearray:
    """The response body, decoded, at most ``max_bytes`` both on the wire and once decoded (and
    within ``budget``, shared with other reads); raises :class:`BodyError`. Never blocks the loop
    for more than one bounded inflate step."""
    if resp.is_stream_consumed:  # built in memory (a mock transport): read and decoded already
        return _whole(resp.content, max_bytes, budget)
    dec = _decoder(resp.headers.get("content-encoding", ""))
    out = bytearray()
    wire = 0
    async for chunk in resp.aiter_raw():
        wire += len(chunk)
        if wire > max_bytes:
            raise BodyTooLarge(f"body larger than {_mib(max_bytes)}, refused")
        if dec is None:
            out += chunk
            _charge(budget, len(chunk))
            continue
        await _inflate(dec, chunk, out, max_bytes, budget)
    if len(out) > max_bytes:
        raise BodyTooLarge(f"body larger than {_mib(max_bytes)}, refused")
    return out


def _whole(content: bytes, max_bytes: int, budget: Budget | None) -> bytearray:
    if len(content) > max_bytes:
        raise BodyTooLarge(f"body larger than {_mib(max_bytes)}, refused")
    _charge(budget, len(content))
    return bytearray(content)


def _charge(budget: Budget | None, n: int) -> None:
    if budget is not None and not budget.take(n):
        raise BodyTooLarge(f"answers larger than {_mib(budget.limit)} together, refused")


async def _inflate(
    dec: zlib._Decompress, data: bytes, out: bytearray, max_bytes: int, budget: Budget | None
) -> None:
    """Inflate ``data`` into ``out`` in pieces of at most ``_PIECE`` bytes, refusing past the cap."""
    if dec.eof:
        return  # data after the end of the stream (a second gzip member) is ignored, as httpx does
    while data:
        try:
            piece = dec.decompress(data, min(_PIECE, max_bytes - len(out) + 1))
        except zlib.error:
            raise BodyError("corrupt compressed body") from None
        out += piece
        if len(out) > max_bytes:
            raise BodyTooLarge(f"body inflates past {_mib(max_bytes)}, refused")
        _charge(budget, len(piece))
        data = dec.unconsumed_tail
        if dec.eof:
            return
        await asyncio.sleep(0)  # a cancelled poll (its timeout) stops here
