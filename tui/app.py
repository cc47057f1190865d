"""The Textual app ``cmdare-tui``: Cluster, Job, Planner and Alerts panes over a monitoring session.

Wide terminals show the four panes in a 2×2 grid; below 110×30 one pane at a time with a tab line
(``tab``/``1``-``4``). Every key is a BINDING with an id (remappable from the config). In read-only
mode every action that writes is absent from the footer, the help screen and the command palette,
and a READ-ONLY badge is always the first thing on the top line."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import time
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from textual import events
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Container
from textual.driver import Driver
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Static
from textual.worker import Worker, WorkerState

from cmdare.collectors import writes
from cmdare.tui.gc_pacing import settle_collector, stop_pacing
from cmdare.tui.help_screen import HelpOverlay, Section, binding_rows, help_sections
from cmdare.tui.options import SessionOptions
from cmdare.tui.pane_screen import PaneScreen
from cmdare.tui.panes.alerts import AlertsPane
from cmdare.tui.panes.cluster import ClusterPane
from cmdare.tui.panes.job import JobPane
from cmdare.tui.panes.planner import PlannerPane
from cmdare.tui.session import MonitorSession, MonitorState, refresh_error
from cmdare.tui.signals import install_quit_signals
from cmdare.tui.widgets.footer import FOOTER_RANK, FitFooter
from cmdare.tui.widgets.painted import PaintedStatic
from cmdare.tui.widgets.progress import ProgressLine, ProgressReport
from cmdare.tui.widgets.quiet import update_static
from cmdare.tui.widgets.status import status_line
from cmdare.tui.widgets.table import FilterTable

log = logging.getLogger(__name__)

PANES: tuple[tuple[str, str, type[Widget]], ...] = (
    ("cluster", "Cluster", ClusterPane),
    ("job", "Job", JobPane),
    ("planner", "Planner", PlannerPane),
    ("alerts", "Alerts", AlertsPane),
)
COMPACT_WIDTH = 110  # below this width (or 30 rows) one pane at a time, switched with tab / 1-4
COMPACT_HEIGHT = 30
FOCUSED_PANE = "-focused"  # the class of the pane holding the focus (its border in the accent colour)
WRITE_ACTIONS = frozenset({"export", "screenshot"})  # absent in read-only mode
# the app's keys that work while the help is open (the others wait until it closes)
HELP_ACTIONS = frozenset({"quit", "help", "command_palette"})


STARTUP_GC_PAUSE_S = 5.0  # the longest the garbage collector stays off at start-up (tui/cli.py turns it off)
# The longest the screen waits for the first poll's data before it is drawn without it (issue 34): a frame of
# empty panes drawn first cost ~30-40 ms of the one CPU start-up runs on (its layouts and paints, composed and
# then composed again with the data) and was on the terminal ~0.1 s (the demo, a quiet machine).
FIRST_FRAME_HOLD_S = 0.5


def collect_again() -> None:
    """End the start-up pause of the garbage collector (~10% of importing the app: start-up builds
    many objects and frees few) with the session's collector policy (:func:`~.gc_pacing.settle_collector`:
    collect once, freeze the survivors, young collections every :data:`~.gc_pacing.GC_YOUNG` allocations,
    the pacer). A no-op when the collector was never paused (tests, headless runs)."""
    if not gc.isenabled():
        settle_collector()


class HeldScreen(PaneScreen):
    """The app's screen (a :class:`PaneScreen`: focus moves repaint what they change, the open help takes the
    keys): composes no frame while the app holds its first one (:meth:`CmdareApp.hold_first_frame`). Textual
    sends no frame during a batch but still composes it; this one is not composed at all."""

    def _compositor_refresh(self) -> None:
        app = self.app
        if isinstance(app, CmdareApp) and app.holding_first_frame:
            return  # the release repaints the whole screen
        super()._compositor_refresh()


class CmdareApp(App[int]):
    TITLE = "cmdare-tui"
    CSS_PATH = "app.tcss"
    ENABLE_COMMAND_PALETTE = True
    BINDINGS = [  # short labels for the footer; the help screen shows the tooltip (the long form)
        Binding("q", "quit", "Quit", id="app.quit"),
        # ctrl+c quits as in any terminal program (Textual's own ctrl+c only says which key quits); with text
        # selected in the filter or on screen, the copy bound there comes first
        Binding("ctrl+c", "quit", show=False, id="app.quit_ctrl_c"),
        Binding("question_mark", "help", "Help", tooltip="This help", id="app.help"),
        Binding("tab", "next_pane", "Pane", tooltip="Next pane", id="app.next_pane", priority=True),
        Binding("shift+tab", "prev_pane", "Previous pane", show=False, id="app.prev_pane", priority=True),
        Binding("r", "refresh_now", "Refresh", tooltip="Poll every source now", id="app.refresh"),
        Binding("p", "next_plot", "Plot", tooltip="Next plot (Job pane)", id="app.next_plot"),
        Binding("e", "export", "Export", tooltip="Export the state as JSON", id="app.export"),
        Binding("1", "show_pane('cluster')", "Cluster", show=False, id="app.pane1"),
        Binding("2", "show_pane('job')", "Job", show=False, id="app.pane2"),
        Binding("3", "show_pane('planner')", "Planner", show=False, id="app.pane3"),
        Binding("4", "show_pane('alerts')", "Alerts", show=False, id="app.pane4"),
        Binding("n", "next_job", "Next job", tooltip="Follow the next job", id="app.next_job"),
        Binding("space", "pause", "Pause", tooltip="Pause / resume polling", id="app.pause"),
        Binding("full_stop", "replay_step", "Step", tooltip="Replay: one poll, pause", id="app.replay_step"),
        Binding("plus", "replay_speed(2.0)", "Faster", tooltip="Replay: faster (×2)", id="app.replay_faster"),
        Binding("minus", "replay_speed(0.5)", "Slower", tooltip="Replay: slower (÷2)", id="app.replay_slower"),
    ]  # fmt: skip

    def __init__(self, options: SessionOptions | None = None, session: MonitorSession | None = None, *,
                 poll: bool = True, theme: str | None = None, animations: bool = False,
                 keys: dict[str, str] | None = None, live_prices: bool = False,
                 prices: str | None = None) -> None:  # fmt: skip
        super().__init__()
        self.options = options or SessionOptions()
        self.session = session or MonitorSession(self.options)
        self.state: MonitorState | None = None
        self._stop = asyncio.Event()
        self._problem: str | None = None  # the last refresh or pane failure, shown on the status line
        self.signal_exit_code = 0  # the exit status after a quit signal (see tui/signals.py)
        self._current = 0
        self._poll = poll
        self._prepared = False
        self._first_frame_asked = False  # whether the work waiting for the first data frame is scheduled
        self.holding_first_frame = (
            False  # whether the screen waits for the first poll's data (FIRST_FRAME_HOLD_S)
        )
        self._selected_job: str | None = None
        self._shown_paused = False  # whether the footer's space key reads "Resume"
        self._keys = keys or {}
        self._help = HelpOverlay(id="help")
        self._badges = PaintedStatic("", id="badges")  # the status line
        self._prices = prices or ("live" if live_prices else "offline")  # the --prices vocabulary
        self.animation_level = "full" if animations else "none"
        if theme:
            self.theme = theme

    def get_driver_class(self) -> type[Driver]:
        """Textual's driver for this terminal; on Linux and macOS the one that answers ``esc`` after
        ``ESCDELAY`` instead of Textual's 0.1 s (tui/escape_driver.py) and writes a style's code once per
        run of it (tui/compact_driver.py)."""
        driver = super().get_driver_class()
        if (driver.__module__, driver.__qualname__) == ("textual.drivers.linux_driver", "LinuxDriver"):
            from cmdare.tui.compact_driver import CompactDriver

            return CompactDriver
        return driver

    @property
    def read_only(self) -> bool:
        return self.options.read_only or writes.is_read_only()

    def compose(self) -> ComposeResult:
        yield self._badges  # the top line: in every layout, so in the first data frame
        yield Static("", id="tabs")
        with Container(id="panes"):
            for pane_id, title, cls in PANES:
                pane = cls(id=f"pane-{pane_id}", classes="pane")
                pane.border_title = title
                yield pane
        yield ProgressLine(id="progress")
        yield FitFooter(self.footer_rank, self.footer_label)
        yield self._help  # hidden until ``?``

    def on_mount(self) -> None:
        if self._keys:
            self.set_keymap(self._keys)
        self.session.start()
        self._render_badges()
        self._layout_for(self.size.width, self.size.height)
        self._focus_pane(0)
        self.query_one(FitFooter).show_keys()  # in the first frame, not one after it
        if self._poll:
            self.hold_first_frame()
            self._start_polling()  # the planner is warmed up once the first poll is on screen
        self.set_timer(STARTUP_GC_PAUSE_S, collect_again)  # should the first data frame never come
        if not self.is_headless:
            install_quit_signals(self)  # SIGTERM/SIGHUP/SIGINT quit like `q`: the terminal is restored

    # --- long work: model and prices, in a thread, with progress; then polling -------------------
    def _prepare(self) -> None:
        """Warm the planner (imports, fitted parameters) and load prices while the first polls
        are drawn; the session picks both up from its second refresh."""
        say = self.post_message
        say(ProgressReport("loading the planner…", 0, 2))
        import cmdare.planner.analysis  # noqa: F401  (heavy imports, off the event loop)
        from cmdare.planner.speed.speed_model import SpeedModel

        SpeedModel.load()
        say(ProgressReport("loading prices…", 1, 2))
        from cmdare.collectors.pricing import load_book

        def progress(message: str) -> None:
            say(ProgressReport(message, 1, 2))

        self.session.set_price_book(load_book(self._prices, progress=progress))
        say(ProgressReport(None))

    def get_default_screen(self) -> Screen[None]:
        return HeldScreen(id="_default")

    def hold_first_frame(self) -> None:
        """Draw nothing until the first poll's state is in the panes (or a refresh failed, the polling ended,
        or :data:`FIRST_FRAME_HOLD_S` passed): the first frame on the terminal has the data. The layout still
        runs (the widgets have their sizes); Textual's batch keeps frames off the terminal, :class:`HeldScreen`
        keeps them from being composed."""
        self._begin_batch()
        self.holding_first_frame = True
        self.set_timer(
            FIRST_FRAME_HOLD_S, lambda: self.release_first_frame(repaint=True), name="first frame hold"
        )

    def release_first_frame(self, repaint: bool = False) -> None:
        """End the hold of :meth:`hold_first_frame` (once; later calls do nothing). The next frame is the whole
        screen; ``repaint`` asks for it now (else the change that released the hold brings it)."""
        if self.holding_first_frame:
            self.holding_first_frame = False
            self._end_batch()
            if repaint:
                self.screen.refresh()

    def _start_polling(self) -> None:
        self.run_worker(self._poll_loop(), name="poller", group="poll", exclusive=True, exit_on_error=False)

    def on_progress_report(self, msg: ProgressReport) -> None:
        """Show the start-up thread's progress; a report that arrives while the app quits (its screen
        gone) is dropped, not raised."""
        for line in self.query(ProgressLine):
            line.report(msg.label, msg.done, msg.total)

    async def _poll_loop(self) -> None:
        await self.session.run(self._stop, self.apply_state, self.report_problem)
        self.release_first_frame(repaint=True)  # a replay that ended before its first state
        if not self._closing_down():  # a replay's end: the last recorded state stays, the header says so
            self._render_badges()
            self.refresh_bindings()  # pause, step and speed are gone with the recording

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The poll loop survives every refresh's exceptions; should it still end in error, it is
        reported and restarted after one interval."""
        if event.worker.name == "poller" and event.state is WorkerState.ERROR and not self._closing_down():
            log.error("poll worker failed: %r", event.worker.error)
            self.report_problem(refresh_error(event.worker.error or RuntimeError("unknown")) + "; restarting")
            self.set_timer(self.options.refresh, self._start_polling)

    def report_problem(self, message: str | None) -> None:
        """Show ``message`` (one line, already clean) on the status line until a refresh succeeds."""
        self._problem = message
        if not self._closing_down():
            self._render_badges()
            if message is not None:
                self.release_first_frame()  # a failed first refresh is shown at once

    def _closing_down(self) -> bool:
        """True once the app quits or its screen is being taken down (the panes are gone)."""
        return self._stop.is_set() or not self._badges.is_attached  # (a query walked the whole DOM)

    def on_unmount(self) -> None:
        stop_pacing()
        self._stop.set()  # the screen is going away (however the app ends): the poll loop ends too

    def _after_first_frame(self) -> None:
        """Once the first data frame is on the terminal: the garbage collector's pass, the Job pane's
        plot, and the planner's warm-up in a thread (each would have delayed that frame)."""
        collect_again()
        self.query_one(JobPane).allow_plot()
        if self._poll and not self._prepared:
            self._prepared = True
            self.run_worker(self._prepare, thread=True, name="prepare", group="prepare", exit_on_error=False)

    def apply_state(self, state: MonitorState) -> None:
        """Hand a new state to every pane (one redraw per refresh)."""
        if self._closing_down():
            return
        state = replace(state, selected=self._selected_job)
        self.state = state
        failed = []
        with self.batch_update():
            for pane_id, title, _ in PANES:
                try:
                    self.query_one(f"#pane-{pane_id}").update_state(state)  # type: ignore[attr-defined]  # every pane of PANES has one
                except Exception as exc:  # one broken pane: the others and the polling go on
                    log.exception("%s pane failed to update", title)
                    failed.append(f"{title} pane: {type(exc).__name__}: {exc}")
            self.report_problem(refresh_error(RuntimeError("; ".join(failed))) if failed else None)
        self.release_first_frame()  # the first frame drawn is this one
        if not self._first_frame_asked:
            self._first_frame_asked = True
            self._badges.after_paint(self._after_first_frame)
        self._send_focus()

    def _send_focus(self) -> None:
        """Tell the session which tasks are on screen (a large fleet reads them in detail)."""
        self.session.set_focus(self.query_one("#pane-cluster", ClusterPane).visible_keys())

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """``enter`` (or a click on the cursor row) in the Cluster table: the task's detail."""
        if event.data_table.id != "cluster-table" or self.state is None:
            return
        from cmdare.tui.widgets.task_detail import task_detail_screen

        job, _, name = str(event.row_key.value).partition("/")
        view = next((n for j in self.state.jobs if j.name == job for n in j.nodes if n.name == name), None)
        if view is None:
            return
        store, lifecycle = self.session.store, self.session.lifecycle
        ts = store.tasks.get(f"{job}/{name}")
        self.push_screen(task_detail_screen(view, job, lifecycle, ts, self.state.t))

    def on_filter_table_columns_requested(self, event: FilterTable.ColumnsRequested) -> None:
        """``c`` in a table: the column chooser (sort by any column, show or hide columns)."""
        from cmdare.tui.widgets.column_chooser import ColumnChooser

        self.push_screen(ColumnChooser(event.table))

    def on_filter_table_scrolled(self, event: FilterTable.Scrolled) -> None:
        """The Cluster table scrolled: the rows now on screen are read in detail from the next poll on."""
        if event.table.id == "cluster-table":
            self._send_focus()

    def _render_badges(self) -> None:
        line = status_line(
            paused=self._replay is None and self.session.polling_paused,
            read_only=self.read_only,
            demo=self.session.is_demo,
            replay=self._replay,
            problem=self._problem,
            state=self.state,
            refresh=self.options.refresh,
            recording=self.session.recording,
        )
        update_static(self._badges, line, layout=False)  # one line, always: no layout
        paused = self._paused()
        if paused != self._shown_paused:  # the footer's space reads Pause or Resume
            self._shown_paused = paused
            self.refresh_bindings()

    # --- layout --------------------------------------------------------------------------------
    def on_resize(self, event) -> None:  # noqa: ANN001
        self._layout_for(event.size.width, event.size.height)

    def _layout_for(self, width: int, height: int) -> None:
        compact = width < COMPACT_WIDTH or height < COMPACT_HEIGHT
        self.query_one("#panes").set_class(compact, "-compact")
        self.query_one("#tabs").display = compact
        self.query_one(FitFooter).compact = compact
        self._show(self._current)

    def _panes(self) -> list[Widget]:
        return [self.query_one(f"#pane-{pid}") for pid, _, _ in PANES]

    def _show(self, index: int) -> None:
        """Show pane ``index`` (compact: only it). Its display is set, not a class: a class toggled on
        a pane restyled its whole subtree (most of a pane switch's time, issue 28)."""
        compact = self.query_one("#panes").has_class("-compact")
        for i, pane in enumerate(self._panes()):
            shown = not compact or i == index
            if pane.display != shown:
                pane.display = shown
        tabs = [
            f"[reverse bold] {i + 1} {t} [/]" if i == index else f" {i + 1} {t} "
            for i, (_, t, _) in enumerate(PANES)
        ]
        update_static(self.query_one("#tabs", Static), "".join(tabs) + "  [dim]tab/1-4[/]", layout=False)

    def _focus_pane(self, index: int) -> None:
        self._current = index % len(PANES)
        self._show(self._current)
        pane = self._panes()[self._current]
        target = next(
            (
                w
                for w in pane.query("*")
                if w.can_focus and w.display and w.parent is not None and w.parent.display
            ),
            None,
        )
        # the focus moved now, not at the next turn of the loop (Widget.focus): the pane's mark and the key
        # line change in the same frame as the pane (they came in a frame of their own ~30 ms later)
        self.screen.set_focus(target or pane, scroll_visible=False)
        self._mark_focused_pane()
        self.query_one(FitFooter).update_keys()
        # (not shown by this app: Textual's App.sub_title repaints the whole screen when set)
        self.set_reactive(App.sub_title, PANES[self._current][1])

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        if self._help.shown:
            self._help.close(restore_focus=False)  # the focus moved under the help (it never takes it)
        self._mark_focused_pane()

    def on_mouse_down(self, event: events.MouseDown) -> None:
        """A press of the mouse beside the open help closes it (then does what it does). The help keeps
        the focus where it was: a click on the focused table would not move the focus and close it."""
        help_ = self._help
        under = event.widget
        if help_.shown and (under is None or (under is not help_ and help_ not in under.ancestors)):
            help_.close(restore_focus=False)

    def _mark_focused_pane(self) -> None:
        """Give the pane holding the focus (else the one last shown) the class :data:`FOCUSED_PANE`,
        restyling that pane alone: its border is the only rule that reads the class. A class set the usual
        way, like ``:focus-within``, restyles the pane's whole subtree (both panes' at each move of the focus:
        half the CPU of a pane switch, issue 28)."""
        index = self._focused_pane_index()
        for i, pane in enumerate(self._panes()):
            if pane.has_class(FOCUSED_PANE) != (i == index):
                pane.set_class(i == index, FOCUSED_PANE, update=False)
                self.stylesheet.update_nodes([pane], animate=False)

    def footer_rank(self, action: str) -> int:
        """How much the footer wants the key of ``action`` (footer.FOOTER_RANK): the plot key ranks
        high in the Job pane; the pane key low at 80×24, where the tab line names the keys."""
        name = action.split("(")[0].rsplit(".", 1)[-1]
        if name == "next_plot" and PANES[self._current][0] == "job":
            return 80
        if name == "pause" and self._replay is None:
            return 60 if self._paused() else 42  # live: below the table's keys (while paused: Resume)
        if name == "next_pane" and self.query_one("#panes").has_class("-compact"):
            return 30
        return FOOTER_RANK.get(name, 50)

    def footer_label(self, action: str, description: str) -> str:
        """A key's word in the footer now: the replay's space reads "Resume" while paused."""
        if action.rsplit(".", 1)[-1] == "pause" and self._paused():
            return "Resume"
        return description

    def _paused(self) -> bool:
        """Whether polling (or the replay) is paused."""
        rp = self._replay
        return rp.paused if rp is not None else self.session.polling_paused

    # --- actions -------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Write actions do not exist in read-only mode (hidden from footer, help and palette);
        replay controls exist only while a recording plays; while the help is open, only
        :data:`HELP_ACTIONS` do."""
        if self.help_shown and action not in HELP_ACTIONS:
            return False  # the keys under the help wait until it closes
        if action.startswith("replay_"):
            return self._replay is not None and not self._replay.ended
        if action == "pause":
            return self._replay is None or not self._replay.ended
        if action == "refresh_now" and self._replay is not None:
            return False  # a recording has nothing to poll now
        return not (action in WRITE_ACTIONS and self.read_only)

    @property
    def _replay(self):  # -> ReplaySource | None
        plan = self.session.plan
        return plan.replay if plan is not None else None

    def action_pause(self) -> None:
        """``space``: pause or resume polling (a replay: its playback). What was being read when
        the key came is held off the screen until play resumes."""
        rp = self._replay
        if rp is not None:
            rp.resume() if rp.paused else rp.pause()
        elif self.session.polling_paused:
            self.session.resume_polling()
        else:
            self.session.pause_polling()
        self._render_badges()

    def action_replay_step(self) -> None:
        if self._replay is not None:
            self._replay.step()

    def action_replay_speed(self, factor: float) -> None:
        rp = self._replay
        if rp is not None:
            rp.speed = min(max(rp.speed * factor, 0.125), 1024.0)
            self._render_badges()

    def action_next_job(self) -> None:
        """Follow the next job in the Job and Planner panes; the Cluster pane (every job's tasks, a Job
        column) puts its cursor on the job's first task."""
        if self.state is None or len(self.state.jobs) < 2:
            return
        names = [j.name for j in self.state.jobs]
        current = self.state.job()
        i = names.index(current.name) if current is not None and current.name in names else -1
        self._selected_job = names[(i + 1) % len(names)]
        self.apply_state(self.state)
        self.query_one("#cluster-table", FilterTable).move_to_prefix(f"{self._selected_job}/")
        self.notify(f"following job {self._selected_job}", timeout=2, markup=False)

    def action_next_pane(self) -> None:
        self._focus_pane(self._current + 1)

    def action_prev_pane(self) -> None:
        self._focus_pane(self._current - 1)

    def action_show_pane(self, pane_id: str) -> None:
        self._focus_pane([p for p, _, _ in PANES].index(pane_id))

    def action_refresh_now(self) -> None:
        if self.session.poller is not None:
            self.session.poller.poke()

    def action_next_plot(self) -> None:
        kind = self.query_one(JobPane).next_plot()
        if self.query_one("#panes").has_class("-compact"):
            self.action_show_pane("job")
        self.notify(f"plot: {kind}", timeout=2)

    def action_export(self) -> None:
        """Write the current overview as JSON into the working directory (through the write guard)."""
        if self.state is None:
            self.notify("nothing to export yet", severity="warning")
            return
        path = Path.cwd() / f"cmdare-snapshot-{time.strftime('%Y%m%d-%H%M%S')}.json"
        try:
            writes.write_text(path, json.dumps(self.state.to_json(), indent=1, default=str))
        except OSError as exc:
            self.notify(f"export failed: {exc}", severity="error", markup=False)
            return
        self.notify(f"wrote {path}", markup=False)

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        """Save an SVG of the screen (through the write guard): ``filename`` in the folder ``path``, by
        default ``cmdare-screen-<time>.svg`` in the working directory (Textual's own parameters)."""
        name = filename or f"cmdare-screen-{time.strftime('%Y%m%d-%H%M%S')}.svg"
        target = Path(path or Path.cwd()) / name
        try:
            writes.write_text(target, self.export_screenshot())
        except OSError as exc:
            self.notify(f"screenshot failed: {exc}", severity="error", markup=False)
            return
        self.notify(f"wrote {target}", markup=False)

    def help_sections(self) -> list[Section]:
        """The help's sections: the focused pane's keys (its ``KEYS_HELP`` and its tables' bindings),
        then every key that works everywhere (write and replay keys only where they apply)."""
        index = self._focused_pane_index()
        pane = self._panes()[index]
        allowed = lambda action: self.check_action(action, ()) is not False  # noqa: E731
        own = list(getattr(pane, "KEYS_HELP", ()))
        tables = pane.query(FilterTable)
        table_keys = binding_rows(tables.first().BINDINGS, self._keys, allowed) if tables else None
        app_keys = [b for b in self.BINDINGS if isinstance(b, Binding)]
        titles = [t for _, t, _ in PANES]
        return help_sections(PANES[index][1], own, app_keys, titles, self._keys, allowed, table_keys)

    def _focused_pane_index(self) -> int:
        """The pane holding the focus (a click may have moved it), else the one last shown."""
        panes = self._panes()
        node = self.focused
        while node is not None and node not in panes:
            node = node.parent if isinstance(node.parent, Widget) else None
        return panes.index(node) if node is not None else self._current

    @property
    def help_shown(self) -> bool:
        """Whether the help is open."""
        return self._help.shown  # (a reference, not a query: bindings are checked often)

    def action_help(self) -> None:
        """``?``: open the help over the panes (again: close it)."""
        overlay = self._help
        if overlay.shown:
            overlay.action_close()
            return
        notes = ["READ-ONLY: nothing is written anywhere; exports are off."] if self.read_only else []
        overlay.open(self.help_sections(), notes)
        self.refresh_bindings()

    def on_help_overlay_closed(self) -> None:
        """The help closed: the keys under it work again; a pane takes the focus if nothing had it."""
        if self.focused is None:
            self._focus_pane(self._current)
        self.refresh_bindings()

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """The palette: the app's own commands first, then Textual's (minus its unguarded screenshot)."""
        for i, (pid, title, _) in enumerate(PANES):
            yield SystemCommand(f"Show {title}", f"Switch to the {title} pane (key {i + 1})",
                                lambda pid=pid: self.action_show_pane(pid))  # fmt: skip
        yield SystemCommand("Refresh now", "Poll every source now (key r)", self.action_refresh_now)
        yield SystemCommand(
            "Next plot", "Job pane: throughput / per-node / cost / loss (key p)", self.action_next_plot
        )
        yield SystemCommand("Help", "Every key (key ?)", self.action_help)
        if not self.read_only:
            yield SystemCommand(
                "Export JSON", "Write the overview to ./cmdare-snapshot-*.json (key e)", self.action_export
            )
            yield SystemCommand(
                "Screenshot", "Save an SVG of the screen to ./cmdare-screen-*.svg", self.action_screenshot
            )
        for cmd in super().get_system_commands(screen):
            if cmd.title != "Screenshot":
                yield cmd

    async def action_quit(self) -> None:
        """Quit at once: close the poller, the recorder (the recording complete in its file) and the replay;
        stop the demo exporters in a thread for at most 1 s (their one thread is a daemon and ends with us). ``q``, ctrl+c, SIGTERM, SIGHUP and SIGINT all come here."""
        self._stop.set()
        if self.session.poller is not None:
            await self.session.poller.aclose()
        self.session.close_sources()
        demo = self.session.demo
        if demo is not None:
            try:
                await asyncio.wait_for(asyncio.shield(asyncio.to_thread(demo.stop)), timeout=1.0)
            except TimeoutError:
                log.info("demo cluster still stopping; exiting anyway")
        self.exit(self.signal_exit_code, return_code=self.signal_exit_code)

    def emergency_close(self) -> None:
        """The last words of a forced exit (tui/signals.py, from its watchdog thread): the recording's committed
        cycles moved into its file."""
        self.session.emergency_close()
