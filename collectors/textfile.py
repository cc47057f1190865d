"""Reading a small text file a user names (config, workload, geo plan, TF_CONFIG, CSV) safely:
only a regular file (a FIFO would block, ``/dev/zero`` never ends), at most ``limit`` bytes, UTF-8.
Every failure is a :class:`TextFileError` with a one-line message naming the file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

DEFAULT_LIMIT = 4 * 1024 * 1024


class TextFileError(ValueError):
    """The file cannot be used as text; ``str()`` is one line naming the file."""


class TextFileMissing(TextFileError):
    """There is no file at that path."""


def read_small_text(path: str | os.PathLike[str], limit: int = DEFAULT_LIMIT, encoding: str = "utf-8") -> str:
    """The text of ``path``; raises :class:`TextFileError`."""
    p = Path(path)
    try:
        with open(p, "rb", opener=_nonblocking) as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise TextFileError(f"{p}: not a regular file")
            data = fh.read(limit + 1)
    except FileNotFoundError:
        raise TextFileMissing(f"{p}: no such file") from None
    except OSError as exc:
        raise TextFileError(f"{p}: cannot read ({exc.strerror or type(exc).__name__})") from None
    except ValueError as exc:  # e.g. an embedded NUL in the name
        raise TextFileError(f"{p!r}: bad file name ({exc})") from None
    if len(data) > limit:
        raise TextFileError(f"{p}: larger than {limit // 1024} KiB")
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise TextFileError(f"{p}: not UTF-8 text (byte {exc.start})") from None


def _nonblocking(path: str, flags: int) -> int:
    """Open without blocking on a FIFO (the regular-file check then refuses it)."""
    return os.open(path, flags | os.O_NONBLOCK)
