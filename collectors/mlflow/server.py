"""Poll an MLflow tracking server's REST API (``/api/2.0/mlflow``) and turn its runs into task polls
(:mod:`cmdare.collectors.mlflow.run`: the rules every log source shares).

Each poll asks:

* ``GET experiments/search`` (every :data:`LIST_EVERY_S`, active experiments, paged up to
  :data:`MAX_EXPERIMENTS`): the experiments' names (a run's job);
* ``POST runs/search`` (one request): the :data:`MAX_RUNS` runs started last in those experiments, with
  their status and each metric's latest point;
* ``GET metrics/get-history`` for one key of each run still running (at most :data:`MAX_HISTORY_RUNS` a
  poll, round robin): the run's *clock key* (the key logged at the highest step, a training loss
  first), read from where the last poll stopped in pages of :data:`HISTORY_PAGE` points, following the
  server's own page tokens (the partial last page is read again next time: at most one page twice). Its
  every point goes through the timeline, so a step going back (a resumed run: MLflow's latest point
  stays the abandoned highest step) is seen as a restart and the rate counts the new timeline only.
  Every key's latest point is folded in after the history (a history behind or unreadable still leaves
  the newest step). A run already finished when first seen is read from its latest points alone.

MLflow lists runs only by ``POST``: in read-only mode (which sends no request but ``GET``) the source
says so and reads nothing; the file store (``--mlruns``) is read without any request.

Credentials: ``user:password`` in the URL, or MLflow's own ``MLFLOW_TRACKING_USERNAME`` /
``MLFLOW_TRACKING_PASSWORD`` / ``MLFLOW_TRACKING_TOKEN``: sent in the ``Authorization`` header only, never
shown, logged or recorded, and redacted from any text a server echoes them in. Every request runs under
the source's timeout; every answer is capped (:data:`MAX_BODY_BYTES`, on the wire and inflated) and parsed
as JSON; an error answer is shown as its status and MLflow's ``error_code`` and message, redacted and cut.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson

from cmdare.collectors import writes
from cmdare.collectors.clock import Clock
from cmdare.collectors.http_client import ACCEPT_ENCODING, BodyError, read_body
from cmdare.collectors.metrics import log_scalar_kind
from cmdare.collectors.mlflow.run import (
    IDLE_AFTER_S,
    SYSTEM_PREFIX,
    RunTimeline,
    last_step,
    run_names,
    turning_points,
)
from cmdare.collectors.prometheus.auth import BasicAuth, BearerToken, public_url
from cmdare.collectors.redaction import redact_cut
from cmdare.collectors.samples import TaskInfo, TaskPoll
from cmdare.collectors.scrape.source import describe_error

log = logging.getLogger(__name__)

API = "/api/2.0/mlflow"
MAX_EXPERIMENTS = 1000  # experiments listed (names of the runs' jobs)
EXPERIMENTS_PAGE = 1000  # experiments per experiments/search answer (the server's own maximum is 50,000)
MAX_RUNS = 256  # runs shown: the most recently started
MAX_HISTORY_RUNS = 16  # runs whose clock key's history is read per poll (round robin past it)
HISTORY_PAGE = 5000  # points per get-history answer (~0.5 MB of JSON)
MAX_PAGES_PER_POLL = 2  # history pages read per run per poll (a long backlog is read over several polls)
HISTORY_CONCURRENCY = 4  # history requests in flight at once
MAX_BODY_BYTES = (
    16 * 1024 * 1024
)  # one answer, on the wire and inflated (runs/search carries params and tags)
LIST_EVERY_S = 10.0  # experiments listed again this often
ERROR_TEXT = 200  # characters of a server's error message shown
LIVE = ("RUNNING", "SCHEDULED")


class MlflowError(Exception):
    """A request that failed: one line, credentials redacted."""


@dataclass
class _History:
    key: str  # the run's clock key
    token: str = ""  # the page token the unread part starts in ("" = the first page)
    seen: int = 0  # points of that page already folded


@dataclass
class _ServerRun:
    timeline: RunTimeline
    experiment: str
    history: _History | None = None
    behind: bool = False  # history still has pages to read
    latest: list[tuple[str, float, float, float]] = field(default_factory=list)  # key, value, ts ms, step


class MlflowServerSource:
    """Polls one MLflow tracking server; one :class:`TaskPoll` per run per poll."""

    name = "mlflow"

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 2.0,
        experiments: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        idle_after_s: float = IDLE_AFTER_S,
    ) -> None:
        parts = urlsplit(url)
        self.display = public_url(url.rstrip("/"))  # no credentials, no query: safe to show and record
        self.base = self.display + API
        self.timeout = timeout
        self.only = set(experiments)  # experiment names to show (all when empty)
        self.idle_after_s = idle_after_s
        env = {} if env is None else env
        user = parts.username or env.get("MLFLOW_TRACKING_USERNAME", "")
        password = parts.password or env.get("MLFLOW_TRACKING_PASSWORD", "")
        token = env.get("MLFLOW_TRACKING_TOKEN", "").strip()
        self._basic = BasicAuth(user, password) if user else None
        self._token = BearerToken(token) if token and not user else None
        self._experiments: dict[str, str] = {}  # id -> name
        self._listed_at = -math.inf
        self._runs: dict[str, _ServerRun] = {}
        self._turn = 0  # round robin over the running runs past MAX_HISTORY_RUNS
        self._notes: list[str] = []

    def __repr__(self) -> str:
        return f"MlflowServerSource({self.display!r})"

    def _secrets(self) -> tuple[str, ...]:
        return tuple(c.secret() for c in (self._token, self._basic) if c is not None)

    # --- requests ---------------------------------------------------------------------------------
    async def _ask(
        self, client: httpx.AsyncClient, method: str, path: str, *, params: dict[str, Any] | None = None,
        body: dict[str, Any] | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        """One request under the source's timeout; the answer's JSON object, or :class:`MlflowError`."""
        headers = {"Accept": "application/json", "Accept-Encoding": ACCEPT_ENCODING}
        for cred in (self._basic, self._token):
            headers.update(cred.header() if cred else {})
        if body is not None:
            headers["Content-Type"] = "application/json"
        try:
            async with asyncio.timeout(self.timeout):
                request = client.stream(
                    method, self.base + path, params=params, headers=headers,
                    content=orjson.dumps(body) if body is not None else None,
                )  # fmt: skip
                async with request as resp:
                    raw = await read_body(resp, MAX_BODY_BYTES)
                    status = resp.status_code
        except (httpx.HTTPError, BodyError, OSError, TimeoutError) as exc:
            raise MlflowError(f"{path}: {describe_error(exc)}") from None
        try:
            obj = orjson.loads(bytes(raw)) if raw else {}
        except orjson.JSONDecodeError:
            obj = None
        if status != 200:
            what = ""
            if isinstance(obj, dict):
                what = f": {obj.get('error_code', '')} {obj.get('message', '')}".rstrip()
            raise MlflowError(redact_cut(f"{path}: HTTP {status}{what}", ERROR_TEXT, self._secrets()))
        if not isinstance(obj, dict):
            raise MlflowError(f"{path}: the answer is not a JSON object")
        return obj

    async def _list_experiments(self, client: httpx.AsyncClient) -> None:
        found: dict[str, str] = {}
        token = ""
        pages = MAX_EXPERIMENTS // EXPERIMENTS_PAGE + 1  # bounded even when a name filter keeps few
        for _ in range(pages):
            params = {"max_results": str(EXPERIMENTS_PAGE), "view_type": "ACTIVE_ONLY"}
            if token:
                params["page_token"] = token
            answer = await self._ask(client, "GET", "/experiments/search", params=params)
            for exp in _objects(answer.get("experiments")):
                eid, name = exp.get("experiment_id"), exp.get("name")
                if isinstance(eid, str) and isinstance(name, str) and (not self.only or name in self.only):
                    found[eid] = name
            token = answer.get("next_page_token") or ""
            if not isinstance(token, str) or not token or len(found) >= MAX_EXPERIMENTS:
                break
        if len(found) >= MAX_EXPERIMENTS:
            self._notes.append(f"only the first {MAX_EXPERIMENTS:,} experiments read")
        self._experiments = dict(list(found.items())[:MAX_EXPERIMENTS])

    async def _search_runs(self, client: httpx.AsyncClient) -> list[dict[str, Any]]:
        body = {
            "experiment_ids": list(self._experiments),
            "max_results": MAX_RUNS,
            "order_by": ["attributes.start_time DESC"],
            "run_view_type": "ACTIVE_ONLY",
        }
        answer = await self._ask(client, "POST", "/runs/search", body=body)
        runs = _objects(answer.get("runs"))[:MAX_RUNS]
        if len(runs) >= MAX_RUNS and answer.get("next_page_token"):
            self._notes.append(f"showing the {MAX_RUNS} runs started last")
        return runs

    async def _read_history(self, client: httpx.AsyncClient, run_id: str, run: _ServerRun) -> None:
        """Fold the clock key's points logged since the last read (up to MAX_PAGES_PER_POLL pages)."""
        hist = run.history
        assert hist is not None
        run.behind = False
        for _ in range(MAX_PAGES_PER_POLL):
            params = {"run_id": run_id, "metric_key": hist.key, "max_results": str(HISTORY_PAGE)}
            if hist.token:
                params["page_token"] = hist.token
            answer = await self._ask(client, "GET", "/metrics/get-history", params=params)
            points = _objects(answer.get("metrics"))
            new = [(pt[1], pt[0], pt[2]) for p in points[hist.seen :] if (pt := _point(p)) is not None]
            before = last_step(run.timeline, hist.key)
            for ts, value, step in turning_points(new, before):  # the newest point, and any step going back
                run.timeline.add(hist.key, value, ts, step)
            token = answer.get("next_page_token")
            if isinstance(token, str) and token and len(points) >= HISTORY_PAGE:
                hist.token, hist.seen = token, 0  # a full page: the next one starts at the server's token
                run.behind = True
                continue
            hist.seen = max(hist.seen, len(points))
            run.behind = False
            return

    # --- runs -------------------------------------------------------------------------------------
    def _update(self, found: list[dict[str, Any]]) -> None:
        """Runs as the search found them: names, statuses, latest points; the clock key chosen once."""
        rows = []
        for r in found:
            info, data = r.get("info"), r.get("data")
            if not isinstance(info, dict):
                continue
            run_id, exp = info.get("run_id") or info.get("run_uuid"), info.get("experiment_id")
            if not isinstance(run_id, str) or not run_id or not isinstance(exp, str):
                continue
            name = info.get("run_name")
            rows.append((exp, run_id, name if isinstance(name, str) else "", info, data))
        names = run_names([(e, r, n) for e, r, n, _, _ in rows])
        runs: dict[str, _ServerRun] = {}
        for exp, run_id, _, info, data in rows:
            ident = TaskInfo(job=self._experiments.get(exp, exp), task=names[run_id], role="chief")
            run = self._runs.get(run_id) or _ServerRun(RunTimeline(ident, f"{self.display}#{run_id}"), exp)
            run.timeline.info = ident
            status = info.get("status")
            run.timeline.status = status if isinstance(status, str) and status else "RUNNING"
            metrics = _objects(data.get("metrics")) if isinstance(data, dict) else []
            run.latest = [
                (p["key"], *pt)
                for p in metrics
                if isinstance(p.get("key"), str) and (pt := _point(p)) is not None
            ]
            if run.history is None and run.timeline.status in LIVE:  # a running run: follow its timeline
                key = _clock_key(run.latest)
                run.history = _History(key) if key else None
            runs[run_id] = run
        self._runs = runs

    def _fold_latest(self) -> None:
        """Every run's latest points, after its history: the clock key's too, so a run whose history is
        behind or unreadable still shows its newest step (a latest point MLflow keeps from an abandoned
        timeline is older than the restart the history showed, and dropped)."""
        for run in self._runs.values():
            for key, value, ts, step in run.latest:
                run.timeline.add(key, value, ts, step)

    async def poll(self, client: httpx.AsyncClient, clock: Clock) -> list[TaskPoll]:
        """One poll per run; a failed request fails every run known (or the server's own row)."""
        t0 = clock.monotonic()
        if writes.is_read_only():
            error = ("read-only mode sends no POST, and MLflow lists runs only by POST (runs/search): nothing "
                     "read; --mlruns reads a file store without any request")  # fmt: skip
            return [TaskPoll(source=self.display, t=clock.now(), ok=False, error=error)]
        try:
            if clock.monotonic() - self._listed_at >= LIST_EVERY_S or not self._experiments:
                await self._list_experiments(client)
                self._listed_at = clock.monotonic()
            found = await self._search_runs(client) if self._experiments else []
        except MlflowError as exc:
            return self._failed(clock, f"MLflow {self.display}: {exc}")
        self._update(found)
        await self._read_histories(client)
        self._fold_latest()
        if not self._runs:
            what = "no experiment" if not self._experiments else "no runs"
            return [
                TaskPoll(
                    source=self.display, t=clock.now(), ok=False, error=f"MLflow {self.display}: {what} found"
                )
            ]
        polls = [
            run.timeline.poll(clock, self.idle_after_s, clock.monotonic() - t0, run.behind)
            for run in self._runs.values()
        ]
        if self._notes:
            polls[0] = replace(polls[0], error="; ".join(filter(None, [polls[0].error, *self._notes])))
            self._notes = []
        return polls

    async def _read_histories(self, client: httpx.AsyncClient) -> None:
        """The clock key's new points of the running runs (MAX_HISTORY_RUNS a poll, in turn), within one
        ``timeout`` in all: a slow server never holds a refresh for more; what is left is read next poll
        (a page is applied whole or not at all)."""
        live = [
            (rid, run)
            for rid, run in self._runs.items()
            if run.history is not None and run.timeline.status in LIVE
        ]
        if len(live) > MAX_HISTORY_RUNS:
            start = self._turn % len(live)
            live = (live[start:] + live[:start])[:MAX_HISTORY_RUNS]
            self._turn += MAX_HISTORY_RUNS
        gate = asyncio.Semaphore(HISTORY_CONCURRENCY)

        done: set[str] = set()

        async def one(run_id: str, run: _ServerRun) -> None:
            async with gate:
                try:
                    await self._read_history(client, run_id, run)
                except MlflowError as exc:
                    run.timeline.notes.append(f"history: {exc}")
                done.add(run_id)

        try:
            async with asyncio.timeout(self.timeout):
                await asyncio.gather(*(one(rid, run) for rid, run in live))
        except TimeoutError:
            for rid, run in live:
                if rid not in done:
                    run.behind = True  # catching up: the rest next poll
                    run.timeline.notes.append(f"history: not all read within {self.timeout:g} s")

    def _failed(self, clock: Clock, error: str) -> list[TaskPoll]:
        log.warning("%s", error)
        if self._runs:  # the runs it showed fail (and turn silent), no other row appears
            return [
                TaskPoll(
                    source=run.timeline.source, t=clock.now(), ok=False, info=run.timeline.info, error=error
                )
                for run in self._runs.values()
            ]
        return [TaskPoll(source=self.display, t=clock.now(), ok=False, error=error)]


def _objects(value: object) -> list[dict[str, Any]]:
    """The JSON objects of a list in an answer (anything else in it left out)."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _number(value: object) -> float | None:
    """A JSON number, or a number as text (MLflow's JSON writes 64-bit integers as strings), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and len(value) <= 32:
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _point(p: dict[str, Any]) -> tuple[float, float, float] | None:
    """``(value, timestamp ms, step)`` of a metric point of an answer (step 0 when absent), or None."""
    value, ts, step = _number(p.get("value")), _number(p.get("timestamp")), _number(p.get("step", 0))
    if value is None or ts is None or step is None:
        return None
    return value, ts, step


def _clock_key(latest: list[tuple[str, float, float, float]]) -> str:
    """The key whose history gives the run's timeline: logged at the highest step (a training loss first
    among those, then by name); "" when every key is at step 0 (no timeline to follow)."""
    training = [(key, step) for key, _, _, step in latest if not key.startswith(SYSTEM_PREFIX)]
    top = max((step for _, step in training), default=0.0)
    if top <= 0:
        return ""
    keys = sorted(key for key, step in training if step == top)
    return min(
        keys, key=lambda k: (0, hit[1]) if (hit := log_scalar_kind(k)) and hit[0] == "loss" else (1, 0)
    )
