"""The one bounded reader of the files a user names (config, workload, geo plan, TF_CONFIG, predict
CSV, token file, price cache): only a regular file (a FIFO would block, ``/dev/zero`` never ends, a
device may act when opened), at most ``limit`` bytes, UTF-8.

The kind of file is checked before it is opened (``stat``, following a symlink) and again on the
open descriptor (which is opened without blocking, so a FIFO put there in between is refused too);
the size is checked from ``fstat`` before any byte is read, and the read itself stops one byte past
the limit whatever the file does meanwhile. Every failure is a :class:`TextFileError` with a
one-line message naming the file and what it is.
"""

from __future__ import annotations

import errno
import io
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

__all__ = [
    "DEFAULT_LIMIT",
    "LINE_LIMIT",
    "TextFileError",
    "TextFileMissing",
    "file_problem",
    "open_regular",
    "open_small_text",
    "read_small_text",
]

DEFAULT_LIMIT = 4 * 1024 * 1024


class TextFileError(ValueError):
    """The file cannot be used as text; ``str()`` is one line naming the file."""


class TextFileMissing(TextFileError):
    """There is no file at that path."""


def _kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket")):  # fmt: skip
        if test(mode):
            return name
    return "a special file"


def file_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` cannot be read as a file (``"a FIFO, not a regular file"``, ``"no such file"``,
    ``"not readable"``), or None when it is a readable regular file. Nothing is opened."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "no such file"
    except (OSError, ValueError) as exc:  # a name too long, an embedded NUL, a loop of symlinks
        return f"cannot read ({getattr(exc, 'strerror', None) or exc})"
    if not stat.S_ISREG(st.st_mode):
        return f"{_kind(st.st_mode)}, not a regular file"
    return None if os.access(path, os.R_OK) else "not readable (permission denied)"


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """``path`` opened for binary reading if it is a regular file (a tailed log, an event file); a
    FIFO or device put in its place raises ``OSError`` (``"a FIFO, not a regular file"``) at once
    instead of blocking or never ending. No size limit: the caller reads in bounded pieces."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, f"{_kind(mode)}, not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def _size_words(limit: int) -> str:
    """``64 MiB``, ``4 KiB``, ``100 bytes``."""
    for unit, size in (("MiB", 2**20), ("KiB", 1024)):
        if limit >= size and not limit % size:
            return f"{limit // size} {unit}"
    return f"{limit:,} bytes"


def _open_regular(p: Path, limit: int) -> _Bounded:
    """``p`` opened for reading once it is known to be a regular file of at most ``limit`` bytes."""
    try:
        st = os.stat(p)
        if stat.S_ISREG(st.st_mode):
            fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise TextFileMissing(f"{p}: no such file") from None
    except OSError as exc:
        raise TextFileError(f"{p}: cannot read ({exc.strerror or type(exc).__name__})") from None
    except ValueError as exc:  # e.g. an embedded NUL in the name
        raise TextFileError(f"{str(p)!r}: bad file name ({exc})") from None
    if not stat.S_ISREG(st.st_mode):  # refused before it is opened: opening a device may act
        raise TextFileError(f"{p}: {_kind(st.st_mode)}, not a regular file")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # replaced between the two looks
            raise TextFileError(f"{p}: {_kind(st.st_mode)}, not a regular file")
        if st.st_size > limit:
            raise TextFileError(f"{p}: larger than {_size_words(limit)}")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return _Bounded(fd, limit, p)


class _Bounded(io.FileIO):
    """A file that refuses to be read past ``limit`` bytes (a file that grows while read)."""

    def __init__(self, fd: int, limit: int, path: Path) -> None:
        super().__init__(fd, "rb", closefd=True)
        self._left, self._limit, self._path = limit + 1, limit, path

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]  # FileIO's takes any buffer; BufferedReader passes these
        view = memoryview(buffer)[: self._left]
        n = super().readinto(view) or 0
        self._left -= n
        if self._left <= 0:
            raise TextFileError(f"{self._path}: larger than {_size_words(self._limit)}")
        return n

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            return self.readall()
        buf = bytearray(size)
        return bytes(buf[: self.readinto(buf)])

    def readall(self) -> bytes:
        out, buf = bytearray(), bytearray(1 << 16)
        while n := self.readinto(buf):
            out += buf[:n]
        return bytes(out)


def read_small_text(path: str | os.PathLike[str], limit: int = DEFAULT_LIMIT, encoding: str = "utf-8") -> str:
    """The text of ``path``; raises :class:`TextFileError`."""
    p = Path(path)
    with _open_regular(p, limit) as fh:
        try:
            data = fh.read()
        except OSError as exc:
            raise TextFileError(f"{p}: cannot read ({exc.strerror or type(exc).__name__})") from None
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise TextFileError(f"{p}: not UTF-8 text (byte {exc.start})") from None


LINE_LIMIT = 1024 * 1024  # bytes of one line read by :func:`open_small_text` (default)


@contextmanager
def open_small_text(
    path: str | os.PathLike[str],
    limit: int = DEFAULT_LIMIT,
    encoding: str = "utf-8",
    line_limit: int = LINE_LIMIT,
) -> Iterator[Iterator[str]]:
    """``path``'s lines (each with its ``\\n``), read and decoded one at a time (for a file too large
    to hold twice, a CSV), with the same checks as :func:`read_small_text`; bytes that are not
    ``encoding`` raise :class:`TextFileError` naming the line and byte, and so does a line over
    ``line_limit`` bytes (a 64 MiB line held as text takes up to four times that). ``utf-8-sig`` drops a BOM."""
    p = Path(path)
    with io.BufferedReader(_open_regular(p, limit), 1 << 16) as fh:
        yield _lines(fh, encoding, p, line_limit)


def _lines(fh: io.BufferedReader[_Bounded], encoding: str, p: Path, line_limit: int) -> Iterator[str]:
    """The decoded lines of ``fh`` (UTF-8 never has the byte 0x0A inside a character: lines split safely)."""
    first, rest = encoding, "utf-8" if encoding == "utf-8-sig" else encoding
    no = 0
    while True:
        try:
            line = fh.readline(line_limit + 1)
        except OSError as exc:
            raise TextFileError(f"{p}: cannot read ({exc.strerror or type(exc).__name__})") from None
        if not line:
            return
        no += 1
        if len(line) > line_limit:
            raise TextFileError(f"{p}: line {no} is longer than {_size_words(line_limit)}")
        try:
            yield line.decode(first if no == 1 else rest)
        except UnicodeDecodeError as exc:
            raise TextFileError(f"{p}: not UTF-8 text (line {no}, byte {exc.start + 1})") from None
