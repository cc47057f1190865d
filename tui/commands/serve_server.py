"""textual-serve's :class:`~textual_serve.server.Server`, made safe by default for ``cmdare-tui serve``.

What the stock server does not do, and this subclass does:

- **Origin check** on the WebSocket that drives an app process: the ``Origin`` must be the page's own
  ``scheme://host:port`` (or one of ``allowed_origins``); a missing Origin is refused too. Bound to
  loopback, the ``Host`` header must name a loopback host (a DNS-rebinding page cannot pass).
- **Session cap**: at most ``max_sessions`` app processes; more get HTTP 503.
- **URLs that work** when bound to 0.0.0.0: the page's URLs are built from the request's own host.
- **No directory index** of the static files.
- **Its own page** (``serve_page.html``): everything it loads (script, styles, the terminal's font) comes from
  this server; no outside host is asked for anything.
- **Every message textual.js sends is understood**, the one-item ``["focus"]`` and ``["blur"]`` included (a
  click or a tab switch must not end the session); a message that is not a JSON list naming its kind ends it.
- **A capped terminal**: whatever size the page asks for (at connect or in a resize), the app is given at most
  :data:`MAX_COLUMNS` × :data:`MAX_ROWS` cells (a page asking for 20,000 × 20,000 grew a session past 1.7 GB).
- **Every session process ends** when its socket closes, however the client left: quit is asked
  for, then SIGTERM, then SIGKILL after ``grace`` seconds; the command runs under ``exec`` so the
  process ended is the app itself, not a shell; at shutdown every live session is ended the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
from pathlib import Path
from urllib.parse import urlsplit

import jinja2
from aiohttp import WSMsgType, web
from textual_serve.app_service import AppService
from textual_serve.server import Server, to_int

log = logging.getLogger(__name__)

LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost")
PAGE = Path(__file__).with_name("serve_page.html")
# The largest terminal a browser session gets: a 4K screen at a 12 px font is ~400 × 110 cells. Past this
# the page's size is cut (an app's screen buffers grow with its cells).
MAX_COLUMNS = 500
MAX_ROWS = 200


def terminal_size(width: object, height: object) -> tuple[int, int] | None:
    """The size a session's app is given for a page's ``width`` × ``height`` (cells): each cut to 1 –
    :data:`MAX_COLUMNS` / :data:`MAX_ROWS`; ``None`` when either is not a whole number."""
    if isinstance(width, bool) or isinstance(height, bool):
        return None
    if not isinstance(width, int) or not isinstance(height, int):
        return None
    return min(max(width, 1), MAX_COLUMNS), min(max(height, 1), MAX_ROWS)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 with or without brackets) is this machine only."""
    h = host.strip("[]").lower()
    if h in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


class SafeServer(Server):
    """A textual-serve server with an Origin check, a session cap and sessions that always end."""

    def __init__(self, command: str, *, host: str, port: int, title: str, max_sessions: int = 4,
                 allowed_origins: tuple[str, ...] = (), grace: float = 3.0) -> None:  # fmt: skip
        super().__init__(command, host=host, port=port, title=title)
        self.max_sessions = max_sessions
        self.allowed_origins = {o.rstrip("/").lower() for o in allowed_origins}
        self.grace = grace
        self.sessions: set[AppService] = set()
        self.page = jinja2.Environment(autoescape=True).from_string(PAGE.read_text(encoding="utf-8"))

    # --- checks ---------------------------------------------------------------------------------
    def host_ok(self, request: web.Request) -> bool:
        """Bound to loopback, only a loopback ``Host`` is served (defeats DNS rebinding)."""
        if not is_loopback(self.host):
            return True
        host = urlsplit(f"//{request.host}").hostname or ""
        return is_loopback(host)

    def origin_ok(self, request: web.Request) -> bool:
        """The WebSocket's ``Origin`` is the page's own origin, or one allowed by ``--allow-origin``."""
        origin = (request.headers.get("Origin") or "").rstrip("/").lower()
        if not origin or origin == "null":
            return False
        if origin in self.allowed_origins:
            return True
        return urlsplit(origin).netloc == request.host.lower() and self.host_ok(request)

    # --- routes ---------------------------------------------------------------------------------
    async def _make_app(self) -> web.Application:
        app = web.Application()
        app.add_routes([
            web.get("/", self.handle_index, name="index"),
            web.get("/ws", self.handle_websocket, name="websocket"),
            web.get("/download/{key}", self.handle_download, name="download"),
            web.static("/static", self.statics_path, show_index=False, name="static"),
        ])  # fmt: skip
        app.on_startup.append(self.on_startup)
        app.on_shutdown.append(self.on_shutdown)
        return app

    async def on_startup(self, app: web.Application) -> None:
        """Quiet start (the serve command has said where it listens)."""

    async def on_shutdown(self, app: web.Application) -> None:
        """End every live session before the server goes."""
        await asyncio.gather(
            *(end_session(s, self.grace) for s in list(self.sessions)), return_exceptions=True
        )

    async def handle_index(self, request: web.Request) -> web.StreamResponse:
        if not self.host_ok(request):
            raise web.HTTPForbidden(text="unexpected Host header")
        base = f"{request.scheme}://{request.host}"  # works when bound to 0.0.0.0
        ws = ("wss" if request.scheme == "https" else "ws") + base[base.index(":") :]
        html = self.page.render(
            title=self.title,
            font_size=min(max(to_int(request.query.get("fontsize", "16"), 16), 6), 64),
            websocket_url=f"{ws}/ws",
            static_url=f"{base}/static/",
        )
        return web.Response(text=html, content_type="text/html")

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        if not self.origin_ok(request):
            log.warning("serve: refused a WebSocket from Origin %r", request.headers.get("Origin"))
            raise web.HTTPForbidden(text="cross-origin WebSocket refused (see --allow-origin)")
        if len(self.sessions) >= self.max_sessions:
            raise web.HTTPServiceUnavailable(
                text=f"session limit reached ({self.max_sessions}; see --max-sessions)"
            )
        websocket = web.WebSocketResponse(heartbeat=15)

        async def close() -> None:
            await websocket.close()

        service = AppService(self.command, write_bytes=websocket.send_bytes, write_str=websocket.send_str,
                             close=close, download_manager=self.download_manager, debug=self.debug)  # fmt: skip
        self.sessions.add(service)
        try:
            await websocket.prepare(request)
            size = terminal_size(to_int(request.query.get("width", "80"), 80),
                                 to_int(request.query.get("height", "24"), 24)) or (80, 24)  # fmt: skip
            await service.start(*size)
            await self._pump(websocket, service)
        except asyncio.CancelledError:
            pass
        except Exception as exc:  # noqa: BLE001 - one session's failure never takes the server down
            log.warning("serve: session ended: %s", type(exc).__name__)
        finally:
            await asyncio.shield(self._finish(service, websocket))
        return websocket

    async def _finish(self, service: AppService, websocket: web.WebSocketResponse) -> None:
        try:
            await end_session(service, self.grace)
        finally:
            self.sessions.discard(service)
            with contextlib.suppress(Exception):
                await websocket.close()

    async def _pump(self, websocket: web.WebSocketResponse, service: AppService) -> None:
        """Browser messages to the app. Each is a JSON list ``[kind, data?]``: ``["focus"]`` and ``["blur"]``
        come without data; a kind this server does not know is ignored; a message that is not such a list
        ends the session (no page of this server sends one)."""
        async for message in websocket:
            if message.type != WSMsgType.TEXT:
                continue
            envelope = message.json()
            if not isinstance(envelope, list) or not envelope or not isinstance(envelope[0], str):
                raise ValueError("malformed message")
            kind, data = envelope[0], envelope[1] if len(envelope) > 1 else None
            if kind == "stdin" and isinstance(data, str):
                await service.send_bytes(data.encode("utf-8"))
            elif kind == "resize" and isinstance(data, dict):
                size = terminal_size(data.get("width"), data.get("height"))
                if size is not None:
                    await service.set_terminal_size(*size)
            elif kind == "ping" and isinstance(data, str):
                await websocket.send_json(["pong", data])
            elif kind == "blur":
                await service.blur()
            elif kind == "focus":
                await service.focus()


async def end_session(service: AppService, grace: float) -> None:
    """End a session's app process: ask it to quit, then SIGTERM, then SIGKILL (``grace`` s each)."""
    proc = service._process  # textual-serve keeps the process private; nothing else exposes it
    with contextlib.suppress(Exception):
        await asyncio.wait_for(service.stop(), grace)
    if proc is None or proc.returncode is not None:
        return
    for signal_it in (proc.terminate, proc.kill):
        with contextlib.suppress(ProcessLookupError):
            signal_it()
        try:
            await asyncio.wait_for(proc.wait(), grace)
            return
        except TimeoutError:
            continue
