"""A large fleet through Prometheus (collectors/prometheus/fleet.py), forced small (``focus_from=3``) on
Debian's real ``prometheus`` scraping six real exporters every second: the job's rates are Prometheus'
own answer at the same instant, a refresh reads per-task detail only for the focus (the screen, the
outliers, the alerts) and the sweep, the slowest worker and a preempted one are found by the server and
read at once. The pure parts (folding, query sizes, the sweep, the columns) are checked beside them
against plain references."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from cmdare.collectors import metrics as M
from cmdare.collectors.clock import SystemClock
from cmdare.collectors.exporter import TrainingExporter
from cmdare.collectors.lifecycle import Lifecycle
from cmdare.collectors.poller import Poller
from cmdare.collectors.prometheus import answers
from cmdare.collectors.prometheus.aggregate import KEY_LABEL, T_KEY
from cmdare.collectors.prometheus.fleet import (
    ColumnValues,
    FleetColumns,
    FleetReader,
    Sweep,
    fold_by_task,
)
from cmdare.collectors.prometheus.source import PrometheusAPISource
from cmdare.collectors.samples import TaskInfo, TaskState
from cmdare.collectors.store import Store
from tests.prom_server import prometheus_server  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow

TASKS = [f"worker-{i}" for i in range(6)]
SLOW = "worker-5"  # steps four times slower than the others
SEL = 'job="cmdare-test"'


@pytest.fixture
def fleet() -> Iterator[dict[str, TrainingExporter]]:
    """Six spot workers stepping in a thread (every 20 ms, the slow one every 80 ms)."""
    exps = {t: TrainingExporter("resnet", "worker", t, gpu="K80", region="us-east1", provisioning="spot",
                                sync="async-ps") for t in TASKS}  # fmt: skip
    for e in exps.values():
        e.start(0)
    stop = threading.Event()

    def run() -> None:
        tick = 0
        while not stop.wait(0.02):
            tick += 1
            for name, e in exps.items():
                if name != SLOW or tick % 4 == 0:
                    e.step(0.01, examples=32)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield exps
    stop.set()
    thread.join()
    for e in exps.values():
        e.stop()


async def _scraped(start, exporters, settle_s: float = 0.0):  # noqa: ANN001
    """A real Prometheus (``start``: the fixture) scraping ``exporters`` every second, once every target is up and
    ``settle_s`` more have passed (a few scrapes: rates over the window)."""
    exporters = list(exporters)
    prom = start([_instance(e) for e in exporters], scrape_interval="1s")
    await asyncio.to_thread(prom.wait_for_targets, len(exporters))
    await asyncio.sleep(settle_s)
    return prom


def _source(url: str, selector: str = SEL, sweep_s: float = 1e9) -> PrometheusAPISource:
    """A source in fleet mode past three tasks, reading the columns on every refresh; ``sweep_s``
    so long that the sweep adds one task a refresh."""
    src = PrometheusAPISource(url, selector, detail_tasks=1, focus_from=3, timeout=10.0)
    src.fleet_reader = FleetReader(src.selector, sweep_s=sweep_s, columns_every_s=0.0)
    return src


async def _ask(url: str, promql: str, at: float) -> list[dict]:
    async with httpx.AsyncClient() as client:
        r = await client.get(f"{url}/api/v1/query", params={"query": promql, "time": f"{at:.3f}"})
        return r.json()["data"]["result"]


async def _refreshes(poller: Poller, n: int, gap: float = 0.5) -> list:
    out = []
    for _ in range(n):
        out.append(await poller.poll_once())
        await asyncio.sleep(gap)
    return out


def _instance(exp: TrainingExporter) -> str:
    return f"127.0.0.1:{exp.port}"


@pytest.mark.parametrize(
    ("selector", "truth"),
    [
        (SEL, f"rate({M.K_WORKER_STEPS}{{{SEL}}}[1m])"),  # a scrape label: the columns use it directly
        (
            'role="worker"',
            f'rate({M.K_WORKER_STEPS}[1m]) and on (instance) cmdare_task_info{{role="worker"}}',
        ),
    ],
)
async def test_job_rates_are_prometheus_own_sum_at_the_same_instant(
    prometheus_server,  # noqa: F811
    fleet,
    selector,
    truth,
):
    prom = await _scraped(prometheus_server, fleet.values(), settle_s=3.0)  # every task has a rate
    src = _source(prom.url, selector)
    store = Store()
    poller = Poller([src], store, lifecycle=Lifecycle(), clock=SystemClock(), interval=0.5)
    await _refreshes(poller, 8)  # a full read, then the columns one a refresh
    assert src.fleet_reader.direct is (selector == SEL)  # probed: does the selector reach the value series?
    got = src.fleet
    assert got is not None
    [role] = got.roles
    assert (role.job, role.role, role.tasks, role.rated) == ("resnet", "worker", 6, 6)
    own = await _ask(prom.url, f"sum({truth})", got.t)
    assert role.steps_per_sec == pytest.approx(float(own[0]["value"][1]), rel=1e-9)
    median = await _ask(prom.url, f"quantile(0.5, {truth})", got.t)
    assert role.p50 == pytest.approx(float(median[0]["value"][1]), rel=1e-9)
    slow = _instance(fleet[SLOW])
    assert got.outliers.get(slow) == "slowest"
    js = store.job("resnet")
    assert js.rate_basis.startswith("Prometheus: sum of 6 tasks' rates")
    assert float(js.last("steps_per_sec", 1)[0]) == pytest.approx(role.steps_per_sec, rel=1e-6)
    await src.aclose()


async def test_a_refresh_reads_detail_only_for_the_focus_the_outliers_and_the_sweep(
    prometheus_server,  # noqa: F811
    fleet,
):
    prom = await _scraped(prometheus_server, fleet.values(), settle_s=3.0)
    src = _source(prom.url)
    src.set_focus({"resnet/worker-1"})  # on screen
    read: list[set[str]] = []
    quick: list[bool] = []
    detail = src.detail

    async def spy(client: httpx.AsyncClient, promql: str, *args: Any, **kw: Any) -> Any:
        assert promql.startswith("{__name__=~")  # a detail query: which instances it names
        inst = re.search(r'instance=~"([^"]*)"', promql).group(1).replace("\\\\", "")
        read[-1] |= set(inst.split("|"))
        got = await detail(client, promql, *args, **kw)
        quick.append(isinstance(got, answers.LabelledRows))  # Prometheus' own answer: no object a row
        return got

    src.detail = spy  # type: ignore[method-assign]  (records what is asked; the server answers)
    poller = Poller([src], Store(), lifecycle=Lifecycle(), clock=SystemClock(), interval=0.5)
    accounted = []
    for _ in range(8):
        read.append(set())
        cycle = await poller.poll_once()
        accounted.append(len(cycle.polls) + cycle.unchanged)
        await asyncio.sleep(0.5)
    await src.aclose()
    focus = _instance(fleet["worker-1"])
    fleet_refreshes = read[1:]  # the first refresh reads every task once
    assert all(focus in r for r in fleet_refreshes), read
    outliers = set(src.fleet.outliers) if src.fleet else set()
    assert all(len(r - {focus} - outliers) <= 1 for r in fleet_refreshes[1:]), read  # + one swept a refresh
    assert all(n == len(TASKS) for n in accounted[1:]), (
        accounted
    )  # every task: read or unchanged (the first refresh brings backfilled history too)
    assert "detail for" in (src.mode_note or "") and "swept" in (src.mode_note or "")
    assert quick and all(quick)


async def test_a_preempted_task_is_found_by_the_server_and_revoked_at_once(
    prometheus_server,  # noqa: F811
    fleet,
):
    prom = await _scraped(prometheus_server, fleet.values(), settle_s=2.0)
    src = _source(prom.url)
    life = Lifecycle()
    poller = Poller([src], Store(), lifecycle=life, clock=SystemClock(), interval=0.5)
    await _refreshes(poller, 3)
    fleet["worker-2"].set_preempted(True)
    await asyncio.sleep(1.5)  # Prometheus scrapes the notice
    await _refreshes(poller, 4)  # the preemption column (every other turn) finds it, then its detail is read
    await src.aclose()
    node = life.nodes["resnet/worker-2"]
    assert node.state is TaskState.REVOKED and node.cause == "preempted"
    assert sum(n.state is TaskState.REVOKED for n in life.nodes.values()) == 1


# --- the pure parts ------------------------------------------------------------------------------


def test_fold_by_task_sums_per_scrape_job_and_takes_the_largest_over_jobs():
    def row(name: str, inst: str, job: str, v: float, **kw: str) -> dict:
        return {"metric": {"__name__": name, "instance": inst, "job": job, **kw}, "value": [0, str(v)]}

    rows = [
        row(M.K_WORKER_STEPS, "a:1", "x", 5, device="0"),
        row(M.K_WORKER_STEPS, "a:1", "x", 7, device="1"),  # summed within a scrape job: 12
        row(M.K_WORKER_STEPS, "a:1", "y", 11),  # the same target read by a second scrape config
        row(M.K_GLOBAL_STEP, "a:1", "x", 40),
        row(M.K_GLOBAL_STEP, "a:1", "x", 42),  # a gauge: the largest
        row(M.PS_BYTES_SAMPLE, "a:1", "x", 9, direction="in"),
        row("not_ours", "a:1", "x", 1),
        {"metric": {"instance": "a:1", KEY_LABEL: T_KEY}, "value": [0, "1700000000.5"]},
    ]
    folded = fold_by_task([rows])
    got = {(i, k): v for i, values in folded.values.items() for k, v in values.items()}
    got |= {(i, T_KEY): float(t) for i, t in folded.times.items()}
    assert got == {("a:1", M.K_WORKER_STEPS): 12.0, ("a:1", M.K_GLOBAL_STEP): 42.0,
                   ("a:1", M.K_PS_IN): 9.0, ("a:1", T_KEY): 1700000000.5}  # fmt: skip


def test_the_sweep_reads_every_task_once_a_period_by_measured_time():
    sweep, instances = Sweep(period=10.0), [f"t{i}" for i in range(25)]
    assert sweep.take(instances, 0.0) == []  # the first refresh read everything
    seen: list[str] = []
    for now in np.arange(2.0, 12.0, 2.0):  # 2 s apart: a fifth of the fleet each time
        seen += sweep.take(instances, float(now))
    assert sorted(seen) == sorted(instances)
    assert len(sweep.take(instances, 32.0)) == 25  # 20 s late: everyone at once, never more


def test_fleet_columns_match_numpy_and_drop_what_is_not_a_rate():
    rng = np.random.default_rng(0)
    tasks = {f"h{i}:1": TaskInfo(job="j", task=f"worker-{i}") for i in range(200)}
    tasks["ps:1"] = TaskInfo(job="j", task="ps-0", role="ps")
    cols = FleetColumns(tasks)
    rates = rng.uniform(1, 5, 200)

    def answer(xs: object) -> list[dict]:
        return [{"metric": {"instance": f"h{i}:1"}, "value": [0, repr(float(x))]} for i, x in enumerate(xs)]

    bad = answer(rates) + [{"metric": {"instance": "h0:1"}, "value": [0, "garbage"]},
                           {"metric": {"instance": "elsewhere:1"}, "value": [0, "99"]}]  # fmt: skip
    col = cols.column(bad[:-2] + bad[-1:])  # a row of an instance not known is ignored
    assert np.allclose(col[:200], rates) and np.isnan(col[200])
    assert np.isnan(cols.column(bad)[0])  # a value that is no number: NaN, the rest kept
    compute = rng.uniform(0.1, 0.5, 200)  # seconds a step: not in the order of the rates
    answers = {"steps": answer(rates), "compute": answer(compute), "examples": answer(32 * rates),
               "preempted": answer([1.0] + [0.0] * 199)}  # fmt: skip
    for name, rows in list(answers.items())[:-1]:
        cols.take(name, rows, 0.0)
    assert not cols.fleet().outliers.get("h0:1")  # the preemption column not read yet: unknown
    cols.take("preempted", answers["preempted"], 0.0)
    fleet = cols.fleet()
    worker = next(r for r in fleet.roles if r.role == "worker")
    assert worker.steps_per_sec == pytest.approx(rates.sum())
    assert worker.examples_per_sec == pytest.approx(32 * rates.sum())
    assert (worker.p10, worker.p50, worker.p90) == pytest.approx(tuple(np.quantile(rates, [0.1, 0.5, 0.9])))
    slowest = {f"h{i}:1" for i in np.argsort(rates)[:10]}
    assert {i for i, why in fleet.outliers.items() if why == "slowest"} == slowest - {"h0:1"}
    assert fleet.outliers["h0:1"] == "preempted"
    longest = {f"h{i}:1" for i in np.argsort(compute)[-10:]}
    assert {i for i, why in fleet.outliers.items() if why == "slowest compute"} == longest - slowest - {
        "h0:1"
    }


async def test_the_rows_on_screen_are_the_focus_and_follow_a_scroll(prometheus_server):  # noqa: F811
    """The real app (Pilot, 80x24: the Cluster pane shows ~15 rows) over a fleet of 24 real exporters
    in fleet mode: the tasks whose rows are on screen are read in detail, and after ``G`` (the end of
    the table) the last rows are."""
    from cmdare.tui.app import CmdareApp
    from cmdare.tui.options import SessionOptions
    from cmdare.tui.session import MonitorSession
    from cmdare.tui.widgets.table import FilterTable

    names = [f"worker-{i}" for i in range(24)]
    exps = [
        TrainingExporter("resnet", "worker", t, gpu="K80", region="us-east1", sync="async-ps") for t in names
    ]
    for e in exps:
        e.start(0)
    try:
        prom = await _scraped(prometheus_server, exps)
        src = _source(prom.url)
        opts = SessionOptions(refresh=0.5, read_only=True)
        app = CmdareApp(opts, MonitorSession(opts, extra_sources=[src]))
        async with app.run_test(size=(80, 24)) as pilot:
            table = app.query_one("#cluster-table", FilterTable)
            for _ in range(200):  # until the fleet is read and the rows are drawn (a hang bound)
                await pilot.pause(0.1)
                if src.fleet_reader.focus and table.row_count == len(names):
                    break
            shown = set(table.visible_keys())
            assert 5 <= len(shown) < len(names) and shown <= src.fleet_reader.focus
            table.focus()
            await pilot.press("G")
            await pilot.pause(0.3)
            bottom = set(table.visible_keys())
            assert "resnet/worker-23" in bottom and bottom <= src.fleet_reader.focus
            assert not (shown - bottom) & src.fleet_reader.focus  # rows scrolled away are no longer asked for
    finally:
        for e in exps:
            e.stop()


async def test_past_the_tasks_cap_the_columns_hold_the_capped_tasks_only(
    prometheus_server,  # noqa: F811
    fleet,
    monkeypatch,
):
    """Six tasks, a cap of four: the fleet's figures count four tasks (each column is joined with the
    server-side capped set), and the status line says what was left out."""
    from cmdare.collectors import caps

    before = caps.current()
    caps.configure(tasks=4)
    try:
        prom = await _scraped(prometheus_server, fleet.values(), settle_s=3.0)
        src = _source(prom.url)
        src.focus_from = 2  # four tasks kept: a fleet past two
        column_rows: list[int] = []
        column = src.column

        async def spy(client: httpx.AsyncClient, promql: str, *args: Any, **kw: Any) -> ColumnValues:
            got = await column(client, promql, *args, **kw)
            if "rate(" in promql and "[1m]" in promql:  # a rate column: its rows (none implausible here)
                column_rows.append(int(np.count_nonzero(~np.isnan(got.values))) + len(got.stray_keys))
            return got

        src.column = spy  # type: ignore[method-assign]  (counts the rows; the server answers)
        quick: list[bool] = []  # whether each column answer of the real server was read without a row object
        check = answers._checked_array

        def watch(body: bytes | bytearray, whole: re.Pattern[bytes]) -> answers.Span | None:
            got = check(body, whole)
            if whole is not answers._ROWS and b'"metric"' in body:  # a column; an empty one is read as JSON
                quick.append(got is not None)
            return got

        monkeypatch.setattr(answers, "_checked_array", watch)
        poller = Poller([src], Store(), lifecycle=Lifecycle(), clock=SystemClock(), interval=0.5)
        await _refreshes(poller, 8)  # a full read, then the columns one a refresh
        await src.aclose()
        [role] = src.fleet.roles
        assert role.tasks == role.rated == 4
        assert column_rows and max(column_rows) == 4  # the server answered for the capped tasks only
        assert quick and all(quick)  # Prometheus' own answers: no object a row
        assert "showing 4 of 6 tasks" in (src.cap_note or "")
    finally:
        caps.configure(before)


def test_a_new_read_of_the_tasks_keeps_the_columns_of_those_still_known():
    tasks = {f"h{i}:1": TaskInfo(job="j", task=f"worker-{i}") for i in range(4)}
    cols = FleetColumns(tasks)
    for name in ("steps", "compute", "examples", "preempted"):
        cols.take(name, [{"metric": {"instance": i}, "value": [0, "2.0"]} for i in tasks], 5.0)
    moved = {"h3:1": tasks["h3:1"], "h9:1": TaskInfo(job="j", task="worker-9"), "h1:1": tasks["h1:1"]}
    again = FleetColumns(moved, carry=cols)
    assert again.fleet() is not None and again.times["steps"] == 5.0
    assert list(again.arrays["steps"][:1]) == [2.0] and np.isnan(again.arrays["steps"][1])  # h9 is new
    assert again.arrays["steps"][2] == 2.0
