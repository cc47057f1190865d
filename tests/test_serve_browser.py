"""``cmdare-tui serve`` in a real browser (issue 28 item 1, issue 27 item 6): headless Chromium, driven over its
DevTools protocol (tests/cdp_browser.py), opens the served page, clicks, focuses, blurs, types and resizes, and the
session stays alive and answers each; every request the page makes goes to the app's own origin; a page asking
for a terminal of 20,000 × 20,000 cells gets the capped size."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cmdare.tui.commands.serve_server import MAX_COLUMNS, MAX_ROWS
from tests.cdp_browser import CHROMIUM, chromium_page

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium not installed (scripts/test.sh installs it)"
)
EXE = str(Path(sys.executable).with_name("cmdare-tui"))
HELP = "keys (esc closes)"  # the help screen's title
KEEP_SOCKETS = """
window.keptSockets = [];
const PageSocket = window.WebSocket;
window.WebSocket = function (...args) { const s = new PageSocket(...args); window.keptSockets.push(s); return s; };
window.WebSocket.prototype = PageSocket.prototype;
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def served(isolated_home: Path) -> Iterator[str]:
    """``cmdare-tui serve`` on a free port, watching one target that never answers (the app still draws)."""
    port = _free_port()
    argv = [
        EXE,
        "serve",
        "--port",
        str(port),
        "--max-sessions",
        "1",
        "--target",
        "http://127.0.0.1:9/metrics",
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(base + "/", timeout=2).read()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"serve did not start: {proc.stderr.read() if proc.stderr else ''}"
                ) from None
            time.sleep(0.2)
    yield base
    proc.terminate()
    proc.communicate(timeout=30)


def _sent(frames: list[str], kind: str) -> list[list[object]]:
    """The page's envelopes of one kind, decoded."""
    out = []
    for f in frames:
        with_kind = json.loads(f) if f.startswith("[") else None
        if isinstance(with_kind, list) and with_kind and with_kind[0] == kind:
            out.append(with_kind)
    return out


async def test_a_browser_session_survives_clicks_focus_blur_keys_and_resizes(served: str) -> None:
    async with chromium_page() as page:
        # keep a handle on the page's own sockets (textual.js keeps its socket private), for the hostile step
        await page.call("Page.addScriptToEvaluateOnNewDocument", {"source": KEEP_SOCKETS})
        await page.call("Page.navigate", {"url": served + "/"})
        await page.wait_for("document.body.classList.contains('-first-byte')")
        await page.wait_received("Cluster")

        # a click on the terminal focuses it: the page sends ["focus"] (a one-item envelope)
        await page.click(300, 300)
        await page.wait_for("document.activeElement && document.activeElement.tagName === 'TEXTAREA'")
        # focus leaves the terminal (another element, as a tab switch does): ["blur"]
        await page.evaluate("document.activeElement.blur()")
        await page.click(300, 300)  # and comes back
        assert _sent(page.frames_out, "focus") == [["focus"], ["focus"]]
        assert _sent(page.frames_out, "blur") == [["blur"]]

        # keys: the app answers each (help opens and closes, the Job pane comes)
        await page.type_text("?")
        await page.wait_screen(lambda screen: HELP in screen)
        await page.press("Escape", "Escape", 27)
        await page.wait_screen(lambda screen: HELP not in screen)
        await page.type_text("2")
        await page.wait_screen(lambda screen: "Global step" in screen)

        # resize the window: the page sends its new size, the app redraws at it
        mark, sizes = len(page.frames_in), len(_sent(page.frames_out, "resize"))
        await page.resize(1400, 900)
        await _wait_until(lambda: len(_sent(page.frames_out, "resize")) > sizes)
        asked = _sent(page.frames_out, "resize")[-1][1]
        assert isinstance(asked, dict) and asked["width"] > 120
        await _wait_until(lambda: _screen(page.received_raw(mark)) == (asked["width"], asked["height"]))

        # still alive: no "Session ended", the socket open, the app answering a key
        await page.type_text("?")
        await page.wait_screen(lambda screen: HELP in screen)
        await page.press("Escape", "Escape", 27)
        await page.wait_screen(lambda screen: HELP not in screen)
        assert not await page.evaluate("document.body.classList.contains('-closed')")
        assert not page.ws_closed

        # nothing asked of any other host: every request (page, script, styles, font, socket) is the app's
        origin = served.split("://", 1)[1]
        outside = [u for u in page.requests if not re.match(rf"(https?|wss?)://{re.escape(origin)}/", u)]
        assert outside == [] and any("/static/fonts/" in u for u in page.requests), page.requests
        # the served font is the one in use
        assert await page.evaluate("document.fonts.check('16px \"Roboto Mono\"')")

        # a script on the page asks for a 20,000 x 20,000 terminal (issue 27 item 6: 141 MB -> 1.73 GB): the
        # app is given the capped size, draws within it, and the session lives on
        mark = len(page.frames_in)
        await page.evaluate(
            "window.keptSockets[0].send(JSON.stringify(['resize', {width: 20000, height: 20000}]))"
        )
        await _wait_until(lambda: _screen(page.received_raw(mark)) == (MAX_COLUMNS, MAX_ROWS))
        await page.type_text("?")
        await page.wait_screen(lambda screen: HELP in screen)
        assert not page.ws_closed


async def _wait_until(check: Callable[[], object], timeout: float = 60) -> None:
    """Poll ``check`` until it is truthy (raises after ``timeout`` s)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not check():
        if loop.time() > end:
            raise TimeoutError("condition not met")
        await asyncio.sleep(0.2)


CURSOR = re.compile(r"\x1b\[(\d+);(\d+)H([^\x1b\n]*(?:\x1b\[[0-9;]*m[^\x1b\n]*)*)")
SGR = re.compile(r"\x1b\[[0-9;]*m")


def _screen(raw: str) -> tuple[int, int]:
    """The (columns, rows) the app drew in ``raw`` terminal output: the furthest cell any positioned run of
    text reached, and the lowest row a cursor move named."""
    cols = rows = 0
    for m in CURSOR.finditer(raw):
        rows = max(rows, int(m[1]))
        cols = max(cols, int(m[2]) - 1 + len(SGR.sub("", m[3])))
    return cols, rows
