"""Redaction runs before any cut (issue 15): a server that echoes the bearer token it received at
every offset 0..300 of its error text leaves no fragment (4 characters or more) of it in a poll's
error, the log, the recording or ``snapshot --json``."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import httpx
import pytest

from cmdare.collectors.clock import SystemClock
from cmdare.collectors.poller import Poller
from cmdare.collectors.prometheus.source import PrometheusAPISource
from cmdare.collectors.recording.recorder import Recorder
from cmdare.collectors.redaction import MAX_SCAN, redact_cut
from cmdare.collectors.store import Store
from cmdare.tui import cli
from tests.hostile_server import HostileProcess

pytestmark = pytest.mark.slow

TOKEN = "Q7vK2xZp9LmW4tRbHy3N"  # no 4-character piece of it occurs in ordinary text
OFFSETS = range(0, 301)


def fragments(text: str, secret: str = TOKEN) -> list[str]:
    """Every piece (4 characters or more) of ``secret`` found in ``text``."""
    return sorted({secret[i : i + 4] for i in range(len(secret) - 3) if secret[i : i + 4] in text})


@pytest.fixture(scope="module")
def hostile() -> Iterator[HostileProcess]:
    with HostileProcess() as srv:
        yield srv


@pytest.mark.parametrize("limit", [40, 160, 300])
def test_redact_cut_leaves_no_fragment_at_any_offset(limit):
    for k in range(0, 400):
        for text in ("x" * k + TOKEN + " tail", "x" * k + "Bearer " + TOKEN, "y" * k + f"?token={TOKEN}&a=1"):
            out = redact_cut(text, limit, [TOKEN])
            assert len(out) <= limit and not fragments(out), (k, out)


def test_a_secret_cut_by_the_scan_limit_leaves_no_head():
    for k in range(MAX_SCAN - len(TOKEN), MAX_SCAN + 1):
        text = "a" * 100 + "b" * (k - 100) + TOKEN
        assert not fragments(redact_cut(text, MAX_SCAN * 2, [TOKEN]))


async def test_echoed_token_at_every_offset_reaches_no_error_log_or_recording(hostile, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    rec = Recorder(tmp_path / "rec.sqlite")
    errors: list[str] = []
    async with httpx.AsyncClient() as client:
        for k in OFFSETS:
            src = PrometheusAPISource(hostile.url(f"/p/echo{k}"), token=TOKEN, timeout=2.0)
            poller = Poller([src], Store(), clock=SystemClock(), interval=0, sinks=[rec], client=client)
            cycle = await poller.poll_once()
            errors += [p.error or "" for p in cycle.polls] + list(cycle.source_errors.values())
    rec.close()
    assert any("was refused" in e for e in errors), "the server's echo must reach the message"
    assert not [e for e in errors if fragments(e)]
    assert not fragments(caplog.text)
    for f in tmp_path.iterdir():
        assert not fragments(f.read_bytes().decode("latin-1")), f.name


class _Raises:
    """A source whose exception text carries a bearer token at a given offset."""

    name = "raises"

    def __init__(self, k: int) -> None:
        self.k = k

    async def poll(self, client: httpx.AsyncClient, clock: object) -> list:
        raise RuntimeError("z" * self.k + f"Authorization: Bearer {TOKEN}")


async def test_poller_source_errors_are_redacted_before_the_cut(caplog):
    caplog.set_level(logging.DEBUG)
    for k in OFFSETS:
        cycle = await Poller([_Raises(k)], Store(), interval=0).poll_once()
        assert not fragments(cycle.source_errors["raises"]), k
    assert not fragments(caplog.text)


@pytest.mark.parametrize("k", [0, 120, 140, 150, 155, 160, 165, 200, 300])
def test_snapshot_json_holds_no_fragment(hostile, k, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PROMETHEUS_TOKEN", TOKEN)
    rec = tmp_path / "snap.sqlite"
    code = cli.main(
        [
            "snapshot",
            "--prometheus",
            hostile.url(f"/p/echo{k}"),
            "--samples",
            "1",
            "--interval",
            "0",
            "--timeout",
            "2",
            "--json",
            "--record",
            str(rec),
        ]
    )
    out = capsys.readouterr()
    assert code in (0, 1)
    assert "was refused" in out.out or "bad_data" in out.out  # the echo did reach the output
    assert not fragments(out.out) and not fragments(out.err)
    assert not any(fragments(p.read_bytes().decode("latin-1")) for p in tmp_path.iterdir())
