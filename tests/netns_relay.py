"""A throttled network for a real DDP job, and a way to read its /metrics from outside it.

The job runs in a network namespace of its own (``unshare -rn``: an unprivileged user namespace owns it),
whose loopback gets a token-bucket rate limit (``tc qdisc … tbf``); gloo's TCP between the ranks crosses
that loopback, so the all-reduce is throttled while nothing outside the namespace is. The ranks' /metrics
endpoints are reached through Unix sockets, which cross network namespaces: inside, :func:`serve_inside`
relays ``DIR/rank<r>.sock`` → ``127.0.0.1:<base + r>``; outside, :class:`Outside` relays
``127.0.0.1:<port>`` → the socket. Run as a script inside the namespace::

    python netns_relay.py DIR BASE RANKS
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import threading
from pathlib import Path


def available() -> str | None:
    """Why a throttled namespace cannot be made here, or None when it can."""
    for tool in ("unshare", "tc", "ip"):
        if shutil.which(tool) is None:
            return f"{tool} not installed"
    import subprocess

    probe = "ip link set lo up && tc qdisc add dev lo root tbf rate 8mbit burst 64kb limit 8mb"
    done = subprocess.run(["unshare", "-rn", "sh", "-c", probe], capture_output=True, timeout=10)
    return (
        None if done.returncode == 0 else f"cannot throttle a private loopback: {done.stderr.decode()[:200]}"
    )


def _pipe(a: socket.socket, b: socket.socket) -> None:
    try:
        while data := a.recv(65536):
            b.sendall(data)
    except OSError:
        pass
    finally:
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _splice(client: socket.socket, upstream: socket.socket) -> None:
    threading.Thread(target=_pipe, args=(client, upstream), daemon=True).start()
    threading.Thread(target=_pipe, args=(upstream, client), daemon=True).start()


def _accept_loop(listener: socket.socket, connect: callable) -> None:  # type: ignore[valid-type]
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        try:
            upstream = connect()
        except OSError:
            client.close()
            continue
        _splice(client, upstream)


def serve_inside(folder: Path, base: int, ranks: int) -> None:
    """Inside the namespace: ``folder/rank<r>.sock`` → ``127.0.0.1:base + r``, until killed."""
    threads = []
    for r in range(ranks):
        path = folder / f"rank{r}.sock"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(path))
        listener.listen(16)

        def connect(port: int = base + r) -> socket.socket:
            return socket.create_connection(("127.0.0.1", port), timeout=5)

        t = threading.Thread(target=_accept_loop, args=(listener, connect), daemon=True)
        t.start()
        threads.append(t)
    for t in threads:
        t.join()


class Outside:
    """Outside the namespace: ``127.0.0.1:<port>`` → ``folder/rank<r>.sock`` for each rank."""

    def __init__(self, folder: Path, ranks: int) -> None:
        self.listeners: list[socket.socket] = []
        self.ports: list[int] = []
        for r in range(ranks):
            listener = socket.create_server(("127.0.0.1", 0))
            self.listeners.append(listener)
            self.ports.append(listener.getsockname()[1])

            def connect(path: Path = folder / f"rank{r}.sock") -> socket.socket:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.settimeout(5)
                s.connect(str(path))
                s.settimeout(None)
                return s

            threading.Thread(target=_accept_loop, args=(listener, connect), daemon=True).start()

    def close(self) -> None:
        for listener in self.listeners:
            listener.close()


if __name__ == "__main__":
    os.nice(5)
    serve_inside(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
