"""A benchmark's synthetic server in a child process: it prints its port on its first line of stdout;
``with ChildServer(argv) as s: s.port``. Killed on exit."""

from __future__ import annotations

import subprocess
import sys


class ChildServer:
    """Run ``python *argv`` and read the port the server prints first."""

    def __init__(self, *argv: str) -> None:
        self.argv = argv
        self.proc: subprocess.Popen | None = None
        self.port = 0

    def __enter__(self) -> ChildServer:
        self.proc = subprocess.Popen([sys.executable, *self.argv], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
