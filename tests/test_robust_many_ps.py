"""Issue 27 item 1: a job with many parameter servers must not make the work grow with what a source
announces. The planner tries a bounded set of PS counts (and says so), one task identity claimed by
200,000 endpoints is not 200,000 tasks, and a recorded cycle is bounded. Real parts: the real
``snapshot`` command replaying a real recording, the real recorder and poller gate."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from adversarial import many_ps_recording  # noqa: E402

from cmdare.collectors import caps  # noqa: E402
from cmdare.collectors.samples import TaskInfo, TaskPoll  # noqa: E402
from cmdare.planner.risk_cost.shapes import EVERY_PS_UP_TO, ps_counts, ps_search_note  # noqa: E402

pytestmark = pytest.mark.slow


def test_ps_counts_are_dense_then_geometric_and_bounded() -> None:
    assert list(ps_counts(4, 2)) == [1, 2, 3, 4]
    assert list(ps_counts(16, 16)) == list(range(1, 17)) and ps_search_note(16) == ""
    big = ps_counts(4096, 2500)
    assert list(big[:EVERY_PS_UP_TO]) == list(range(1, EVERY_PS_UP_TO + 1))
    assert big[-1] == 4096 and 2500 in big and len(big) <= 45
    assert "not every count" in ps_search_note(2500)


def _snapshot_json(path: Path) -> dict:
    cmd = [sys.executable, "-m", "cmdare.tui.cli", "snapshot", "--read-only", "--json", "--replay", str(path),
           "--samples", "3", "--interval", "0"]  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    return json.loads(p.stdout)


def test_snapshot_of_a_many_ps_job_ranks_a_bounded_set_and_says_so(tmp_path: Path) -> None:
    """300 PSs with model facts declared (2,500 took 3.45 GB and 112 s of CPU: every PS count 1..2,500 times
    every GPU, worker count, region and provisioning); the ranking tries ~30 PS counts and says so."""
    path = tmp_path / "rec.sqlite"
    many_ps_recording(path, 300)
    doc = _snapshot_json(path)
    (job,) = doc["jobs"]
    assert sum(n["role"] == "ps" for n in job["nodes"]) == 300
    ranking = doc["planner"]["jobs"][0]["ranking"]
    assert ranking["rows"] and "PS counts tried: 1–16" in ranking["search_note"]
    assert {r["ps"] for r in ranking["rows"]} <= set(ps_counts(300, 300).tolist())


def test_the_ranking_of_2500_ps_enumerates_a_bounded_table() -> None:
    from cmdare.collectors.pricing import load_book
    from cmdare.collectors.samples import ModelSpec
    from cmdare.planner.risk_cost.shapes import enumerate_shapes, worker_counts
    from cmdare.planner.risk_cost.workload import Allowed, Options, Shape, Target, Workload

    book = load_book("offline")
    gpus, regions = tuple(sorted(set(book.gpus()) | {"K80"})), tuple(sorted(book.regions()))
    w = Workload(
        model=ModelSpec(name="ResNet-32", model_flops=1.4e11, params=4.6e5, batch_size=128),
        target=Target(steps=64000),
        current=Shape("K80", 4, 2500, "us-central1", "spot"),
        allowed=Allowed(
            gpus=gpus, regions=regions, max_workers=16, max_ps=2500, provisionings=("standard", "spot")
        ),
        options=Options(),
        source="test",
    )
    rows = enumerate_shapes(w)["ps"].size
    assert rows == len(gpus) * len(worker_counts(16, 4)) * len(ps_counts(2500, 2500)) * len(regions) * 2
    assert rows * 50 < len(gpus) * len(worker_counts(16, 4)) * 2500 * len(regions) * 2  # not every PS count


def test_one_ps_announced_20000_times_in_a_cycle_is_at_most_four_tasks(tmp_path: Path) -> None:
    """A recording whose cycle repeats ps-0 (200,000 times made 50,000 tasks, the replay's cycle cap, and a
    50,000-PS job for the planner), each poll from its own source: 20,000 here, the same bound."""
    path = tmp_path / "rec.sqlite"
    many_ps_recording(path, 1, claimants=20_000)
    doc = _snapshot_json(path)
    (job,) = doc["jobs"]
    ps = [n["name"] for n in job["nodes"] if n["role"] == "ps"]
    assert len(ps) == caps.MAX_CLAIMANTS and ps[0] == "ps-0"


def test_the_gate_counts_each_claimant_against_the_task_cap() -> None:
    gate = caps.CapGate()
    info = TaskInfo(job="j", task="ps-0", role="ps")
    polls = [TaskPoll(source=f"s{i}", t=1.0, ok=True, info=info) for i in range(1000)]
    polls += [
        TaskPoll(source=f"w{i}", t=1.0, ok=True, info=TaskInfo(job="j", task=f"worker-{i}")) for i in range(4)
    ]
    kept = gate.admit(polls, caps.Caps(tasks=6))
    assert [p.source for p in kept] == ["s0", "s1", "s2", "s3", "w0", "w1"]
    assert (
        gate.note is not None and "996 poll(s) dropped" in gate.note and "showing 6 of 8 tasks" in gate.note
    )


@pytest.fixture
def small_cycles() -> object:
    before = caps.current()
    caps.configure(cycle_polls=10)
    yield
    caps.configure(before)


def test_the_recorder_writes_at_most_cycle_polls_a_cycle_and_says_so(tmp_path: Path, small_cycles) -> None:
    from cmdare.collectors.poller import Cycle
    from cmdare.collectors.recording.recorder import Recorder

    rec = Recorder(tmp_path / "rec.sqlite", interval=2.0)
    polls = [
        TaskPoll(source=f"s{i}", t=1.0, ok=True, info=TaskInfo(job="j", task=f"worker-{i}"))
        for i in range(25)
    ]
    rec.record(Cycle(t=1.0, elapsed=0.0, polls=polls, transitions=[]))
    rec.close()
    c = sqlite3.connect(tmp_path / "rec.sqlite")
    (n,) = c.execute("SELECT count(*) FROM polls").fetchone()
    (errors,) = c.execute("SELECT source_errors FROM cycles").fetchone()
    c.close()
    assert n == 10 and "only the first 10 of 25 polls recorded" in json.loads(errors)["recording"]


async def test_the_planner_pane_says_which_ps_counts_it_tried(tmp_path: Path) -> None:
    """The real app (Pilot) replaying the 300-PS job: the Planner pane's subtitle names the PS counts tried."""
    from cmdare.tui.app import CmdareApp
    from cmdare.tui.options import SessionOptions
    from cmdare.tui.panes.planner import PlannerPane
    from cmdare.tui.session import MonitorSession
    from tests.pilot_app import wait_for

    path = tmp_path / "rec.sqlite"
    many_ps_recording(path, 300, cycles=30)  # the app ranks in the background: the next refresh shows it
    opts = SessionOptions(replay=str(path), replay_speed=4.0, read_only=True)
    app = CmdareApp(opts, MonitorSession(opts))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.state is not None and getattr(app.state.planner.job("big"), "ranked", None) is not None,
                       timeout=60)  # fmt: skip
        await pilot.press("3")
        pane = app.query_one(PlannerPane)
        await wait_for(
            pilot, lambda: "PS count" in str(pane.border_subtitle), timeout=20
        )  # in a form that fits
