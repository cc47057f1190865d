"""Backfill through a Prometheus server: the recent samples of a task met for the first time.

An instant query gives one sample a target a refresh, so a short look (``snapshot --samples 3``)
would rate over one scrape interval, or none at all when Prometheus scrapes every 15 s. Prometheus
already holds the history: for targets not met before, one range query
(``{__name__=~"cmdare_worker_steps_total|…", instance=~"…"}[60s]``) returns every raw sample of the
counters that make rates, each with Prometheus' own scrape timestamp. They become polls older than
the current one, so the first refresh already rates over the newest complete scrape intervals.
Pure functions: query text in, polls out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from cmdare.collectors import metrics as M
from cmdare.collectors.clock import plausible_time
from cmdare.collectors.hostdetail import host_name
from cmdare.collectors.prometheus.hosts import promql_string
from cmdare.collectors.samples import TaskInfo, TaskPoll

BACKFILL_S = 60  # seconds of history read for a few new targets (the store bridges up to six 10 s windows)
BACKFILL_BUDGET = 6000  # target-seconds of history per refresh: 200 new targets get 30 s each
MIN_BACKFILL_S = 15
BACKFILL_POINTS = 12  # newest samples kept per target (a 10 s window at a 1 s scrape interval)
MAX_BACKFILL_TARGETS = 200  # new targets backfilled in one refresh (a fleet's first refreshes stay cheap)
#: The rate-making counters read back (sample name = series key), the preemption notice, and the PS
#: traffic (keyed by direction).
_KEYS = {
    key: key
    for key in (
        M.K_GLOBAL_STEP,
        *M.STEP_COUNTER_KEYS,
        M.K_PREEMPTED,  # a task met under a preemption notice is revoked from its oldest sample on
    )
}
_PS = M.PS_BYTES_SAMPLE


def backfill_seconds(n_targets: int) -> int:
    """How far back to read for ``n_targets`` new targets: 60 s for a few, less for many."""
    return max(MIN_BACKFILL_S, min(BACKFILL_S, BACKFILL_BUDGET // max(1, n_targets)))


def backfill_query(instances: Iterable[str], seconds: int | None = None) -> str:
    """The range query for the rate-making counters of exactly these scrape targets."""
    import re

    wanted = sorted(set(instances))
    seconds = seconds or backfill_seconds(len(wanted))
    alts = "|".join(re.escape(i) for i in wanted)
    names = "|".join(sorted([*_KEYS, _PS]))
    return f'{{__name__=~"{names}",instance=~"{promql_string(alts)}"}}[{seconds}s]'


def _key(labels: Mapping[str, str]) -> str | None:
    name = labels.get("__name__", "")
    if name == _PS:
        return M.K_PS_IN if labels.get("direction") == "in" else M.K_PS_OUT
    return _KEYS.get(name)


def _fold(rows: list[dict[str, Any]]) -> dict[str, dict[float, dict[str, float]]]:
    """instance → scrape time → key → value (series of one scrape config per instance)."""
    out: dict[str, dict[float, dict[str, float]]] = {}
    job_of: dict[str, str] = {}
    for r in rows:
        labels, values = r.get("metric"), r.get("values")
        if type(labels) is not dict or type(values) is not list:
            continue
        key, inst = _key(labels), str(labels.get("instance", ""))
        if key is None or job_of.setdefault(inst, str(labels.get("job", ""))) != labels.get("job", ""):
            continue  # another scrape config reading the same target: its samples would interleave
        times = out.setdefault(inst, {})
        for pair in values:
            try:
                t, v = float(pair[0]), float(pair[1])
            except (TypeError, ValueError, IndexError):
                continue
            if plausible_time(t) and M.valid_value(key, v):
                point = times.setdefault(t, {})
                point[key] = point.get(key, 0.0) + v
    return out


def backfill_polls(
    rows: list[dict[str, Any]],
    infos: Mapping[str, TaskInfo],
    before: Mapping[str, float],
    source: Mapping[str, str],
    skew: float = 0.0,
) -> list[TaskPoll]:
    """Polls for the samples older than each target's current one (``before``), oldest first."""
    out: list[TaskPoll] = []
    for inst, times in _fold(rows).items():
        info, limit = infos.get(inst), before.get(inst, math.inf)
        limit = limit if math.isfinite(limit) else math.inf
        if info is None:
            continue
        for t in sorted(t for t in times if t < limit)[-BACKFILL_POINTS:]:
            out.append(
                TaskPoll(
                    source=source[inst], t=t - skew, ok=True, info=info, values=times[t], host=host_name(inst)
                )
            )
    out.sort(key=lambda p: p.t)
    return out


def scrape_spacings(polls: list[TaskPoll]) -> list[float]:
    """The spacings of each target's consecutive samples in ``polls`` (its scrape interval, as its
    history shows it)."""
    times: dict[str, list[float]] = {}
    for p in polls:
        times.setdefault(p.source, []).append(p.t)
    out = []
    for ts in times.values():
        ts.sort()
        out += [b - a for a, b in zip(ts, ts[1:], strict=False) if b > a]
    return out
