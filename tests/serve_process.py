"""``cmdare-tui serve`` in its own process, on a port free a moment ago: started again on another port when the
server exits before answering (another process took the port in between)."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.prom_server import free_port

EXE = str(Path(sys.executable).with_name("cmdare-tui"))


def start_serve(
    args: list[str], env: dict[str, str] | None = None, attempts: int = 3
) -> tuple[subprocess.Popen[str], int]:
    """The server process (stdout and stderr piped, text) and its port, once its index page answers with the
    app's name; the wait bounds a hung start only. ``args`` follow ``serve --port N``."""
    for _ in range(attempts):
        port = free_port()
        argv = [EXE, "serve", "--port", str(port), *args]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2).read().decode()
                if "cmdare-tui" in body:
                    return proc, port
            except OSError:
                pass
            time.sleep(0.2)
        if proc.poll() is None:  # running yet never answered: not a port taken
            proc.kill()
            _, err = proc.communicate(timeout=20)
            raise RuntimeError(f"serve did not answer on port {port}: {err[-2000:]}")
        proc.communicate(timeout=20)
    raise RuntimeError(f"serve exited before answering on {attempts} ports in a row")
