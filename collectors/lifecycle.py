"""Instance lifecycle: up → silent (N failed polls) → revoked (the evidence says so), and the
lifetimes the revocation model learns from."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from cmdare.collectors.metrics import K_PREEMPTED
from cmdare.collectors.samples import Lifetime, TaskInfo, TaskPoll, TaskState

log = logging.getLogger(__name__)

TRANSIENT = frozenset({"spot", "preemptible"})


@dataclass
class NodeStatus:
    info: TaskInfo
    state: TaskState = TaskState.UP
    since: float = 0.0  # when the current state began
    failures: int = 0  # consecutive failed polls
    last_ok: float = 0.0
    last_error: str | None = None  # the latest failure, or degraded-poll remark
    cause: str = ""  # for revoked: preempted | vanished
    preempted_seen: bool = False
    started: float = 0.0  # start of the current lifetime
    restarts: int = 0  # how many times this task came back after being revoked


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

    def observe(self, polls: list[TaskPoll]) -> list[Transition]:
        """Update states from one poll cycle; returns the state changes it caused."""
        changes: list[Transition] = []
        for poll in polls:
            key = poll.info.key if poll.info else self._by_source.get(poll.source)
            if key is None:
                continue
            if poll.ok and poll.info is not None:
                self._by_source[poll.source] = key
                changes += self._ok(key, poll)
        up_jobs = {n.info.job for n in self.nodes.values() if n.state is TaskState.UP}
        for poll in polls:
            key = poll.info.key if (poll.info and poll.ok) else self._by_source.get(poll.source)
            if key is None and poll.info is not None:
                key = poll.info.key
            if key is None or poll.ok:
                continue
            changes += self._failed(key, poll, peers_up=self.nodes.get(key) is not None
                                    and self.nodes[key].info.job in up_jobs)
        for c in changes:
            log.info("task %s: %s -> %s (%s)", c.task, c.old.value if c.old else "new", c.new.value, c.reason)
        return changes

    def _ok(self, key: str, poll: TaskPoll) -> list[Transition]:
        assert poll.info is not None
        node = self.nodes.get(key)
        preempted = poll.values.get(K_PREEMPTED, 0.0) >= 1.0
        if node is None:
            node = self.nodes[key] = NodeStatus(info=poll.info, since=poll.t, started=poll.t)
            node.last_ok, node.preempted_seen = poll.t, preempted
            node.last_error = poll.error
            return [Transition(key, None, TaskState.UP, poll.t, "first seen")]
        node.info = poll.info
        node.failures, node.last_ok, node.last_error = 0, poll.t, poll.error
        if preempted:
            node.preempted_seen = True
            return self._set(node, key, TaskState.REVOKED, poll.t, "cloud reports preemption", cause="preempted")
        if node.state is TaskState.REVOKED:
            node.restarts += 1
            node.started, node.preempted_seen = poll.t, False
            return self._set(node, key, TaskState.UP, poll.t, "replacement is up")
        if node.state is TaskState.SILENT:
            return self._set(node, key, TaskState.UP, poll.t, "answering again")
        return []

    def _failed(self, key: str, poll: TaskPoll, *, peers_up: bool) -> list[Transition]:
        node = self.nodes.get(key)
        if node is None:
            if poll.info is None:
                return []
            node = self.nodes[key] = NodeStatus(info=poll.info, state=TaskState.SILENT, since=poll.t)
            node.failures, node.last_error = 1, poll.error
            return [Transition(key, None, TaskState.SILENT, poll.t, poll.error or "no answer")]
        node.failures += 1
        node.last_error = poll.error
        if node.state is TaskState.REVOKED:
            return []
        if node.failures >= self.silent_after and node.preempted_seen:
            return self._set(node, key, TaskState.REVOKED, poll.t, "gone after preemption notice", cause="preempted")
        transient = node.info.provisioning in TRANSIENT
        if node.failures >= self.vanished_after and transient and peers_up:
            return self._set(node, key, TaskState.REVOKED, poll.t, "vanished while its peers run", cause="vanished")
        if node.failures >= self.silent_after and node.state is TaskState.UP:
            return self._set(node, key, TaskState.SILENT, poll.t, poll.error or "no answer")
        return []

    def _set(self, node: NodeStatus, key: str, new: TaskState, t: float, reason: str, cause: str = "") -> list[Transition]:
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
        return Lifetime(key, node.started, end, cause, i.gpu, i.region, i.provisioning)

    def all_lifetimes(self) -> list[Lifetime]:
        """Closed lifetimes plus the running ones (``end=None``)."""
        running = [self._lifetime(k, n, None, "running") for k, n in self.nodes.items() if n.state is not TaskState.REVOKED]
        return [*self.lifetimes, *running]
