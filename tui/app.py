"""The Textual app ``cmdare-tui``: Cluster, Job, Planner and Alerts panes over a monitoring session."""

from __future__ import annotations

import asyncio
import logging

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Container
from textual.widget import Widget
from textual.widgets import Footer, Static

from cmdare.tui.help_screen import HelpScreen
from cmdare.tui.panes.alerts import AlertsPane
from cmdare.tui.panes.cluster import ClusterPane
from cmdare.tui.panes.job import JobPane
from cmdare.tui.panes.planner import PlannerPane
from cmdare.tui.session import MonitorSession, MonitorState, SessionOptions

log = logging.getLogger(__name__)

PANES: tuple[tuple[str, str, type[Widget]], ...] = (
    ("cluster", "Cluster", ClusterPane),
    ("job", "Job", JobPane),
    ("planner", "Planner", PlannerPane),
    ("alerts", "Alerts", AlertsPane),
)
COMPACT_WIDTH = 110  # below this width (or 30 rows) one pane at a time, switched with tab / 1-4
COMPACT_HEIGHT = 30


class CmdareApp(App[int]):
    TITLE = "cmdare-tui"
    CSS_PATH = "app.tcss"
    ENABLE_COMMAND_PALETTE = True
    BINDINGS = [
        Binding("q", "quit", "Quit", id="app.quit"),
        Binding("question_mark", "help", "Help", id="app.help"),
        Binding("tab", "next_pane", "Next pane", id="app.next_pane", priority=True),
        Binding("shift+tab", "prev_pane", "Prev pane", id="app.prev_pane", priority=True),
        Binding("r", "refresh_now", "Refresh", id="app.refresh"),
        Binding("1", "show_pane('cluster')", "Cluster", show=False, id="app.pane1"),
        Binding("2", "show_pane('job')", "Job", show=False, id="app.pane2"),
        Binding("3", "show_pane('planner')", "Planner", show=False, id="app.pane3"),
        Binding("4", "show_pane('alerts')", "Alerts", show=False, id="app.pane4"),
    ]

    def __init__(self, options: SessionOptions | None = None, session: MonitorSession | None = None) -> None:
        super().__init__()
        self.options = options or SessionOptions()
        self.session = session or MonitorSession(self.options)
        self.state: MonitorState | None = None
        self._stop = asyncio.Event()
        self._current = 0

    def compose(self) -> ComposeResult:
        yield Static("", id="badges")
        with Container(id="panes"):
            for pane_id, title, cls in PANES:
                pane = cls(id=f"pane-{pane_id}", classes="pane")
                pane.border_title = title
                yield pane
        yield Footer()

    def on_mount(self) -> None:
        self.session.start()
        self._render_badges()
        self._layout_for(self.size.width, self.size.height)
        self._focus_pane(0)
        self.run_worker(self._poll_loop(), name="poller", group="poll", exclusive=True, exit_on_error=False)

    async def _poll_loop(self) -> None:
        await self.session.run(self._stop, self.apply_state)

    def apply_state(self, state: MonitorState) -> None:
        """Hand a new state to every pane (one redraw per refresh)."""
        self.state = state
        with self.batch_update():
            for pane_id, _, _ in PANES:
                self.query_one(f"#pane-{pane_id}").update_state(state)  # type: ignore[attr-defined]
            self._render_badges()

    def _render_badges(self) -> None:
        parts = []
        if self.session.is_demo:
            parts.append("[reverse bold] DEMO [/] simulated cluster on loopback, calibrated from CM-DARE measurements")
        if self.options.read_only:
            parts.append("[reverse bold] READ-ONLY [/]")
        st = self.state
        if st is not None:
            parts.append(f"poll #{st.cycles} · every {self.options.refresh:g}s · " + " · ".join(s.message for s in st.sources))
        self.query_one("#badges", Static).update("  ".join(parts) or "cmdare-tui")

    # --- layout --------------------------------------------------------------------------------
    def on_resize(self, event) -> None:  # noqa: ANN001
        self._layout_for(event.size.width, event.size.height)

    def _layout_for(self, width: int, height: int) -> None:
        compact = width < COMPACT_WIDTH or height < COMPACT_HEIGHT
        self.query_one("#panes").set_class(compact, "-compact")
        self._show(self._current)

    def _panes(self) -> list[Widget]:
        return [self.query_one(f"#pane-{pid}") for pid, _, _ in PANES]

    def _show(self, index: int) -> None:
        for i, pane in enumerate(self._panes()):
            pane.set_class(i == index, "-shown")

    def _focus_pane(self, index: int) -> None:
        self._current = index % len(PANES)
        self._show(self._current)
        pane = self._panes()[self._current]
        target = next((w for w in pane.query("*") if w.can_focus), None)
        if target is not None:
            target.focus()
        self.sub_title = PANES[self._current][1]

    # --- actions -------------------------------------------------------------------------------
    def action_next_pane(self) -> None:
        self._focus_pane(self._current + 1)

    def action_prev_pane(self) -> None:
        self._focus_pane(self._current - 1)

    def action_show_pane(self, pane_id: str) -> None:
        self._focus_pane([p for p, _, _ in PANES].index(pane_id))

    def action_refresh_now(self) -> None:
        if self.session.poller is not None:
            self.session.poller.poke()

    def action_help(self) -> None:
        keys = []
        for b in [*self.BINDINGS, *self._focused_bindings()]:
            if isinstance(b, Binding) and b.description:
                keys.append((self._key_label(b.key), b.description))
        notes = ["Panes: " + ", ".join(f"{i + 1} {t}" for i, (_, t, _) in enumerate(PANES)),
                 "Ctrl+P opens the command palette."]
        if self.options.read_only:
            notes.append("READ-ONLY: nothing is written anywhere; recording and exports are off.")
        self.push_screen(HelpScreen(keys, notes))

    def _focused_bindings(self) -> list[Binding]:
        w = self.focused
        return [b for b in getattr(w, "BINDINGS", []) if isinstance(b, Binding)] if w else []

    @staticmethod
    def _key_label(key: str) -> str:
        return key.replace("question_mark", "?").replace("shift+tab", "shift+tab")

    async def action_quit(self) -> None:
        self._stop.set()
        await self.session.aclose()
        self.exit(0)
