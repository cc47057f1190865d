"""The real app, driven by its Pilot, against a real hostile target on 127.0.0.1: a pane that raises,
or a refresh that raises, is shown on the status line and polling goes on; hostile labels render as
literal text in tables, toasts and explain windows (never as markup, never as a link)."""

from __future__ import annotations

import pytest
from rich.text import Text

from cmdare.tui.app import CmdareApp
from cmdare.tui.options import SessionOptions
from cmdare.tui.panes.cluster import ClusterPane
from cmdare.tui.session import MonitorSession
from cmdare.tui.widgets.explain import ExplainScreen
from cmdare.tui.widgets.table import FilterTable
from tests.hostile_text_server import HOSTILE, HostileServer
from tests.pilot_app import wait_for

pytestmark = pytest.mark.slow


def hostile_app(srv: HostileServer, n: int = 3) -> CmdareApp:
    opts = SessionOptions.of(targets=[srv.target_url(i) for i in range(n)], refresh=0.2, read_only=True,
                          silent_after=2)  # fmt: skip
    return CmdareApp(opts, MonitorSession(opts))


def badges(app: CmdareApp) -> str:
    return str(app.query_one("#badges").render())


async def test_a_pane_that_raises_is_reported_and_polling_goes_on(monkeypatch):
    calls = {"n": 0}
    real = ClusterPane.update_state

    def flaky(self: ClusterPane, state) -> None:  # noqa: ANN001
        calls["n"] += 1
        if calls["n"] <= 3:
            raise ValueError(f"broken pane {HOSTILE['close']}{HOSTILE['title']}")
        real(self, state)

    monkeypatch.setattr(ClusterPane, "update_state", flaky)
    with HostileServer() as srv:
        app = hostile_app(srv)
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda: "Cluster pane: ValueError: broken pane oops[/]␛]0;" in badges(app))
            assert app.query_one("#pane-job")._state is not None  # the other panes drew
            await wait_for(pilot, lambda: app.query_one("#cluster-table", FilterTable).row_count == 3)
            cycles = app.state.cycles
            await wait_for(pilot, lambda: app.state.cycles >= cycles + 2)  # polling went on
            assert "broken pane" not in badges(app)  # the remark goes once a refresh draws cleanly


async def test_a_refresh_that_raises_is_reported_and_the_next_poll_runs(monkeypatch):
    with HostileServer() as srv:
        app = hostile_app(srv, 1)
        real = app.session.analyse
        calls = {"n": 0}

        def flaky(cycle):  # noqa: ANN001, ANN202
            calls["n"] += 1
            if 2 <= calls["n"] <= 4:  # three refreshes in a row fail
                raise RuntimeError(HOSTILE["link"])
            return real(cycle)

        monkeypatch.setattr(app.session, "analyse", flaky)
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda: "refresh failed: RuntimeError: [link=file:///etc/passwd]x[/link]"
                           in badges(app))  # fmt: skip
            await wait_for(pilot, lambda: calls["n"] >= 6 and app.state is not None and app.state.cycles >= 6)
            assert "refresh failed" not in badges(app)


async def test_hostile_labels_render_literally_in_tables_toasts_and_explain_windows():
    with HostileServer() as srv:
        app = hostile_app(srv)
        async with app.run_test(size=(160, 45)) as pilot:
            await wait_for(pilot, lambda: app.state is not None and app.state.cycles >= 2)
            table = app.query_one("#cluster-table", FilterTable)
            await wait_for(pilot, lambda: table.row_count == 3)
            cells = [c for r in range(table.row_count) for c in table.get_row_at(r)]
            assert all(isinstance(c, Text) for c in cells)
            assert not [s for c in cells for s in c.spans if "link" in str(s.style)]  # no live hyperlink
            assert "[link=file:///etc/passwd]x[/link]" in [c.plain for c in cells]
            srv.down.add(1)  # task t1 (named with an OSC 8 link) goes silent: an alert about it
            await wait_for(pilot, lambda: any(a.kind == "node-silent" for a in app.state.alerts))
            await pilot.press("4")
            alerts = app.query_one("#alerts-table", FilterTable)
            await wait_for(pilot, lambda: alerts.row_count >= 1)
            alerts.focus()
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, ExplainScreen))
            grid = [c for col in app.screen._body.columns for c in col._cells]
            assert all(isinstance(c, Text) for c in grid)  # rendered as text, not as markup
            assert any("␛]8;;file:///etc/passwd" in c.plain for c in grid)
            assert not any("\x1b" in c.plain for c in grid)
            await pilot.press("escape")
            app.notify(f"job {HOSTILE['close']}", markup=False)  # the app's toasts are plain text
            await pilot.press("n")  # 'next job': one job only, nothing to follow, no crash
            cycles = app.state.cycles
            await wait_for(pilot, lambda: app.state.cycles >= cycles + 2)


async def test_a_start_up_progress_report_after_quitting_is_dropped():
    """The start-up thread (planner, prices) may report after the app quit and its screen is gone: the
    report is dropped, not raised (a quick quit, or a test that ends on the first data frame, raised)."""
    from cmdare.tui.widgets.progress import ProgressLine, ProgressReport

    app = CmdareApp(SessionOptions(), poll=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.query(ProgressLine)
    app.on_progress_report(ProgressReport("loading prices…", 1, 2))  # no ProgressLine left: no NoMatches


async def test_a_progress_report_while_the_line_is_taken_down_is_dropped():
    """Quitting takes the screen down children first: a report that lands on a progress line whose label
    and bar are already gone (seen once: NoMatches on 'loading prices…') is dropped too."""
    from cmdare.tui.widgets.progress import ProgressLine

    app = CmdareApp(SessionOptions(), poll=False)
    async with app.run_test(size=(80, 24)) as pilot:
        line = app.query_one(ProgressLine)
        await line.remove_children()
        await pilot.pause()
        line.report("loading prices…", 1, 2)  # no NoMatches
