"""tui/allocator.py: after ``settle_allocator`` a large block freed does not move glibc's mmap threshold, so
the next block of that size is mapped (given back when freed) rather than carved from the heap, where it
would stay resident; the session sets it when it starts. Each case runs in its own process (the setting
is process-wide); glibc's own ``mallinfo2`` says where the block lives."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's allocator only")

# a 4 MiB block allocated and freed (it was mapped: the dynamic threshold rises to its size unless fixed),
# then another: mapped (counted in hblkhd) or from the heap
PROBE = """
import ctypes, sys
libc = ctypes.CDLL(None)
class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]
if not hasattr(libc, "mallinfo2"):
    print("none"); sys.exit()
libc.mallinfo2.restype = MallInfo2
SETUP
a = bytearray(4 << 20)
del a
before = libc.mallinfo2().hblkhd
b = bytearray(4 << 20)
print("mapped" if libc.mallinfo2().hblkhd - before >= 4 << 20 else "heap")
"""


def _where(setup: str) -> str:
    code = PROBE.replace("SETUP", setup)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    where = out.stdout.strip()
    if where == "none":
        pytest.skip("glibc without mallinfo2 (before 2.33)")
    return where


def test_a_large_block_is_mapped_again_once_settled():
    assert _where("") == "heap"  # glibc's dynamic threshold: the case the setting is for
    assert _where("from cmdare.tui.allocator import settle_allocator\nassert settle_allocator()") == "mapped"


def test_the_session_settles_the_allocator_when_it_starts():
    setup = (
        "from cmdare.tui.options import SessionOptions\n"
        "from cmdare.tui.session import MonitorSession\n"
        "MonitorSession(SessionOptions.of(prometheus='http://127.0.0.1:9', refresh=2.0)).start()"
    )
    assert _where(setup) == "mapped"
