"""What a source can do beyond polling, each a small protocol the poller and the session check with
``isinstance`` (a source declares a capability by having its members; nothing to register):

- :class:`Focusable`: reads the tasks on screen in detail (a large fleet);
- :class:`FleetReading`: a large fleet's figures from the server, how far back a rate must reach and
  how it read this cycle;
- :class:`UnchangedCounting`: how many tasks it left unread this cycle, unchanged;
- :class:`PacedPolling`: polls unchanged targets less often, says which it skipped, and reads everything
  when woken;
- :class:`CapNoting`: says what its own caps dropped;
- :class:`StatusNoting`: a remark for the status line (node detail refused, tasks replaced);
- :class:`Displayed`: a name to show that differs from ``name`` (a URL without credentials);
- :class:`Closable`: holds connections or threads of its own, closed with the session."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from cmdare.collectors.prometheus.fleet import Fleet


@runtime_checkable
class Focusable(Protocol):
    def set_focus(self, keys: Iterable[str]) -> None:
        """The tasks (keys ``job/task``) to read in detail on every refresh."""


@runtime_checkable
class FleetReading(Protocol):
    @property
    def fleet(self) -> Fleet | None:
        """The latest per-job and per-role figures of a large fleet, else None."""

    @property
    def sparse_window_s(self) -> float:
        """How far back a task's rate must reach for its last two points (0: every poll)."""

    mode_note: str | None  # how this cycle read the fleet


@runtime_checkable
class UnchangedCounting(Protocol):
    unchanged: int  # tasks up but not read this cycle (nothing new from them: counted as answering)


@runtime_checkable
class PacedPolling(Protocol):
    unpolled: list[str]  # the targets not asked this cycle (unchanged: polled less often)

    def wake(self) -> None:
        """Read everything on the next poll (the user asked for a refresh)."""


@runtime_checkable
class CapNoting(Protocol):
    cap_note: str | None  # what the source's own caps dropped this cycle


@runtime_checkable
class StatusNoting(Protocol):
    @property
    def status_note(self) -> str | None:
        """A remark for the status line, or None."""


@runtime_checkable
class Displayed(Protocol):
    display: str  # the name shown and recorded (``name`` may hold more)


@runtime_checkable
class Closable(Protocol):
    async def aclose(self) -> None:
        """Close what the source holds of its own (connections, threads)."""
