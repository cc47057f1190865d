"""Issue 30's "done when" on the real DDP example (examples/pytorch_ddp: gloo, CPU, 2 ranks under torchrun,
declaring T4 spot in us-central1, rank 0 checkpointing): with minutes of work left, through the real session
(no Pilot; the app's Pilot test is tests/test_planner_actionable_app.py), no ranked row recommends a switch that
costs more than it saves, every row's explanation lists the switching terms, and the work at risk since the
job's own last checkpoint is in ``snapshot --json``'s document."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from cmdare.tui.options import SessionOptions
from cmdare.tui.session import MonitorSession
from tests.training_jobs import ddp_job as run_ddp

pytest.importorskip("torch")
pytestmark = pytest.mark.slow

TARGET = 6000  # global steps: a few minutes at the CPU run's pace


@pytest.fixture
def ddp_job(tmp_path: Path) -> Iterator[int]:
    with run_ddp(
        tmp_path,
        "--gpu",
        "T4",
        "--region",
        "us-central1",
        "--provisioning",
        "spot",
        "--target-steps",
        str(TARGET),
        "--checkpoint-dir",
        str(tmp_path),
        "--checkpoint-every",
        "100",
    ) as base:
        yield base


async def test_minutes_left_plans_pay_for_their_switch_and_say_what_is_at_risk(ddp_job: int) -> None:
    from cmdare.collectors.pricing import load_book
    from cmdare.tui.widgets.explain import ExplainScreen

    urls = [f"http://127.0.0.1:{ddp_job + r}/metrics" for r in range(2)]
    session = MonitorSession(SessionOptions.of(targets=urls, refresh=1.0, read_only=True))
    session.set_price_book(load_book("offline"))
    session.start()
    try:
        state = None
        for _ in range(60):
            state = await session.refresh()
            job = state.job()
            if job is not None and job.steps_per_sec and any(n.last_checkpoint_at for n in job.nodes):
                break
            await asyncio.sleep(1.0)
        await session.update_plans()
        state = replace(state, planner=state.planner.with_plans(session.analysis.live_plans))
    finally:
        await session.aclose()
    job = state.job()
    assert job.eta_seconds is not None and job.eta_seconds < 3600, "minutes of work left, not hours"
    view = state.planner.job(job.name)
    table = view.ranked
    assert table is not None, view.plan and view.plan.note
    c = table.columns
    order = [int(i) for i in table.view]
    stay = order.index(0)
    print(f"ETA {job.eta_seconds:.0f} s; 'stay' ranked #{stay + 1} of {len(order)}; "
          + "; ".join(f"{table.ranked_row(i).shape} {table.switch_words(i)}" for i in order[:4]))  # fmt: skip
    for i in order[:stay]:  # every row ranked above "stay" beats it with its switch counted
        assert c["worth_switching"][i] and c["switch_s"][i] > 0 and c["score"][i] < c["score"][0]
        assert c["hours_p50"][i] * 3600 > c["switch_s"][i]  # the switch is part of its time
    for i in order[stay + 1 : stay + 20]:
        assert table.switch_words(i).startswith("not worth switching")
    for i in order[:10]:
        if i == 0:
            continue
        console = Console(width=160, record=True, color_system=None)
        console.print(ExplainScreen.for_ranked(table, i)._body)
        text = console.export_text()
        assert "Switching" in text and "restart," in text and "redo since checkpoint" in text
    assert table.switch_basis["redo"].startswith("measured: last checkpoint")  # the job's own checkpoint
    doc = state.to_json()
    risk = next(j for j in doc["planner"]["jobs"] if j["job"] == job.name)["checkpoint"]
    assert (
        risk["since_s"] is not None
        and 0 <= risk["since_s"] < 120
        and risk["write_basis"].startswith("measured")
    )
    assert risk["optimal_s"] and risk["revocation_now_s"] > risk["since_s"]
