"""A sentinel bearer token and password, given the way users give them (PROMETHEUS_TOKEN, a
user:password URL, a ?token= query on a scrape target), reach the server but never a log line,
the recording, or the snapshot output."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from cmdare.tui import cli
from tests.fault_server import FaultServer
from tests.prom_server import FakePromAPI

pytestmark = pytest.mark.slow

TOKEN = "SENTINEL-TOKEN-7f3a9c"
PASSWORD = "SENTINEL-PW-41b2"
EMPTY = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}).encode()
ECHO = json.dumps({"status": "error", "errorType": "bad_data", "error": f"bad auth: Bearer {TOKEN}"}).encode()


def _leaks(text: str) -> list[str]:
    return [s for s in (TOKEN, PASSWORD) if s in text]


@pytest.mark.parametrize("answer", [EMPTY, ECHO], ids=["empty", "server-echoes-token"])
def test_sentinel_never_leaks(answer: bytes, tmp_path: Path, monkeypatch, capsys, caplog):
    monkeypatch.setenv("PROMETHEUS_TOKEN", TOKEN)
    caplog.set_level(logging.DEBUG)
    rec = tmp_path / "rec.sqlite"
    with FakePromAPI(answer) as prom, FaultServer(seed=5, faults={"ok": 1, "http500": 1}) as faults:
        host = prom.url.removeprefix("http://")
        code = cli.main(
            [
                "snapshot",
                "--prometheus",
                f"http://admin:{PASSWORD}@{host}",
                "--target",
                faults.url(0) + f"?token={TOKEN}",
                "--samples",
                "2",
                "--interval",
                "0",
                "--timeout",
                "2",
                "--json",
                "--record",
                str(rec),
            ]
        )
        sent = [h.get("Authorization", "") for h in prom.headers]
    assert code in (0, 1)
    assert any(TOKEN in h for h in sent), "the token must really be sent, or this test proves nothing"
    out = capsys.readouterr()
    assert not _leaks(out.out) and not _leaks(out.err)
    assert not _leaks(caplog.text)
    files = [p for p in tmp_path.iterdir() if p.name.startswith("rec.sqlite")]
    assert files and not any(_leaks(p.read_bytes().decode("latin-1")) for p in files)
