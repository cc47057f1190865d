"""Reading an SQLite database without writing a byte anywhere, and without losing what its ``-wal``
holds (a recording being written, or left by a crash).

SQLite writes even to read: a WAL-mode database opened ``mode=ro`` gets ``-shm`` and ``-wal`` files
beside it; ``immutable=1`` writes none but reads the main file alone, so every cycle still in the
``-wal`` is lost (both measured: ``tests/test_replay_private.py``). :func:`open_private` reads the
database this way instead:

* no ``-wal``, or none of its frames committed: the main file holds everything; it is opened
  ``immutable=1`` (nothing written, nothing read into memory);
* else a private image in memory: the main file, then every page of the ``-wal``'s committed
  transactions put in its place (frames read in order, each checked as SQLite checks it: the
  header's salts and the running checksum; the last commit frame gives the size), handed to
  SQLite with ``deserialize``. Nothing is written, the original is never touched, and the image is
  a snapshot of the moment it was opened.

The image costs its size in memory (twice, briefly), so it is bounded (:data:`IMAGE_LIMIT`); past the
bound :class:`ImageTooLarge` says how large it would be, and the caller decides (the replay then reads
the main file alone and says what it left out, or lets SQLite read the ``-wal`` outside read-only mode).
"""

from __future__ import annotations

import functools
import os
import sqlite3
import stat
import struct
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy loads with the first -wal read, not with the replay's module
    import numpy as np

__all__ = ["IMAGE_LIMIT", "ImageTooLarge", "WalContent", "open_immutable", "open_private", "wal_content"]

IMAGE_LIMIT = 64 * 1024 * 1024  # bytes of a private image (held twice while SQLite takes it in)
_WAL_MAGIC = (0x377F0682, 0x377F0683)  # checksums little- / big-endian
_WAL_HEADER, _FRAME_HEADER = 32, 24


class ImageTooLarge(Exception):
    """The private image of a database with a non-empty ``-wal`` would exceed the limit."""

    def __init__(self, path: Path, what: str, size: int, limit: int) -> None:
        super().__init__(
            f"{path}: a private copy would take {size / 2**20:.1f} MiB ({what}; the limit is {limit / 2**20:.1f} MiB)"
        )
        self.size, self.limit = size, limit


@dataclass(frozen=True)
class WalContent:
    """What a ``-wal`` file adds to its database: the committed pages (page number → offset of its
    data in the ``-wal``), the database's size in pages after the last commit, and the page size."""

    pages: dict[int, int]
    db_pages: int
    page_size: int
    frames: int  # committed frames read (a page written twice counts twice)
    salts: bytes  # the header's salts when read (a restarted -wal has new ones)


def _checksum(data: bytes, s0: int, s1: int, big: bool) -> tuple[int, int]:
    """SQLite's WAL checksum of ``data`` (a multiple of 8 bytes), continued from ``(s0, s1)``."""
    words = struct.unpack(f"{'>' if big else '<'}{len(data) // 4}I", data)
    for i in range(0, len(words), 2):
        s0 = (s0 + words[i] + s1) & 0xFFFFFFFF
        s1 = (s1 + words[i + 1] + s0) & 0xFFFFFFFF
    return s0, s1


@functools.cache
def _powers(pairs: int) -> tuple[np.ndarray, ...]:
    """The entries ``A, B, C, D`` of ``M^j`` for ``j = 0..pairs`` (``M = [[1, 1], [1, 2]]``, mod 2^32), as
    uint64: one step of the checksum is ``(s0, s1) ← M·(s0, s1) + (x, x + y)``."""
    import numpy as np

    out = np.empty((4, pairs + 1), dtype=np.uint64)
    a, b, c, d = 1, 0, 0, 1
    for j in range(pairs + 1):
        out[:, j] = (a, b, c, d)
        a, b, c, d = (
            (a + c) & 0xFFFFFFFF,
            (b + d) & 0xFFFFFFFF,
            (a + 2 * c) & 0xFFFFFFFF,
            (b + 2 * d) & 0xFFFFFFFF,
        )
    return tuple(out)


def _checksum_page(data: bytes, s0: int, s1: int, big: bool) -> tuple[int, int]:
    """:func:`_checksum` of a page, on arrays: ``s_n = M^n·s_0 + Σ M^(n-k)·v_k``, summed in uint64 whose
    wrap-around keeps every result mod 2^32 exact (2^32 divides 2^64)."""
    import numpy as np

    words = np.frombuffer(data, dtype=">u4" if big else "<u4").astype(np.uint64)
    x, xy = words[0::2], words[0::2] + words[1::2]
    n = x.size
    a, b, c, d = (p[n - 1 :: -1] for p in _powers(n))  # M^(n-k) for k = 1..n
    a_n, b_n, c_n, d_n = (int(p[n]) for p in _powers(n))
    with np.errstate(over="ignore"):
        t0 = int((a * x + b * xy).sum(dtype=np.uint64))
        t1 = int((c * x + d * xy).sum(dtype=np.uint64))
    return (a_n * s0 + b_n * s1 + t0) & 0xFFFFFFFF, (c_n * s0 + d_n * s1 + t1) & 0xFFFFFFFF


def wal_content(wal: Path) -> WalContent | None:
    """The committed content of the ``-wal`` file ``wal`` (None: no such file, not a WAL, or nothing
    committed). Frames past the first one that fails its salt or checksum are not SQLite's either;
    frames written after the file's size was taken are left for a later look (the content read
    ends at a commit: a consistent snapshot)."""
    try:
        fh = open(wal, "rb", opener=_nonblocking)  # noqa: SIM115 - closed by the with below
    except OSError:
        return None
    with fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            return None
        head = fh.read(_WAL_HEADER)
        if len(head) < _WAL_HEADER:
            return None
        magic, version, page_size, _, salt1, salt2, c0, c1 = struct.unpack(">8I", head)
        if magic not in _WAL_MAGIC or page_size < 512 or page_size > 65536 or page_size & (page_size - 1):
            return None
        big = magic & 1 == 1
        s = _checksum(head[:24], 0, 0, big)
        if s != (c0, c1):
            return None
        pages: dict[int, int] = {}
        pending: dict[int, int] = {}
        db_pages, frames, seen, offset = 0, 0, 0, _WAL_HEADER
        while offset + _FRAME_HEADER + page_size <= st.st_size:
            frame = fh.read(_FRAME_HEADER + page_size)
            if len(frame) < _FRAME_HEADER + page_size:
                break
            page, commit, f_salt1, f_salt2, f0, f1 = struct.unpack(">6I", frame[:_FRAME_HEADER])
            if (f_salt1, f_salt2) != (salt1, salt2) or page < 1:
                break
            s = _checksum(frame[:8], *s, big)
            s = _checksum_page(frame[_FRAME_HEADER:], *s, big)
            if s != (f0, f1):
                break
            pending[page] = offset + _FRAME_HEADER
            seen += 1
            if commit:  # a transaction's last frame: everything up to here is committed
                pages.update(pending)
                pending.clear()
                db_pages, frames = commit, seen
            offset += _FRAME_HEADER + page_size
    if not pages:
        return None
    return WalContent(pages, db_pages, page_size, frames, head[16:24])


def _last_commit_bytes(wal: Path, size: int) -> int:
    """The database size the ``-wal``'s last whole frame gives when it ends a transaction of this
    ``-wal`` (its salts), else 0: a look at two headers, no checksum."""
    try:
        with open(wal, "rb", opener=_nonblocking) as fh:
            head = fh.read(_WAL_HEADER)
            if len(head) < _WAL_HEADER:
                return 0
            page_size: int = struct.unpack(">I", head[8:12])[0]
            if page_size < 512 or page_size > 65536:
                return 0
            frames = (size - _WAL_HEADER) // (_FRAME_HEADER + page_size)
            if frames < 1:
                return 0
            fh.seek(_WAL_HEADER + (frames - 1) * (_FRAME_HEADER + page_size))
            frame = fh.read(_FRAME_HEADER)
    except OSError:
        return 0
    if len(frame) < _FRAME_HEADER or frame[8:16] != head[16:24]:
        return 0
    count: int = struct.unpack(">I", frame[4:8])[0]
    return count * page_size


def _uri(path: Path, query: str) -> str:
    return f"file:{urllib.parse.quote(str(path.absolute()))}?{query}"


def open_immutable(path: Path) -> sqlite3.Connection:
    """``path`` opened ``immutable=1``: nothing written, no lock taken, the main file alone read."""
    return sqlite3.connect(_uri(path, "immutable=1"), uri=True, check_same_thread=False)


def open_private(path: str | os.PathLike[str], limit: int | None = None) -> sqlite3.Connection:
    """The database at ``path`` with its ``-wal``'s committed transactions, read without writing
    anything (see the module's docstring); raises :class:`ImageTooLarge`, ``OSError`` and
    ``sqlite3.Error``. ``limit``: the image's size at most (default :data:`IMAGE_LIMIT`). A ``-wal``
    restarted while it was read (a live writer's checkpoint) is read again."""
    p = Path(path)
    limit = IMAGE_LIMIT if limit is None else limit
    wal_path = Path(f"{p}-wal")
    for _ in range(3):
        try:
            wal_size = os.stat(wal_path).st_size
        except OSError:
            return open_immutable(p)
        if wal_size > 2 * limit:  # its checksums alone would take seconds to go through
            raise ImageTooLarge(p, f"its -wal is {wal_size / 2**20:.1f} MiB", wal_size, limit)
        claimed = _last_commit_bytes(wal_path, wal_size)
        if claimed > limit:  # what the last frame says, before seconds of checksums confirm it
            raise ImageTooLarge(p, "the size the -wal's last commit gives", claimed, limit)
        wal = wal_content(wal_path)
        if wal is None:
            return open_immutable(p)
        size = wal.db_pages * wal.page_size
        if size > limit:
            raise ImageTooLarge(p, f"{wal.frames:,} committed page(s) in its -wal", size, limit)
        image = _image(p, wal_path, wal)
        if image is not None:
            break
    else:
        raise sqlite3.DatabaseError(f"{p}: its -wal kept changing while it was read")
    image[18:20] = b"\x01\x01"  # a rollback-journal database now: an in-memory one has no WAL
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    try:
        conn.deserialize(image)
        del image
        conn.execute("PRAGMA query_only = 1")
    except BaseException:
        conn.close()
        raise
    return conn


def _image(p: Path, wal_path: Path, wal: WalContent) -> bytearray | None:
    """The main file with the committed ``-wal`` pages in place; None when the ``-wal`` was
    restarted meanwhile (its header changed: the offsets no longer hold those pages)."""
    image = bytearray(wal.db_pages * wal.page_size)
    view = memoryview(image)
    with open(p, "rb", opener=_nonblocking) as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise sqlite3.DatabaseError(f"{p}: not a regular file")
        fh.readinto(view)  # a shorter main file leaves zeros: those pages are in the -wal
    with open(wal_path, "rb", opener=_nonblocking) as fh:
        head = fh.read(_WAL_HEADER)
        for page, at in wal.pages.items():
            if page <= wal.db_pages:
                fh.seek(at)
                start = (page - 1) * wal.page_size
                fh.readinto(view[start : start + wal.page_size])
        fh.seek(0)
        same = fh.read(_WAL_HEADER) == head and head[16:24] == wal.salts
    view.release()
    return image if same else None


def _nonblocking(name: str, flags: int) -> int:
    return os.open(name, flags | os.O_NONBLOCK)
