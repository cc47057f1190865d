"""The plain report and the help text say what the app shows (issue 28 item 8): ``snapshot`` pads no
line with spaces and prints a pipeline job's measured WAN boundaries (not "Plans: none"); a task that
names no GPU is "unknown", not CPU; ``predict --help`` lists the output columns ``predict`` writes.

The report is made by ``snapshot``'s own path (a monitoring session on the demo with its geo pipeline,
exporters on 127.0.0.1, then :func:`print_overview`)."""

from __future__ import annotations

import asyncio
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from cmdare.collectors.observed import NodeView
from cmdare.demo.cluster import DemoCluster
from cmdare.tui.options import SessionOptions
from cmdare.tui.panes.cluster_rows import gpu_name
from cmdare.tui.plain import cluster_table, print_overview
from cmdare.tui.session import MonitorSession

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]


async def test_snapshot_report_has_no_trailing_spaces_and_shows_the_pipelines_boundaries():
    opts = SessionOptions(demo=True, refresh=0.5, read_only=True)
    session = MonitorSession(opts, demo_factory=lambda: DemoCluster(geo=True, first_revocation_s=1000))
    session.start()
    try:
        for _ in range(120):  # until the pipeline's boundaries are measured (a few polls)
            state = await session.refresh()
            view = state.planner.job("lm-pipeline-3dc")
            if view is not None and view.pipeline is not None and view.pipeline.boundaries:
                break
            await asyncio.sleep(0.25)
        else:
            raise AssertionError("no WAN boundary measured")
    finally:
        await session.aclose()
    for width in (80, 120):
        out = io.StringIO()
        print_overview(state, Console(file=out, width=width, no_color=True, force_terminal=False))
        text = out.getvalue()
        assert not [line for line in text.splitlines() if line.endswith(" ")], text
        pipeline = text[text.index("Job lm-pipeline-3dc") :]
        assert "Plans: none" not in pipeline.split("Cluster")[0]
        assert re.search(r"Pipeline: \d+ WAN boundaries measured, \d+ WAN-bound", pipeline)
        assert "WAN boundaries" in pipeline and "WAN-bound" in pipeline and "->" in pipeline
    coloured = io.StringIO()  # a terminal's report: spaces before the closing style codes go too
    print_overview(state, Console(file=coloured, width=100, force_terminal=True, color_system="standard"))
    plain = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in coloured.getvalue().splitlines()]
    assert not [line for line in plain if line.endswith(" ")]


def test_a_task_that_names_no_gpu_is_unknown_and_a_ps_is_cpu():
    def node(name: str, role: str, gpu: str = "", owns: bool = False, status: str = "up") -> NodeView:
        return NodeView(
            name=name,
            role=role,
            gpu=gpu,
            region="",
            zone="",
            provisioning="",
            status=status,
            steps_per_sec=None,
            step_seconds=None,
            gpu_util=None,
            net_in_bps=None,
            net_out_bps=None,
            started_at=None,
            last_error=None,
            restarts=0,
            cause="",
            owns_gpu=owns,
        )

    nodes = [node("worker-0", "worker", status="pending"), node("run-1", "worker"), node("ps-0", "ps"),
             node("worker-2", "worker", owns=True), node("worker-3", "worker", "T4")]  # fmt: skip
    assert [gpu_name(n) for n in nodes] == ["unknown", "unknown", "CPU", "GPU", "T4"]
    out = io.StringIO()
    Console(file=out, width=120, no_color=True).print(cluster_table(type("J", (), {"nodes": nodes})(), 0.0))
    rows = {
        line.split()[2]: line for line in out.getvalue().splitlines() if line.split()[:1] in (["○"], ["●"])
    }
    assert " unknown " in rows["worker-0"] and " CPU " in rows["ps-0"]


def test_predict_help_lists_the_columns_predict_writes():
    exe = Path(sys.executable).with_name("cmdare-tui")
    helped = subprocess.run(
        [str(exe), "predict", "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    section = helped.split("output: every input column, then", 1)[1].split("\nexample", 1)[0]
    listed = set()
    for line in section.splitlines():
        if line.startswith("  ") and not line.startswith("   "):  # a column's line, not a continuation
            listed |= {name.strip() for name in re.split(r"\s{2,}", line.strip())[0].split(",")}
    written = set()
    for example in ("predict.csv", "predict-sync.csv"):
        header = subprocess.run([str(exe), "predict", "--input", str(REPO / "examples" / example)],
                                capture_output=True, text=True, timeout=60, check=True).stdout.splitlines()[0]  # fmt: skip
        inputs = (REPO / "examples" / example).read_text().splitlines()[0].split(",")
        written |= set(header.split(",")) - set(inputs)
    assert listed == written, (listed, written)
