"""The one place that performs every write to disk (recording, cache, config, exports, logs).

Read-only mode is a single switch here: once :func:`set_read_only` is on, every call raises
:class:`ReadOnlyError` before touching the filesystem. Code elsewhere must not open files for
writing itself; it asks this module.

Targets are checked before anything is written (:func:`check_target`): a symlink is refused unless
the caller passes ``follow_symlinks=True`` (then the file it points at is replaced), and anything
that is not a regular file (a directory, FIFO, device node, socket) is refused and never replaced.
Files are written atomically: a temporary file beside the target, then ``os.replace``.
"""

from __future__ import annotations

import io
import logging
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:  # sqlite3 loads with the first database (recorder, replay), not with the app
    import sqlite3

__all__ = [
    "ReadOnlyError",
    "UnsafeTargetError",
    "check_target",
    "set_read_only",
    "is_read_only",
    "guard",
    "write_text",
    "write_bytes",
    "open_atomic",
    "make_dirs",
    "open_sqlite",
    "remove",
    "log_handler",
    "probe_writable",
]


class ReadOnlyError(PermissionError):
    """A write was attempted while the app runs in read-only mode."""


class UnsafeTargetError(OSError):
    """The target of a write is a symlink (not allowed), a directory, a device, a FIFO or a socket."""


_read_only = False


def set_read_only(value: bool) -> None:
    global _read_only
    _read_only = bool(value)


def is_read_only() -> bool:
    return _read_only


def guard(what: str) -> None:
    """Raise :class:`ReadOnlyError` if writes are off; ``what`` names the refused write."""
    if _read_only:
        raise ReadOnlyError(f"read-only mode: refused to write {what}")


def check_target(path: str | os.PathLike[str], *, follow_symlinks: bool = False) -> Path:
    """The path a write to ``path`` may replace; raises :class:`UnsafeTargetError` (one-line message)
    when it is a symlink (unless ``follow_symlinks``), not a regular file, or its folder is missing."""
    p = Path(path)
    if p.is_symlink():
        if not follow_symlinks:
            raise UnsafeTargetError(f"refusing to write through the symlink {p}")
        p = p.resolve()
    try:
        st = p.lstat()
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise UnsafeTargetError(f"refusing to replace {p}: {_kind(st.st_mode)}, not a regular file")
    parent = p.parent
    if parent.exists() and not parent.is_dir():
        raise UnsafeTargetError(f"cannot write {p}: {parent} is not a directory")
    return p


def probe_writable(path: str | os.PathLike[str]) -> Path:
    """Check, before a long run, that ``path`` could be written: :func:`check_target`, then a
    temporary file created and removed in the nearest existing folder on the way (permissions,
    a read-only mount, a full disk). Raises :class:`ReadOnlyError` or :class:`OSError`."""
    guard(str(path))
    p = check_target(path)
    folder = p.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise UnsafeTargetError(f"cannot write {p}: {folder} is not a directory")
    fd, tmp = tempfile.mkstemp(prefix=".cmdare-probe.", dir=folder)
    os.close(fd)
    os.unlink(tmp)
    return p


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket")):  # fmt: skip
        if test(mode):
            return name
    return "a special file"


def make_dirs(path: str | os.PathLike[str]) -> Path:
    p = Path(path)
    if not p.is_dir():
        guard(f"directory {p}")
        p.mkdir(parents=True, exist_ok=True)
    return p


def write_bytes(path: str | os.PathLike[str], data: bytes, *, follow_symlinks: bool = False) -> Path:
    """Atomically replace ``path`` with ``data`` (a temp file beside it, then rename); see
    :func:`check_target` for what is refused."""
    with open_atomic(path, follow_symlinks=follow_symlinks) as fh:
        fh.write(data)
    return check_target(path, follow_symlinks=follow_symlinks)


@contextmanager
def open_atomic(path: str | os.PathLike[str], *, follow_symlinks: bool = False) -> Iterator[BinaryIO]:
    """A binary file to write ``path``'s new content into, piece by piece: a temporary file beside
    it, renamed over ``path`` only when the block ends without an error (else removed: nothing
    half-written is left). Refused in read-only mode and where :func:`check_target` refuses."""
    guard(str(path))
    p = check_target(path, follow_symlinks=follow_symlinks)
    make_dirs(p.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=p.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        _keep_mode(p, tmp)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _keep_mode(target: Path, tmp: str) -> None:
    """A replaced file keeps its permission bits (a new one gets the umask's, not mkstemp's 0600)."""
    try:
        mode = target.stat().st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    os.chmod(tmp, mode)


def write_text(path: str | os.PathLike[str], text: str, *, follow_symlinks: bool = False) -> Path:
    return write_bytes(path, text.encode("utf-8"), follow_symlinks=follow_symlinks)


def remove(path: str | os.PathLike[str]) -> None:
    p = Path(path)
    guard(f"removal of {p}")
    p.unlink(missing_ok=True)


def open_sqlite(path: str | os.PathLike[str], *, writable: bool) -> sqlite3.Connection:
    """Open an SQLite database. ``writable=False`` opens it read-only (URI ``mode=ro``) and is
    always allowed; ``writable=True`` is refused in read-only mode."""
    import sqlite3

    p = Path(path)
    if not writable:
        return sqlite3.connect(f"file:{p}?mode=ro", uri=True, check_same_thread=False)
    guard(f"database {p}")
    p = check_target(p)
    make_dirs(p.parent)
    return sqlite3.connect(p, check_same_thread=False)


class _LazyFileHandler(logging.FileHandler):
    """Creates its folder and file only when the first record is written."""

    def _open(self) -> io.TextIOWrapper:
        guard(f"log file {self.baseFilename}")
        check_target(self.baseFilename)
        make_dirs(Path(self.baseFilename).parent)
        return super()._open()


def log_handler(path: str | os.PathLike[str]) -> logging.FileHandler:
    """A handler appending to the log file ``path``, created with the first record (refused in
    read-only mode, or when ``path`` is a symlink or not a regular file)."""
    guard(f"log file {path}")
    p = check_target(path)
    return _LazyFileHandler(p, encoding="utf-8", delay=True)
