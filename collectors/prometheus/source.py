"""A Prometheus server's HTTP API as a source: Prometheus scrapes the fleet, we ask it a handful of
instant queries per refresh (``/api/v1/query``), whatever the number of tasks:

1. ``cmdare_task_info{SEL}``: who every task is (role, GPU, region, provisioning…);
2. ``topk by (job) (1, cmdare_job_info{SEL})``: what each job trains (one row per job);
3. ``up{SEL} == 0``: the scrape targets Prometheus cannot reach;
4. ``or``-ed aggregates ``sum|max by (instance) (…)``, each tagged with a ``cmdare_key``
   label naming the series key it feeds (the same keys :mod:`exposition` produces, so the store,
   the lifecycle and the panes work unchanged), plus each target's scrape timestamp; split in
   queries the server evaluates in parallel;
5. node detail (node_exporter, DCGM on another port of a task's host), found by the tasks' hosts
   whatever the selector (:mod:`.hosts`), read between refreshes so that it never delays one;
   a host met for the first time is read at once, at its last scrape and the one before, so that its
   CPU and NIC (counters) rate from the first refresh.
6. for a task met for the first time, its recent samples (one range query, :mod:`.backfill`),
   so that the first refresh already rates over complete scrape intervals.

How late the engine answers is measured on every refresh (its newest sample's age, and how far before
the time asked it evaluates: VictoriaMetrics' latency offset) and said on the status line past two
scrape intervals; "scraped since" reads look back from the last refresh's newest sample.

Every query of one refresh is evaluated at the same instant (``time=``, the server's clock less
:data:`EVAL_LAG_S`), so a scrape landing between two queries never mixes two samples' values with
one scrape time. Each task's scrape time is ``timestamp(cmdare_task_info{SEL})``: it carries the same
labels as the task's values whatever the selector (``job``, ``exported_job``, any label) and
``honor_labels`` (``up`` carries only the scrape config's labels).

Prometheus' cost is about 15 µs per series a query selects, so above ``detail_tasks`` tasks (200)
the answers that rarely change are read less often: identities every k-th refresh (and at once when
a task not met before shows up), the two groups of task values in turns (Prometheus itself scrapes
every 5–15 s, so each value is still read about once per scrape), node detail every k-th refresh.
The store's rates use each sample's own time and bridge sparsely read series.

Series are joined to tasks on Prometheus' ``instance`` label, and the selector chooses tasks by their
``cmdare_task_info`` series (``… and on (instance) cmdare_task_info{SEL}``): the exporter's own labels
(its ``job``, which arrives as ``exported_job`` unless the scrape config sets ``honor_labels: true``,
``role``, ``region``…) are on that series only.

Queries go as GET (as POST only when the URL would be over-long, and never in read-only mode). A
server's answers are untrusted: one content coding at most, inflated under the byte cap; the answers
of one refresh share a byte and a JSON-value budget (counted before parsing); rows per answer are
capped; an implausible value or job fact is dropped with a note, never the task.

The bearer token comes from a file or ``PROMETHEUS_TOKEN``; it is held privately, sent only in the
``Authorization`` header, and never appears in a message, a log line or a recording.
"""

from __future__ import annotations

import asyncio
import logging
import math
import statistics
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx

from cmdare.collectors import caps, writes
from cmdare.collectors import metrics as M
from cmdare.collectors.clock import Clock, plausible_time
from cmdare.collectors.hostdetail import host_name
from cmdare.collectors.http_client import ACCEPT_ENCODING, BodyError, Budget, read_body
from cmdare.collectors.prometheus.aggregate import (
    ALWAYS_KEYS,
    KEY_LABEL,
    NODE_KEYS,
    STEP_KEYS,
    T_KEY,
    VALUE_QUERIES,
    capped_tasks,
    changed_values_query,
    count_query,
    instances_query,
    lag_query,
    metric_selector,
    of_tasks,
    selector_matchers,
    values_query,
)
from cmdare.collectors.prometheus.answers import (
    MAX_JSON_VALUES,
    LabelledQuery,
    LabelledRows,
    PrometheusAPIError,
    decode,
    decode_labelled,
    evaluation_offset,
    job_facts,
    labels_of,
    number,
    read_pairs,
    server_time,
)
from cmdare.collectors.prometheus.auth import BasicAuth, BearerToken, public_url
from cmdare.collectors.prometheus.backfill import (
    MAX_BACKFILL_TARGETS,
    backfill_polls,
    backfill_query,
    scrape_spacings,
)
from cmdare.collectors.prometheus.fleet import (
    FOCUS_FROM,
    Column,
    ColumnValues,
    DetailQuery,
    Fleet,
    FleetReader,
    FoldedDetail,
    direct_probe,
)
from cmdare.collectors.prometheus.hosts import (
    exact_instances,
    fits_one_query,
    host_polls,
    host_queries,
    host_query,
)
from cmdare.collectors.prometheus.query_url import query_url
from cmdare.collectors.redaction import redact_cut
from cmdare.collectors.samples import JobFacts, TaskInfo, TaskPoll
from cmdare.collectors.scrape.source import describe_error
from cmdare.collectors.untrusted import clean_text

T = TypeVar("T")
#: The ``origin`` label of the alerts ``cmdare-tui rules`` generates, and the query for those firing: the
#: engine's ``ALERTS`` series (Prometheus; VictoriaMetrics when vmalert writes its state back to it).
ENGINE_ORIGIN = "cmdare-rules"
ENGINE_ALERTS_QUERY = f'ALERTS{{alertstate="firing",origin="{ENGINE_ORIGIN}"}}'
ENGINE_ALERTS_MAX = 500  # rows read a refresh: a fleet's worth of flags, bounded

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 2.0
DEFAULT_MAX_BYTES = 64 * 1024 * 1024  # ~17 series x 10k tasks fits; past this a query is refused
MAX_GET_URL = 8000  # bytes: longer queries go as POST (proxies cut longer URLs), never in read-only mode
SKEW_TOLERANCE_S = 2.0  # assumption: larger server/client clock differences are corrected and reported
# "scraped since the last refresh" looks back past the last evaluation instant by the engine's measured
# lag then (to its newest sample), the longest scrape, and this floor (a sample made visible a little out
# of its time order): samples become visible in about their time order (an engine with a latency offset
# or slow under load shows each later, all alike), so what the last refresh could not see is newer than
# its newest sample less the longest scrape
LOOK_BACK_MARGIN_S = 0.5
MAX_LOOK_BACK_S = 30.0  # a scrape reported as longer is taken as this long (full reads catch the rest)
MAX_ENGINE_LAG_S = 3600.0  # a lag measured past this (an engine stalled for an hour) is taken as this long
# the engine's lag is the smallest newest-sample age of the last this many refreshes (16 s at the default
# 2 s: past a 15 s scrape interval, so one refresh lands just after a scrape and the scrapes' phase drops out)
LAG_REFRESHES = 8
# the status line says the engine lags past two scrape intervals (the freshest target's sample is at most
# one interval and a scrape old when the engine is up to date) and at least this long (less is within a
# refresh or two of the default 2 s), or when the engine evaluates this far before the time asked
LAG_NOTE_MIN_S = 5.0
# node detail of hosts met for the first time is read at once, and again just before their last scrape
# (CPU and NIC are counters: a rate needs two scrapes), for at most this many hosts a refresh
MAX_HISTORY_HOSTS = 200
EVAL_LAG_S = (
    0.1  # queries are evaluated this far behind the server's now (a scrape in progress is not half-read)
)
FULL_READ_MAX = 20_000  # tasks up to which the first refresh reads every task's values (then fleet mode)
SPARSE_SWEEPS = 2.5  # a large fleet's rates reach back this many sweep periods (one late sweep, a scrape)
NODE_DETAIL_TASKS = 200  # up to this many tasks, node detail is read on every refresh
# a background read (node detail, a large fleet's columns) may take this many refresh timeouts
BACKGROUND_TIMEOUT_FACTOR = 3
# a target Prometheus no longer names is reported gone ("no longer in Prometheus") for this long, then
# forgotten: the lifecycle has called it silent or revoked by then, and a long session's churn of spot
# VMs (a new address each) does not pile up as failed polls and identities
FORGET_AFTER_S = 600.0


@dataclass
class _Target:
    info: TaskInfo
    values: dict[str, float] = field(default_factory=dict)
    scrape_time: float = math.nan
    dropped: int = 0  # implausible values dropped from this target's rows


def _ident(labels: Mapping[str, str]) -> str:
    """A scrape target: its ``instance`` (the ``job`` label differs between a target's series under
    ``honor_labels``; two scrape configs reading one target read one task). The string itself names the
    target in every book (a tuple around it was 56 bytes a task more, hashed anew at each lookup)."""
    return labels.get("instance", "")


class _Books:
    """What the source keeps of one known target, in one object (``_known``'s values): its identity, its
    source name and host (made when first asked, then the same strings: the lifecycle keys its books by
    them), the scrape time last handed on and last read, and whether its recent history was read. These
    were five books of a key a target (the names' dict and a tuple a target, two dicts of times, a set):
    ~21 MiB at 100,000 tasks, where one object of six slots is ~80 bytes a target (~8 MiB)."""

    __slots__ = ("info", "source", "host", "seen", "last", "backfilled")

    def __init__(self, info: TaskInfo) -> None:
        self.info = info
        self.source: str | None = None  # the source name its polls carry (_source)
        self.host: str | None = None  # its host (_host)
        self.seen: float | None = None  # the scrape time last handed on (_unchanged_targets)
        self.last: float | None = None  # the scrape time last read (_measure_lag: scrape spacings)
        self.backfilled = False  # its recent history was read (_backfill)


def _info(labels: Mapping[str, str]) -> TaskInfo:
    job = labels.get("exported_job") or labels.get("job") or "job"
    task = labels.get("task") or labels.get("instance") or "task"
    pick = {
        k: _shared(v) if k in _MANY else v
        for k in M.TASK_INFO.labels
        if k not in ("job", "task")
        if (v := labels.get(k))
    }
    return TaskInfo(job=_shared(job), task=task, **pick)


# the labels whose values many tasks share (the others are a task's own: its name, address, ranks, GPUs)
_MANY = frozenset(
    ("exported_job", "job", "role", "gpu", "region", "zone", "provisioning", "dc", "stage", "local_rank")
)
_OTHER_LABELS = tuple(k for k in M.TASK_INFO.labels if k not in ("job", "task"))  # fields of their own name
_DEFAULTS = {f.name: f.default for f in fields(TaskInfo)}
_SHARED: dict[str, str] = {}  # label values many tasks carry (job, role, GPU, region…): one string each
_SHARED_MAX = 4096


def _shared(value: str) -> str:
    """One string object for a label value many tasks carry (each answer's parse makes its own copy);
    past :data:`_SHARED_MAX` distinct values, the value itself."""
    got = _SHARED.get(value)
    if got is None:
        if len(_SHARED) >= _SHARED_MAX or len(value) > 64:
            return value
        got = _SHARED[value] = value
    return got


def _made_from(info: TaskInfo, labels: Mapping[str, str]) -> bool:
    """Whether :func:`_info` would make ``info`` again of ``labels`` (the labels it reads have the values
    it holds): a task's identity is kept, the same object, while they stay the same (~800 bytes a task
    for the parsed labels kept to compare, where this holds nothing). A value its cleaning changed reads
    as changed: that task's identity is made again at each read, as a new one would be."""
    get = labels.get
    if info.job != (get("exported_job") or get("job") or "job"):
        return False
    if info.task != (get("task") or get("instance") or "task"):
        return False
    return all(getattr(info, k) == (get(k) or _DEFAULTS[k]) for k in _OTHER_LABELS)


class _Named(Mapping[str, TaskInfo]):
    """The targets the last identity read named, each to its identity (its books'): what a re-read naming
    the same targets with the same identities names, seen without a dict of 100,000 made for it."""

    __slots__ = ("_current", "_known")

    def __init__(self, current: dict[str, int], known: dict[str, _Books]) -> None:
        self._current, self._known = current, known

    def __getitem__(self, ident: str) -> TaskInfo:
        if ident not in self._current:
            raise KeyError(ident)
        return self._known[ident].info

    def __contains__(self, ident: object) -> bool:
        return ident in self._current

    def __iter__(self) -> Iterator[str]:
        return iter(self._current)

    def __len__(self) -> int:
        return len(self._current)


# a refresh's task values: value rows (``values_query``'s), or a large fleet's detail folded per task
Values = list[dict[str, Any]] | FoldedDetail
_Answers = tuple[
    list[dict[str, Any]] | LabelledRows | None, list[dict[str, Any]], list[dict[str, Any]], Values
]
# infos, jobs, ups, values


class PrometheusAPISource:
    """Asks a Prometheus server for every task of the jobs matched by ``selector``."""

    name = "prometheus"

    def __init__(
        self,
        url: str,
        selector: str = "",
        *,
        token: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        max_bytes: int = DEFAULT_MAX_BYTES,
        detail_tasks: int = NODE_DETAIL_TASKS,
        focus_from: int = FOCUS_FROM,
        forget_after_s: float = FORGET_AFTER_S,
    ) -> None:
        self.display = public_url(url.rstrip("/"))
        self.base = self.display  # credentials in the URL go in a header, never in a logged URL
        parts = urlsplit(url)
        self._basic = BasicAuth(parts.username or "", parts.password or "") if parts.username else None
        self.selector = selector_matchers(selector)
        self._token = BearerToken(token) if token else None
        self.timeout = timeout
        self.max_bytes = max_bytes
        # above this many tasks, identities, task values and node detail are read less often
        self.detail_tasks = detail_tasks
        # instance → what is kept of the target (_Books): its identity seen before, reused (the same object)
        # while the labels it is made of stay the same (_made_from); bounded by the targets Prometheus names
        # and those gone for less than ``forget_after_s`` (_follow)
        self._known: dict[str, _Books] = {}
        self.forget_after_s = forget_after_s
        self._gone: dict[str, float] = {}  # known targets no longer named → since when (clock)
        self.replaced = 0  # tasks met again at a new address (a replacement VM), this session
        self._detail_note: str | None = None  # why the last node detail read has no answer
        self._failure = ""  # why the last background read failed
        # source name → the target it names now, for the names other than a target's own (``display#instance``,
        # which only that target can hold: not listed, ~4 MiB at 100,000 tasks): carried on, or numbered
        self._in_use: dict[str, str] = {}
        # source names carried on (_carry_on) to targets named for the first time by the identity read being
        # taken in, until their books are made (_targets)
        self._carried: dict[str, str] = {}
        # tasks whose address answers for another task now, found nowhere: key → (identity, source, since)
        self._lost: dict[str, tuple[TaskInfo, str, float]] = {}
        # the targets named by the last task_info answer, in its order (slot → instance) and each to its
        # slot: the one instance string a target's books hold is found (_slots[_current[i]]) for the copy
        # each answer's parse makes anew; a large fleet's columns are laid out over the same slots and look
        # instances up in this same dict (FleetColumns: one dict of 100,000 keys less, ~6 MiB). Replaced
        # whole by an identity read that names other targets (kept by one naming the same: _name), never
        # changed in place (an earlier read's columns still use it).
        self._slots: list[str] = []
        self._current: dict[str, int] = {}
        self._gone_cache: set[str] | None = None  # known − current (_gone_known)
        self._no_info: set[str] = set()  # targets with job values but no task_info
        self._tasks_expr: str | None = None  # the server-side tasks cap, once the fleet is over it
        self._set_queries(None)
        self._total: int | None = None  # tasks the selector matches (read with the identities)
        self._rows_cut = 0  # rows past ``[caps] rows_per_answer`` dropped this refresh
        self.cap_note: str | None = None  # what the caps dropped (the poller shows it)
        self._polls = 0
        self._skew = 0.0  # server clock − ours, from the last answer
        self._server_now = math.nan  # the server's clock when it answered (``vector(time())``)
        self._eval_offset = 0.0  # how far before the time asked the engine evaluates (its latency offset)
        self._newest = -math.inf  # the newest scrape time read so far (server clock)
        self._ages: deque[float] = deque(maxlen=LAG_REFRESHES)  # the newest sample's age, refresh by refresh
        self._spacings: deque[float] = deque(maxlen=256)  # recent spacings of a target's consecutive scrapes
        self._hosts_read: set[str] = set()  # hosts whose recent node detail was read (two instants)
        self._node_task: asyncio.Task[list[dict[str, Any]] | str] | None = (
            None  # node detail read in the background
        )
        # hosts too many for one GET: their node detail is read a slice a refresh (_node_queries), a pass
        # over these hosts (sorted; empty while the hosts fit one query) in the period of a whole read
        self._host_pass: list[str] = []
        self._host_next = 0  # where in the pass the next slice begins
        self._host_slice = 0  # hosts a slice reads
        # above ``detail_tasks`` tasks a refresh reads only the targets scraped since the last one
        self._since: float | None = None  # evaluation instant of the last refresh that answered
        self._lag = 0.0  # the longest scrape of the selected targets (s): the look-back past ``_since``
        self._full_due = False  # the task count moved: read every task's values next refresh
        self.unchanged = 0  # known tasks up and not scraped since the last refresh (no poll this time)
        # above ``focus_from`` tasks, per-task detail only for the focus (fleet.py)
        self.focus_from = focus_from
        self.fleet_reader = FleetReader(self.selector)
        self._jobs_rows: list[
            dict[str, Any]
        ] = []  # the job-info answer, read with the identities in fleet mode
        self._columns_due: dict[str, str] | None = None  # the column queries to start after this refresh
        self._columns_task: asyncio.Task[dict[str, Column] | str] | None = None  # read in the background
        self._columns_at = math.nan  # the evaluation instant the running column read asks for
        self.mode_note: str | None = None  # how this refresh read the fleet (the status line shows it)

    def _set_queries(self, tasks: str | None) -> None:
        """The refresh's queries, over every task or (``tasks``) the capped set. Every refresh: the
        scrape times and revocations. Steps and step times, then the rest: both on every refresh for
        small clusters, in turns above ``detail_tasks`` tasks (Prometheus' cost is ~15 µs a series;
        it scrapes every 5–15 s anyway, so each is still read in time)."""
        self._tasks_expr = tasks
        # every task's identity: read as labelled rows (100,000 rows of ~8 labels each were ~130 MB of
        # dicts while they were read)
        self._info_query = LabelledQuery(tasks or metric_selector("cmdare_task_info", self.selector))
        job_keys = [k for k, *_ in VALUE_QUERIES if k not in NODE_KEYS]
        self._always_query = values_query(self.selector, ALWAYS_KEYS, tasks=tasks)
        self._group_keys = tuple(
            [k for k in job_keys if k not in ALWAYS_KEYS and (k in STEP_KEYS) == steps]
            for steps in (True, False)
        )
        self._group_queries = tuple(
            values_query(self.selector, keys, scrape_time=False, tasks=tasks) for keys in self._group_keys
        )

    def _changed_queries(self) -> list[str] | None:
        """Above ``detail_tasks`` tasks, between the reads of who the tasks are: every value of the
        targets scraped since the last refresh, looking back past its evaluation instant by the engine's
        lag then (how old its newest sample was: an engine with a latency offset, or slow to make samples
        visible under load, shows none newer), the longest scrape (a sample is stamped when its scrape
        began) and :data:`LOOK_BACK_MARGIN_S`; in two queries the server evaluates side by side; None when
        a full read is due. At a 15 s scrape and a 2 s refresh about one task in six has something new."""
        if self._since is None or self._full_due or self._infos_due():
            return None
        # the last refresh's evaluation instant less the engine's lag then: its newest sample
        anchor = min(self._since, self._newest) if math.isfinite(self._newest) else self._since
        since = anchor - self._lag - LOOK_BACK_MARGIN_S
        first, rest = [*ALWAYS_KEYS, *self._group_keys[0]], self._group_keys[1]
        return [
            changed_values_query(self.selector, first, since, scrape_time=True, tasks=self._tasks_expr),
            changed_values_query(self.selector, rest, since, scrape_time=False, tasks=self._tasks_expr),
        ]

    async def _count_tasks(self, client: httpx.AsyncClient, at: float) -> None:
        """How many tasks the selector matches; past ``[caps] tasks`` the queries ask for the first
        that many only (``topk`` on the server: the answer never holds more)."""
        rows = await self.query(client, count_query(self.selector), at=at)
        self._total = int(number(rows[0].get("value", [0, 0])[1]) or 0) if rows else 0
        cap = caps.current().tasks
        tasks = capped_tasks(self.selector, cap) if self._total > cap else None
        if tasks != self._tasks_expr:
            self._set_queries(tasks)

    def _cap_notes(self) -> str | None:
        cap = caps.current()
        notes = []
        if self._tasks_expr is not None and self._total:
            notes.append(
                f"showing {min(cap.tasks, self._total):,} of {self._total:,} tasks (cap {cap.tasks:,})"
            )
        if self._rows_cut:
            notes.append(f"{self._rows_cut:,} row(s) past {cap.rows_per_answer:,} an answer dropped")
        return "; ".join(notes) or None

    @property
    def fleet(self) -> Fleet | None:
        """A large fleet's latest per-job and per-role figures (Prometheus' per-task rates), else None."""
        return self.fleet_reader.fleet if self._fleet_mode() else None

    @property
    def sparse_window_s(self) -> float:
        """How far back a task's rate must reach for its last two points: a large fleet's sweep reads
        each task once a period (2.5 periods: a late sweep and a scrape interval); else 0 (default)."""
        return SPARSE_SWEEPS * self.fleet_reader.sweep_period if self._fleet_mode() else 0.0

    def set_focus(self, keys: Iterable[str]) -> None:
        """The tasks (keys ``job/task``) to read in detail on every refresh of a large fleet: the rows
        on screen, the tasks the alerts name (the session says which)."""
        self.fleet_reader.focus = set(keys)

    def __repr__(self) -> str:
        return f"PrometheusAPISource({self.display!r}, selector={self.selector!r})"

    def _secrets(self) -> tuple[str, ...]:
        return tuple(c.secret() for c in (self._token, self._basic) if c is not None)

    def budget(self) -> tuple[Budget, Budget]:
        """What the answers of one refresh may cost together: bytes, and JSON values. Both are sized for
        10,000 tasks and grow with the tasks cap past it (``[caps] tasks = 100000``: ten times each)."""
        scale = max(1, -(-caps.current().tasks // 10_000))
        return Budget(self.max_bytes * scale), Budget(MAX_JSON_VALUES * scale)

    async def query(
        self,
        client: httpx.AsyncClient,
        promql: str,
        budget: tuple[Budget, Budget] | None = None,
        at: float | None = None,
        result_type: str = "vector",
    ) -> list[dict[str, Any]]:
        """One query (evaluated at server time ``at`` when given; ``result_type`` "matrix" for a range
        selector); returns the result rows or raises :class:`PrometheusAPIError`.
        Sent as GET; as POST only when the URL would exceed :data:`MAX_GET_URL`, and never in
        read-only mode. The answer is capped in bytes (on the wire and inflated) and in rows, and
        counted against ``budget`` (shared by the queries of one refresh; its own when None)."""
        nbytes, nvalues = budget or self.budget()
        body, ctype, status = await self._fetch(client, promql, nbytes, at)
        cut: list[int] = []
        rows = decode(body, ctype, status, nvalues, result_type, cut)
        self._rows_cut += sum(cut)
        return rows

    async def column(
        self, client: httpx.AsyncClient, promql: str, budget: tuple[Budget, Budget], at: float
    ) -> ColumnValues:
        """A large fleet's per-task column (one row a task, labelled ``instance`` only): :meth:`query`,
        read a chunk of rows at a time straight into an array over the known tasks
        (:func:`~.answers.read_pairs` into :meth:`~.fleet.FleetReader.lay_out`: no object a row, no list
        of text kept while the answer waits for the next refresh)."""
        nbytes, nvalues = budget
        body, ctype, status = await self._fetch(client, promql, nbytes, at)
        cut: list[int] = []
        laid = read_pairs(body, ctype, status, "instance", self.fleet_reader.lay_out, nvalues, cut)
        self._rows_cut += sum(cut)
        return laid

    async def _fetch(
        self, client: httpx.AsyncClient, promql: str, nbytes: Budget, at: float | None
    ) -> tuple[bytearray, str, int]:
        """One query's answer as it came (body, content type, status): :meth:`query`'s request."""
        headers = {"Accept": "application/json", "Accept-Encoding": ACCEPT_ENCODING}
        for cred in (self._basic, self._token):
            headers.update(cred.header() if cred else {})
        url = f"{self.base}/api/v1/query"
        form = {"query": promql, **({"time": f"{at:.3f}"} if at else {})}  # one evaluation instant a refresh
        get = _get_url(url, form)
        if get is not None:
            request = client.stream("GET", get, headers=headers)
        elif writes.is_read_only():
            raise PrometheusAPIError(
                f"query of {len(promql):,} characters is too long for GET and read-only mode sends no POST;"
                " narrow the selector"
            )
        else:
            request = client.stream("POST", url, data=form, headers=headers)
        try:
            async with request as resp:
                body = await read_body(resp, self.max_bytes, nbytes)
                return body, resp.headers.get("content-type", ""), resp.status_code
        except (httpx.HTTPError, BodyError, OSError) as exc:
            raise PrometheusAPIError(describe_error(exc)) from None

    async def engine_alerts(self, client: httpx.AsyncClient) -> list[dict[str, str]]:
        """The labels of the firing alerts of the generated rule file (``cmdare-tui rules``), cleaned where
        they enter (they are the server's text); at most :data:`ENGINE_ALERTS_MAX`. Raises
        :class:`PrometheusAPIError` when the server does not answer."""
        rows = await self.query(client, ENGINE_ALERTS_QUERY)
        out = []
        for row in rows[:ENGINE_ALERTS_MAX]:
            labels = row.get("metric")  # rows are dicts (decode); their labels are the server's
            if isinstance(labels, dict):
                out.append({clean_text(k): clean_text(v) for k, v in labels.items() if isinstance(v, str)})
        return out

    async def _ask(self, client: httpx.AsyncClient, at: float, now: float) -> _Answers:
        """This refresh's answers: identities (None when not read), job facts, down targets, task
        values. ``at``: the evaluation instant (server clock); ``now``: our monotonic clock."""
        if self._infos_due():
            try:
                async with asyncio.timeout(self.timeout):
                    await self._count_tasks(client, at)
            except TimeoutError:
                raise PrometheusAPIError("timed out") from None
        queries, finish = self._fleet_queries(now) if self._fleet_mode() else self._task_queries()
        due = self._node_detail_due()
        self._polls += 1
        budget = self.budget()
        try:
            async with asyncio.timeout(self.timeout):
                *res, clock = await asyncio.gather(
                    *(self._maybe(client, q, budget, at) for q in queries),
                    self.query(client, "vector(time())", budget),
                )
        except TimeoutError:
            raise PrometheusAPIError("timed out") from None
        clock_rows = clock if isinstance(clock, list) else []  # rows (query): the union is gather's
        self._server_now = server_time(clock_rows) if clock_rows else math.nan
        self._eval_offset = evaluation_offset(clock_rows) if clock_rows else 0.0
        if self._node_task is None and (node_queries := self._node_queries(due)):
            # starts after the refresh's own queries
            self._node_task = asyncio.create_task(self._in_background(self._read_hosts(client, node_queries)))
        if self._columns_due is not None and self._columns_task is None:  # likewise, a large fleet's columns
            self._columns_at = at
            self._columns_task = asyncio.create_task(
                self._in_background(self._read_columns(client, self._columns_due, at))
            )
            self._columns_due = None
        return finish(res, at)

    def _jobs_query(self) -> str:
        """What each job trains: one row per job."""
        return f"topk by (job, exported_job) (1, {of_tasks('cmdare_job_info', self.selector)})"

    def _task_queries(self) -> tuple[list[str], Callable[[list[Any], float], _Answers]]:
        """Every task's values (in turns, or only the targets scraped since, above ``detail_tasks``)."""
        sel = self.selector
        small = max(len(self._known), self._total or 0) <= self.detail_tasks
        changed = None if small else self._changed_queries()
        groups = self._group_queries if small else [self._group_queries[self._polls % 2]]
        queries = [
            self._info_query if self._infos_due() else "",
            self._jobs_query(),
            self._down_query(),  # only the targets Prometheus cannot reach
            *(changed or [self._always_query, *groups]),
        ]
        # one row each; the longest scrape changes slowly: read with the identities
        watch = [] if small else [instances_query(sel), lag_query(sel) if self._infos_due() else ""]

        def finish(res: list[Any], at: float) -> _Answers:
            if watch:
                self._watch(*res[len(queries) :])
            return res[0], res[1], res[2], [row for r in res[3 : len(queries)] for row in r]

        return [*queries, *watch], finish

    def _fleet_mode(self) -> bool:
        """Above ``focus_from`` tasks, once every task has been read once: detail for the focus only.
        Past :data:`FULL_READ_MAX` tasks from the first refresh on: there the first read of every task's
        values (~7 rows a task) costs more than a refresh's timeout; the columns and the sweep fill in."""
        if (self._total or 0) > FULL_READ_MAX:
            return True
        return len(self._known) > self.focus_from and self._since is not None

    def _fleet_queries(self, now: float) -> tuple[list[str], Callable[[list[Any], float], _Answers]]:
        """A large fleet's refresh (:mod:`.fleet`): the focus's detail and the down targets;
        identities and job facts only when due (then also whether the selector applies to the value
        series). The columns and the task count, when due, are read between refreshes (like node
        detail: ~0.1-0.3 s of server time each at 10,000 tasks), and join the refresh after."""
        reader = self.fleet_reader
        infos_due = self._infos_due()
        columns, t = self._columns_answers(), self._columns_at  # the read started after the last refresh
        waiting = self._columns_task is not None or self._columns_due is not None  # a failed refresh left one
        detail, cols = reader.plan(now, busy=waiting, tasks=self._tasks_expr)
        if cols:  # one column a refresh, in turns; the task count with the steps column
            self._columns_due = {
                **cols,
                **({"count": instances_query(self.selector)} if "steps" in cols else {}),
            }
        self.mode_note = reader.note
        head = [
            self._info_query if infos_due else "",
            self._jobs_query() if infos_due else "",
            self._down_query(),
            direct_probe(self.selector) if (infos_due or reader.direct is None) and self.selector else "",
        ]

        def finish(res: list[Any], at: float) -> _Answers:
            infos, jobs, ups, probe = res[:4]
            if probe is not None:
                reader.set_direct(probe)
            if jobs is not None:
                self._jobs_rows = jobs
            if columns is not None and "count" in columns:
                count = columns.pop("count")
                self._watch(count if isinstance(count, list) else None, None)
            return infos, self._jobs_rows, ups, reader.read(res[4:], columns, t)

        return [*head, *detail], finish

    async def _read_columns(
        self, client: httpx.AsyncClient, queries: dict[str, str], at: float
    ) -> dict[str, Column]:
        """A large fleet's columns (and task count: rows), read between refreshes (:meth:`_in_background`)."""
        budget = self.budget()
        reads: list[Awaitable[Column]] = [
            self.query(client, q, budget, at) if name == "count" else self.column(client, q, budget, at)
            for name, q in queries.items()
        ]
        answers = await asyncio.gather(*reads)
        return dict(zip(queries, answers, strict=True))

    async def _in_background(self, read: Awaitable[T]) -> T | str:
        """A read that runs between refreshes (node detail, a large fleet's columns) and joins the next
        one: its answer, or why there is none (it never raises: nobody awaits it at once)."""
        try:
            async with asyncio.timeout(self.timeout * BACKGROUND_TIMEOUT_FACTOR):
                return await read
        except PrometheusAPIError as exc:
            return str(exc)
        except TimeoutError:
            return f"timed out after {self.timeout * BACKGROUND_TIMEOUT_FACTOR:g} s"
        except Exception as exc:  # e.g. the session closed its client meanwhile
            return f"{type(exc).__name__}: {exc}"

    def _finished(self, task: asyncio.Task[T | str] | None, what: str) -> tuple[bool, T | None]:
        """(whether the background ``task`` has ended, its answer or None when it failed: logged)."""
        if task is None or not task.done():
            return False, None
        out = None if task.cancelled() else task.result()
        if isinstance(out, str):
            self._failure = redact_cut(out, 160, self._secrets())  # the status line says it too
            log.warning("%s", redact_cut(f"Prometheus {self.display}: {what}: {out}", 300, self._secrets()))
            return True, None
        return True, out

    def _columns_answers(self) -> dict[str, Column] | None:
        """The background column read's answers once it has finished (else None)."""
        ended, out = self._finished(self._columns_task, "fleet columns")
        if ended:
            self._columns_task = None
        return out

    def _watch(self, count: list[dict[str, Any]] | None, lag: list[dict[str, Any]] | None) -> None:
        """A task count other than the tasks known means tasks came or went: the next refresh reads
        every task. The longest scrape sets how far back "scraped since" looks (capped)."""
        if count is not None:
            total = int(number(count[0].get("value", [0, 0])[1]) or 0) if count else 0
            self._full_due = min(total, caps.current().tasks) != len(self._current)
        if lag is not None:
            longest = number(lag[0].get("value", [0, 0])[1]) if lag else None
            self._lag = min(max(longest or 0.0, 0.0), MAX_LOOK_BACK_S)

    def _down_query(self) -> str:
        """``up == 0`` of the selected targets, and of the known tasks' instances (a selector on
        the exporter's labels, e.g. ``exported_job``, matches no ``up`` series). Past
        ``detail_tasks`` known tasks the instances are not listed (the query would be hundreds of
        kB): a task gone from a large fleet shows as "no longer in Prometheus", not "target down"."""
        q = f"{metric_selector('up', self.selector)} == 0"
        if not self._known or len(self._known) > 2 * self.detail_tasks:  # not listed: no set made either
            return q
        known = set(self._known)
        if len(known) > self.detail_tasks:
            return q
        return f"{q} or up{{{exact_instances(known)}}} == 0"

    async def _maybe(
        self, client: httpx.AsyncClient, promql: str, budget: tuple[Budget, Budget], at: float | None = None
    ) -> list[dict[str, Any]] | LabelledRows | None:
        if not promql:
            return None
        if isinstance(promql, DetailQuery):
            return await self.detail(client, promql, budget, at)
        if isinstance(promql, LabelledQuery):
            return await self.labelled(client, promql, budget, at)
        return await self.query(client, promql, budget, at)

    async def detail(
        self, client: httpx.AsyncClient, promql: str, budget: tuple[Budget, Budget], at: float | None
    ) -> list[dict[str, Any]] | LabelledRows:
        """A large fleet's detail query (:func:`~.fleet.detail_query`), read by :meth:`labelled`."""
        return await self.labelled(client, promql, budget, at)

    async def labelled(
        self, client: httpx.AsyncClient, promql: str, budget: tuple[Budget, Budget], at: float | None
    ) -> list[dict[str, Any]] | LabelledRows:
        """:meth:`query`, its rows read as their labels' and values' text when the answer has the usual
        shape (:func:`~.answers.decode_labelled`: no object a row alive)."""
        nbytes, nvalues = budget
        body, ctype, status = await self._fetch(client, promql, nbytes, at)
        cut: list[int] = []
        rows = decode_labelled(body, ctype, status, nvalues, cut)
        self._rows_cut += sum(cut)
        return rows

    def _infos_due(self) -> bool:
        """Who the tasks are (~15 labels a task: the largest answer) is read every refresh up to
        ``detail_tasks`` tasks, then every k-th refresh, and at once when an unknown task shows up."""
        every = self._every_k()
        return not self._known or self._polls % every == 0 or (self._full_due and self._fleet_mode())

    def _every_k(self) -> int:
        """Every how many refreshes the answers that rarely change (the identities, each host's node
        detail) are read: 1 up to ``detail_tasks`` tasks, then k so that their cost stays flat."""
        return max(1, math.ceil(len(self._known) / self.detail_tasks))

    def _node_detail_due(self) -> bool:
        """node_exporter/DCGM detail (~300 raw series a node: the costly part for the server) every
        refresh up to ``detail_tasks`` tasks, then every k-th refresh so its cost stays flat; the
        store takes rates over the samples it has, with their own times."""
        return self._polls % self._every_k() == 0

    def _node_queries(self, due: bool) -> list[str]:
        """The node detail queries to read in the background after this refresh. Hosts that fit one GET
        (:func:`~.hosts.fits_one_query`: ~100 IPv4 hosts) are read all at once when ``due`` (every k-th
        refresh). More (where one read stopped fitting a GET: it went as a POST, and read-only mode sent
        none) are read a slice a refresh, in a pass over the hosts (sorted) that starts when due
        and lasts the same k refreshes: each host is read once in the same period, Prometheus' cost
        a second is the same, and no refresh holds every host's query and answer at once (one read of the
        100,000 hosts of the synthetic benchmark's 100,000 tasks was a 16 MB query, sent as a 27.5 MiB
        POST body, which read-only mode refused; an answer grows with the hosts too). A slice goes as
        queries whose URLs fit a GET (:func:`~.hosts.host_queries`), read one after another. A pass is
        taken up where it was when a slow read made a refresh skip its slice; the next one starts when
        it ends (hosts met meanwhile had their detail read at once: :meth:`_new_hosts`)."""
        if self._host_next >= len(self._host_pass):  # no pass under way
            if not (due or self._host_pass):
                return []
            hosts = sorted({h for i in self._known if (h := self._host(i))})
            if fits_one_query(hosts):
                self._host_pass = []
                return [host_query(hosts)] if hosts else []
            self._host_pass, self._host_next = hosts, 0
            self._host_slice = math.ceil(len(hosts) / self._every_k())
        start = self._host_next
        self._host_next += self._host_slice
        return host_queries(self._host_pass[start : self._host_next])

    async def _read_hosts(self, client: httpx.AsyncClient, queries: list[str]) -> list[dict[str, Any]]:
        """The rows of node detail ``queries``, read one after another (one request in flight)."""
        rows: list[dict[str, Any]] = []
        for query in queries:
            rows += await self.query(client, query)
        return rows

    def _node_rows(self) -> list[dict[str, Any]]:
        """The background node query's rows (about 1 s of server time at 1,000 nodes, 16 CPUs each: it
        runs between refreshes and joins the next one, never delaying it) once it has finished, else none."""
        ended, out = self._finished(self._node_task, "node detail")
        if ended:
            self._node_task = None
            self._detail_note = None if out is not None else f"node detail: {self._failure}"
        return out or []

    async def aclose(self) -> None:
        """Stop a node query still running in the background."""
        for task in (self._node_task, self._columns_task):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        self._node_task = self._columns_task = None

    async def poll(self, client: httpx.AsyncClient, clock: Clock) -> list[TaskPoll]:
        t0 = clock.monotonic()
        node_rows = self._node_rows()  # the background query's answer, when it has finished
        self._rows_cut = 0
        asked_at = clock.now()
        at = clock.now() + self._skew - EVAL_LAG_S
        try:
            infos, jobs, ups, values = await self._ask(client, at, clock.monotonic())
        except PrometheusAPIError as exc:  # the server's own words may echo our credentials: redact
            msg = redact_cut(f"Prometheus {self.display}: {exc}", 200, self._secrets())
            log.warning("%s", msg)
            return self._all_failed(msg, clock, t0)
        named = infos is not None  # the identities were read (and taken in at once: their text let go)
        if infos is not None:
            self._name(infos, clock.now())
            infos = None
            targets: dict[str, _Target] | None = self._folded_or_all(values)
        elif isinstance(values, FoldedDetail):
            targets = self._reuse_folded(values, ups)
        else:
            targets = self._reuse_targets(values, ups)
        if targets is None:  # a task we have not met: ask who it is now
            try:
                async with asyncio.timeout(self.timeout):
                    infos = await self.labelled(client, self._info_query, self.budget(), None)
            except (PrometheusAPIError, TimeoutError) as exc:
                msg = redact_cut(
                    f"Prometheus {self.display}: {str(exc) or 'timed out'}", 200, self._secrets()
                )
                log.warning("%s", msg)
                return self._all_failed(msg, clock, t0)
            self._name(infos, clock.now())
            named, infos = True, None
            targets = self._folded_or_all(values)
        if named:
            if isinstance(values, FoldedDetail):  # a fleet's detail holds task values only
                self._no_info = {i for i, v in values.values.items() if v} - self._current.keys()
            else:
                self._no_info = {_ident(r["metric"]) for r in values if _job_value(r)} - self._current.keys()
        now = clock.now()
        fleet = self._fleet_mode()
        if isinstance(values, FoldedDetail):
            self._fill_folded(targets, values)
        else:
            self._fill(targets, values)
        self._measure_lag(targets, at)
        if fleet:  # only the tasks whose detail this refresh read (the focus and the sweep)
            targets = {i: tg for i, tg in targets.items() if math.isfinite(tg.scrape_time)}
        facts, fact_notes = job_facts(jobs)
        server_now = self._server_now
        skew = server_now - asked_at if math.isfinite(server_now) and plausible_time(server_now) else 0.0
        self._skew = skew
        note = f"clock skew {skew:+.1f} s vs Prometheus, corrected" if abs(skew) > SKEW_TOLERANCE_S else None
        self._since = at
        self._unchanged_targets(targets, named)
        hosts = self._new_hosts(targets)
        if hosts:  # read side by side with the tasks' history (else no wait at all: nothing is asked)
            backfill, history = await asyncio.gather(
                self._backfill(client, targets, skew if note else 0.0),
                self._host_history(client, hosts, at, now, skew if note else 0.0),
            )
            polls = backfill + history
        else:
            polls = await self._backfill(client, targets, skew if note else 0.0)
        polls += [
            self._ok(
                ident,
                tg,
                facts.get(tg.info.job),
                now,
                skew,
                _join(note, fact_notes.get(tg.info.job)),
                clock,
                t0,
            )
            for ident, tg in targets.items()
        ]
        polls += self._missing(targets, ups, clock, t0)
        polls += host_polls(node_rows, self.display, now, skew if note else 0.0)  # a host cut says so itself
        self.cap_note = self._cap_notes()
        self._first_columns(client, at, clock.monotonic())
        return polls

    def _first_columns(self, client: httpx.AsyncClient, at: float, now: float) -> None:
        """Once a large fleet's tasks are known, every column is read at once, between this refresh and the
        next (:meth:`FleetReader.first_columns`), so the job's figures join the next refresh whole."""
        reader = self.fleet_reader
        if (
            self._fleet_mode()
            and reader.first_due
            and self._columns_task is None
            and self._columns_due is None
        ):
            self._columns_at = at
            self._columns_task = asyncio.create_task(
                self._in_background(
                    self._read_columns(client, reader.first_columns(now, self._tasks_expr), at)
                )
            )

    async def _backfill(
        self, client: httpx.AsyncClient, targets: dict[str, _Target], skew: float
    ) -> list[TaskPoll]:
        """The recent samples of targets met for the first time (see :mod:`.backfill`);
        none when the query fails (logged: the current values still show)."""
        known = self._known
        new = [i for i in targets if not known[i].backfilled][:MAX_BACKFILL_TARGETS]
        if not new:
            return []
        for i in new:
            known[i].backfilled = True
        try:
            async with asyncio.timeout(self.timeout):
                rows = await self.query(client, backfill_query(new), result_type="matrix")
        except (PrometheusAPIError, TimeoutError) as exc:
            log.warning(
                "%s",
                redact_cut(
                    f"Prometheus {self.display}: history: {str(exc) or 'timed out'}", 300, self._secrets()
                ),
            )
            return []
        polls = backfill_polls(
            rows,
            {i: targets[i].info for i in new},
            {i: targets[i].scrape_time for i in new},
            {i: self._source(i) for i in new},
            skew,
        )
        self._spacings.extend(scrape_spacings(polls))
        return polls

    def _new_hosts(self, targets: dict[str, _Target]) -> list[str]:
        """The hosts of ``targets`` whose node detail was never read (at most :data:`MAX_HISTORY_HOSTS`),
        marked read."""
        read = self._hosts_read
        if len(read) > 4 * max(caps.current().tasks, len(self._known)):
            read.clear()  # a long session's churn of hosts: bounded (a host met again is read again)
        hosts = sorted({h for i in targets if (h := self._host(i)) and h not in read})[:MAX_HISTORY_HOSTS]
        read.update(hosts)
        return hosts

    async def _host_history(
        self, client: httpx.AsyncClient, hosts: list[str], at: float, now: float, skew: float
    ) -> list[TaskPoll]:
        """Node detail of ``hosts`` (met for the first time) read at once: at ``at``, then just before the
        earliest of their last scrapes (so each host's previous scrape, whatever its scrape interval and
        the engine's evaluation offset), so that their CPU and NIC (counters: a rate needs two scrapes)
        show from the first refresh, not after two node detail reads between refreshes. None when the
        reads fail (logged: the background read follows). Hosts too many for one GET are read as several
        queries (:func:`~.hosts.host_queries`), side by side."""
        try:
            async with asyncio.timeout(self.timeout):
                answers = await asyncio.gather(*(self._host_pair(client, q, at) for q in host_queries(hosts)))
        except (PrometheusAPIError, TimeoutError) as exc:
            log.warning(
                "%s",
                redact_cut(
                    f"Prometheus {self.display}: node history: {str(exc) or 'timed out'}",
                    300,
                    self._secrets(),
                ),
            )
            return []
        old = [row for pair in answers for row in pair[0]]
        new = [row for pair in answers for row in pair[1]]
        return host_polls(old, self.display, now, skew) + host_polls(new, self.display, now, skew)

    async def _host_pair(
        self, client: httpx.AsyncClient, query: str, at: float
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """A node detail ``query``'s rows (before, at ``at``) for :meth:`_host_history`."""
        new = await self.query(client, query, at=at)
        stamps = [
            v
            for r in new
            if r["metric"].get(KEY_LABEL) == T_KEY
            and (v := number(r["value"][1])) is not None
            and plausible_time(v)
        ]
        old = await self.query(client, query, at=min(stamps) - 0.001) if stamps else []
        return old, new

    def _measure_lag(self, targets: dict[str, _Target], at: float) -> None:
        """How far behind the engine answers: the newest scrape time read so far against this refresh's
        evaluation instant ``at`` (server clock); kept for the look-back and :attr:`engine_lag_s`."""
        newest = max((t for tg in targets.values() if math.isfinite(t := tg.scrape_time)), default=-math.inf)
        if not math.isfinite(newest):  # nothing read (every target down, none scraped since): no measure
            return
        self._newest = max(self._newest, min(newest, at))  # a sample stamped in the future says nothing
        self._ages.append(min(max(0.0, at - self._newest), MAX_ENGINE_LAG_S))
        if self._fleet_mode():  # a fleet's detail reads a task now and then: its history's spacings only
            return
        known, spacings = (
            self._known,
            self._spacings,
        )  # a target's last scrape: its books' (bounded with them)
        for ident, tg in targets.items():  # every new scrape of a target is read: one interval apart
            t = tg.scrape_time
            if math.isfinite(t):
                books = known[ident]
                if (prev := books.last) is not None and t > prev:
                    spacings.append(t - prev)
                books.last = t

    @property
    def scrape_interval_s(self) -> float | None:
        """The targets' scrape interval (s): the median spacing of a target's consecutive scrapes, read
        refresh by refresh or in its history; None before two scrapes of one target were read."""
        return statistics.median(self._spacings) if self._spacings else None

    @property
    def engine_lag_s(self) -> float | None:
        """How old the engine's newest sample is when it answers (s): the smallest age of the last
        :data:`LAG_REFRESHES` refreshes (an engine that makes samples visible D seconds late shows none
        younger than D; VictoriaMetrics stamps its clock in whole seconds: up to 1 s less); None before
        any sample was read."""
        return min(self._ages) if self._ages else None

    def _lag_note(self) -> str | None:
        """For the status line: the engine's lag when it is past two scrape intervals (and
        :data:`LAG_NOTE_MIN_S`), or its evaluation offset is past :data:`LAG_NOTE_MIN_S`."""
        lag, off = self.engine_lag_s, self._eval_offset
        if lag is None:
            return None
        interval = self.scrape_interval_s
        limit = max(LAG_NOTE_MIN_S, 2 * (interval or 0.0))
        if lag <= limit and off < LAG_NOTE_MIN_S:
            return None
        said = [f"its newest sample is {lag:.0f} s old"]
        said += [f"a scrape every {interval:.3g} s"] if interval else []
        said += [f"it evaluates queries {off:.0f} s back: a latency offset"] if off >= 0.5 else []
        return f"engine lag {lag:.0f} s: every figure is that far behind ({'; '.join(said)})"

    def _reuse_targets(
        self, values: list[dict[str, Any]], ups: list[dict[str, Any]]
    ) -> dict[str, _Target] | None:
        """The identities read last time, for those targets Prometheus still scrapes (each has a
        scrape-time row) and reaches; None when a row names a task not met before."""
        down = {_ident(r.get("metric", {})) for r in ups}
        current, slots, infos, no_info = self._current, self._slots, self._known, self._no_info
        # rows are well formed (decode): ``metric`` is a dict of str; ~7 rows a task a refresh, so
        # read in a few comprehensions rather than one loop with branches (``_ident``, inlined)
        metrics = [r["metric"] for r in values]
        idents = [m.get("instance", "") for m in metrics]
        keys = [m.get(KEY_LABEL) for m in metrics]
        strangers = set(idents) - current.keys() - no_info
        if strangers and any(
            k != T_KEY and k not in NODE_KEYS for i, k in zip(idents, keys, strict=True) if i in strangers
        ):
            return None  # job values from a target we cannot name yet
        return {
            slots[current[i]]: _Target(infos[i].info)  # the string the target's books hold, not this answer's
            for i, k in zip(idents, keys, strict=True)
            if k == T_KEY and i in current and i not in down
        }

    def _targets(self, infos: list[dict[str, Any]] | LabelledRows, now: float) -> dict[str, _Target]:
        """Take in an identity read (:meth:`_name`); every target it names, in its order."""
        self._name(infos, now)
        return self._named_targets()

    def _named_targets(self) -> dict[str, _Target]:
        """Every target the last identity read named, in its order, each with its identity."""
        known = self._known
        return {ident: _Target(known[ident].info) for ident in self._slots}

    def _folded_or_all(self, values: Values) -> dict[str, _Target]:
        """This refresh's targets once the identities are read: in fleet mode, those whose folded detail was
        read (:meth:`_read_targets`, the only ones poll keeps), else every target named."""
        if isinstance(values, FoldedDetail) and self._fleet_mode():
            return self._read_targets(values)
        return self._named_targets()

    def _read_targets(self, folded: FoldedDetail) -> dict[str, _Target]:
        """The targets named by the last identity read whose folded detail this refresh read (a scrape
        time each), in the identity read's order: in fleet mode the only ones kept after
        :meth:`_fill_folded` (a finite scrape time), so the 100,000 others are not made to be dropped."""
        current, slots, known = self._current, self._slots, self._known
        read = sorted(n for i in folded.times if (n := current.get(i)) is not None)
        return {(ident := slots[n]): _Target(known[ident].info) for n in read}

    def _name(self, infos: list[dict[str, Any]] | LabelledRows, now: float) -> None:
        """Take in an identity read: each target's identity (the same object while the labels it is made
        of stay the same: :func:`_made_from`), who moved or went (:meth:`_follow`), the slots and a large
        fleet's reader. Compared as it goes with the last read: while each row names the target of its
        slot with its identity unchanged (the usual re-read), nothing new is made; the slots, the position
        dict and the fleet's columns, order and key hashes are kept (they would be made again the same)."""
        rows: Iterable[Mapping[str, str]] = (
            map(labels_of, infos.labels) if isinstance(infos, LabelledRows) else (r["metric"] for r in infos)
        )
        current, slots, known = self._current, self._slots, self._known
        out: dict[str, TaskInfo] | None = None  # made at the first row that differs from the last read
        n = 0  # rows read while every one matched its slot
        for labels in rows:
            ident = _ident(labels)
            if (slot := current.get(ident)) is not None:  # a target named before: the string its books hold
                ident = slots[slot]
            books = known.get(ident)
            info = books.info if books is not None else None
            if info is None or not _made_from(info, labels):  # a new task, or its labels changed
                info = _info(labels)
            if out is None:
                if slot == n and books is not None and info is books.info:
                    n += 1
                    continue
                out = {i: known[i].info for i in slots[:n]}  # the rows that matched, as they were
            out[ident] = info
        if out is None and n != len(slots):  # fewer rows than slots: some went
            out = {i: known[i].info for i in slots[:n]}
        self._follow(_Named(current, known) if out is None else out, now)
        carried = self._carried
        if out is not None:
            for ident, info in out.items():
                books = known.get(ident)
                if books is not None:
                    books.info = info
                    continue
                books = known[ident] = _Books(info)
                if carried and (source := carried.pop(ident, None)) is not None:  # a task's name, carried on
                    books.source, books.backfilled = source, True
        carried.clear()  # every target carried on to is named by this read: none is left (bounded)
        if out is not None:
            self._slots = slots = list(out)
            self._current = current = {i: n for n, i in enumerate(slots)}
            self._gone_cache = None
            if len(out) > self.focus_from:
                self.fleet_reader.know(out, slots=(slots, current))
        if len(slots) > self.focus_from:
            self._full_due = False  # a fleet's newcomers are read in detail next refresh, not all tasks

    def _follow(self, named: Mapping[str, TaskInfo], now: float) -> None:
        """Identity follows a task across addresses (``named``: this identity read's targets). A known task
        no longer at its address that another address now answers for was replaced (a spot VM's successor
        keeps the name, gets a new address): the new address carries on under the old one's source name (the
        same task to the lifecycle: up, not revoked, no extra row) and the old address is forgotten at once.
        An address that answers for another task now (addresses are reused) gets a source name of its own;
        the task it had, found nowhere, is reported gone (:meth:`_missing`) like any target no longer named,
        and forgotten after :attr:`forget_after_s`."""
        known = self._known
        moved = [
            (i, books.info) for i, books in known.items() if i not in named or named[i].key != books.info.key
        ]
        # the addresses now answering for the keys looked up below (the last one naming a key, as a dict
        # of every key would hold): only those keys, not a dict of 100,000
        wanted = {info.key for _, info in moved} | self._lost.keys()
        by_key: dict[str, str] = {}
        if wanted:
            for ident, info in named.items():
                if (key := info.key) in wanted:
                    by_key[key] = ident
        sources = {i: self._source(i) for i, _ in moved}  # before any of them is handed on
        carry: list[tuple[str, str, str, str]] = []  # (successor, source, task, old address)
        for ident, info in moved:
            successor = by_key.get(info.key)
            here = known.get(successor) if successor is not None else None
            if successor is not None and (here is None or here.info.key != info.key):  # it moved
                carry.append((successor, sources[ident], info.key, ident))
                if ident in named:
                    self._release(ident)
                else:
                    self._drop(ident)
            elif ident in named:  # its address answers for another task now, and it is found nowhere
                self._release(ident)
                if len(self._lost) < caps.current().tasks:
                    self._lost[info.key] = (info, sources[ident], now)
            elif now - self._gone.setdefault(ident, now) > self.forget_after_s:
                self._drop(ident)
        for key in [k for k in self._lost if k in by_key]:  # a task reported gone, back at a new address
            info, source, _ = self._lost.pop(key)
            successor = by_key[key]
            if (here := known.get(successor)) is None or here.info.key != key:
                self._release(successor)
                carry.append((successor, source, key, ""))
        for successor, source, key, was in carry:  # once every old name is released (two tasks may swap)
            self._carry_on(successor, source, key, was)
        for ident in named.keys() & self._gone.keys():  # named again
            del self._gone[ident]

    def _carry_on(self, successor: str, source: str, key: str, was: str) -> None:
        """``successor`` answers for the task that was known under ``source``: it takes the name on, and its
        history is the task's, read at the old address (a target named for the first time gets both when
        its books are made: :meth:`_targets`)."""
        self._in_use[source] = successor  # listed: not its own name, or taken as if it were not
        books = self._known.get(successor)
        if books is None:
            self._carried[successor] = source
        else:
            books.source, books.backfilled = source, True
        self.replaced += 1
        log.info(
            "%s: %s moved%s to %s (replaced)", self.display, key, f" from {was}" if was else "", successor
        )

    def _release(self, ident: str) -> None:
        """Forget what was made for the task at ``ident`` (its source name, last scrapes, history mark)."""
        self._carried.pop(ident, None)
        books = self._known.get(ident)
        if books is None:
            return
        if books.source is not None and self._in_use.get(books.source) == ident:
            del self._in_use[books.source]
        books.source = books.seen = books.last = None
        books.backfilled = False

    def _drop(self, ident: str) -> None:
        """Forget a target: its identity, its cached labels and names, its history read and its last scrape."""
        self._release(ident)
        for book in (self._known, self._gone):
            book.pop(ident, None)
        self._gone_cache = None

    @property
    def status_note(self) -> str | None:
        """For the status line: an engine that answers late (:meth:`_lag_note`), node detail that failed (the
        last read: refused, timed out), fleet column values ignored (the last read), and how many tasks moved
        to a new address this session ("replaced")."""
        replaced = (
            self.replaced
            and f"{self.replaced:,} task(s) replaced (same name, new address): followed, not revoked"
        )
        bad = self.fleet_reader.implausible
        columns = (
            bad and f"fleet columns: {bad:,} implausible value(s) ignored (negative, not finite or past 1e30)"
        )
        return _join(self._lag_note(), self._detail_note, columns or None, replaced or None)

    def _reuse_folded(self, folded: FoldedDetail, ups: list[dict[str, Any]]) -> dict[str, _Target] | None:
        """:meth:`_reuse_targets` for a large fleet's folded detail: the targets read (a scrape time each)
        that Prometheus still names and reaches; None when a task not met before has values."""
        down = {_ident(r.get("metric", {})) for r in ups}
        current, slots, infos, no_info = self._current, self._slots, self._known, self._no_info
        if any(v and i not in current and i not in no_info for i, v in folded.values.items()):
            return None  # job values from a target we cannot name yet
        return {
            ident: _Target(infos[ident].info)
            for i in folded.times
            if (slot := current.get(i)) is not None and (ident := slots[slot]) not in down
        }

    def _fill_folded(self, targets: dict[str, _Target], folded: FoldedDetail) -> None:
        """:meth:`_fill` for a large fleet's folded detail (its values are finite numbers already): each
        task's dict is handed on as it is when every value is plausible (each key's range read once a
        call: :func:`~cmdare.collectors.metrics.value_range`, ~8,000 values a refresh at 100,000 tasks)."""
        ranges: dict[str, tuple[float, float]] = {}
        for inst, text in folded.times.items():
            tg = targets.get(inst)
            if tg is not None:
                val = number(text)
                tg.scrape_time = val if val is not None and plausible_time(val) else math.nan
        for inst, values in folded.values.items():
            tg = targets.get(inst)
            if tg is None:
                continue
            bad = 0
            for k, v in values.items():
                got = ranges.get(k)
                if got is None:
                    got = ranges[k] = M.value_range(k)
                if not got[0] <= v <= got[1]:
                    bad += 1
            if not bad:  # the usual case: the task's dict as it is
                tg.values = values
                continue
            kept = {k: v for k, v in values.items() if M.valid_value(k, v)}
            tg.dropped += len(values) - len(kept)  # one bad value goes, never the task
            tg.values = kept

    def _fill(self, targets: dict[str, _Target], values: list[dict[str, Any]]) -> None:
        valid = M.valid_value
        for r in values:  # rows are well formed (decode): ``metric`` a dict, ``value`` a pair
            labels = r["metric"]
            key = labels.get(KEY_LABEL, "")
            tg = targets.get(labels.get("instance", ""))  # _ident, inlined
            if not key or tg is None:
                continue
            val = number(r["value"][1])
            if key == T_KEY:
                tg.scrape_time = val if val is not None and plausible_time(val) else math.nan
            elif val is None or not valid(key, val):
                tg.dropped += 1  # one bad value goes (NaN, inf, huge, a negative counter), never the task
            else:
                tg.values[key] = val

    def _ok(
        self,
        ident: str,
        tg: _Target,
        facts: JobFacts | None,
        now: float,
        skew: float,
        note: str | None,
        clock: Clock,
        t0: float,
    ) -> TaskPoll:
        # Stamp with the sample's own scrape time (in our clock) so rates use the real sampling interval.
        t = tg.scrape_time - skew if math.isfinite(tg.scrape_time) and note else tg.scrape_time
        if not math.isfinite(t):
            t = now
        if tg.dropped:
            note = _join(note, f"{tg.dropped} implausible value(s) ignored")
        return TaskPoll(
            source=self._source(ident),
            t=t,
            ok=True,
            info=tg.info,
            values=tg.values,
            error=note,
            job_facts=facts,
            elapsed=clock.monotonic() - t0,
            host=self._host(ident),
        )

    def _unchanged_targets(self, targets: dict[str, _Target], full: bool) -> None:
        """Above ``detail_tasks`` tasks, drop the targets whose scrape time is the one already handed
        on (read again inside the look-back): nothing new, no poll. ``full``: the identities were read
        (forget targets no longer named)."""
        if max(len(self._known), self._total or 0) <= self.detail_tasks:
            return
        known = (
            self._known
        )  # the scrape time last handed on: each target's books' (every target read is known)
        if full:  # targets no longer named: handed on afresh when named again
            for ident in self._gone_known():
                known[ident].seen = None
        for ident in [i for i, tg in targets.items() if known[i].seen == tg.scrape_time]:
            del targets[ident]
        for ident, tg in targets.items():
            known[ident].seen = tg.scrape_time

    def _missing(
        self, targets: dict[str, _Target], ups: list[dict[str, Any]], clock: Clock, t0: float
    ) -> list[TaskPoll]:
        """Failed polls for known tasks that Prometheus reports down or no longer has. Above
        ``detail_tasks`` tasks a task not read this refresh but still named and up is unchanged
        (counted in :attr:`unchanged`, no poll)."""
        down = {_ident(r.get("metric", {})) for r in ups if number(r.get("value", [0, ""])[1]) == 0}
        large = max(len(self._known), self._total or 0) > self.detail_tasks
        fleet = large and self._fleet_mode()
        missing = set() if fleet else self._known.keys() - targets.keys()  # a fleet's: below
        if fleet:  # a fleet's tasks not read: the sweep's turn, unchanged unless down or no longer named;
            # counted from the few read and the few failed (no pass over 100,000 tasks)
            known = self._known
            failed = (self._gone_known() | {i for i in down if i in known}) - targets.keys()
            read = sum(1 for i in targets if i in self._known)
            self.unchanged = len(self._known) - read - len(failed)
            missing = failed
        elif large:  # still named and up, not read this refresh: unchanged
            quiet = (missing & self._current.keys()) - down
            quiet = {i for i in quiet if self._known[i].seen is not None}  # handed on before
            missing -= quiet
            self.unchanged = len(quiet)
        else:
            self.unchanged = 0
        out = []
        for ident in [i for i in self._known if i in missing] if missing else []:  # in the known order
            why = "target down in Prometheus" if ident in down else "no longer in Prometheus"
            out.append(
                TaskPoll(
                    source=self._source(ident),
                    t=clock.now(),
                    ok=False,
                    info=self._known[ident].info,
                    error=why,
                    elapsed=clock.monotonic() - t0,
                )
            )
        now = clock.now()
        for key, (info, source, since) in list(self._lost.items()):  # displaced from a reused address
            if now - since > self.forget_after_s:
                del self._lost[key]
                continue
            why = "no longer in Prometheus (its address answers for another task)"
            out.append(
                TaskPoll(source=source, t=now, ok=False, info=info, error=why, elapsed=clock.monotonic() - t0)
            )
        return out

    def _gone_known(self) -> set[str]:
        """The known targets the last identity read did not name (made again only when either changed)."""
        if self._gone_cache is None:
            self._gone_cache = set(self._known.keys() - self._current.keys())
        return self._gone_cache

    def _all_failed(self, msg: str, clock: Clock, t0: float) -> list[TaskPoll]:
        el = clock.monotonic() - t0
        if not self._known:
            return [TaskPoll(source=self.display, t=clock.now(), ok=False, error=msg, elapsed=el)]
        return [
            TaskPoll(source=self._source(i), t=clock.now(), ok=False, info=books.info, error=msg, elapsed=el)
            for i, books in self._known.items()
        ]

    def _source(self, ident: str) -> str:
        """A known target's source name, made once (asked every refresh for each target read): its own,
        ``display#instance``, unless another target carries that name on (a task that moved away from this
        address): then numbered. A name is never given twice."""
        books = self._known[ident]
        if books.source is None:
            source = base = f"{self.display}#{ident}"
            n = 1
            while self._taken(source, ident):
                n += 1
                source = f"{base}#{n}"
            if n > 1:
                self._in_use[source] = ident  # not its own name: listed
            books.source = source
        return books.source

    def _taken(self, source: str, ident: str) -> bool:
        """Whether a target other than ``ident`` holds the source name ``source``: one listed in
        ``_in_use``, or the target whose own name it is (``display#instance``: only it can hold it so)."""
        holder = self._in_use.get(source)
        if holder is not None:
            return holder != ident
        other = source[len(self.display) + 1 :]
        books = self._known.get(other) if other != ident else None
        return books is not None and books.source == source

    def _host(self, ident: str) -> str:
        """A known target's host (its instance's, :func:`~cmdare.collectors.hostdetail.host_name`), made once."""
        books = self._known[ident]
        if books.host is None:
            books.host = host_name(ident)
        return books.host


def _get_url(url: str, form: dict[str, str]) -> httpx.URL | None:
    """The GET URL for ``form`` (encoded once: :mod:`.query_url`), or None when it would be longer than
    :data:`MAX_GET_URL`."""
    if len(form["query"]) > MAX_GET_URL:  # httpx refuses URL parts over 64 kB: not even built
        return None
    get = query_url(url, form)
    return httpx.URL(get) if len(get) <= MAX_GET_URL else None


def _join(*notes: str | None) -> str | None:
    return "; ".join(n for n in notes if n) or None


def _job_value(row: dict[str, Any]) -> bool:
    """A row of a task's own series (not a scrape time, not node detail joined by host)."""
    key = row["metric"].get(KEY_LABEL)
    return key != T_KEY and key not in NODE_KEYS
