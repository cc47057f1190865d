"""Injectable clocks: wall time for the app, a manual clock for tests, benchmarks and replay."""

from __future__ import annotations

import math
import time
from typing import Protocol

MAX_EPOCH_S = 1e11  # assumption: a "time" past the year 5000 is in milliseconds, or hostile


def clock_time(t: float) -> str:
    """``HH:MM`` of epoch time ``t`` on the viewer's local clock (``--:--`` when not a plausible time)."""
    return time.strftime("%H:%M", time.localtime(t)) if plausible_time(t) else "--:--"


def plausible_time(t: float) -> bool:
    """Whether ``t`` can be a time in seconds since the epoch (finite, 0 ≤ t ≤ :data:`MAX_EPOCH_S`).
    Times from files and recordings that are not are rejected with a note, never used."""
    return math.isfinite(t) and 0.0 <= t <= MAX_EPOCH_S


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch (may be simulated)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a monotonic scale, for measuring elapsed time."""
        ...


class SystemClock:
    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()


class ManualClock:
    """A clock that moves only when told to (tests, simulated history, replay)."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._t = float(start)

    def now(self) -> float:
        return self._t

    def monotonic(self) -> float:
        return self._t

    def advance(self, seconds: float) -> None:
        self._t += float(seconds)

    def set(self, t: float) -> None:
        self._t = float(t)
