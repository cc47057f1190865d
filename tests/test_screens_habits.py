"""Issue 28 item 5: an operator's habits (k9s / htop / dolphie) in the real app on the demo cluster
(real exporters on 127.0.0.1, Pilot): ``enter`` on a Cluster row opens the task whole; ``space`` pauses and
resumes live polling at once; a click on a column's label sorts by it; ``c`` chooses columns; the help
lists the tables' keys, the mouse and a legend; ``--help`` lists the app's keys and three examples; the
Cluster pane has a Job column and ``n`` puts its cursor on the followed job."""

from __future__ import annotations

import subprocess
import sys

import pytest
from textual.widget import Widget
from textual.widgets import OptionList, Static

from cmdare.tui.app import CmdareApp
from cmdare.tui.help_screen import HelpOverlay, key_label
from cmdare.tui.widgets.column_chooser import ColumnChooser
from cmdare.tui.widgets.explain import ExplainScreen
from cmdare.tui.widgets.table import FilterTable
from cmdare.tui.widgets.task_detail import per_second, sparkline
from tests.pilot_app import fast_demo_app, wait_for

pytestmark = pytest.mark.slow


def screen_text(app: CmdareApp, within: Widget | None = None) -> str:
    """The text of every Static on the active screen (tables' cells included), or ``within`` a widget."""
    from rich.console import Console

    console = Console(width=200, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    for w in (within or app.screen).query(Static):
        console.print(w.content)
    return console.export_text()


def test_sparkline_and_rates():
    assert sparkline([0, 1, 2, 3, 4, 5, 6, 7]) == "▁▂▃▄▅▆▇█"
    assert sparkline([1.0, float("nan"), 1.0]) == "▁ ▁"
    assert per_second([0, 1, 3], [0, 10, 10]) == [10, 0]
    assert per_second([0, 1], [10, 5])[0] != per_second([0, 1], [10, 5])[0]  # a reset: NaN, not negative


async def test_enter_opens_the_task_whole_and_space_pauses_polling():
    app = fast_demo_app(first_revocation_s=1000)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.state is not None and app.state.cycles >= 3)
        table = app.query_one("#cluster-table", FilterTable)
        table.focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ExplainScreen))
        text = screen_text(app)
        key = table.current_key()
        assert key is not None and f"Task {key}" in text
        for word in ("Address", "http://127.0.0.1:", "Labels", "role=", "State", "Last error", "Lifetime",
                     "Restarts", "Series", "cmdare_worker_steps_total /s"):  # fmt: skip
            assert word in text, word
        assert any(c in text for c in "▁▂▃▄▅▆▇█")  # sparklines
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, ExplainScreen))

        await pilot.press("space")
        assert app.session.polling_paused
        drawn, polled = app.state.cycles, app.session.poller.cycles
        await pilot.pause(2.0)  # four refresh intervals
        assert app.state.cycles == drawn  # nothing new drawn after the key
        assert app.session.poller.cycles <= polled + 1  # at most the poll under way when the key came
        assert "PAUSED" in str(app.query_one("#badges").render())
        await pilot.press("space")
        assert not app.session.polling_paused
        await wait_for(pilot, lambda: app.state.cycles >= drawn + 2)


async def test_a_click_on_a_label_sorts_and_the_chooser_sorts_and_hides():
    app = fast_demo_app(first_revocation_s=1000)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.state is not None and app.state.cycles >= 2)
        table = app.query_one("#cluster-table", FilterTable)
        task = list(table.columns).index("Task")
        x = table.column_region(task).x + 2
        await pilot.click("#cluster-table", offset=(x, 0))
        assert table.view.sort_col == task and not table.view.reverse
        assert str(table.columns["Task"].label) == "Task ▲"
        await pilot.click("#cluster-table", offset=(x, 0))
        assert table.view.sort_col == task and table.view.reverse
        keys = [r.key.split("/", 1)[1] for r in table.shown()]
        assert keys == sorted(keys, key=str.lower, reverse=True)

        table.focus()
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, ColumnChooser))
        options = app.screen.query_one(OptionList)
        role = list(table.columns).index("Role")
        options.highlighted = role
        await pilot.press("enter")  # sort by Role
        assert table.view.sort_col == role and not table.view.reverse
        await pilot.press("space")  # hide it
        assert "Role" in table.hidden
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, ColumnChooser))
        await pilot.pause()
        assert table.columns["Role"].width == 0 and "Role" not in table.render_line(0).text


async def test_help_lists_table_keys_mouse_and_legend_and_n_moves_the_cluster_cursor():
    app = fast_demo_app(first_revocation_s=1000, geo=True)  # two jobs
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(
            pilot, lambda: app.state is not None and app.state.cycles >= 2 and len(app.state.jobs) > 1
        )
        table = app.query_one("#cluster-table", FilterTable)
        assert table.columns["Job"].width > 0 and "Job" in table.render_line(0).text  # two jobs: a Job column
        await pilot.press("n")
        job = app.state.job().name
        assert table.current_key().startswith(f"{job}/")
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: app.help_shown)
        sections = dict(app.query_one(HelpOverlay).sections)
        assert {"In tables", "Mouse", "Symbols and abbreviations"} <= sections.keys()
        shown = {k for k, _ in sections["In tables"]}
        assert {"← →", "Home End", "PgUp PgDn", "/", "s", "S", "c"} <= shown
        legend = " ".join(k for k, _ in sections["Symbols and abbreviations"])
        for symbol in ("★", "▶", "†", "◌", "○", "✖", "usc1", "pre", "od", "comp"):
            assert symbol in legend, symbol
        text = screen_text(app, app.query_one(HelpOverlay))
        assert "Symbols and abbreviations" in text and "usc1" in text and "…" not in text


def test_help_flag_lists_every_app_key_and_three_examples():
    out = subprocess.run([sys.executable, "-m", "cmdare.tui.cli", "--help"], capture_output=True, text=True,
                         timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    text = out.stdout
    keys = text.split("keys (", 1)[1].split("examples:", 1)[0]
    for b in CmdareApp.BINDINGS:
        label = key_label(b.key)  # type: ignore[union-attr]
        if label in ("1", "2", "3", "4", "shift+tab"):
            continue  # "tab, 1-4"
        assert label in keys, label
    examples = text.split("examples:", 1)[1]
    assert examples.count("  cmdare-tui ") == 3


async def test_a_recorded_cycle_read_when_space_comes_is_held_off_the_screen(tmp_path):
    """The key lands while a recorded cycle is on its way to the screen (the replay's read is wrapped
    to press space right after it): that cycle is not drawn; ``.`` (one poll) then plays it."""
    from tests.test_screens_replay_app import recorded_demo, replay_app

    app = replay_app(await recorded_demo(tmp_path, cycles=10), speed=1.0)
    async with app.run_test(size=(80, 24)) as pilot:
        replay = app.session.plan.replay
        await wait_for(pilot, lambda: app.state is not None and replay.position[0] >= 2)
        original = replay.poll

        async def read_then_key(client, clock):  # noqa: ANN001, ANN202
            polls = await original(client, clock)
            replay.poll = original
            app.action_pause()
            return polls

        replay.poll = read_then_key
        await wait_for(pilot, lambda: replay.paused)
        taken = replay.position[0]
        await pilot.pause(1.0)  # five recorded intervals
        assert app.state.cycles == taken - 1 and replay.position[0] == taken  # read, not drawn
        await pilot.press("full_stop")
        await wait_for(pilot, lambda: app.state.cycles == taken)
        await pilot.pause(0.6)
        assert replay.paused and replay.position[0] == taken and app.state.cycles == taken
