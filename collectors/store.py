"""In-memory time-series store: per-task numpy ring buffers of fixed capacity (memory is bounded by
design), with Prometheus-style counter rates (resets handled here, once)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from cmdare.collectors.metrics import is_counter_key
from cmdare.collectors.samples import JobFacts, TaskInfo, TaskPoll

LATEST_LOOKBACK = 8  # polls a gauge may skip before it shows as unknown
DEFAULT_CAPACITY = 1800  # points per series: 1 h of history at the default 2 s refresh


class Ring:
    """A fixed-capacity ring of float values aligned with its owner's time ring."""

    __slots__ = ("_buf", "_n", "_head")

    def __init__(self, capacity: int, dtype: type = np.float32) -> None:
        self._buf = np.full(capacity, np.nan, dtype=dtype)
        self._n = 0
        self._head = 0  # next write position

    def append(self, value: float) -> None:
        self._buf[self._head] = value
        self._head = (self._head + 1) % len(self._buf)
        self._n = min(self._n + 1, len(self._buf))

    def __len__(self) -> int:
        return self._n

    def last(self, n: int | None = None) -> np.ndarray:
        """The newest ``n`` values (all when None), oldest first."""
        n = self._n if n is None else min(n, self._n)
        if n <= 0:
            return self._buf[:0].copy()
        start = self._head - n
        if start >= 0:
            return self._buf[start : self._head].copy()
        return np.concatenate((self._buf[start:], self._buf[: self._head]))  # wraps around the end


def counter_increase(values: np.ndarray) -> float:
    """Increase of a counter over consecutive samples, treating any drop as a reset to zero
    (what Prometheus' ``increase()`` does, without extrapolation). NaN samples are skipped."""
    v = values[~np.isnan(values)].astype(np.float64)
    if len(v) < 2:
        return float("nan")
    d = np.diff(v)
    resets = d < 0
    d[resets] = v[1:][resets]
    return float(d.sum())


@dataclass
class TaskSeries:
    info: TaskInfo
    capacity: int
    times: Ring = field(init=False)
    values: dict[str, Ring] = field(default_factory=dict)
    first_seen: float = math.nan
    last_seen: float = math.nan

    def __post_init__(self) -> None:
        self.times = Ring(self.capacity, np.float64)

    def append(self, t: float, values: dict[str, float]) -> None:
        n_before = len(self.times)
        self.times.append(t)
        for key, value in values.items():
            ring = self.values.get(key)
            if ring is None:
                ring = self.values[key] = Ring(self.capacity)
                for _ in range(n_before):  # align with the time ring
                    ring.append(math.nan)
            ring.append(value)
        for key, ring in self.values.items():
            if key not in values:
                ring.append(math.nan)
        if math.isnan(self.first_seen):
            self.first_seen = t
        self.last_seen = t

    def latest(self, key: str, lookback: int = LATEST_LOOKBACK) -> float | None:
        """The newest value of ``key`` among the last ``lookback`` points (a source may read some
        series less often than others, e.g. node detail through Prometheus), or None."""
        ring = self.values.get(key)
        if ring is None or len(ring) == 0:
            return None
        recent = ring.last(lookback)
        ok = np.nonzero(~np.isnan(recent))[0]
        return float(recent[ok[-1]]) if len(ok) else None

    def window(self, key: str, seconds: float) -> tuple[np.ndarray, np.ndarray]:
        """(times, values) of ``key`` within the last ``seconds`` before the newest point.

        Reads only the newest points (times are appended in order): 32, then 4x more until the
        window is covered, instead of copying the whole ring on every rate."""
        ring = self.values.get(key)
        total = len(self.times)
        if ring is None or total == 0:
            return np.empty(0), np.empty(0)
        k = min(total, 32)
        t = self.times.last(k)
        while k < total and t[0] >= t[-1] - seconds:
            k = min(total, k * 4)
            t = self.times.last(k)
        v = ring.last(k)
        keep = t >= t[-1] - seconds
        return t[keep], v[keep]

    def rate(self, key: str, seconds: float) -> float | None:
        """Per-second rate of a counter (or of a gauge that only grows, like the global step)
        over the window, divided by the *measured* time between the first and last samples."""
        t, v = self.window(key, seconds)
        ok = ~np.isnan(v)
        if ok.sum() < 2:
            return None
        t_ok = t[ok]
        span = float(t_ok[-1] - t_ok[0])
        if span <= 0:
            return None
        inc = counter_increase(v) if is_counter_key(key) or key.endswith("global_step") else float(v[ok][-1] - v[ok][0])
        return inc / span

    def mean_of_ratio(self, num_key: str, den_key: str, seconds: float) -> float | None:
        """increase(num)/increase(den) over the window, e.g. mean step seconds from a histogram."""
        _, num = self.window(num_key, seconds)
        _, den = self.window(den_key, seconds)
        dn = counter_increase(den) if len(den) else math.nan
        if not dn or math.isnan(dn) or dn <= 0:
            return None
        return counter_increase(num) / dn


@dataclass
class JobSeries:
    """Per-job derived series (cluster throughput over time, predicted throughput) for plots."""

    capacity: int
    facts: JobFacts | None = None
    times: Ring = field(init=False)
    values: dict[str, Ring] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.times = Ring(self.capacity, np.float64)

    def append(self, t: float, values: dict[str, float]) -> None:
        n_before = len(self.times)
        self.times.append(t)
        for key, value in values.items():
            if key not in self.values:
                ring = self.values[key] = Ring(self.capacity)
                for _ in range(n_before):
                    ring.append(math.nan)
            self.values[key].append(value)
        for key, ring in self.values.items():
            if key not in values:
                ring.append(math.nan)

    def last(self, key: str, n: int) -> np.ndarray:
        ring = self.values.get(key)
        return ring.last(n) if ring is not None else np.empty(0, np.float32)


class Store:
    """Every task's and job's recent history. Bounded: ``capacity`` points per series."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = capacity
        self.tasks: dict[str, TaskSeries] = {}
        self.jobs: dict[str, JobSeries] = {}

    def add(self, poll: TaskPoll) -> TaskSeries | None:
        """Add one successful poll; failed polls carry no values and are left to the lifecycle."""
        if not poll.ok or poll.info is None:
            return None
        ts = self.tasks.get(poll.info.key)
        if ts is None:
            ts = self.tasks[poll.info.key] = TaskSeries(poll.info, self.capacity)
        elif ts.info != poll.info:
            ts.info = poll.info  # labels may be enriched later (e.g. zone discovered)
        ts.append(poll.t, poll.values)
        if poll.job_facts is not None:
            self.job(poll.info.job).facts = poll.job_facts
        return ts

    def job(self, name: str) -> JobSeries:
        js = self.jobs.get(name)
        if js is None:
            js = self.jobs[name] = JobSeries(self.capacity)
        return js
