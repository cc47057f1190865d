"""The terminal driver: Textual's Linux driver, but a lone ``esc`` is answered once ``ESCDELAY`` has passed.

Textual's input thread waits for input in ``select`` with a 0.1 s timeout and looks at the escape
sequence it is reading only when that wait ends: a lone ESC (the ``esc`` key) was delivered when the
next byte came or 0.1 s later, whatever ``ESCDELAY`` said (measured through tmux: ``esc`` reached the
app 100–120 ms after it was sent, issue 28). This thread waits at most until the sequence's own
timeout, so ``esc`` arrives ``ESCDELAY`` (tui/cli.py: 10 ms) after it was pressed. Between keys it
waits as Textual's does (0.1 s at a time: no extra wake-ups while idle)."""

from __future__ import annotations

import os
import selectors
from codecs import getincrementaldecoder

from textual._parser import ParseError
from textual._time import get_time
from textual._xterm_parser import XTermParser
from textual.drivers.linux_driver import LinuxDriver

IDLE_WAIT_S = 0.1  # Textual's own wait for input between keys


def input_wait(parser: XTermParser, now: float) -> float:
    """How long the input thread may wait for input: until ``parser``'s pending sequence times out
    (a lone ESC becomes the ``esc`` key then), else :data:`IDLE_WAIT_S`."""
    due = parser._timeout_time  # when the sequence read so far times out (None: nothing pending)
    return IDLE_WAIT_S if due is None else min(max(due - now, 0.0), IDLE_WAIT_S)


class EscapeDriver(LinuxDriver):
    """Textual's Linux driver whose input thread wakes when a pending escape sequence times out."""

    def run_input_thread(self) -> None:
        """Wait for input and dispatch events (Textual's loop, the wait bounded by :func:`input_wait`)."""
        selector = selectors.SelectSelector()
        selector.register(self.fileno, selectors.EVENT_READ)
        fileno = self.fileno
        parser = XTermParser(self._debug)
        decode = getincrementaldecoder("utf-8")().decode

        def process(events: list[tuple[selectors.SelectorKey, int]], final: bool = False) -> None:
            for i, (_key, mask) in enumerate(events):
                if mask & selectors.EVENT_READ:
                    data = decode(os.read(fileno, 1024 * 4), final=final and i == len(events) - 1)
                    if not data:  # (stdin piped)
                        break
                    for event in parser.feed(data):
                        self.process_message(event)
            for event in parser.tick():
                self.process_message(event)

        try:
            while not self.exit_event.is_set():
                process(selector.select(input_wait(parser, get_time())))
            selector.unregister(self.fileno)
            process(selector.select(IDLE_WAIT_S), final=True)
        finally:
            selector.close()
            try:
                for _event in parser.feed(""):
                    pass
            except (EOFError, ParseError):
                pass
