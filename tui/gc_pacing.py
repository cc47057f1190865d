"""Full garbage collections that do not walk the long-lived fleet again and again (issue 34).

After start-up the app freezes what survives (``tui/app.py``, ``collect_again``), but everything built
later (a 100,000-task fleet's columns, identities, history) sits in CPython's oldest generation, and each
full (generation-2) collection walks all of it to free a few thousand objects. Measured at 100,000 tasks
(benchmarks/app_scale.py --synthetic 100000, 2026-12-03): one every 35-180 s, 0.44-1.14 s each, freeing
3,100-8,700 objects (the build of 650 MB); 0.99-3.67 s each on the earlier build of 1.3 GB, where two in a
60 s window made the refresh p99 2.7-2.9 s. With this pacer, the same harness: 0.06-0.60 s each once the
fleet is frozen (docs/performance.md).

:class:`FullCollectionPacer` freezes the survivors of each full collection (``gc.freeze``: they are never
walked again), so the next full collection walks only what survived since. It does so on the event loop,
scheduled from a ``gc.callbacks`` hook on the ``stop`` of a generation-2 pass: the hook itself changes no
collector state (a callback runs inside the collector, in whichever thread triggered it, and what the
collector allows there differs across CPython versions), it only asks the loop to act.

The price of freezing: a reference cycle among frozen objects that becomes garbage is never collected
(reference counting still frees everything else). So the freeze is undone on a rule: every
:data:`UNFREEZE_EVERY_S`, or once the frozen count has grown :data:`UNFREEZE_GROWTH` times since the last
full walk, the pacer unfreezes, collects everything once (the walk the collector made every 35-180 s
before: 0.75-0.86 s measured for the growth walk during the first sweep at 100,000 tasks) and freezes again.
A long session does not wait on the collector for that walk: with young collections every :data:`GC_YOUNG`
net allocations, a steady fleet allocates about as many containers as it frees, and CPython's own full
collection may never come (measured at 100,000 tasks, ``prometheus_scale.py --synthetic 100000 --minutes 60``,
2026-12-04: none in 35 minutes, while each re-read of the node detail left its 28 MB request body in a
reference cycle). So the pacer also looks at the time rule on a timer of its own (:meth:`on_timer`, every
:data:`UNFREEZE_EVERY_S`) and makes the walk itself when no full collection has made it.
The trade: the leak is bounded by the cyclic garbage made in ten minutes (at 100,000 tasks a full collection
found 3,100-8,700 such objects every 35-180 s: about 150,000 objects held at most until the next walk, never
more than the frozen count doubling), and the whole fleet is walked once in ten minutes (~0.1-0.2% of a core)
instead of at every full collection."""

from __future__ import annotations

import asyncio
import gc
import math
import time
from collections.abc import Callable
from typing import Final

UNFREEZE_EVERY_S: Final = 600.0  # the longest frozen cyclic garbage is held: one full walk in this long
UNFREEZE_GROWTH: Final = 2.0  # ... or once the frozen count has doubled since the last full walk
FULL: Final = 2  # CPython's oldest generation: a collection of it is a full collection
GC_YOUNG: Final = (
    50_000  # container allocations between young-generation collections (CPython's default: 700)
)


class FullCollectionPacer:
    """Freezes the survivors of each full collection (on the event loop) and, per the unfreeze rule,
    unfreezes, walks everything once and freezes again. :meth:`install` once the start-up freeze is done;
    :meth:`uninstall` when the app ends. ``clock`` is monotonic seconds (a test may pass its own)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        *,
        every_s: float = UNFREEZE_EVERY_S,
        growth: float = UNFREEZE_GROWTH,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._loop = loop
        self._every_s = every_s
        self._growth = growth
        self._clock = clock
        self._scheduled = False  # a freeze is waiting on the loop (set from any thread, cleared on the loop)
        self._walking = False  # the pacer's own full collection is running: its hook does nothing
        self._walked_at = clock()
        self._walked_frozen = gc.get_freeze_count()  # the frozen count right after the last full walk
        self.full_walks = 0  # full walks the unfreeze rule made (shown to tests and benchmarks)
        self._timer: asyncio.TimerHandle | None = None  # the time rule's own check (on_timer)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop the pacer acts on."""
        return self._loop

    def install(self) -> None:
        """Start watching full collections; counts the start-up freeze as the first full walk."""
        self._walked_at, self._walked_frozen = self._clock(), gc.get_freeze_count()
        if self._on_collection not in gc.callbacks:
            gc.callbacks.append(self._on_collection)
        self._arm(self._every_s)

    def uninstall(self) -> None:
        """Stop watching (what is frozen stays frozen: the process is ending, or a test restores it)."""
        if self._on_collection in gc.callbacks:
            gc.callbacks.remove(self._on_collection)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _arm(self, delay: float) -> None:
        """The next :meth:`on_timer` in ``delay`` seconds of the loop's clock (never sooner than 1 s)."""
        if self._timer is not None:
            self._timer.cancel()
        if not self._loop.is_closed() and math.isfinite(delay):
            self._timer = self._loop.call_later(max(1.0, delay), self.on_timer)

    def on_timer(self) -> None:
        """On the loop, every :data:`UNFREEZE_EVERY_S`: the time rule's walk when it is due and no full
        collection has made it (the collector's own may not come in a steady session); then the next
        check, that long after the last walk."""
        self._timer = None
        if self._clock() - self._walked_at >= self._every_s and not self._walking:
            self._walk()
        self._arm(self._every_s - (self._clock() - self._walked_at))

    def _on_collection(self, phase: str, info: dict[str, int]) -> None:
        # Inside the collector, in any thread: only ask the loop to act (one request at a time).
        if phase != "stop" or info.get("generation") != FULL or self._walking or self._scheduled:
            return
        self._scheduled = True
        try:
            self._loop.call_soon_threadsafe(self.after_full_collection)
        except RuntimeError:  # the loop is closed: the app is gone
            self._scheduled = False

    def unfreeze_due(self) -> bool:
        """The unfreeze rule: :data:`UNFREEZE_EVERY_S` since the last full walk, or the frozen count grown
        :data:`UNFREEZE_GROWTH` times since then."""
        if self._clock() - self._walked_at >= self._every_s:
            return True
        return gc.get_freeze_count() >= self._growth * max(self._walked_frozen, 1)

    def after_full_collection(self) -> None:
        """On the loop, after a full collection: freeze its survivors, or (per :meth:`unfreeze_due`)
        unfreeze, collect everything once, and freeze what survives that."""
        self._scheduled = False
        if self.unfreeze_due():
            self._walk()
        else:
            gc.freeze()

    def _walk(self) -> None:
        """Unfreeze, collect everything once, freeze what survives: the clock and the count start over."""
        self._walking = True
        try:
            gc.unfreeze()
            gc.collect()
        finally:
            self._walking = False
        gc.freeze()
        self._walked_at, self._walked_frozen = self._clock(), gc.get_freeze_count()
        self.full_walks += 1


_pacer: FullCollectionPacer | None = None  # the process' one pacer (the collector is process-wide)


def start_pacing() -> FullCollectionPacer | None:
    """Install the process' pacer on the running event loop (once); None without a running loop."""
    global _pacer
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    if _pacer is not None and _pacer.loop is not loop:  # an earlier app's, on a loop now gone: replaced
        stop_pacing()
    if _pacer is None:
        _pacer = FullCollectionPacer(loop)
        _pacer.install()
    return _pacer


def settle_collector() -> FullCollectionPacer | None:
    """The app's collector policy, once start-up is over (tui/app.py ``collect_again``; the session-only
    benchmarks run their session under it too, so that they measure what the app runs): collect once,
    freeze what survives (modules, the app, the first state are never scanned again), collect the young
    generation every :data:`GC_YOUNG` allocations, and pace the full collections (:func:`start_pacing`).
    A refresh of a 10,000-task fleet allocates ~100k short-lived objects (its answers); at the default
    threshold the collector re-scanned the survivors dozens of times a refresh (measured: half the CPU of
    a refresh that reads the fleet's columns)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG, *gc.get_threshold()[1:])
    gc.enable()
    return start_pacing()


def stop_pacing() -> None:
    """Uninstall the process' pacer (the app is ending)."""
    global _pacer
    if _pacer is not None:
        _pacer.uninstall()
        _pacer = None
