"""Issue 20: hard caps with visible truncation. Past a cap a source keeps working on what fits and the
status line says what was dropped: a real Prometheus (Debian's) scraping real exporters on
127.0.0.1, real JSON-lines files, a real recording, the real poller and session."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from cmdare.collectors import caps
from cmdare.collectors.caps import CapGate, Caps
from cmdare.collectors.clock import ManualClock, SystemClock
from cmdare.collectors.exporter import TrainingExporter
from cmdare.collectors.logs.source import JsonlSource
from cmdare.collectors.poller import Poller
from cmdare.collectors.prometheus.source import PrometheusAPISource, _Books
from cmdare.collectors.samples import TaskInfo, TaskPoll
from cmdare.collectors.store import MIN_POINTS, Store
from cmdare.tui.options import SessionOptions
from cmdare.tui.session import MonitorSession
from tests.prom_server import prometheus_server  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _default_caps() -> Iterator[None]:
    caps.configure(Caps())
    yield
    caps.configure(Caps())


def _poll(i: int, n_values: int = 3) -> TaskPoll:
    values = {f"scalar{{tag=t{k}}}": float(k) for k in range(n_values)}
    return TaskPoll(source=f"s#{i}", t=1.7e9, ok=True, info=TaskInfo(job="job", task=f"w{i}"), values=values)


class Many:
    """A source naming ``n`` tasks a poll (no network)."""

    name = "many"

    def __init__(self, n: int) -> None:
        self.n = n

    async def poll(self, client: object, clock: object) -> list[TaskPoll]:
        return [_poll(i) for i in range(self.n)]


def test_gate_keeps_the_first_tasks_and_says_how_many_were_dropped():
    gate = CapGate()
    kept = gate.admit([_poll(i) for i in range(5)], Caps(tasks=3))
    assert [p.info.task for p in kept] == ["w0", "w1", "w2"]
    assert gate.note == "showing 3 of 5 tasks (cap 3)"
    kept = gate.admit([_poll(i) for i in (4, 1, 0, 2)], Caps(tasks=3))  # an admitted task stays admitted
    assert [p.info.task for p in kept] == ["w1", "w0", "w2"]
    kept = gate.admit([_poll(0, n_values=10)], Caps(series_per_task=4))
    assert len(kept[0].values) == 4 and gate.note == "1 task(s) cut to 4 series"
    assert gate.admit([_poll(0)], Caps()) and gate.note is None


async def test_session_status_line_says_showing_n_of_m_tasks():
    session = MonitorSession(SessionOptions(caps={"tasks": 4}), extra_sources=[Many(9)], clock=ManualClock())
    session.start()
    state = await session.refresh()
    await session.aclose()
    assert len(session.store.tasks) == 4
    said = [s.message for s in state.sources if not s.ok]
    assert "many: showing 4 of 9 tasks (cap 4)" in said, said


def test_store_history_budget_shortens_history_not_memory():
    store = Store(capacity=1800, history_bytes=2 << 20)
    for i in range(400):
        store.add(_poll(i, n_values=8))
    for step in range(300):
        for i in range(400):
            store.add(
                TaskPoll(
                    source=f"s#{i}",
                    t=1.7e9 + step,
                    ok=True,
                    info=TaskInfo(job="job", task=f"w{i}"),
                    values={"x": 1.0},
                )
            )
    allowed = store.allowed(9)
    assert MIN_POINTS <= allowed < 300
    total = sum(ts.nbytes for ts in store.tasks.values())
    assert total <= 2 * (2 << 20), total  # rings grow by doubling: at most twice the budget
    ts = store.tasks["job/w0"]
    assert len(ts.times) == len(ts.values["x"]) <= 2 * allowed  # rings of one task stay aligned


def test_store_keeps_at_most_series_per_task():
    store = Store(max_series=5)
    for k in range(20):
        store.add(
            TaskPoll(
                source="s", t=1.7e9 + k, ok=True, info=TaskInfo(job="j", task="w"), values={f"k{k}": 1.0}
            )
        )
    ts = store.tasks["j/w"]
    assert len(ts.values) == 5 and all(len(r) == len(ts.times) for r in ts.values.values())


async def test_jsonl_tasks_and_tags_are_capped_per_task_not_per_line(tmp_path: Path):
    caps.configure(tasks=3, tags_per_task=5)
    log = tmp_path / "train.jsonl"
    with log.open("w") as fh:
        for i in range(10):  # 10 tasks
            fh.write(json.dumps({"task": f"w{i}", "step": 1, "time": 1.7e9}) + "\n")
        for k in range(40):  # 40 lines of one task, 4 new tags each: 160 tags in all
            fh.write(json.dumps({"task": "w0", "step": k, **{f"tag{k}_{j}": 1.0 for j in range(4)}}) + "\n")
    src = JsonlSource(log)
    polls = await src.poll(None, ManualClock())  # type: ignore[arg-type]
    assert sorted(p.info.task for p in polls) == ["w0", "w1", "w2"]
    tags = [k for k in polls[0].values if k.startswith("scalar{")]
    assert len(tags) == 5
    assert (
        "showing 3 of 10 tasks (cap 3)" in src.cap_note
        and "155 tag(s) of 1 task(s) past 5 tags" in src.cap_note
    )


def test_label_length_cap_cuts_names_where_they_enter():
    caps.configure(label_length=12)
    info = TaskInfo(job="j", task="w" * 1_000_000)
    assert info.task == "w" * 11 + "…"
    caps.configure(Caps())
    assert len(TaskInfo(job="j", task="w" * 300).task) == 200


def test_replay_reads_at_most_cycle_polls(tmp_path: Path):
    from cmdare.collectors.poller import Cycle
    from cmdare.collectors.recording.recorder import Recorder
    from cmdare.collectors.recording.replay import ReplaySource

    rec = Recorder(tmp_path / "r.sqlite", interval=2.0)
    rec.record(Cycle(t=1.7e9, elapsed=0.0, polls=[_poll(i) for i in range(30)], transitions=[]))
    rec.close()
    caps.configure(cycle_polls=10)
    src = ReplaySource(tmp_path / "r.sqlite", ManualClock())
    cycle = src.read_cycle(src._ids[0])
    src.close()
    assert (
        len(cycle.polls) == 10
        and "only the first 10 polls read (cap cycle_polls)" in cycle.source_errors["replay"]
    )


@pytest.fixture
def five_exporters() -> Iterator[list[TrainingExporter]]:
    out = []
    for i in range(5):
        exp = TrainingExporter("big", "worker", f"worker-{i}", gpu="K80", region="us-east1")
        exp.start(0)
        out.append(exp)
    yield out
    for exp in out:
        exp.stop()


async def test_real_prometheus_tasks_cap_is_asked_of_the_server_and_said(prometheus_server, five_exporters):  # noqa: F811
    prom = prometheus_server([f"127.0.0.1:{e.port}" for e in five_exporters], scrape_interval="1s")
    await asyncio.to_thread(prom.wait_for_targets, 5)
    # every task's info series present at an instant a second behind now: the refresh asks a little
    # behind "now" (EVAL_LAG_S), and a task first scraped after that instant would be missing from it
    counted = await asyncio.to_thread(
        prom.wait_for, "count(cmdare_task_info offset 1s)", lambda r: bool(r) and r[0]["value"][1] == "5"
    )
    assert counted and counted[0]["value"][1] == "5", counted
    caps.configure(tasks=3)
    src = PrometheusAPISource(prom.url, 'job="cmdare-test"')
    async with httpx.AsyncClient() as client:
        polls = await src.poll(client, SystemClock())
        again = await src.poll(client, SystemClock())
    await src.aclose()
    # a task met for the first time may also bring its recent history (backfill polls): count tasks, not polls
    tasks = {p.info.task for p in polls if p.ok}
    assert len(tasks) == 3 and tasks == {p.info.task for p in again if p.ok}  # the same 3 each time
    assert src.cap_note == "showing 3 of 5 tasks (cap 3)"
    assert "topk(3," in src._info_query


async def test_real_prometheus_rows_past_the_cap_are_dropped_and_said(prometheus_server, five_exporters):  # noqa: F811
    prom = prometheus_server([f"127.0.0.1:{e.port}" for e in five_exporters], scrape_interval="1s")
    await asyncio.to_thread(prom.wait_for_targets, 5)
    caps.configure(rows_per_answer=4)
    src = PrometheusAPISource(prom.url, 'job="cmdare-test"')
    async with httpx.AsyncClient() as client:
        polls = await src.poll(client, SystemClock())
    await src.aclose()
    assert 1 <= len({p.info.task for p in polls if p.ok and p.info}) <= 4  # kept working on what fit
    assert "row(s) past 4 an answer dropped" in (src.cap_note or "")


async def test_poller_puts_a_source_cap_note_in_the_cycle():
    class Noted(Many):
        cap_note = "showing 1 of 2 tasks (cap 1)"
        display = "http://x"

    poller = Poller([Noted(1)], Store(), clock=ManualClock())
    cycle = await poller.poll_once()
    assert cycle.truncations == {"http://x": "showing 1 of 2 tasks (cap 1)"}


def test_a_label_value_over_the_cap_is_said_by_the_parser():
    from cmdare.collectors.scrape.exposition import parse_exposition

    page = (
        'cmdare_task_info{job="j",task="'
        + "w" * 5000
        + '"} 1\ncmdare_global_step{x="'
        + "A" * (1 << 20)
        + '"} 5\n'
    )
    parsed = parse_exposition(page)
    assert parsed.info is not None and len(parsed.info.task) == 200
    assert "2 series with a label value over 200 characters: cut ([caps] label_length)" in parsed.notes


def test_down_query_lists_instances_only_for_small_fleets():
    src = PrometheusAPISource("http://127.0.0.1:9", 'exported_job="big"', detail_tasks=2)
    src._known = {f"10.0.0.{i}:9400": _Books(TaskInfo(job="big", task=f"w{i}")) for i in range(2)}
    assert "instance=~" in src._down_query()
    src._known["10.0.0.9:9400"] = _Books(TaskInfo(job="big", task="w9"))
    assert src._down_query() == 'up{exported_job="big"} == 0'  # a URL of 10,000 instances is never built
