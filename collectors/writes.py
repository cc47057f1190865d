"""The one place that performs every write to disk (recording, cache, config, exports, logs).

Read-only mode is a single switch here: once :func:`set_read_only` is on, every call raises
:class:`ReadOnlyError` before touching the filesystem. Code elsewhere must not open files for
writing itself; it asks this module.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from pathlib import Path

__all__ = [
    "ReadOnlyError",
    "set_read_only",
    "is_read_only",
    "guard",
    "write_text",
    "write_bytes",
    "make_dirs",
    "open_sqlite",
    "remove",
]


class ReadOnlyError(PermissionError):
    """A write was attempted while the app runs in read-only mode."""


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


def make_dirs(path: str | os.PathLike[str]) -> Path:
    p = Path(path)
    if not p.is_dir():
        guard(f"directory {p}")
        p.mkdir(parents=True, exist_ok=True)
    return p


def write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Atomically replace ``path`` with ``data`` (write to a temp file, then rename)."""
    p = Path(path)
    guard(str(p))
    make_dirs(p.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=p.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return p


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    return write_bytes(path, text.encode("utf-8"))


def remove(path: str | os.PathLike[str]) -> None:
    p = Path(path)
    guard(f"removal of {p}")
    p.unlink(missing_ok=True)


def open_sqlite(path: str | os.PathLike[str], *, writable: bool) -> sqlite3.Connection:
    """Open an SQLite database. ``writable=False`` opens it read-only (URI ``mode=ro``) and is
    always allowed; ``writable=True`` is refused in read-only mode."""
    p = Path(path)
    if not writable:
        return sqlite3.connect(f"file:{p}?mode=ro", uri=True, check_same_thread=False)
    guard(f"database {p}")
    make_dirs(p.parent)
    return sqlite3.connect(p, check_same_thread=False)
