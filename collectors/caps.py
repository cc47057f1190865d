"""Hard caps on everything a source can grow, and the gate that applies them with a visible note.

A source is untrusted in size as well as in content: a Prometheus server may answer for 100,000
tasks, a log may name a new tag on every line, a recording may hold 200,000 polls in one cycle.
Past a cap the source keeps working on what fits, and the status line says what was dropped
("showing 10,000 of 100,000 tasks"). The caps are one frozen value (:class:`Caps`), set once per
process from the config's ``[caps]`` table (:func:`configure`) like the read-only switch, and read
where each cap applies:

* ``tasks``: tasks (and hosts) per source, kept first come first served (:class:`CapGate`, in the
  poller; a Prometheus source also asks the server for at most this many, see ``prometheus/source.py``);
* ``series_per_task``: series keys per task (the gate cuts a poll; the store never grows more rings);
* ``tags_per_task``: logged scalar tags per task (JSON lines, TensorBoard runs), over the task's life;
* ``label_length``: characters of a label value, name or tag (``untrusted.clean_text``);
* ``rows_per_answer``: rows of one Prometheus answer kept (the rest are dropped, with a note);
* ``cycle_polls``: polls (keys) of one recorded cycle read on replay;
* ``history_mb``: the store's tasks together (their points and the rest of each, ``store.TASK_BYTES``);
  past it, new history points reuse the oldest (fewer minutes of history per task, not more memory),
  down to the points the readers need (``store.MIN_POINTS``): 100,000 tasks of 10 series fit (~1.0 kB
  each after an hour of sweeps); past ~106,000 the store grows with the tasks, never with time.

Defaults keep one source under 300 MB (``benchmarks/large_inputs.py`` measures each case).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from itertools import islice

from cmdare.collectors.metrics import COUNTER_KEYS, K_GLOBAL_STEP, K_PREEMPTED
from cmdare.collectors.samples import TaskPoll

__all__ = ["CapGate", "Caps", "configure", "current"]

MAX_CLAIMANTS = 4  # endpoints one task identity may be claimed by in one cycle (each shown as a duplicate)
_FIRST_KEYS = frozenset({K_GLOBAL_STEP, K_PREEMPTED, *COUNTER_KEYS})  # kept before any other series


@dataclass(frozen=True, kw_only=True)
class Caps:
    """What one source may grow to (see the module docstring). Every field is an integer >= 1."""

    tasks: int = 10_000
    series_per_task: int = 256
    tags_per_task: int = 64
    label_length: int = 200
    rows_per_answer: int = 200_000
    cycle_polls: int = 50_000
    history_mb: int = 104

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if type(value) is not int or value < 1:
                raise ValueError(f"cap {f.name} must be an integer >= 1, not {value!r}")


_current = Caps()


def configure(caps: Caps | None = None, **changes: int) -> Caps:
    """Set the process-wide caps (``caps``, or the current ones with ``changes``); returns them."""
    global _current
    _current = replace(caps or _current, **changes)
    from cmdare.collectors import untrusted  # label length is read where text enters

    untrusted.set_label_limit(_current.label_length)
    return _current


def current() -> Caps:
    """The caps in force."""
    return _current


def cut_series(values: dict[str, float], limit: int) -> dict[str, float]:
    """``values`` with at most ``limit`` keys: the metric contract's keys first, then page order."""
    if len(values) <= limit:
        return values
    first = [k for k in values if k in _FIRST_KEYS]
    rest = (k for k in values if k not in _FIRST_KEYS)
    keep = first[:limit] + list(islice(rest, max(0, limit - len(first))))
    return {k: values[k] for k in keep}


def _key(p: TaskPoll) -> tuple[int, str] | None:
    """(0, task key) or (1, host): tasks and hosts are capped apart (a host's detail is not a task)."""
    if p.info is None:
        return None
    return (1, p.host) if p.host_only else (0, p.info.key)


class CapGate:
    """Applies the task and series caps to one source's polls, first come first served: a task once
    admitted stays admitted (its history goes on), a new one waits until there is room (a task that
    has gone is forgotten after ``forget_after`` cycles without a poll)."""

    def __init__(self, forget_after: int = 30) -> None:
        self._admitted: tuple[dict[str, int], dict[str, int]] = ({}, {})  # tasks, hosts -> last cycle polled
        self._cycle = 0
        self.forget_after = forget_after
        self.note: str | None = None  # what the last cycle dropped, for the status line

    def admit(self, polls: Iterable[TaskPoll], caps: Caps | None = None) -> list[TaskPoll]:
        """The polls that fit; sets :attr:`note` to what was dropped (None when nothing was).

        Endpoints claiming one identity in the same cycle become tasks of their own (the lifecycle keeps
        them apart as duplicates), so each claimant counts against ``tasks``, and one identity has at
        most :data:`MAX_CLAIMANTS` (a source repeating one task 200,000 times is not 200,000 tasks)."""
        caps = caps or _current
        self._cycle += 1
        self._forget()
        out: list[TaskPoll] = []
        over: set[str] = set()
        kept: set[str] = set()
        claimants: dict[str, list[str]] = {}  # task key -> the sources claiming it this cycle, first first
        cut = claims_over = 0
        for p in polls:
            kind_key = _key(p)
            if kind_key is not None:
                kind, key = kind_key
                if not kind:
                    claim = claimants.setdefault(key, [p.source])
                    if p.source not in claim:  # another endpoint claims a task seen this cycle
                        if len(claim) >= MAX_CLAIMANTS:
                            claims_over += 1
                            continue
                        claim.append(p.source)
                    if p.source != claim[0]:
                        key = f"{key}@{p.source}"  # a task of its own (the lifecycle renames it)
                book = self._admitted[kind]
                if key not in book and len(book) >= caps.tasks:
                    if not kind:
                        over.add(key)
                    continue
                book[key] = self._cycle
                if not kind:
                    kept.add(key)
            if len(p.values) > caps.series_per_task:
                p = replace(p, values=cut_series(p.values, caps.series_per_task))
                cut += 1
            out.append(p)
        self.note = _note(len(kept), len(over), cut, caps, claims_over)
        return out

    def _forget(self) -> None:
        if self._cycle % self.forget_after == 0:
            old = self._cycle - self.forget_after
            tasks, hosts = ({k: c for k, c in b.items() if c > old} for b in self._admitted)
            self._admitted = (tasks, hosts)


def _note(kept: int, over: int, cut: int, caps: Caps, claims_over: int = 0) -> str | None:
    parts = []
    if claims_over:
        parts.append(f"{claims_over:,} poll(s) dropped: more than {MAX_CLAIMANTS} endpoints claim one task")
    if over:
        parts.append(f"showing {kept:,} of {kept + over:,} tasks (cap {caps.tasks:,})")
    if cut:
        parts.append(f"{cut:,} task(s) cut to {caps.series_per_task:,} series")
    return "; ".join(parts) or None
