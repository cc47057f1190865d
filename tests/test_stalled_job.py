"""A job that dies is shown as stalled, not as training (issue 28 item 2): once no task is up, the
real app says "stalled since HH:MM" with the last rate as a past figure, no steps/s and no ETA, and the
planner stops ranking it — in the Job pane, the Planner pane, the snapshot text and the JSON export.

The job is real: examples/pytorch_ps (1 PS + 2 workers over torch.distributed.rpc), ended by SIGTERM;
the ranking gate is held on the demo cluster (a network and GPU shape the planner ranks), stopped."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from textual.widgets import Static

from cmdare.planner.live.plan import STALLED_NOTE
from cmdare.tui.app import CmdareApp
from cmdare.tui.format import clock
from cmdare.tui.options import SessionOptions
from cmdare.tui.plain import print_overview
from cmdare.tui.session import MonitorSession
from tests.pilot_app import fast_demo_app, wait_for
from tests.training_jobs import port_base, wait_training

pytestmark = pytest.mark.slow

pytest.importorskip("torch")
REPO = Path(__file__).resolve().parents[1]


def _summary(app: CmdareApp) -> str:
    """The Job pane's summary as the screen shows it (wide enough for whole lines)."""
    console = Console(width=200, color_system=None)
    with console.capture() as cap:
        console.print(app.query_one("#job-summary", Static).content)
    return cap.get()


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has ended (its parent has not reaped it yet)


async def test_pytorch_ps_job_ended_by_sigterm_leaves_no_rank_and_reads_stalled(tmp_path: Path) -> None:
    """The two-worker PS example on a loaded host: no per-worker straggler flag (one peer is too few
    to tell); SIGTERM to its launcher ends every rank (none orphaned); the app then reads the job as
    stalled everywhere."""
    base = port_base(3)
    job = subprocess.Popen(
        [sys.executable, "-m", "examples.pytorch_ps", "--steps", "100000", "--port-base", str(base)],
        cwd=REPO,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "job.log").open("wb"),
        start_new_session=True,  # a stray rank is killed with the group in the end, whatever happens
    )
    urls = [f"http://127.0.0.1:{base + r}/metrics" for r in range(3)]
    try:
        wait_training(urls)
        ranks = _children(job.pid)
        assert len(ranks) == 3
        opts = SessionOptions(targets=urls, refresh=0.5, read_only=True)
        app = CmdareApp(opts, MonitorSession(opts))
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.state is not None and app.state.job() is not None
                           and app.state.job().eta_seconds is not None)  # fmt: skip
            await pilot.press("2")
            await wait_for(pilot, lambda: "measured" in _summary(app) and "stalled" not in _summary(app))
            assert not app.state.job().stalled
            # its tasks name no region: priced where the planner would plan them, and said so (item 7)
            await wait_for(pilot, lambda: "us-central1 assumed; no budget set" in _summary(app))
            assert "/h" in next(line for line in _summary(app).splitlines() if line.startswith("Cost"))
            start = app.state.cycles
            await wait_for(pilot, lambda: app.state.cycles >= start + 8)  # past raise_after (3) twice over
            flagged = {(a.kind, a.subject) for a in app.state.alert_history}
            assert not {s for k, s in flagged if k == "straggler" and "/" in s}, flagged

            job.send_signal(signal.SIGTERM)  # to the launcher only, as a user or a scheduler does
            assert job.wait(timeout=30) == 128 + signal.SIGTERM
            assert not [r for r in ranks if _alive(r)]  # every rank ended with it
            await wait_for(pilot, lambda: app.state.job().stalled)
            await wait_for(pilot, lambda: "no task up" in _summary(app))
            j = app.state.job()
            since = clock(j.stalled_since)
            assert j.steps_per_sec is None and j.eta_seconds is None and j.last_steps_per_sec > 0
            summary = _summary(app)
            assert re.search(rf"Steps/s +stalled  since {since} · last [\d.]+ measured · no task up", summary)
            assert "Images/s    –  none while no task is up" in summary and "· $0/h" in summary
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
        try:
            os.killpg(job.pid, signal.SIGKILL)  # whatever of the job is left (nothing, when it passed)
        except ProcessLookupError:
            pass
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


def test_a_job_past_its_target_with_no_task_up_reads_finished_not_stalled() -> None:
    from cmdare.collectors.observed import JobView
    from cmdare.collectors.pricing import load_offline_book
    from cmdare.collectors.samples import JobFacts
    from cmdare.planner.live.plan import FINISHED_NOTE, LivePlanner
    from cmdare.planner.speed.speed_model import SpeedModel
    from cmdare.tui.format import stalled_phrase

    def job(step: float) -> JobView:
        return JobView(
            name="j",
            facts=JobFacts("j", target_steps=1000),
            steps_per_sec=None,
            examples_per_sec=None,
            global_step=step,
            eta_seconds=None,
            nodes=[],
            stalled_since=1.8e9,
            last_steps_per_sec=9.6,
        )

    done, dead = job(1000.0), job(400.0)
    assert done.finished and not dead.finished and dead.stalled
    assert stalled_phrase(done).startswith(f"finished: target step reached, no task up since {clock(1.8e9)}")
    assert stalled_phrase(dead) == f"stalled since {clock(1.8e9)} (no task up; last measured 9.6 steps/s)"
    assert done.to_json(0.0)["finished"] is True and dead.to_json(0.0)["finished"] is False
    planner = LivePlanner(SpeedModel.load(), load_offline_book())
    assert planner.update(done, 0.0).note == FINISHED_NOTE and planner.update(dead, 0.0).note == STALLED_NOTE
