"""One HTTP server on a 127.x address answering GETs with exposition text: the pages the tests and benchmarks serve.

``body_of(path)`` gives a path's body at the moment it is asked (a fixed page, or one rendered each scrape); ``None``
answers ``missing_status`` (404 for an unknown path; 503 where a page stands for a task that died)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def serve_pages(
    body_of: Callable[[str], bytes | None], addr: str = "127.0.0.1", missing_status: int = 404
) -> ThreadingHTTPServer:
    """Start the server on ``addr`` (port 0: the kernel picks one) in a daemon thread; ``shutdown()`` and
    ``server_close()`` end it."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = body_of(self.path)
            if body is None:
                self.send_error(missing_status)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer((addr, 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def close_server(server: ThreadingHTTPServer) -> None:
    """Stop answering and release the port."""
    server.shutdown()
    server.server_close()
