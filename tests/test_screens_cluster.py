"""Issue 18 (screens): the Cluster pane's Region is a compact code, never a cut name, and `Up` counts from
the task's own start (the exporter's `process_start_time_seconds`), at 80x24 and 120x40. Real exporters on
127.0.0.1 (the demo cluster), the real app driven by its Pilot."""

from __future__ import annotations

import time
import urllib.request

import pytest

from cmdare.collectors import metrics as M
from cmdare.collectors.exporter import TrainingExporter
from cmdare.collectors.exposition import parse_exposition
from cmdare.tui.panes.cluster import COLUMNS
from cmdare.tui.widgets.table import FilterTable
from tests.test_app_pilot import fast_demo_app, wait_for


def test_exporter_page_states_its_start_time_and_the_parser_keeps_the_oldest():
    before = time.time()
    exp = TrainingExporter(job="j", role="worker", task="worker-0")
    port = exp.start(port=0)
    try:
        page = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    finally:
        exp.stop()
    start = parse_exposition(page).values[M.K_PROCESS_START]
    assert before - 1 <= start <= time.time()
    two = 'process_start_time_seconds{pid="2"} 1700000100\nprocess_start_time_seconds{pid="1"} 1700000000\n'
    assert parse_exposition(two).values[M.K_PROCESS_START] == 1700000000  # never a sum


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_cluster_region_is_a_code_and_up_counts_from_the_task_start(size):
    app = fast_demo_app(first_revocation_s=1000)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.state is not None and app.state.cycles >= 2)
        table = app.query_one("#cluster-table", FilterTable)
        labels = [label for label, _ in COLUMNS]
        regions = {str(table.get_row_at(i)[labels.index("Region")]) for i in range(table.row_count)}
        assert regions and regions <= {"usc1", "use1", "usw1", "euw1", "euw4", "ase1"}, regions
        node = next(n for n in app.state.job().nodes if n.status == "up")
        ts = next(t for t in app.session.store.tasks.values() if t.info.task == node.name)
        started = ts.latest(M.K_PROCESS_START)
        assert started is not None and node.uptime_s(app.state.t) is not None
        assert (
            abs(app.state.t - started - node.uptime_s(app.state.t)) < 1e-6
        )  # from the task's start, not first seen
