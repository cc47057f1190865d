"""The last check before a poll's values enter the store, whatever source read them (a scrape, a
Prometheus answer, a log, a recording replayed): each kind of value within its range, values that
must agree with each other agreeing, and counters that do not grow faster than the hardware can.

* ranges (:data:`cmdare.collectors.metrics.VALUE_BOUNDS`): GPU utilisation 0–100 %, GPU and host
  memory up to a physical bound; a value outside is dropped;
* agreement: memory available is at most the memory there is (``MemAvailable`` ≤ ``MemTotal``);
  otherwise ``MemAvailable`` is dropped (host memory used is then unknown, never negative);
* growth (:data:`cmdare.collectors.metrics.RATE_BOUNDS`): a counter whose increase since the task's
  last point implies a rate over the physical bound (NIC and parameter-server bytes, CPU seconds) is
  kept, and the store refuses any rate over the bound while that jump is in its window.

Each refusal is said in the poll's note (``error`` of an answered poll: the status line shows it),
naming the value and the bound. Pure functions over a poll and the task's series so far.
"""

from __future__ import annotations

from dataclasses import replace

from cmdare.collectors import metrics as M
from cmdare.collectors.samples import TaskPoll
from cmdare.collectors.store import Store, TaskSeries

__all__ = ["checked", "refusals"]

MAX_NOTED = 2  # refusals named in one poll's note (the count says how many more)
_RANGED = frozenset(M.VALUE_BOUNDS)
_RATED = frozenset(M.RATE_BOUNDS)
_BOUNDED = _RANGED | _RATED


def refusals(
    values: dict[str, float], host_only: bool, prev: TaskSeries | None, t: float
) -> tuple[dict[str, float], list[str]]:
    """(the values kept, a note per value refused or per implausible jump)."""
    keys = list(values) if host_only else [k for k in values if k in _BOUNDED]
    notes: list[str] = []
    drop: list[str] = []
    for key in keys:
        why = M.value_refusal(key, values[key]) if host_only or key in _RANGED else None
        if why is not None:
            drop.append(key)
            notes.append(why)
    total, avail = values.get(M.K_MEM_TOTAL), values.get(M.K_MEM_AVAIL)
    if total is not None and avail is not None and avail > total and M.K_MEM_AVAIL not in drop:
        drop.append(M.K_MEM_AVAIL)
        notes.append(f"host memory available {avail:.3g} B over its total {total:.3g} B refused")
    if prev is not None and prev.last_seen < t:
        notes += _jumps(values, keys, prev, t)
    if not drop:
        return values, notes
    return {k: v for k, v in values.items() if k not in drop}, notes


def _jumps(values: dict[str, float], keys: list[str], prev: TaskSeries, t: float) -> list[str]:
    """Counters that grew faster than their physical bound since the task's last point (its
    newest point's value: a counter it did not read then is checked by the store's rates only)."""
    out = []
    dt = t - prev.last_seen
    bounds = M.RATE_BOUNDS
    for key in keys:
        bound = bounds.get(key)
        if bound is None:
            continue
        last = prev.last_value(key)
        if last is not None and values[key] - last > bound.high * dt:
            out.append(bound.refusal((values[key] - last) / dt, f"{key} rate: "))
    return out


def checked(poll: TaskPoll, store: Store) -> TaskPoll:
    """``poll`` with its implausible values dropped and a note saying so (the same poll when all
    are plausible: the usual case, told by one set operation for a task's poll)."""
    if not poll.ok or not poll.values or (not poll.host_only and _BOUNDED.isdisjoint(poll.values)):
        return poll
    prev = store.series_of(poll)
    values, notes = refusals(poll.values, poll.host_only, prev, poll.t)
    if not notes:
        return poll
    more = f" (+{len(notes) - MAX_NOTED} more)" if len(notes) > MAX_NOTED else ""
    note = "; ".join(notes[:MAX_NOTED]) + more
    return replace(poll, values=values, error=f"{poll.error}; {note}" if poll.error else note)
