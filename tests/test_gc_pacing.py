"""The app's garbage-collector pacing (tui/gc_pacing.py) with CPython's real collector: the survivors of a
full collection are frozen (walked no more), young collections change nothing, and the unfreeze rule
(time, or growth of the frozen count) walks everything once, freeing cyclic garbage that was frozen.
The clock is the test's own: nothing here depends on timing."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Awaitable, Callable, Iterator

import pytest

from cmdare.tui.gc_pacing import FullCollectionPacer


class Node:
    """A tracked container that can sit in a reference cycle and be weakly referenced."""

    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture(autouse=True)
def collector_restored() -> Iterator[None]:
    """The collector as the test found it: enabled, nothing frozen by the test left frozen."""
    enabled = gc.isenabled()
    yield
    gc.unfreeze()
    gc.collect()
    if enabled:
        gc.enable()


def tracked(obj: object) -> bool:
    """Whether the collector's generations hold ``obj`` (a frozen object is in none of them)."""
    return any(o is obj for o in gc.get_objects())


async def settle() -> None:
    for _ in range(3):  # the loop runs what the collector's hook scheduled
        await asyncio.sleep(0)


def run(test: Callable[[FullCollectionPacer, list[float]], Awaitable[None]], **rule: float) -> None:
    async def main() -> None:
        now = [0.0]
        others = gc.callbacks[
            :
        ]  # hooks of other tests' apps in this process (a pacer left installed) stay out
        gc.callbacks.clear()
        gc.collect()
        gc.freeze()  # the app's start-up freeze (tui/app.py, collect_again), then the pacer
        pacer = FullCollectionPacer(asyncio.get_running_loop(), clock=lambda: now[0], **rule)
        pacer.install()
        try:
            await test(pacer, now)
        finally:
            pacer.uninstall()
            gc.callbacks.extend(others)

    asyncio.run(main())


def test_survivors_of_a_full_collection_are_frozen_young_passes_change_nothing() -> None:
    async def test(pacer: FullCollectionPacer, now: list[float]) -> None:
        kept = Node()
        gc.collect(0)
        await settle()
        assert tracked(kept)  # a young collection: nothing frozen
        gc.collect()
        await settle()
        assert not tracked(kept)  # frozen: the next full collections do not walk it
        assert pacer.full_walks == 0

    run(test, growth=1e9)


def test_frozen_cyclic_garbage_is_held_until_the_time_rule_then_freed() -> None:
    async def test(pacer: FullCollectionPacer, now: list[float]) -> None:
        cycle = Node()
        cycle.other = cycle
        ref = weakref.ref(cycle)
        gc.collect()
        await settle()  # frozen while alive
        del cycle
        now[0] += 599.0
        gc.collect()
        await settle()
        assert ref() is not None  # the price of freezing: held, not walked
        now[0] += 1.0  # UNFREEZE_EVERY_S since the start-up walk
        gc.collect()
        await settle()
        assert ref() is None  # unfrozen, walked once, freed
        assert pacer.full_walks == 1
        kept = Node()
        gc.collect()
        await settle()
        assert not tracked(kept) and pacer.full_walks == 1  # frozen again; the clock starts over

    run(test, every_s=600.0, growth=1e9)


def test_growth_of_the_frozen_count_walks_everything_once() -> None:
    async def test(pacer: FullCollectionPacer, now: list[float]) -> None:
        gc.collect()
        await settle()
        frozen = gc.get_freeze_count()
        cycle = Node()
        cycle.other = cycle
        ref = weakref.ref(cycle)
        grown = [Node() for _ in range(frozen)]  # the frozen count about doubles at the next freeze
        gc.collect()
        await settle()
        del cycle
        assert pacer.full_walks == 0 and ref() is not None
        gc.collect()
        await settle()
        assert pacer.full_walks == 1 and ref() is None  # no time has passed: growth alone fired the walk
        del grown

    # a growth of 1.5: the count doubles, less what was frozen and has since been freed (a test process frees
    # objects of earlier tests at any time: with 2.0 the rule missed once in the full suite)
    run(test, every_s=1e9, growth=1.5)


def test_the_timer_walks_when_no_full_collection_comes() -> None:
    """A steady session may never see CPython's own full collection (young passes every 50,000 net
    allocations): the time rule's walk comes from the pacer's timer, and only once it is due."""

    async def test(pacer: FullCollectionPacer, now: list[float]) -> None:
        gc.disable()  # no collection of the collector's own during the test: only the timer's
        cycle = Node()
        cycle.other = cycle
        ref = weakref.ref(cycle)
        del cycle
        now[0] += 599.0
        pacer.on_timer()
        assert ref() is not None and pacer.full_walks == 0  # not due yet: nothing walked
        now[0] += 1.0
        pacer.on_timer()
        assert ref() is None and pacer.full_walks == 1  # due: walked once, the cycle freed
        pacer.on_timer()
        assert pacer.full_walks == 1  # the clock started over at the walk

    run(test, every_s=600.0, growth=1e9)


def test_the_timer_is_armed_while_installed_only() -> None:
    async def test(pacer: FullCollectionPacer, now: list[float]) -> None:
        assert pacer._timer is not None and not pacer._timer.cancelled()
        timer = pacer._timer
        pacer.uninstall()
        assert pacer._timer is None and timer.cancelled()

    run(test, every_s=600.0, growth=1e9)
