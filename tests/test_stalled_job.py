"""A job that dies is shown as stalled, not as training (issue 28 item 2): once no task is up, the
real app says "stalled since HH:MM" with the last rate as a past figure, no steps/s and no ETA, and the
planner stops ranking it — in the Job pane, the Planner pane, the snapshot text and the JSON export.

The job is real: examples/pytorch_ps (1 PS + 2 workers over torch.distributed.rpc), killed with SIGKILL;
the ranking gate is held on the demo cluster (a network and GPU shape the planner ranks), stopped."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from textual.widgets import Static
from test_app_pilot import fast_demo_app, wait_for
from training_jobs import port_base, wait_training

from cmdare.planner.live_plan import STALLED_NOTE
from cmdare.tui.app import CmdareApp
from cmdare.tui.format import clock
from cmdare.tui.options import SessionOptions
from cmdare.tui.plain import print_overview
from cmdare.tui.session import MonitorSession

pytest.importorskip("torch")
REPO = Path(__file__).resolve().parents[1]


def _summary(app: CmdareApp) -> str:
    """The Job pane's summary as the screen shows it (wide enough for whole lines)."""
    console = Console(width=200, color_system=None)
    with console.capture() as cap:
        console.print(app.query_one("#job-summary", Static).content)
    return cap.get()


async def test_killed_pytorch_job_reads_stalled_everywhere(tmp_path: Path) -> None:
    base = port_base(3)
    job = subprocess.Popen(
        [sys.executable, "-m", "examples.pytorch_ps", "--steps", "100000", "--port-base", str(base)],
        cwd=REPO,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "job.log").open("wb"),
        start_new_session=True,  # its ranks in one process group: killed together below
    )
    urls = [f"http://127.0.0.1:{base + r}/metrics" for r in range(3)]
    try:
        wait_training(urls)
        opts = SessionOptions(targets=urls, refresh=0.5, read_only=True)
        app = CmdareApp(opts, MonitorSession(opts))
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.state is not None and app.state.job() is not None
                           and app.state.job().eta_seconds is not None)  # fmt: skip
            await pilot.press("2")
            await wait_for(pilot, lambda: "measured" in _summary(app) and "stalled" not in _summary(app))
            assert not app.state.job().stalled
            os.killpg(job.pid, signal.SIGKILL)  # every rank dies at once
            job.wait(timeout=10)
            await wait_for(pilot, lambda: app.state.job().stalled)
            await wait_for(pilot, lambda: "stalled since" in _summary(app))
            j = app.state.job()
            since = clock(j.stalled_since)
            assert j.steps_per_sec is None and j.eta_seconds is None and j.last_steps_per_sec > 0
            summary = _summary(app)
            assert f"stalled since {since} (no task up; last measured " in summary
            assert "none while the job is stalled" in summary and "at measured speed" not in summary
            await pilot.press("3")
            await wait_for(
                pilot, lambda: "stalled since" in str(app.query_one("#pane-planner").border_subtitle)
            )
            assert app.state.planner.job(j.name).plan.note == STALLED_NOTE

            exported = app.state.to_json()["jobs"][0]  # what the export key writes
            assert exported["steps_per_sec"] is None and exported["eta_seconds"] is None
            assert exported["stalled_since"] == j.stalled_since and exported["last_steps_per_sec"] > 0
            assert isinstance(exported["global_step"], int) and exported["rate_basis"] is None
            json.dumps(exported)

            out = io.StringIO()
            print_overview(app.state, Console(file=out, width=200, no_color=True))
            text = out.getvalue()
            assert f"stalled since {since}" in text and "ETA none (stalled)" in text
            assert "steps/s measured" not in text and "Plans: none (the job is stalled" in text
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(timeout=10)


async def test_planner_stops_ranking_a_stalled_job() -> None:
    app = fast_demo_app(first_revocation_s=1000)
    async with app.run_test(size=(120, 40)) as pilot:
        name = "resnet32-p100"
        await wait_for(pilot, lambda: app.state is not None
                       and getattr(app.state.planner.job(name), "ranked", None) is not None)  # fmt: skip
        app.session.demo.stop()  # every task of the demo stops answering
        await wait_for(pilot, lambda: app.state.job(name).stalled)
        await app.session.update_plans()  # a ranking pass asked for now: it ranks nothing for the job
        assert app.session.analysis.live_plans[name].table is None
        await wait_for(pilot, lambda: app.state.planner.job(name).plan.note == STALLED_NOTE)
        assert app.state.planner.job(name).ranked is None
