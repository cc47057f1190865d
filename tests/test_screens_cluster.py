"""Issue 18 (screens): the Cluster pane's Region is a compact code, never a cut name, and `Up` counts from
the task's own start (the exporter's `process_start_time_seconds`), at 80x24 and 120x40. Real exporters on
127.0.0.1 (the demo cluster), the real app driven by its Pilot."""

from __future__ import annotations

import time
import urllib.request

import pytest

from cmdare.collectors import metrics as M
from cmdare.collectors.exporter import TrainingExporter
from cmdare.collectors.scrape.exposition import parse_exposition
from cmdare.tui.panes.cluster import COLUMNS
from cmdare.tui.widgets.table import FilterTable
from tests.pilot_app import fast_demo_app, wait_for

pytestmark = pytest.mark.slow


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


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_host_cpu_memory_and_gpu_columns_show_what_the_collectors_read(size):
    """A worker, the real node_exporter and a DCGM page (MOCK, dcgm_page.py) on one host, given with
    --target: the worker's row shows host CPU %, memory used/total, GPU % and GPU memory."""
    import re
    import shutil
    import subprocess

    from cmdare.tui.app import CmdareApp
    from cmdare.tui.options import SessionOptions
    from cmdare.tui.session import MonitorSession
    from tests.dcgm_page import DcgmServer, Gpu, page
    from tests.prom_server import free_port

    node_exporter = shutil.which("prometheus-node-exporter")
    assert node_exporter, "scripts/test.sh installs prometheus-node-exporter"
    node = f"127.0.0.1:{free_port()}"
    proc = subprocess.Popen([node_exporter, f"--web.listen-address={node}", "--collector.disable-defaults",
                             "--collector.cpu", "--collector.meminfo"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    dcgm = DcgmServer(page([Gpu(0, "GPU-1", "Tesla T4", 70.0, 3000, 12000)]))
    exp = TrainingExporter(job="bert", role="worker", task="worker-0", gpu_ids="0")
    exp.step(0.01, examples=8)
    try:
        urls = [
            f"http://127.0.0.1:{exp.start(port=0)}/metrics",
            f"http://{node}/metrics",
            f"http://{dcgm.addr}/metrics",
        ]
        opts = SessionOptions(targets=urls, refresh=0.5)
        app = CmdareApp(opts, MonitorSession(opts))
        async with app.run_test(size=size) as pilot:
            table = app.query_one("#cluster-table", FilterTable)
            labels = [label for label, _ in COLUMNS]

            def cells() -> dict[str, str]:
                if table.row_count != 1:
                    return {}
                return dict(zip(labels, (str(c) for c in table.get_row_at(0)), strict=True))

            await wait_for(pilot, lambda: cells().get("CPU", "–") != "–" and cells().get("GPU%", "–") != "–")
            row = cells()
            total = urllib.request.urlopen(f"http://{node}/metrics", timeout=5).read().decode()
            mem_total = float(re.search(r"^node_memory_MemTotal_bytes (\S+)$", total, re.M).group(1))
            assert re.fullmatch(r"\d+%", row["CPU"]), row
            assert re.fullmatch(rf"\d+\.\d/{mem_total / 2**30:.0f}G", row["Mem"]), row
            assert (row["GPU"], row["GPU%"], row["GPU mem"]) == ("T4", "70%", "2.9/15G"), row
            widths = [c.get_render_width(table) for c in table.ordered_columns]
            assert sum(widths[: labels.index("GPU%") + 1]) <= table.scrollable_content_region.width
    finally:
        exp.stop()
        dcgm.close()
        proc.kill()
        proc.wait(timeout=10)
