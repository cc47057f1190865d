"""The C allocator's hold on freed memory in a session that reads large answers (issue 34).

A large fleet's session decodes answers of megabytes now and then (a 100,000-row column, every task's
identity) and frees them at once. glibc's ``malloc`` serves a block past its mmap threshold (128 KiB at
start) with its own mapping, returned to the system when freed; but freeing such a block raises the
threshold to its size (up to 32 MiB: "dynamic mmap threshold"), so from then on blocks of that size come
from the heap, and a heap's free space is only given back from its top: the freed answers stay resident
between the long-lived tables allocated after them. Measured at 100,000 tasks (the session against the
synthetic API server, every task read once, a scratch harness of ``prometheus_scale.py``'s session,
2026-12-04): the heap held 138 MB of which 40 MB free, resident 418 MB; with the threshold fixed at 128 KiB
(:func:`settle_allocator`) the heap held 13 MB, resident 382 MB (docs/performance.md).

Fixing the threshold (``mallopt(M_MMAP_THRESHOLD, …)``, which also turns the dynamic adjustment off) costs
a mapping and its page faults for each large block instead of reusing heap space: the CPU per refresh is
measured beside it in the same row. Elsewhere than glibc (musl, macOS) nothing is done. Reaching
``mallopt`` loads ``ctypes`` when the session starts (~3 ms, measured; numpy loads it anyway once the
planner runs, after the first data frame)."""

from __future__ import annotations

import ctypes
import platform
from typing import Final

M_MMAP_THRESHOLD: Final = -3  # glibc's mallopt parameter (malloc.h)
MMAP_THRESHOLD: Final = 128 * 1024  # glibc's own starting threshold, kept fixed

_settled = False


def settle_allocator() -> bool:
    """Fix glibc's mmap threshold at :data:`MMAP_THRESHOLD` (once a process): blocks that large are
    mapped and given back when freed, whatever was freed before. Whether it is in force (False off glibc,
    or when glibc refused)."""
    global _settled
    if _settled:
        return True
    if platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    _settled = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1  # 1: done, 0: refused
    return _settled
