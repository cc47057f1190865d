"""Direct scrape of Prometheus exposition endpoints (``/metrics`` of the job's exporter,
node_exporter, DCGM exporter) with httpx: per-target timeout, capped body, one-line errors."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx

from cmdare.collectors.clock import Clock, SystemClock
from cmdare.collectors.exposition import ExpositionError, parse_exposition
from cmdare.collectors.samples import TaskInfo, TaskPoll

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 2.0
DEFAULT_MAX_BYTES = 8 * 1024 * 1024  # a node_exporter page is ~100 kB; anything past 8 MiB is refused


@dataclass(frozen=True)
class ScrapeTarget:
    url: str
    default_info: TaskInfo | None = None  # identity when the endpoint carries no cmdare_task_info


class BodyTooLarge(Exception):
    pass


async def _read_capped(resp: httpx.Response, max_bytes: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in resp.aiter_bytes():
        size += len(chunk)
        if size > max_bytes:
            raise BodyTooLarge(f"body larger than {max_bytes // (1024 * 1024)} MiB, refused")
        chunks.append(chunk)
    return b"".join(chunks)


def _describe(exc: BaseException) -> str:
    """A one-line, secret-free description of a transport failure."""
    if isinstance(exc, httpx.ConnectError):
        text = str(exc).lower()
        if "name" in text and ("resolution" in text or "not known" in text or "resolve" in text):
            return "DNS lookup failed"
        return "connection refused" if "refused" in text else "cannot connect"
    if isinstance(exc, httpx.TimeoutException | asyncio.TimeoutError):
        return "timed out"
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError):
        return "connection reset mid-response"
    if isinstance(exc, BodyTooLarge):
        return str(exc)
    return type(exc).__name__


async def scrape(
    client: httpx.AsyncClient,
    target: ScrapeTarget,
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    max_bytes: int = DEFAULT_MAX_BYTES,
    clock: Clock | None = None,
) -> TaskPoll:
    """Scrape one target. Never raises for the target's faults: they become ``ok=False`` polls."""
    clock = clock or SystemClock()
    t0 = clock.monotonic()

    def done(ok: bool, **kw: object) -> TaskPoll:
        return TaskPoll(source=target.url, t=clock.now(), ok=ok, elapsed=clock.monotonic() - t0, **kw)  # type: ignore[arg-type]

    try:
        async with asyncio.timeout(timeout):
            async with client.stream("GET", target.url, headers={"Accept": "text/plain"}) as resp:
                if resp.status_code != 200:
                    return done(False, info=target.default_info, error=f"HTTP {resp.status_code}")
                body = await _read_capped(resp, max_bytes)
    except (httpx.HTTPError, TimeoutError, BodyTooLarge, OSError) as exc:
        return done(False, info=target.default_info, error=_describe(exc))
    try:
        parsed = parse_exposition(body.decode("utf-8", errors="replace"), target.default_info)
    except ExpositionError as exc:
        return done(False, info=target.default_info, error=str(exc))
    if parsed.info is None:
        return done(False, error="no cmdare_task_info and no identity configured for this target")
    return done(True, info=parsed.info, values=parsed.values, job_facts=parsed.facts,
                error="; ".join(parsed.notes) or None)


class ScrapeSource:
    """Scrapes a set of targets concurrently; a slow target never delays the others beyond its timeout."""

    name = "scrape"

    def __init__(
        self,
        targets: Sequence[ScrapeTarget] | Callable[[], Sequence[ScrapeTarget]],
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self._targets = targets
        self.timeout = timeout
        self.max_bytes = max_bytes

    def targets(self) -> Sequence[ScrapeTarget]:
        return self._targets() if callable(self._targets) else self._targets

    async def poll(self, client: httpx.AsyncClient, clock: Clock) -> list[TaskPoll]:
        jobs = [scrape(client, t, timeout=self.timeout, max_bytes=self.max_bytes, clock=clock) for t in self.targets()]
        return list(await asyncio.gather(*jobs))
