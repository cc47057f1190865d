"""Helpers for driving the ``cmdare-tui`` entry point in-process (``main(argv)``) and checking its
error discipline: an exit status in the documented set, at most one line on stderr (exactly one,
``cmdare-tui: error: …``, for status 2), no traceback, and never the last-resort "unexpected" path."""

from __future__ import annotations

import io
import signal
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path

from cmdare.collectors import writes
from cmdare.tui import cli

HOSTILE = (
    "", "-", "--", "0", "-1", "99999", "1e308", "-1e308", "nan", "inf", "-inf", "0x10", "1_000", "12abc",
    "[/]", "[link=file:///etc/passwd]x[/link]", "[bold red]x", "\x1b]52;c;aGk=\x07", "\x1b[2J", "\x9b31m",
    "\x07", "\u202e\u2066evil", "\u200b", "a" * 5000, "http://127.0.0.1:99999/", "http://[::1", "http://",
    "https://u:p@127.0.0.1:0/", "file:///etc/passwd", "/dev/null", "/proc/self/mem", "/", ".", "..",
    "~", "$HOME", "%s%n", "{}", "[]", "'", '"', "\\", "job=\"x\"", '{job="x"}', "+1", "+99999", "é",
)  # fmt: skip


@contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Fail (instead of hanging the suite) when the block runs longer than ``seconds``."""

    def _raise(*_: object) -> None:
        raise TimeoutError(f"no answer within {seconds} s")

    old = signal.signal(signal.SIGALRM, _raise)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def run_main(argv: list[str], seconds: int = 60) -> tuple[int, str, str]:
    """``cli.main(argv)`` with stdout and stderr captured; read-only mode reset afterwards."""
    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err), deadline(seconds):
            code = cli.main(argv)
    finally:
        writes.set_read_only(False)
    return code, out.getvalue(), err.getvalue()


def check_discipline(code: int, err: str, allowed: tuple[int, ...] = (0, 1, 2)) -> None:
    """The error-discipline contract of every entry point."""
    assert code in allowed, (code, err)
    assert "Traceback" not in err, err
    assert "unexpected" not in err, err  # the last-resort handler: an unforeseen error is a bug
    lines = err.splitlines()
    if code == 2:
        assert len(lines) == 1 and lines[0].startswith("cmdare-tui: error: "), err
    else:
        assert len(lines) <= 1, err
    assert "\x1b" not in err and "\x07" not in err and "\x9b" not in err, repr(err)


def leftovers(folder: Path) -> list[str]:
    """Temporary files a half-done write would leave (writes.py's ``.NAME.xxxx`` and probes)."""
    return [p.name for p in folder.rglob(".*") if p.is_file()]
