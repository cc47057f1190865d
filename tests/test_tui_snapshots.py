"""Snapshot tests of the app on fixed data: a source that returns the same TaskPolls for the same
clock time, a ManualClock, polls driven by the test (no live demo, no wall time). Also used by the
other tui tests (``fixed_app``) and by ``scripts/screenshots.py``'s deterministic mode.

Update after an intended change: ``.venv/bin/pytest tests/test_tui_snapshots.py --snapshot-update``."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from cmdare.collectors import metrics as M
from cmdare.collectors.clock import Clock, ManualClock
from cmdare.collectors.samples import JobFacts, ModelSpec, TaskInfo, TaskPoll
from cmdare.tui.app import CmdareApp
from cmdare.tui.options import SessionOptions
from cmdare.tui.session import MonitorSession

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def utc_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The top line's ``polled HH:MM`` is local time: every snapshot in UTC, wherever it is taken."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


T0 = 1_700_000_000.0
# ResNet-32 on P100 as in demo/data/demo_calibration.json (from ../shared/data/cmdare); the
# per-worker speed 5.4 steps/s is what 8 workers behind one saturated PS show there (≈43 steps/s).
FACTS = JobFacts(
    "resnet32-p100",
    ModelSpec(name="ResNet-32", model_flops=1658696889.0, params=1857722.0, batch_size=128),
    64000,
)
WORKER_RATE = 5.4
REVOKE_AFTER = 4  # worker-3 stops answering after this many polls


class FixedSource:
    """Eight P100 workers (one chief) and one PS; worker-3 disappears after ``REVOKE_AFTER`` polls."""

    name = "fixed"

    def __init__(self) -> None:
        self.polls = 0

    async def poll(self, client: httpx.AsyncClient, clock: Clock) -> list[TaskPoll]:
        self.polls += 1
        t = clock.now()
        dt = t - T0
        out = [self._ps(t, dt)]
        for i in range(8):
            info = TaskInfo(
                job=FACTS.job,
                task=f"worker-{i}",
                role="chief" if i == 0 else "worker",
                gpu="P100",
                region="us-central1",
                zone="us-central1-a",
                provisioning="preemptible",
            )
            if i == 3 and self.polls > REVOKE_AFTER:
                out.append(
                    TaskPoll(
                        source=f"http://10.0.0.{i}:9100/metrics",
                        t=t,
                        ok=False,
                        info=info,
                        error="connection refused",
                    )
                )
                continue
            steps = WORKER_RATE * dt
            values = {M.K_WORKER_STEPS: steps, M.K_GLOBAL_STEP: 8 * steps, M.K_EXAMPLES: 128 * steps,
                      M.K_STEP_SECONDS_SUM: 0.083 * steps, M.K_STEP_SECONDS_COUNT: steps}  # fmt: skip
            out.append(
                TaskPoll(
                    source=f"http://10.0.0.{i}:9100/metrics",
                    t=t,
                    ok=True,
                    info=info,
                    values=values,
                    job_facts=FACTS,
                )
            )
        return out

    def _ps(self, t: float, dt: float) -> TaskPoll:
        info = TaskInfo(
            job=FACTS.job,
            task="ps-0",
            role="ps",
            gpu="",
            region="us-central1",
            zone="us-central1-a",
            provisioning="standard",
        )
        moved = 8 * WORKER_RATE * dt * FACTS.model.params * 4
        return TaskPoll(source="http://10.0.0.100:9100/metrics", t=t, ok=True, info=info,
                        values={M.K_PS_IN: moved, M.K_PS_OUT: moved}, job_facts=FACTS)  # fmt: skip


def fixed_app(read_only: bool = False, polls: int = 6, **opts) -> tuple[CmdareApp, object]:  # noqa: ANN003
    """An app over :class:`FixedSource` and a ManualClock; ``run_before`` takes ``polls`` polls 2 s apart."""
    options = SessionOptions.of(refresh=2.0, read_only=read_only, **opts)
    clock = ManualClock(T0)
    session = MonitorSession(options, clock=clock, extra_sources=[FixedSource()])
    app = CmdareApp(options, session, poll=False)

    async def run_before(pilot) -> None:  # noqa: ANN001
        for _ in range(polls):
            clock.advance(2.0)
            app.apply_state(await session.refresh())
        await pilot.pause()

    return app, run_before


def test_overview_120x40(snap_compare):
    app, before = fixed_app(budget_usd=50.0)
    assert snap_compare(app, terminal_size=(120, 40), run_before=before)


def test_overview_80x24(snap_compare):
    app, before = fixed_app()
    assert snap_compare(app, terminal_size=(80, 24), run_before=before)


def test_job_pane_80x24(snap_compare):
    app, before = fixed_app(budget_usd=50.0)
    assert snap_compare(app, terminal_size=(80, 24), run_before=before, press=["2"])


def test_planner_80x24(snap_compare):
    app, before = fixed_app()
    assert snap_compare(app, terminal_size=(80, 24), run_before=before, press=["3"])


def test_planner_explain_120x40(snap_compare):
    app, before = fixed_app()
    assert snap_compare(app, terminal_size=(120, 40), run_before=before, press=["3", "j", "enter"])


def test_alerts_80x24(snap_compare):
    app, before = fixed_app(polls=9)
    assert snap_compare(app, terminal_size=(80, 24), run_before=before, press=["4"])


def test_help_80x24(snap_compare):
    app, before = fixed_app()
    assert snap_compare(app, terminal_size=(80, 24), run_before=before, press=["question_mark"])


def test_read_only_badge_80x24(snap_compare):
    app, before = fixed_app(read_only=True)
    assert snap_compare(app, terminal_size=(80, 24), run_before=before)


def test_no_color_80x24(snap_compare, monkeypatch: pytest.MonkeyPatch):
    """Monochrome: states still read as symbols and words (● up, ✖ revoked, ▲ warning)."""
    monkeypatch.setenv("NO_COLOR", "1")
    app, before = fixed_app(polls=9)
    assert app.no_color
    assert snap_compare(app, terminal_size=(80, 24), run_before=before)
