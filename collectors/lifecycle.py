"""Instance lifecycle: up → silent (N failed polls) → revoked (the evidence says so), and the
lifetimes the revocation model learns from."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from cmdare.collectors.clock import clock_time
from cmdare.collectors.metrics import K_LOG_RESTARTS, K_PREEMPTED
from cmdare.collectors.samples import Lifetime, TaskInfo, TaskPoll, TaskState

log = logging.getLogger(__name__)

TRANSIENT = frozenset({"spot", "preemptible"})


_UNSET = object()  # a NodeStatus field not set yet


class _LifecycleBooks:
    """Base of :class:`NodeStatus`: what the lifecycle keeps of a task beside its state, in slots of the
    status's own (no dataclass field: not in equality or a recording, and setting one is no change of the
    status): its running lifetime as :meth:`Lifecycle.all_lifetimes` last made it, and the source that
    owns its identity (the first claimant, or the replacement of a gone one). Two dicts of them by task
    key beside ``nodes`` cost ~7.3 MB at 100,000 tasks; the slots cost 16 bytes a task."""

    __slots__ = ("_lifetime", "_owner")
    _lifetime: Lifetime
    _owner: str


@dataclass(slots=True)  # one a task: no __dict__ each
class NodeStatus(_LifecycleBooks):
    """One task's lifecycle state; ``version`` counts its changes (a field set to another value),
    which is what a reader's cache keys on."""

    version: int = field(default=0, init=False, compare=False, repr=False)
    info: TaskInfo
    state: TaskState = TaskState.UP
    since: float = 0.0  # when the current state began
    failures: int = 0  # consecutive failed polls
    last_error: str | None = None  # the latest failure, or degraded-poll remark
    cause: str = ""  # for revoked: preempted | vanished
    preempted_seen: bool = False
    started: float = 0.0  # start of the current lifetime
    restarts: int = 0  # how many times this task came back after being revoked, or restarted (its logs)
    log_restarts: int = 0  # restarts from a checkpoint its logs showed (cmdare_log_restarts)

    def __setattr__(self, name: str, value: object) -> None:
        old = getattr(self, name, _UNSET)
        object.__setattr__(self, name, value)
        if name != "version" and old is not value and old != value:  # a poll sets what it had: no change
            object.__setattr__(self, "version", getattr(self, "version", 0) + 1)


@dataclass(frozen=True)
class Transition:
    task: str
    old: TaskState | None
    new: TaskState
    t: float
    reason: str


@dataclass
class Lifecycle:
    silent_after: int = 3  # failed polls before a task is called silent
    vanished_after: int = 6  # failed polls (while peers answer) before a transient task counts as revoked
    nodes: dict[str, NodeStatus] = field(default_factory=dict)
    lifetimes: list[Lifetime] = field(default_factory=list)  # closed lifetimes
    _by_source: dict[str, str] = field(default_factory=dict)
    duplicates: set[str] = field(
        default_factory=set
    )  # keys claimed by two endpoints at once (both answering)
    _pairs: dict[str, tuple[str, str, str]] = field(
        default_factory=dict
    )  # renamed key -> (key, owner, claimant)
    # key -> the source that owns it, for a key claimed before it has a status (a status holds its own)
    _owner: dict[str, str] = field(default_factory=dict)
    _answered: dict[str, int] = field(default_factory=dict)  # source -> the last cycle it answered in
    _host_sources: set[str] = field(default_factory=set)  # node_exporter / DCGM targets
    # synchronous jobs: keys of tasks that claim a rank another task of their job claims too (both
    # answering in this cycle or the last one), and each ranked task's (job, rank, last cycle it answered)
    duplicate_ranks: set[str] = field(default_factory=set)
    _ranks: dict[str, tuple[str, str, int]] = field(default_factory=dict)
    _cycle: int = 0
    _dirty: set[str] = field(default_factory=set)  # tasks whose status may have changed (take_dirty)

    def resolve(self, polls: list[TaskPoll], unpolled: Iterable[str] = ()) -> list[TaskPoll]:
        """Identities before anything is stored. A target that has never answered is *pending*
        under its URL (no task of its own: when it answers, it is folded into the task it turns out
        to be); two endpoints claiming one identity in the same cycles are kept apart and both
        flagged ``duplicate-identity``; host-detail pages are no tasks. ``unpolled``: sources not asked
        this cycle because their page has not changed (scrape's back-off): they answer as they last did
        (a duplicate or a rank they claim stays claimed)."""
        self._cycle += 1
        for source in unpolled:
            if source in self._answered:
                self._answered[source] = self._cycle
                key = self._by_source.get(source)
                if key is not None and key in self._ranks:
                    job, rank, _ = self._ranks[key]
                    self._ranks[key] = (job, rank, self._cycle)
        out = []
        for poll in polls:
            if poll.ok and poll.info is not None:
                self._answered_now(poll.source, poll.host_only)
                if not poll.host_only:
                    poll = self._claim(poll)
            elif not poll.ok and poll.source not in self._by_source:
                if poll.source not in self._host_sources and poll.info is not None:
                    self._pending(poll)
                poll = replace(poll, info=None)
            out.append(poll)
        recent = self._cycle - 1  # both claimants answered in this cycle or the last one: still a duplicate
        before = self.duplicates
        self.duplicates = {
            k
            for renamed, (key, a, b) in self._pairs.items()
            if min(self._answered.get(a, -9), self._answered.get(b, -9)) >= recent
            for k in (key, renamed)
        }
        self._dirty |= before ^ self.duplicates  # their flag changed
        self._check_ranks(out)
        return out

    def _check_ranks(self, polls: list[TaskPoll]) -> None:
        """Flag tasks of one job that claim the same rank (four launchers all given RANK=0: every rank-based
        figure would mix them up). Only ranked tasks are looked at; one gone 30 cycles is forgotten."""
        for p in polls:
            if p.ok and p.info is not None and p.info.rank and not p.host_only:
                self._ranks[p.info.key] = (p.info.job, p.info.rank, self._cycle)
        if not self._ranks:
            return
        if self._cycle % 30 == 0:
            self._ranks = {k: v for k, v in self._ranks.items() if v[2] > self._cycle - 30}
        claims: dict[tuple[str, str], list[str]] = {}
        for key, (job, rank, cycle) in self._ranks.items():
            if cycle >= self._cycle - 1:
                claims.setdefault((job, rank), []).append(key)
        before = self.duplicate_ranks
        self.duplicate_ranks = {k for keys in claims.values() if len(keys) > 1 for k in keys}
        if self.duplicate_ranks - before:
            said = {self._ranks[k][:2] for k in self.duplicate_ranks - before}
            for job, rank in sorted(said)[:10]:  # said once, when it starts
                log.warning("job %s: %d tasks claim rank %s", job, len(claims[(job, rank)]), rank)
        self._dirty |= before ^ self.duplicate_ranks

    @property
    def rank_note(self) -> str | None:
        """One line on the ranks claimed twice (``job: N tasks claim rank R``), or None."""
        if not self.duplicate_ranks:
            return None
        clash: dict[tuple[str, str], int] = {}
        for key in self.duplicate_ranks:
            job, rank, _ = self._ranks[key]
            clash[(job, rank)] = clash.get((job, rank), 0) + 1
        said = [f"{job}: {n} tasks claim rank {rank}" for (job, rank), n in sorted(clash.items())[:3]]
        more = f" (+{len(clash) - 3} more)" if len(clash) > 3 else ""
        return "; ".join(said) + more + " (flag duplicate-rank: check each launcher's RANK)"

    def _answered_now(self, source: str, host_only: bool) -> None:
        self._answered[source] = self._cycle
        if self.nodes.pop(pending_key(source), None) is not None:  # folded into what it turned out to be
            self._dirty.add(pending_key(source))
        if host_only:
            self._host_sources.add(source)

    def _claim(self, poll: TaskPoll) -> TaskPoll:
        assert poll.info is not None
        key = poll.info.key
        held = self._owner_of(key)
        owner = held or poll.source
        if owner == poll.source or self._answered.get(owner, -9) < self._cycle - 1:
            if held != poll.source:  # the first claimant, or a replacement of a gone one
                self._set_owner(key, poll.source)
            return poll
        info = replace(poll.info, task=f"{poll.info.name}@{_short(poll.source)}")
        if info.key not in self._pairs:  # said once, not every poll
            log.warning(
                "duplicate identity %s: claimed by %s and %s", key, _short(owner), _short(poll.source)
            )
        self._pairs[info.key] = (key, owner, poll.source)
        if self._owner_of(info.key) is None:
            self._set_owner(info.key, poll.source)
        return replace(poll, info=info)

    def _owner_of(self, key: str) -> str | None:
        """The source that owns identity ``key`` (None: unclaimed)."""
        node = self.nodes.get(key)
        owner: str | None = None if node is None else getattr(node, "_owner", None)  # unset: not claimed yet
        return owner if owner is not None else self._owner.get(key)

    def _set_owner(self, key: str, source: str) -> None:
        node = self.nodes.get(key)
        if node is None:
            self._owner[key] = source  # until the key's status is made (:meth:`_new_status`)
        else:
            object.__setattr__(node, "_owner", source)  # no change of the status (its version stays)
            self._owner.pop(key, None)

    def _new_status(self, key: str, status: NodeStatus) -> NodeStatus:
        """``status`` made the status of ``key``, holding its owner if it was claimed before."""
        self.nodes[key] = status
        owner = self._owner.pop(key, None)
        if owner is not None:
            object.__setattr__(status, "_owner", owner)
        return status

    def _pending(self, poll: TaskPoll) -> None:
        assert poll.info is not None
        key = pending_key(poll.source)
        node = self.nodes.get(key)
        if node is None:
            info = replace(poll.info, task=_short(poll.source), role=poll.info.role or "node")
            node = self.nodes[key] = NodeStatus(info=info, state=TaskState.PENDING, since=poll.t)
        self._dirty.add(key)
        node.failures += 1
        node.last_error = poll.error

    def observe(self, polls: list[TaskPoll]) -> list[Transition]:
        """Update states from one poll cycle; returns the state changes it caused."""
        changes: list[Transition] = []
        polls = [p for p in polls if not p.host_only]
        for poll in polls:
            key = poll.info.key if poll.info else self._by_source.get(poll.source)
            if key is None:
                continue
            if poll.ok and poll.info is not None:
                self._by_source[poll.source] = key
                changes += self._ok(key, poll)
        failed = [p for p in polls if not p.ok]
        up_jobs = {n.info.job for n in self.nodes.values() if n.state is TaskState.UP} if failed else set()
        for poll in failed:
            key = poll.info.key if (poll.info and poll.ok) else self._by_source.get(poll.source)
            if key is None and poll.info is not None:
                key = poll.info.key
            if key is None or poll.ok:
                continue
            changes += self._failed(
                key, poll, peers_up=self.nodes.get(key) is not None and self.nodes[key].info.job in up_jobs
            )
        for c in changes:
            log.info("task %s: %s -> %s (%s)", c.task, c.old.value if c.old else "new", c.new.value, c.reason)
        return changes

    def _ok(self, key: str, poll: TaskPoll) -> list[Transition]:
        assert poll.info is not None
        self._dirty.add(key)
        node = self.nodes.get(key)
        preempted = poll.values.get(K_PREEMPTED, 0.0) >= 1.0
        if node is None:
            node = self._new_status(key, NodeStatus(info=poll.info, since=poll.t, started=poll.t))
            node.preempted_seen = preempted
            node.last_error = poll.error
            node.restarts = node.log_restarts = int(poll.values.get(K_LOG_RESTARTS, 0))
            first = [Transition(key, None, TaskState.UP, poll.t, "first seen")]
            if preempted:  # met already under notice: revoked from its first sample on; no lifetime is
                # recorded (its start was never seen: a zero-hour one would teach the revocation model
                # that servers die at once)
                node.state, node.cause = TaskState.REVOKED, "preempted"
                reason = "cloud reports preemption (first seen under notice)"
                return first + [Transition(key, TaskState.UP, TaskState.REVOKED, poll.t, reason)]
            if poll.finished:  # an old run read for the first time
                node.last_error = poll.error or f"finished: last event at {clock_time(poll.t)}"
                return first + self._set(node, key, TaskState.FINISHED, poll.t, "its log ended long ago")
            return first
        node.info = poll.info
        node.failures, node.last_error = 0, poll.error
        logged = poll.values.get(K_LOG_RESTARTS)
        if logged is not None and logged > node.log_restarts:  # its logs say it restarted from a checkpoint
            node.restarts += int(logged - node.log_restarts)  # (the same server: its lifetime goes on)
            node.log_restarts = int(logged)
        if preempted:
            node.preempted_seen = True
            return self._set(
                node, key, TaskState.REVOKED, poll.t, "cloud reports preemption", cause="preempted"
            )
        if node.state is TaskState.REVOKED:
            node.restarts += 1
            node.started, node.preempted_seen = poll.t, False
            return self._set(node, key, TaskState.UP, poll.t, "replacement is up")
        if poll.finished:
            node.last_error = poll.error or f"finished: last event at {clock_time(poll.t)}"
            return self._set(node, key, TaskState.FINISHED, poll.t, "its log ended long ago")
        if node.state in (TaskState.SILENT, TaskState.FINISHED):
            return self._set(node, key, TaskState.UP, poll.t, "answering again")
        return []

    def _failed(self, key: str, poll: TaskPoll, *, peers_up: bool) -> list[Transition]:
        self._dirty.add(key)
        node = self.nodes.get(key)
        if node is None:
            if poll.info is None:
                return []
            node = self._new_status(key, NodeStatus(info=poll.info, state=TaskState.SILENT, since=poll.t))
            node.failures, node.last_error = 1, poll.error
            return [Transition(key, None, TaskState.SILENT, poll.t, poll.error or "no answer")]
        node.failures += 1
        node.last_error = poll.error
        if node.state is TaskState.REVOKED:
            return []
        if poll.finished:  # the source knows its writer is done: no N polls to wait
            return self._set(node, key, TaskState.FINISHED, poll.t, poll.error or "finished")
        if node.failures >= self.silent_after and node.preempted_seen:
            return self._set(
                node, key, TaskState.REVOKED, poll.t, "gone after preemption notice", cause="preempted"
            )
        transient = node.info.provisioning in TRANSIENT
        if node.failures >= self.vanished_after and transient and peers_up:
            return self._set(
                node, key, TaskState.REVOKED, poll.t, "vanished while its peers run", cause="vanished"
            )
        if node.failures >= self.silent_after and node.state is TaskState.UP:
            return self._set(node, key, TaskState.SILENT, poll.t, poll.error or "no answer")
        return []

    def _set(
        self, node: NodeStatus, key: str, new: TaskState, t: float, reason: str, cause: str = ""
    ) -> list[Transition]:
        old = node.state
        if old is new:
            return []
        if new is TaskState.REVOKED:
            node.cause = cause
            self.lifetimes.append(self._lifetime(key, node, t, cause))
        node.state, node.since = new, t
        return [Transition(key, old, new, t, reason)]

    @staticmethod
    def _lifetime(key: str, node: NodeStatus, end: float | None, cause: str) -> Lifetime:
        i = node.info
        return Lifetime(
            task=key,
            start=node.started,
            end=end,
            cause=cause,
            gpu=i.gpu,
            region=i.region,
            provisioning=i.provisioning,
        )

    def source_of(self, key: str) -> str | None:
        """The address the task ``key`` answers at (a pending target's own), or None."""
        if key.startswith("pending:"):
            return key.removeprefix("pending:")
        return next((s for s, k in self._by_source.items() if k == key), None)

    def take_dirty(self) -> set[str]:
        """The tasks whose status, flags or lifetime may have changed since the last call (one
        reader: the session's overview)."""
        dirty, self._dirty = self._dirty, set()
        return dirty

    def all_lifetimes(self) -> list[Lifetime]:
        """Closed lifetimes plus the running ones (``end=None``); a running one is made once per
        start and identity, not on every call (asked at every ranking, for every task), and held by the
        task's status (:class:`_LifecycleBooks`: it goes when the task does)."""
        running = []
        for k, n in self.nodes.items():
            if n.state in (TaskState.REVOKED, TaskState.PENDING):
                continue
            hit, i = getattr(n, "_lifetime", None), n.info
            if (
                hit is None
                or hit.start != n.started
                or hit.gpu != i.gpu
                or hit.region != i.region
                or hit.provisioning != i.provisioning
            ):  # what a running lifetime holds (no tuple beside it to key on: one a task)
                hit = self._lifetime(k, n, None, "running")
                object.__setattr__(n, "_lifetime", hit)  # no change of the status (its version stays)
            running.append(hit)
        return [*self.lifetimes, *running]


def pending_key(source: str) -> str:
    """The lifecycle key of a target that has not answered yet."""
    return f"pending:{source}"


def _short(source: str) -> str:
    """A source URL without its scheme and the default ``/metrics`` path (how it is shown)."""
    s = source.split("://", 1)[-1]
    return s.removesuffix("/metrics")
