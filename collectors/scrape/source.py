"""Direct scrape of Prometheus exposition endpoints (``/metrics`` of the job's exporter,
node_exporter, DCGM exporter) with httpx: per-target timeout, capped body, one-line errors.

A target whose page comes back byte-identical is not parsed again, and past
:data:`UNCHANGED_BEFORE_BACKOFF` identical answers in a row it is polled less often: every 2nd
refresh, then every :data:`MAX_BACKOFF`-th (a finished job's exporter left running, a static textfile
page). A changed page, a failure or the refresh key (:meth:`ScrapeSource.wake`) polls it every refresh
again at once; the status line says how many targets wait and how often they are polled.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import hashlib
import logging
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import httpx

from cmdare.collectors import metrics as M
from cmdare.collectors.clock import Clock, SystemClock
from cmdare.collectors.hostdetail import HOST_JOB, host_name, is_host_key
from cmdare.collectors.http_client import ACCEPT_ENCODING, BodyError, BodyTooLarge, new_client, read_body
from cmdare.collectors.redaction import install_log_filters, redact, remember_url
from cmdare.collectors.samples import JobFacts, TaskInfo, TaskPoll
from cmdare.collectors.scrape.exposition import ExpositionError, Parsed, parse_exposition

log = logging.getLogger(__name__)

install_log_filters(("httpx", "httpcore"))

DEFAULT_TIMEOUT_S = 2.0
STAMP_TRUST_S = 300.0  # an exporter's own sample timestamps are used when this close to our clock
DEFAULT_MAX_BYTES = 8 * 1024 * 1024  # a node_exporter page is ~100 kB; anything past 8 MiB is refused
_HEADERS = {"Accept": "text/plain", "Accept-Encoding": ACCEPT_ENCODING}
PARSE_INLINE_BYTES = 256 * 1024  # larger pages are parsed in a thread (the slow path: ~0.5 s a MiB)
PARSE_THREADS = 2  # large pages parsed at once
__all__ = ["BodyTooLarge", "PageMemo", "ScrapeSource", "ScrapeTarget", "scrape"]
# A page byte-identical this many times in a row (after its first answer) is polled less often: the
# period doubles at each further identical answer, up to MAX_BACKOFF refreshes
UNCHANGED_BEFORE_BACKOFF = 3
MAX_BACKOFF = 4  # an unchanged target is still polled at least every 4th refresh (8 s at the default 2 s)


@dataclass(frozen=True)
class ScrapeTarget:
    url: str
    default_info: TaskInfo | None = None  # identity when the endpoint carries no cmdare_task_info

    def __post_init__(self) -> None:
        if (
            "@" in self.url or "?" in self.url
        ):  # a password or a token= the page may echo: redacted everywhere
            remember_url(self.url)


@dataclass
class PageMemo:
    """One target's last answer between polls: its page's digest and what it parsed to (a byte-identical
    page is not parsed again), and how often the target is polled while it stays the same."""

    digest: bytes = b""
    parsed: Parsed | None = field(default=None, repr=False)
    same: int = 0  # byte-identical answers in a row (0: the last one changed or failed)
    every: int = 1  # polled every ``every`` refreshes
    wait: int = 0  # refreshes left to skip before the next poll

    def after(self, ok: bool, most: int = MAX_BACKOFF) -> None:
        """Set the next poll's period from the answer just read: back off while identical (up to every
        ``most`` refreshes), poll every refresh again after a change or a failure."""
        if not ok:
            self.same, self.digest, self.parsed = 0, b"", None
        if ok and self.same >= UNCHANGED_BEFORE_BACKOFF:
            self.every = max(1, min(most, self.every * 2))
        else:
            self.every = 1
        self.wait = self.every - 1

    def reset(self) -> None:
        """Poll at the next refresh and every refresh after (the refresh key), until it backs off again."""
        self.same, self.every, self.wait = 0, 1, 0


_UNREACHABLE = {errno.EHOSTUNREACH, errno.ENETUNREACH}


def _root_cause(exc: BaseException) -> BaseException:
    """The innermost exception (httpx wraps the socket error; anyio merges happy-eyeballs attempts)."""
    seen = 0
    while seen < 10:
        inner = exc.__cause__ or exc.__context__
        if inner is None:
            break
        exc, seen = inner, seen + 1
    return exc


def describe_error(exc: BaseException) -> str:
    """A one-line, secret-free description of a transport failure."""
    if isinstance(exc, httpx.ConnectError):
        root = _root_cause(exc)
        text = str(exc).lower()
        if "name" in text and ("resolution" in text or "not known" in text or "resolve" in text):
            return "DNS lookup failed"
        if isinstance(root, ConnectionRefusedError) or "refused" in text:
            return "connection refused"
        return (
            "host unreachable"
            if isinstance(root, OSError) and root.errno in _UNREACHABLE
            else "cannot connect"
        )
    if isinstance(exc, httpx.TimeoutException | asyncio.TimeoutError):
        return "timed out"
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError):
        return "connection reset mid-response"
    if isinstance(exc, BodyError):
        return str(exc)
    return type(exc).__name__


_GATES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()


async def _parse(body: bytearray, default_info: TaskInfo | None) -> Parsed:
    """Parse a body: a large one in a worker thread, so that a page which sends the parser down its
    slow path (seconds for 8 MiB) never stalls the loop and stays under the poll's timeout. At most
    :data:`PARSE_THREADS` such parses run at once (a thread cannot be stopped at the timeout: a
    hostile page polled again and again must not pile them up); the others wait, under the timeout."""
    text = body.decode("utf-8", errors="replace")
    if len(body) <= PARSE_INLINE_BYTES:
        return parse_exposition(text, default_info)
    loop = asyncio.get_running_loop()
    gate = _GATES.setdefault(loop, asyncio.Semaphore(PARSE_THREADS))
    await gate.acquire()
    try:
        fut = loop.run_in_executor(None, _parse_then_release, text, default_info, loop, gate)
    except BaseException:
        gate.release()
        raise
    return await fut


def _parse_then_release(
    text: str, default_info: TaskInfo | None, loop: asyncio.AbstractEventLoop, gate: asyncio.Semaphore
) -> Parsed:
    """In the worker thread: parse, then free the slot when the parse really ends."""
    try:
        return parse_exposition(text, default_info)
    finally:
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(gate.release)


async def scrape(
    client: httpx.AsyncClient,
    target: ScrapeTarget,
    *,
    timeout: float = DEFAULT_TIMEOUT_S,
    max_bytes: int = DEFAULT_MAX_BYTES,
    clock: Clock | None = None,
    memo: PageMemo | None = None,
) -> TaskPoll:
    """Scrape one target. Never raises for the target's faults: they become ``ok=False`` polls.
    ``timeout`` bounds it all: connecting, reading, inflating and parsing. With ``memo`` (the target's
    last page), a byte-identical page is not parsed again and ``memo.same`` counts it."""
    clock = clock or SystemClock()
    t0 = clock.monotonic()
    source = redact(target.url)  # polls are logged and recorded: they never carry the credentials

    host = host_name(target.url)
    answered: list[float] = []  # when the response headers arrived: the page was rendered just before

    def done(
        ok: bool,
        *,
        error: str | None,
        info: TaskInfo | None = None,
        values: dict[str, float] | None = None,
        job_facts: JobFacts | None = None,
        host_only: bool = False,
    ) -> TaskPoll:
        t = answered[0] if answered and ok else clock.now()  # the sample's time, not when parsing ended
        return TaskPoll(source=source, t=t, ok=ok, info=info, values=values or {}, error=error,
                        job_facts=job_facts, elapsed=clock.monotonic() - t0, host=host, host_only=host_only)  # fmt: skip

    try:
        async with asyncio.timeout(timeout):
            async with client.stream("GET", target.url, headers=_HEADERS) as resp:
                answered.append(clock.now())
                if resp.status_code != 200:
                    return done(False, info=target.default_info, error=f"HTTP {resp.status_code}")
                body = await read_body(resp, max_bytes)
            parsed = await _parse_or_reuse(body, target.default_info, memo)
    except (httpx.HTTPError, TimeoutError, BodyError, OSError) as exc:
        return done(False, info=target.default_info, error=describe_error(exc))
    except ExpositionError as exc:
        return done(False, info=target.default_info, error=str(exc))
    except Exception as exc:  # a parser fault on hostile text costs this target, never the others
        log.warning("scrape %s: page not parsed: %s", source, type(exc).__name__)
        return done(False, info=target.default_info, error=f"page not parsed ({type(exc).__name__})")
    if parsed.info is None:
        return done(False, error="no cmdare_task_info and no identity configured for this target")
    if host_detail_only(parsed):  # node_exporter / DCGM: detail for the tasks on this host
        info = TaskInfo(job=HOST_JOB, task=host, role="node", gpu=parsed.gpu_model)
        values = {k: v for k, v in parsed.values.items() if k != M.K_PROCESS_START}  # its own start
        return done(True, info=info, values=values, host_only=True, error="; ".join(parsed.notes) or None)
    if parsed.sample_time is not None and abs(parsed.sample_time - clock.now()) < STAMP_TRUST_S:
        answered[:] = [parsed.sample_time]  # the exporter stamped its samples: its own time wins
    return done(
        True,
        info=parsed.info,
        values=parsed.values,
        job_facts=parsed.facts,
        error="; ".join(parsed.notes) or None,
    )


async def _parse_or_reuse(body: bytearray, default_info: TaskInfo | None, memo: PageMemo | None) -> Parsed:
    """``body`` parsed, or the memo's parse when the page is byte-identical to the last one (its values a
    fresh copy: a poll's values are its own)."""
    if memo is None:
        return await _parse(body, default_info)
    digest = hashlib.blake2b(body, digest_size=16).digest()
    if memo.parsed is not None and digest == memo.digest:
        memo.same += 1
        p = memo.parsed
        return replace(p, values=dict(p.values), notes=list(p.notes))
    memo.digest, memo.parsed, memo.same = b"", None, 0  # set again once the new page parsed
    parsed = await _parse(body, default_info)
    memo.digest, memo.parsed = digest, parsed
    return replace(parsed, values=dict(parsed.values), notes=list(parsed.notes))


def host_detail_only(parsed: Parsed) -> bool:
    """A page without ``cmdare_task_info`` whose series are all host detail (node_exporter, DCGM)."""
    own = [k for k in parsed.values if k != M.K_PROCESS_START]  # every exporter says when it started
    return not parsed.own_info and bool(own) and all(is_host_key(k) for k in own)


# httpcore's connection pool does O(connections²) work per request, so one shared client for
# hundreds of hosts spends seconds of CPU per cycle (and requests time out waiting in its queue).
# Past this many distinct hosts, each host gets its own one-connection client instead.
SHARED_POOL_MAX_ORIGINS = 32
# Requests in flight at once: with thousands at once the loop cannot read them all within their
# timeout and every one of them fails; queued targets wait without their timeout running.
MAX_IN_FLIGHT = 64


@functools.lru_cache(maxsize=4096)
def _origin(url: str) -> str:
    """scheme://host:port/ of ``url`` (the key of a per-host client); the URL itself when invalid
    (its scrape then fails alone)."""
    try:
        return str(httpx.URL(url).copy_with(path="/", query=None, fragment=None))
    except httpx.InvalidURL:
        return url


class ScrapeSource:
    """Scrapes a set of targets concurrently; a slow target never delays the others beyond its timeout."""

    name = "scrape"

    def __init__(
        self,
        targets: Sequence[ScrapeTarget] | Callable[[], Sequence[ScrapeTarget]],
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_in_flight: int = MAX_IN_FLIGHT,
        max_backoff: int = MAX_BACKOFF,
        interval_s: float | None = None,
    ) -> None:
        """``max_backoff``: an unchanged target is polled at least every this many refreshes (1: every
        refresh); ``interval_s``: the refresh period, to say the back-off in seconds."""
        self._targets = targets
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.max_in_flight = max_in_flight
        self.max_backoff = max_backoff
        self.interval_s = interval_s
        self._clients: dict[str, httpx.AsyncClient] = {}  # per host, when there are many hosts
        self._memos: dict[str, PageMemo] = {}  # per target URL: its last page and its poll period
        # targets not polled this refresh, their page the same for a while: their source names (each counts as
        # answering as it last did; the poller's Cycle.waiting, said by status_note, not as "unchanged")
        self.unpolled: list[str] = []
        self.status_note: str | None = None  # how often the unchanged targets are polled (the status line)

    def targets(self) -> Sequence[ScrapeTarget]:
        return self._targets() if callable(self._targets) else self._targets

    def _client_for(self, origin: str) -> httpx.AsyncClient:
        c = self._clients.get(origin)
        if c is None:
            limits = httpx.Limits(max_connections=2, max_keepalive_connections=1)
            # the timeout asked for (httpx's default 5 s capped a longer one)
            c = self._clients[origin] = new_client(limits, self.timeout)
        return c

    async def poll(self, client: httpx.AsyncClient, clock: Clock) -> list[TaskPoll]:
        targets = self.targets()
        origins = [_origin(t.url) for t in targets]
        many = len(set(origins)) > SHARED_POOL_MAX_ORIGINS
        gate = asyncio.Semaphore(self.max_in_flight)
        memos = self._memos_of(targets)

        async def one(target: ScrapeTarget, origin: str, memo: PageMemo) -> TaskPoll:
            async with gate:  # the timeout starts when the request does, not while it queues
                try:
                    poll = await scrape(
                        self._client_for(origin) if many else client,
                        target,
                        timeout=self.timeout,
                        max_bytes=self.max_bytes,
                        clock=clock,
                        memo=memo,
                    )
                except httpx.InvalidURL:  # one bad URL fails alone, never the whole source
                    poll = TaskPoll(
                        source=redact(target.url),
                        t=clock.now(),
                        ok=False,
                        info=target.default_info,
                        error="invalid URL",
                    )
            memo.after(poll.ok, self.max_backoff)
            return poll

        due, waiting = [], []
        for t, o, m in zip(targets, origins, memos, strict=True):
            if m.wait > 0:  # unchanged for a while: its turn comes every m.every refreshes
                m.wait -= 1
                waiting.append(t)
            else:
                due.append(one(t, o, m))
        polls = list(await asyncio.gather(*due))
        self.unpolled = [redact(t.url) for t in waiting]
        self.status_note = self._backoff_note(memos)
        if many and len(self._clients) > len(set(origins)):  # hosts that left the target list
            await self._drop_clients(set(self._clients) - set(origins))
        return polls

    def _memos_of(self, targets: Sequence[ScrapeTarget]) -> list[PageMemo]:
        """Each target's memo (made on first sight; those of targets no longer listed forgotten)."""
        memos = [self._memos.setdefault(t.url, PageMemo()) for t in targets]
        if len(self._memos) > len(memos):
            self._memos = {t.url: m for t, m in zip(targets, memos, strict=True)}
        return memos

    def _backoff_note(self, memos: list[PageMemo]) -> str | None:
        """``2 targets answering the same page: polled every 8 s while it stays the same``, or None when none
        backs off."""
        slow = [m.every for m in memos if m.every > 1]
        if not slow:
            return None
        lo, hi = min(slow), max(slow)
        if self.interval_s:
            period = (
                f"{hi * self.interval_s:g} s"
                if lo == hi
                else f"{lo * self.interval_s:g}–{hi * self.interval_s:g} s"
            )
        else:
            period = f"{hi} refreshes" if lo == hi else f"{lo}–{hi} refreshes"
        n = len(slow)
        return f"{n} target{'s' if n != 1 else ''} answering the same page: polled every {period} while it stays the same"

    def wake(self) -> None:
        """Poll every target at the next refresh, and every refresh until it backs off again (the
        refresh key: the user asked for fresh data)."""
        for memo in self._memos.values():
            memo.reset()
        self.status_note = None

    async def _drop_clients(self, origins: set[str]) -> None:
        for o in origins:
            await self._clients.pop(o).aclose()

    async def aclose(self) -> None:
        """Close the per-host clients (the shared one belongs to the poller)."""
        await self._drop_clients(set(self._clients))
