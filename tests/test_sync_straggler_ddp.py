"""The sync ``straggler`` on a real DDP job (examples/pytorch_ddp, gloo, CPU, 2 ranks under torchrun) whose
rank 1 is made slow (``--slow-rank 1``: 40 ms more compute a step), through the real session (no Pilot):
the rule names rank 1 and predicts the gain of replacing it from the measured split; the all-reduce share
of the fast rank (it waits for the slow one) is what grows. (On this 2-vCPU machine the ranks share CPUs, so
a rank computes faster while its peer sleeps: the predicted gain — "a median rank" — is larger than what an
unslowed run reaches here; on GPUs ranks do not share their compute.)"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from cmdare.tui.options import SessionOptions
from cmdare.tui.session import MonitorSession
from tests.training_jobs import ddp_job as run_ddp

pytest.importorskip("torch")
pytestmark = pytest.mark.slow

SLOW_S = 0.04


@pytest.fixture
def slow_ddp(tmp_path: Path) -> Iterator[int]:
    with run_ddp(tmp_path, "--slow-rank", "1", "--slow-seconds", str(SLOW_S)) as base:
        yield base


async def test_the_slow_rank_is_named_with_the_gain_of_replacing_it(slow_ddp: int) -> None:
    urls = [f"http://127.0.0.1:{slow_ddp + r}/metrics" for r in range(2)]
    session = MonitorSession(SessionOptions.of(targets=urls, refresh=1.0, read_only=True))
    session.start()
    try:
        state = None
        for _ in range(40):
            state = await session.refresh()
            if any(a.kind == "straggler" for a in state.alerts):
                break
            await asyncio.sleep(1.0)
    finally:
        await session.aclose()
    assert state is not None
    (alert,) = [a for a in state.alerts if a.kind == "straggler"]
    job = state.job()
    fast, slow = sorted(job.nodes, key=lambda n: n.step_seconds or 0.0)
    print(f"{alert.message}; {alert.fix}; evidence {alert.evidence}")
    assert alert.subject == f"{job.name}/worker-1" and alert.evidence["rank"] == "1"
    # the sleep is compute: the slow rank's step holds it, and it is the slower one (how much slower depends on how
    # busy the machine's cores are, so no tighter figure holds on a shared machine)
    assert slow.step_seconds >= SLOW_S and slow.step_seconds > fast.step_seconds
    assert fast.allreduce_seconds > slow.allreduce_seconds  # the fast rank waits for the slow one
    expected = (slow.step_seconds + slow.allreduce_seconds) / (fast.step_seconds + slow.allreduce_seconds) - 1
    assert alert.evidence["predicted_gain"] == pytest.approx(expected, rel=0.25)
    assert alert.fix and "replace worker-1" in alert.fix and "predicted +" in alert.fix
