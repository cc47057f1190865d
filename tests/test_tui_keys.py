"""Keyboard-only use on fixed data: vim keys, / filter, s sort, enter explains, p plots, palette."""

from __future__ import annotations

import asyncio

import pytest
from textual.widgets import Static

from cmdare.tui.app import CmdareApp
from cmdare.tui.help_screen import HelpOverlay
from cmdare.tui.panes.job import JobPane
from cmdare.tui.widgets.explain import ExplainScreen
from cmdare.tui.widgets.footer import FitFooter
from cmdare.tui.widgets.table import FilterTable
from tests.pilot_app import wait_for
from tests.test_tui_snapshots import fixed_app

pytestmark = pytest.mark.slow


def keys_of(table: FilterTable) -> list[str]:
    return [r.key.split("/")[-1] for r in table.shown()]


async def test_vim_keys_filter_and_sort():
    app, before = fixed_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await before(pilot)
        t = app.query_one("#cluster-table", FilterTable)
        assert app.focused is t and t.cursor_row == 0
        await pilot.press("j", "j")
        assert t.cursor_row == 2
        await pilot.press("G")
        assert t.cursor_row == t.row_count - 1
        await pilot.press("g", "k")
        assert t.cursor_row == 0
        await pilot.press("slash", *"worker-1", "enter")
        assert keys_of(t) == ["worker-1"] and app.focused is t
        await pilot.press("slash", "escape")
        assert t.row_count == 9
        await pilot.press("s", "s")  # sort by the 2nd column (Task), ascending
        assert keys_of(t)[:2] == ["ps-0", "worker-0"]
        await pilot.press("S")
        assert keys_of(t)[0] == "worker-7"
        assert "▼" in str(t.columns["Task"].label)
        app.apply_state(await app.session.refresh())  # a refresh keeps sort and filter
        assert keys_of(t)[0] == "worker-7"


async def test_enter_explains_a_planner_row():
    app, before = fixed_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await before(pilot)
        await pilot.press("3", "enter")
        assert isinstance(app.screen, ExplainScreen)
        assert "8×P100 · 1 PS" in app.screen._title
        await pilot.press("escape")
        assert not isinstance(app.screen, ExplainScreen)


async def test_p_cycles_plots_and_palette_lists_app_commands():
    app, before = fixed_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await before(pilot)
        job = app.query_one(JobPane)
        assert job.plot_kind == "throughput"
        await pilot.press("p")
        assert job.plot_kind == "nodes"
        await pilot.press("p")
        assert job.plot_kind == "cost"
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for t in (
            "Show Cluster",
            "Show Job",
            "Show Planner",
            "Show Alerts",
            "Refresh now",
            "Next plot",
            "Help",
        ):
            assert t in titles
        assert titles.count("Screenshot") == 1  # ours (through the write guard), not Textual's
        await pilot.press("ctrl+p")
        await pilot.pause()
        assert app.screen.__class__.__name__ == "CommandPalette"


async def test_no_animation_by_default():
    app, before = fixed_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await before(pilot)
        assert app.animation_level == "none"


async def test_replay_keys_pause_step_and_change_speed(tmp_path):
    """Record a few real polls of the demo, replay them in the app, drive the replay keys."""
    from cmdare.demo.cluster import DemoCluster
    from cmdare.tui.app import CmdareApp
    from cmdare.tui.options import SessionOptions
    from cmdare.tui.session import MonitorSession

    rec = tmp_path / "demo.sqlite"
    live = MonitorSession(
        SessionOptions.of(demo=True, refresh=0.2, record=str(rec)),
        demo_factory=lambda: DemoCluster(first_revocation_s=1000),
    )
    live.start()
    for _ in range(6):
        await live.refresh()
        await asyncio.sleep(0.2)
    await live.aclose()

    opts = SessionOptions.of(replay=str(rec), replay_speed=1.0, read_only=True)
    app = CmdareApp(opts, MonitorSession(opts))
    async with app.run_test(size=(120, 40)) as pilot:
        replay = app.session.plan.replay
        assert replay is not None and app.check_action("pause", ()) is True
        await pilot.press("space")
        assert replay.paused
        before = replay.position[0]
        await pilot.press("full_stop")
        for _ in range(30):
            if replay.position[0] > before:
                break
            await pilot.pause(0.1)
        assert replay.position[0] == before + 1 and replay.paused
        await pilot.press("plus", "plus")
        assert replay.speed == 4.0
        assert "REPLAY" in str(app.query_one("#badges").render())


def widgets(app: CmdareApp) -> set[int]:
    """Every widget of the app's screen, by identity."""
    return {id(w) for w in app.screen.walk_children()}


async def settled(app: CmdareApp, pilot) -> None:  # noqa: ANN001
    """Wait for the Job pane's plot: it is mounted after the first data frame is drawn (not to delay it),
    which a busy machine puts after the polls of ``before``; a widget count taken earlier would see it come."""
    await wait_for(pilot, lambda: bool(app.query("#job-plot")))


async def test_help_is_a_box_over_the_panes_and_keys_under_it_wait():
    """Issue 28/34: the help opens over the panes in the app's own screen (no screen pushed, nothing
    mounted) and takes the keys while the table below keeps the focus (unchanged: no restyle, no repaint
    in blurred colours); the keys under it wait, esc closes it; a click on another pane closes it."""
    app, before = fixed_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await before(pilot)
        await settled(app, pilot)
        table = app.query_one("#cluster-table", FilterTable)
        screen, mounted = app.screen, widgets(app)
        await pilot.press("question_mark")
        help_ = app.query_one(HelpOverlay)
        assert app.help_shown and app.screen is screen and app.focused is table and table.has_focus
        assert app.query_one("#pane-cluster").display and help_.region.width == 78  # the panes stay around it
        assert "cmdare-tui — keys (esc closes)" in str(help_.query_one(Static).content)
        footer = app.query_one(FitFooter)
        assert [k.key_display for k in footer.keys] == ["esc"] and footer.keys[0].description == "Close help"
        await pilot.press("2", "j", "down", "slash", "s")  # wait: no pane switch, cursor move, filter or sort
        assert app.help_shown and app._current == 0 and table.cursor_row == 0 and app.focused is table
        assert table.view.sort_col is None and not app.query("Input.filter.-active")
        await pilot.press("escape")
        await pilot.pause()
        assert not app.help_shown and app.focused is table and widgets(app) == mounted
        assert "q" in [k.key_display for k in footer.keys]  # the keys are back
        await pilot.press("j")
        assert table.cursor_row == 1  # and go to the table again
        await pilot.press("question_mark")
        assert table.region.x + 2 < help_.region.x  # a click on the focused table beside the help closes it
        await pilot.click(table, offset=(2, 3))  # (the focus does not move: only the click can tell)
        await pilot.pause()
        assert not app.help_shown and app.focused is table
        await pilot.press("question_mark")
        alerts = app.query_one("#pane-alerts")
        await pilot.click(alerts, offset=(alerts.size.width - 4, 3))  # beside the help: the focus goes there
        await pilot.pause()  # (and the help closes)
        await pilot.pause()
        assert not app.help_shown and app.query_one("#pane-alerts").has_class("-focused")


async def test_help_answers_its_keys_and_a_click_beside_it_closes_it():
    """Issue 28: while the help is open, its keys scroll it (not the table below, which keeps the focus),
    and ``q`` and ``?`` close it (``q`` does not quit)."""
    app, before = fixed_app()
    async with app.run_test(size=(80, 24)) as pilot:  # the help is taller than the screen: it scrolls
        await before(pilot)
        table = app.query_one("#cluster-table", FilterTable)
        help_ = app.query_one(HelpOverlay)
        await pilot.press("question_mark")
        assert app.help_shown and help_.max_scroll_y > 0 and help_.scroll_y == 0
        await pilot.press("down", "down")
        await pilot.pause()
        assert help_.scroll_y == 2 and table.cursor_row == 0
        await pilot.press("pagedown")
        await pilot.pause()
        assert help_.scroll_y > 2
        await pilot.press("home")
        await pilot.pause()
        assert help_.scroll_y == 0
        await pilot.click(help_, offset=(10, 5))  # a click inside the help leaves it open, the focus below
        await pilot.pause()
        assert app.help_shown and app.focused is table
        await pilot.press("q")
        await pilot.pause()
        assert not app.help_shown and app.is_running and app.focused is table
        await pilot.press("question_mark")
        assert app.help_shown
        await pilot.press("question_mark")
        assert not app.help_shown


async def test_pane_switch_marks_the_pane_and_mounts_nothing():
    """Issue 28: switching panes toggles what is shown and repaints; no widget is mounted or removed
    (Textual's Footer remounted its keys at every switch), and only the focused pane wears the accent."""
    app, before = fixed_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await before(pilot)
        await settled(app, pilot)
        mounted = widgets(app)
        footer = app.query_one(FitFooter)
        for key, pane in (("2", "job"), ("3", "planner"), ("4", "alerts"), ("1", "cluster")):
            await pilot.press(key)
            await pilot.pause()
            shown = [p.id for p in app.query(".pane") if p.display]
            marked = [p.id for p in app.query(".pane") if p.has_class("-focused")]
            assert shown == marked == [f"pane-{pane}"]
            keys = [k.key_display for k in footer.keys]
            assert ("/" in keys) == (pane != "job")  # the line follows the pane (a table's filter key)
            assert widgets(app) == mounted


async def test_pane_switch_moves_focus_mark_and_key_line_at_once():
    """Issue 28: a pane switch moves the focus, the pane's mark and the key line in the action itself,
    so they are drawn in the frame that shows the pane (the focus came a turn of the loop later, and the
    mark and the key line in a second frame); the sub-title follows without repainting the screen."""
    app, before = fixed_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await before(pilot)
        footer = app.query_one(FitFooter)
        app.action_show_pane("job")  # no pause: what the next frame draws is set already
        job = app.query_one("#pane-job")
        assert app.focused is not None and (app.focused is job or job in app.focused.ancestors)
        assert job.has_class("-focused") and not app.query_one("#pane-cluster").has_class("-focused")
        assert "/" not in [k.key_display for k in footer.keys] and app.sub_title == "Job"
        app.action_show_pane("cluster")
        assert app.focused is app.query_one("#cluster-table", FilterTable)
        assert "/" in [k.key_display for k in footer.keys] and app.sub_title == "Cluster"


async def test_a_click_on_a_footer_key_presses_it():
    app, before = fixed_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await before(pilot)
        footer = app.query_one(FitFooter)
        x, _, _ = next(p for p in footer.placed if p[2].key_display == "?")
        assert footer.key_at(x) is not None and footer.key_at(x).action == "help"
        await pilot.click(FitFooter, offset=(x + 1, 0))
        await pilot.pause()
        assert app.help_shown


def test_a_lone_escape_waits_its_delay_not_the_input_threads_tenth_of_a_second(monkeypatch):
    """Issue 28: Textual's input thread read a pending escape sequence only when its 0.1 s wait for input
    ended, so ``esc`` came 100+ ms late whatever ESCDELAY said. The app's driver waits for input only until
    the sequence times out: a lone ESC becomes ``esc`` then; an arrow's sequence is still one key."""
    from textual import constants
    from textual._time import get_time
    from textual._xterm_parser import XTermParser

    from cmdare.tui.escape_driver import IDLE_WAIT_S, EscapeDriver, input_wait

    assert issubclass(CmdareApp().get_driver_class(), EscapeDriver)  # (tests run without TEXTUAL_DRIVER)
    from cmdare.tui.cli import ESCAPE_DELAY_MS

    monkeypatch.setattr(constants, "ESCAPE_DELAY", ESCAPE_DELAY_MS / 1000)  # what tui/cli.py's ESCDELAY gives
    parser = XTermParser()
    assert input_wait(parser, get_time()) == IDLE_WAIT_S and IDLE_WAIT_S == 0.1  # idle: as Textual's
    assert list(parser.feed("\x1b")) == []  # a lone ESC: is more coming?
    wait = input_wait(parser, get_time())
    assert 0 < wait <= constants.ESCAPE_DELAY < IDLE_WAIT_S
    import time

    time.sleep(wait)  # the thread's wait ends when the sequence times out
    assert [e.key for e in parser.tick()] == ["escape"]
    assert input_wait(parser, get_time()) == IDLE_WAIT_S
    assert [e.key for e in parser.feed("\x1b[A")] == ["up"]  # a sequence in one read: one key, no wait


async def test_help_open_close_lays_out_nothing_else():
    """Issue 28: the help is hidden, not taken out of the layout (a box that came and went changed the
    painting order of every widget, so the whole screen was written again), and a layout repaints no
    table's scroll bars when the table did not change (Textual's ScrollView repainted them at every
    layout, in a frame of their own)."""
    from textual.scrollbar import ScrollBar

    app, before = fixed_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await before(pilot)
        await settled(app, pilot)
        help_ = app.query_one(HelpOverlay)
        painted: list[ScrollBar] = []
        tables = [t for t in app.query(FilterTable) if t is not app.focused and t.show_vertical_scrollbar]
        bars = [t.vertical_scrollbar for t in tables]
        for bar in bars:  # (the scroll bars of the tables without the focus: nothing of theirs changes)
            bar.refresh = lambda *a, _b=bar, _r=bar.refresh, **k: (painted.append(_b), _r(*a, **k))[1]  # type: ignore[method-assign]  # a spy on the real method
        order = {
            id(w): w.region for w in app.screen.walk_children() if w is not help_ and help_ not in w.ancestors
        }
        for key in ("question_mark", "escape", "question_mark", "escape"):
            await pilot.press(key)
            await pilot.pause()
            assert help_.display and help_.shown == (key == "question_mark")
        assert bars and painted == []
        assert order == {
            id(w): w.region for w in app.screen.walk_children() if w is not help_ and help_ not in w.ancestors
        }


async def test_a_move_of_the_focus_repaints_what_it_changes_not_the_screen():
    """Issue 28: Textual's screen repainted every cell at each move of the focus (its ``focused`` repaints
    the screen); the app's screen repaints only the widgets whose look changes. Switching panes in the
    2×2 layout (a move of the focus, nothing laid out again) asks no repaint of the whole screen."""
    app, before = fixed_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await before(pilot)
        await settled(app, pilot)
        screen = app.screen
        whole: list[tuple[object, ...]] = []
        real = screen.refresh
        screen.refresh = lambda *regions, **kw: (
            whole.append(regions) if not regions else None,
            real(*regions, **kw),
        )[1]  # type: ignore[method-assign]  # a spy on the real method
        for key in ("3", "4", "1"):
            await pilot.press(key)
            await pilot.pause()
        assert app.focused is app.query_one("#cluster-table", FilterTable) and whole == []


async def test_closing_the_help_repaints_the_cells_it_covered_in_one_frame():
    """The closed help left its box on the terminal about one close in ten in the demo (tmux): Textual's layout
    repaints a hidden widget's cells only when the widget was in the compositor's map before it, and a lookup
    of any region after a refresh of a widget out of view rebuilds that map (the box already gone from it).
    Closed with that race made and without it, the frames after the close paint every cell the box covered,
    in one frame (a repaint of the screen's region wrote the same ~22 kB a second time, issue 28), and a
    terminal that showed the open help and is then sent those frames shows what a whole frame shows (the
    frames write the cells asked for, not whole table rows: :class:`CellCompositor`)."""
    import io

    from rich.console import Console
    from textual._compositor import ChopsUpdate, LayoutUpdate

    from tests.test_compact_driver import painted

    terminal = Console(file=io.StringIO(), force_terminal=True, color_system="256")

    def show(data: str, cells: dict[tuple[int, int], tuple[str, tuple[str, ...]]]) -> None:
        cells.update({(y, x): (char, style) for y, x, char, style in painted(data) if y >= 0})

    def whole() -> dict[tuple[int, int], tuple[str, tuple[str, ...]]]:
        cells: dict[tuple[int, int], tuple[str, tuple[str, ...]]] = {}
        strips = compositor.render_strips()
        show("".join(f"\x1b[{y + 1};1H" + strip.render(terminal) for y, strip in enumerate(strips)), cells)
        return cells

    app, before = fixed_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await before(pilot)
        await settled(app, pilot)
        help_ = app.query_one(HelpOverlay)
        compositor = app.screen._compositor
        real_close = help_.close

        race = [True]

        def racing_close(*, restore_focus: bool) -> None:
            real_close(restore_focus=restore_focus)
            if not race[0]:
                return
            compositor._full_map_invalidated = True  # what a refresh of a widget out of view does
            assert help_ not in compositor.full_map  # a region looked up: the map rebuilt without the box

        help_.close = racing_close  # type: ignore[method-assign]  # the real close, then the race
        frames: list[set[tuple[int, int]]] = []  # the cells each frame paints
        written: list[str] = []  # each frame as written to the terminal
        real_render = compositor.render_update

        def render_update(*args: object, **kw: object):  # noqa: ANN202 (a spy on the real method)
            update = real_render(*args, **kw)  # type: ignore[arg-type]
            if isinstance(update, ChopsUpdate):
                frames.append({(x, y) for y, x1, x2 in update.spans for x in range(x1, x2)})
            elif isinstance(update, LayoutUpdate):
                frames.append({(x, y) for y in range(40) for x in range(120)})
            if update is not None:
                written.append(update.render_segments(terminal))
            return update

        compositor.render_update = render_update  # type: ignore[method-assign]
        for race[0] in (True, False):
            await pilot.press("question_mark")
            await pilot.pause()
            covered = help_.region
            cells = {
                (x, y) for y in range(covered.y, covered.bottom) for x in range(covered.x, covered.right)
            }
            shown = whole()
            frames.clear()
            written.clear()
            await pilot.press("escape")
            await pilot.pause()
            assert not help_.shown and covered.area > 0
            assert [len(cells - f) for f in frames if f & cells] == [0], race  # all of it, once
            for frame in written:
                show(frame, shown)
            assert shown == whole(), race
