"""Issue 20 (start-up): nothing is imported before it is needed. A structural check, not a timing one:
importing the app (and building the demo's sources) in a fresh interpreter leaves the plots, the
planner's models and ranking, the price book, the other source kinds, the recorder, the replay and the
heavy libraries (numpy included: the store's rings are stdlib arrays) unloaded; they load when first
used (the plot just after the first data frame, the planner in a worker after it). The first data
frame itself, from the demo's first poll to the frame on the terminal, needs none of them either.
The timing is benchmarks/startup.py's job."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

DEFERRED = (
    "plotext",  # the Job pane's plot: mounted just after the first data frame
    "textual_plotext",
    "cmdare.planner.analysis",  # the planner: loaded in a worker after the first frame
    "cmdare.planner.live.outlook",
    "cmdare.planner.speed.speed_model",
    "cmdare.planner.speed.speed_fit",
    "cmdare.planner.risk_cost.shapes",  # ranking
    "cmdare.planner.risk_cost.sync_shapes",
    "cmdare.planner.risk_cost.ranking_notes",
    "cmdare.planner.risk_cost.time_cost",
    "cmdare.planner.risk_cost.revocation",
    "cmdare.collectors.pricing",  # the price book: loaded with the planner
    "cmdare.collectors.logs.source",  # source kinds not asked for
    "cmdare.collectors.tensorboard.source",
    "cmdare.collectors.prometheus.source",
    "cmdare.collectors.mlflow.server",
    "cmdare.collectors.mlflow.store",
    "cmdare.collectors.scrape.tf_config",
    "cmdare.collectors.recording.recorder",
    "cmdare.collectors.recording.replay",
    "sqlite3",  # recordings only
    "importlib.metadata",  # only for --version
    "numpy",  # the planner's arrays (and the store's numpy readers): after the first data frame
    "cmdare.planner.speed.allreduce",  # the sync model: with the planner, not with the Job pane
    "cmdare.planner.rules.alerts",  # the rules engine: with the planner (its Alert type is only named)
    "cmdare.planner.rules.inputs",  # the rules' inputs: with the planner (the first state's view needs none)
    "cmdare.tui.widgets.explain",  # a row's explanation window: on enter
    "cmdare.planner.risk_cost.cost_meter",
    "pandas",
    "sklearn",
    "scipy",
    "torch",
)
DEMO_ONLY = ("cmdare.demo.cluster", "prometheus_client")  # the demo's exporters: only when a demo runs


def _loaded(code: str, names: tuple[str, ...], env: dict[str, str] | None = None) -> list[str]:
    """The names of ``names`` found in sys.modules after running ``code`` in a fresh interpreter."""
    probe = f"{code}\nimport sys\nprint(','.join(m for m in {names!r} if m in sys.modules))\n"
    environ = {**os.environ, **(env or {})}
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, env=environ
    )
    assert out.returncode == 0, out.stderr
    return [m for m in out.stdout.strip().split(",") if m]


def test_importing_the_app_loads_nothing_deferred():
    assert _loaded("import cmdare.tui.app, cmdare.tui.cli", DEFERRED + DEMO_ONLY) == []


def test_the_demos_command_line_loads_nothing_deferred(tmp_path):
    """Parsing ``cmdare-tui --demo --read-only`` (no config file) into session options loads no
    recording modules (nor sqlite3), no TOML parser and no TF_CONFIG reader (argparse also checks
    ``--metrics-port``'s default, which is known good)."""
    code = (
        "import cmdare.tui.app\n"
        "from cmdare.tui.cli import build_parser, load_config_defaults\n"
        "from cmdare.tui.source_flags import session_options\n"
        "argv = ['--demo', '--read-only']\n"
        "parser = build_parser()\n"
        "config = load_config_defaults(argv, parser)\n"
        "assert session_options(parser.parse_args(argv), config).demo\n"
    )
    env = {"XDG_CONFIG_HOME": str(tmp_path), "HOME": str(tmp_path)}
    assert _loaded(code, (*DEFERRED, "tomllib"), env) == []


def test_the_metrics_port_default_is_the_tf_config_one():
    from cmdare.collectors.scrape.spec import METRICS_PORT, metrics_port
    from cmdare.collectors.scrape.tf_config import DEFAULT_METRICS_PORT

    assert METRICS_PORT == str(DEFAULT_METRICS_PORT) == metrics_port(METRICS_PORT)


def test_live_sources_import_only_the_kinds_asked_for():
    code = (
        "from cmdare.tui.options import SessionOptions\n"
        "from cmdare.tui.sources import build_sources\n"
        "plan = build_sources(SessionOptions.of(targets=['http://127.0.0.1:9']))\n"
        "assert len(plan.sources) == 1 and plan.demo is None\n"
    )
    assert _loaded(code, DEFERRED + DEMO_ONLY) == []


@pytest.mark.parametrize(
    ("flag", "module"),
    [
        ("jsonl=['x.jsonl']", "cmdare.collectors.logs.source"),
        ("tensorboard=['runs']", "cmdare.collectors.tensorboard.source"),
        ("prometheus='http://127.0.0.1:9'", "cmdare.collectors.prometheus.source"),
    ],
)
def test_a_source_kind_loads_when_asked_for(flag: str, module: str):
    code = (
        "from cmdare.tui.options import SessionOptions\n"
        "from cmdare.tui.sources import live_sources\n"
        f"live_sources(SessionOptions.of({flag}))\n"
    )
    assert _loaded(code, (module,)) == [module]


def test_a_prometheus_source_loads_no_numpy_until_a_large_fleet():
    """A Prometheus source (and its fleet reader) is built without numpy: the arrays of a large
    fleet's columns load with the first fleet past ``focus_from`` tasks."""
    code = (
        "from cmdare.tui.options import SessionOptions\n"
        "from cmdare.tui.sources import live_sources\n"
        "live_sources(SessionOptions.of(prometheus='http://127.0.0.1:9'))\n"
    )
    assert _loaded(code, ("numpy",)) == []


def test_the_first_state_needs_nothing_deferred():
    """The session's first poll of the demo cluster and the state built from it (what the first
    data frame shows): no numpy, no planner model, no plot library."""
    code = (
        "import asyncio\n"
        "from cmdare.tui.options import SessionOptions\n"
        "from cmdare.tui.session import MonitorSession\n"
        "session = MonitorSession(SessionOptions.of(demo=True))\n"
        "session.start()\n"
        "try:\n"
        "    state = asyncio.run(session.refresh())\n"
        "finally:\n"
        "    session.demo.stop()\n"
        "assert sum(len(j.nodes) for j in state.jobs) >= 9, state.jobs\n"
    )
    assert _loaded(code, DEFERRED) == []


def test_the_first_data_frame_needs_nothing_deferred():
    """The real app (headless, the demo cluster): when its first data frame has been painted, and the
    work waiting for it begins, nothing deferred has been loaded yet; the plot and the planner follow."""
    code = (
        "import asyncio, sys\n"
        "from cmdare.tui.app import CmdareApp\n"
        "from cmdare.tui.options import SessionOptions\n"
        "seen = {}\n"
        "after = CmdareApp._after_first_frame\n"
        "def probe(app):\n"
        f"    seen['loaded'] = [m for m in {DEFERRED!r} if m in sys.modules]\n"
        "    seen['nodes'] = sum(len(j.nodes) for j in app.state.jobs)\n"
        "    after(app)\n"
        "CmdareApp._after_first_frame = probe\n"
        "async def main():\n"
        "    app = CmdareApp(SessionOptions.of(demo=True, read_only=True))\n"
        "    async with app.run_test(size=(120, 40)) as pilot:\n"
        "        for _ in range(1200):  # the plot and the planner follow the frame (a hang bound: 60 s)\n"
        "            if app.query('#job-plot') and 'cmdare.planner.analysis' in sys.modules:\n"
        "                break\n"
        "            await pilot.pause(0.05)\n"
        "        else:\n"
        "            raise AssertionError('no plot or planner within 60 s of the first frame')\n"
        "asyncio.run(main())\n"
        "assert seen['nodes'] >= 9 and seen['loaded'] == [], seen\n"
    )
    _loaded(code, ())


async def test_the_start_up_gc_pause_ends_with_the_first_data_frame():
    """tui/cli.py turns the garbage collector off while the app starts; the real app (Pilot, demo
    cluster) turns it back on once its first data frame is drawn, and mounts the Job pane's plot."""
    import gc

    from tests.pilot_app import fast_demo_app, wait_for

    app = fast_demo_app(first_revocation_s=1000)
    gc.disable()
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.state is not None)
            await wait_for(pilot, lambda: gc.isenabled() and bool(app.query("#job-plot")))
    finally:
        gc.enable()


async def test_work_after_paint_waits_for_the_frame_that_draws_the_widget():
    """``PaintedStatic.after_paint``: the callback runs after the widget's new content was rendered
    into a frame, never before it (Textual's ``call_after_refresh`` may run before the repaint)."""
    from textual.app import App, ComposeResult

    from cmdare.tui.widgets.painted import PaintedStatic

    events: list[str] = []

    class Probe(PaintedStatic):
        def render_lines(self, crop):  # noqa: ANN001, ANN202
            events.append(f"painted {self.content}")
            return super().render_lines(crop)

    class Bare(App[None]):
        def compose(self) -> ComposeResult:
            yield Probe("before")

    app = Bare()
    async with app.run_test(size=(40, 5)) as pilot:
        await pilot.pause(0.1)
        probe = app.query_one(Probe)
        probe.update("after")
        probe.after_paint(lambda: events.append("callback"))
        assert "callback" not in events
        for _ in range(50):
            if "callback" in events:
                break
            await pilot.pause(0.02)
    assert events.index("painted after") < events.index("callback")
