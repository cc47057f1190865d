"""Several exporters' ``/metrics`` pages served from one thread of one process (the demo's 17 exporters).

Each exporter keeps its own listening socket and port, as separate training processes would have; the
host's one thread waits on all of them and answers each request in turn (a page is ~4 kB, built in
~0.3 ms). ``start_http_server`` gives every exporter a thread waiting on its socket and starts one more
thread per request: the demo's first poll started 17 threads in the app's process while the app was
drawing its first frame, each of them contending for the interpreter lock (issue 34).
"""

from __future__ import annotations

import logging
import selectors
import socket
import threading
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

log = logging.getLogger(__name__)

POLL_S = 0.5  # the host's wait when nothing is asked for (a socket added meanwhile is seen at once anyway)
CLIENT_TIMEOUT_S = 5.0  # a client that connects and says nothing holds every page up this long at most


class _QuietHandler(WSGIRequestHandler):
    """No line on stderr per request (the app draws on the terminal); a silent client is dropped."""

    timeout = CLIENT_TIMEOUT_S

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002  (the base class's name)
        pass


class _PageServer(WSGIServer):
    """A request that fails (a client gone or silent) is logged, not printed on the terminal."""

    def handle_error(self, request: object, client_address: object) -> None:
        log.debug("page host: a request from %s failed", client_address, exc_info=True)


class PageHost:
    """Serves the ``/metrics`` page of each registry :meth:`add`-ed, on its own port, from one daemon thread."""

    def __init__(self, name: str = "cmdare-pages") -> None:
        self._selector = selectors.DefaultSelector()
        self._lock = threading.Lock()  # (un)registering and answering never overlap
        self._wake_r, self._wake_w = socket.socketpair()  # close() wakes the thread at once
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def add(self, registry: CollectorRegistry, port: int = 0, addr: str = "127.0.0.1") -> WSGIServer:
        """Listen on ``addr:port`` (0: any free port) for ``registry``'s page; the server (its
        ``server_address`` holds the port). Raises OSError when the port is taken."""
        server = make_server(addr, port, make_wsgi_app(registry), _PageServer, handler_class=_QuietHandler)
        server.timeout = 0  # handle_request() answers what is waiting, never waits itself
        with self._lock:
            if self._closed:
                server.server_close()
                raise OSError("page host closed")
            self._selector.register(server.socket, selectors.EVENT_READ, server)
        return server

    def remove(self, server: WSGIServer) -> None:
        """Stop serving ``server``'s page and close its port (a request under way is answered first)."""
        with self._lock:
            try:
                self._selector.unregister(server.socket)
            except (KeyError, ValueError):  # removed already
                return
            server.server_close()

    def close(self) -> None:
        """Close every port and end the thread (at once: it is woken)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            servers = [k.data for k in self._selector.get_map().values() if k.data is not None]
            for server in servers:
                self._selector.unregister(server.socket)
                server.server_close()
        self._wake_w.send(b"x")
        self._thread.join(timeout=2)
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()

    def _run(self) -> None:
        while True:
            ready = self._selector.select(POLL_S)
            with self._lock:
                if self._closed:
                    return
                live = self._selector.get_map()
                for key, _ in ready:
                    server = key.data
                    now = live.get(key.fd)
                    if server is None or now is None or now.data is not server:  # the wake-up, or removed
                        continue
                    server.handle_request()  # its failures go to handle_error
