"""The Job pane shows what a real job logs: loss, learning rate and a loss plot, from event files
written by torch's SummaryWriter, in the real app driven by its Pilot."""

from __future__ import annotations

import asyncio

import pytest
from rich.console import Console

torch_tb = pytest.importorskip("torch.utils.tensorboard")

from cmdare.tui.app import CmdareApp  # noqa: E402
from cmdare.tui.options import SessionOptions  # noqa: E402
from cmdare.tui.panes.job import JobPane, summary_grid  # noqa: E402
from tests.pilot_app import wait_for  # noqa: E402

pytestmark = pytest.mark.slow


def _write(d, first: int, last: int) -> None:
    w = torch_tb.SummaryWriter(log_dir=str(d), filename_suffix=f".{first}")
    for i in range(first, last):
        w.add_scalar("train/loss", 3.0 / (i + 1), 10 * i, walltime=1_700_000_000.0 + i)
        w.add_scalar("learning_rate", 0.05, 10 * i, walltime=1_700_000_000.0 + i)
    w.close()


async def test_job_pane_shows_loss_lr_and_a_loss_plot(tmp_path):
    run = tmp_path / "run"
    _write(run, 0, 20)
    app = CmdareApp(SessionOptions(tensorboard=[str(tmp_path)], job="tb", refresh=0.3, read_only=True))
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.query_one(JobPane)

        def summary_text() -> str:
            st = app.state
            return "" if st is None or st.job() is None or st.job().training is None else "ok"

        await wait_for(pilot, lambda: summary_text() == "ok")
        job = app.state.job()
        assert job.training.loss == pytest.approx(3.0 / 20) and job.training.learning_rate == pytest.approx(
            0.05
        )
        await asyncio.to_thread(_write, run, 20, 40)
        # The writer flushes as it goes: a poll may read the file half-written (loss 0.12 at step 240),
        # and the next poll reads the rest. Wait for the last value the writer logged.
        await wait_for(pilot, lambda: app.state.job().training.loss == pytest.approx(3.0 / 40))
        assert len(app.state.job().training.loss_points) >= 2
        while pane.plot_kind != "loss":
            pane.next_plot()
        await pilot.pause(0.2)
        assert pane.query_one("#job-plot").display and not pane.query_one("#plot-note").display
        console = Console(width=100, record=True, color_system=None)
        console.print(summary_grid(app.state.job(), app.state, None))
        text = console.export_text()
        assert "Loss" in text and "0.0750" in text and "LR" in text and "0.05" in text


async def test_a_tensorboard_note_reaches_the_status_line(tmp_path):
    """A degraded but answered poll (here: a file unreadable past a bad length CRC) is said on screen."""
    from cmdare.collectors.clock import ManualClock
    from cmdare.collectors.tensorboard.source import TensorBoardSource
    from cmdare.tui.session import MonitorSession

    run = tmp_path / "run"
    _write(run, 0, 5)
    (f,) = run.glob("events.out.tfevents.*")
    with f.open("ab") as fh:
        fh.write(b"\x05" + b"\x00" * 15)  # a record header whose length CRC is wrong
    src = TensorBoardSource(tmp_path, job="tb", poll_budget_s=30)
    session = MonitorSession(SessionOptions(job="tb"), clock=ManualClock(), extra_sources=[src])
    session.start()
    try:
        cycle = await session.poller.poll_once()
        status = session._source_status(cycle)  # what the status line and snapshot print (no planner)
    finally:
        await session.aclose()
    assert status[0].ok and status[0].message == "1/1 targets answered"
    assert any(s.ok and "length CRC mismatch" in s.message for s in status[1:])


def test_snapshot_text_says_what_the_job_logs(capsys, tmp_path):
    from cmdare.tui.cli import main

    _write(tmp_path / "run", 0, 20)
    code = main(
        ["snapshot", "--tensorboard", str(tmp_path), "--samples", "2", "--interval", "0.3", "--read-only"]
    )
    out = capsys.readouterr().out
    assert code == 0 and "Logged: loss 0.1500, learning rate 0.05" in out
