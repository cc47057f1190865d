"""`cmdare-tui serve` really serves the app over HTTP, on 127.0.0.1 and read-only by default."""

from __future__ import annotations

import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.serve_process import start_serve

pytestmark = pytest.mark.slow


def test_serve_answers_on_loopback_with_a_read_only_app(isolated_home):
    proc, port = start_serve([])
    try:
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10).read().decode()
        assert "cmdare-tui" in body and "<html" in body.lower()
        if shutil.which("ss"):  # iproute2: which addresses the server listens on
            listening = subprocess.run(["ss", "-ltn"], capture_output=True, text=True).stdout
            lines = [ln for ln in listening.splitlines() if f":{port} " in ln]
            assert lines and all("127.0.0.1" in ln for ln in lines), lines
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert "read-only" in err and f"127.0.0.1:{port}" in err


def test_serve_hands_source_flags_on_and_refuses_a_bad_port():
    exe = Path(sys.executable).with_name("cmdare-tui")
    out = subprocess.run(
        [str(exe), "serve", "--dry-run", "--prometheus", "http://127.0.0.1:9090"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (
        out.returncode == 0
        and "--prometheus http://127.0.0.1:9090" in out.stdout
        and "--read-only" in out.stdout
    )
    bad = subprocess.run([str(exe), "serve", "--port", "0"], capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
