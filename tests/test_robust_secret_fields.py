"""Credentials echoed into the fields the app cuts short (issue 27, item 8), by a real hostile server
on 127.0.0.1 (``tests/hostile_server.py``): Prometheus' ``errorType`` and ``resultType``, an answer's
``Content-Encoding``, a task's label values, the error URL-encoded, and basic auth echoed as bare
base64 (without ``Basic``). Through the real source, poller and recorder, ``snapshot`` and the app:
no fragment of 4 characters or more of the token, the password or the base64 credential reaches a
status, the log, the recording, stdout or the screen."""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from cmdare.collectors.clock import SystemClock
from cmdare.collectors.poller import Poller
from cmdare.collectors.prometheus.source import PrometheusAPISource
from cmdare.collectors.recording.recorder import Recorder
from cmdare.collectors.scrape.source import ScrapeSource, ScrapeTarget
from cmdare.collectors.store import Store
from cmdare.tui import cli
from tests.hostile_server import HostileProcess

pytestmark = pytest.mark.slow

# '/', '+' and '=' make its URL-encoded form differ; no 4-character piece of it is ordinary text
TOKEN = "Gq7/Vx2+Kp9zLw4=Tb8nRj3Y"
USER, PASSWORD = "ops", "Zr5/Hw8+Qn2vXk6"
BASIC = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


def fragments(text: str, *secrets: str) -> list[str]:
    """Every piece (4 characters or more) of the secrets found in ``text``, in any letter case."""
    text = text.lower()
    secrets = secrets or (TOKEN, PASSWORD, BASIC)
    return sorted({p for s in secrets for i in range(len(s) - 3) if (p := s[i : i + 4].lower()) in text})


@pytest.fixture(scope="module")
def hostile() -> Iterator[HostileProcess]:
    with HostileProcess() as srv:
        yield srv


FIELD_ATTACKS = [
    *(f"etype{k}" for k in (0, 10, 20, 30, 35, 40)),
    *(f"rtype{k}" for k in (0, 5, 10, 15, 20)),
    *(f"cenc{k}" for k in (0, 5, 10, 15, 20)),
    "urlenc",
    *(f"label{k}" for k in (0, 150, 180, 190, 200)),
]


async def _poll_all(srv: HostileProcess, urls: list[str], tmp: Path, token: str | None) -> list[str]:
    """Poll each URL once through the real poller and a recorder; every text a poll produced."""
    rec = Recorder(tmp / "rec.sqlite")
    texts: list[str] = []
    async with httpx.AsyncClient() as client:
        for url in urls:
            src = PrometheusAPISource(url, token=token, timeout=2.0)
            poller = Poller([src], Store(), clock=SystemClock(), interval=0, sinks=[rec], client=client)
            cycle = await poller.poll_once()
            await src.aclose()
            texts += [p.error or "" for p in cycle.polls] + list(cycle.source_errors.values())
            texts += [repr(p.info) for p in cycle.polls if p.info is not None]
    rec.close()
    return texts


def _files_clean(tmp: Path, *secrets: str) -> None:
    for f in tmp.iterdir():
        assert not fragments(f.read_bytes().decode("latin-1"), *secrets), f.name


async def test_a_bearer_token_echoed_into_cut_fields_leaves_no_fragment(hostile, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    texts = await _poll_all(hostile, [hostile.url(f"/p/{a}") for a in FIELD_ATTACKS], tmp_path, TOKEN)
    joined = "\n".join(texts)
    for seen in ("***", "unsupported content coding", "unexpected result type", "refused"):
        assert seen in joined, f"the echo must reach the output ({seen}), or this test proves nothing"
    assert not fragments(joined, TOKEN), [t for t in texts if fragments(t, TOKEN)][:3]
    assert not fragments(caplog.text, TOKEN)
    _files_clean(tmp_path, TOKEN)


async def test_basic_auth_echoed_as_bare_base64_leaves_no_fragment(hostile, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    host = hostile.url("").removeprefix("http://")
    attacks = ["echo0", "echo150", "etype10", "cenc10", "label0", "label190"]
    pw = quote(PASSWORD, safe="")  # as a URL carries it
    texts = await _poll_all(hostile, [f"http://{USER}:{pw}@{host}/p/{a}" for a in attacks], tmp_path, None)
    joined = "\n".join(texts)
    assert "***" in joined and "was refused" in joined
    assert not fragments(joined, PASSWORD, BASIC), [t for t in texts if fragments(t, PASSWORD, BASIC)][:3]
    assert not fragments(caplog.text, PASSWORD, BASIC)
    _files_clean(tmp_path, PASSWORD, BASIC)


async def test_a_scrape_targets_token_echoed_into_its_coding_or_labels_leaves_no_fragment(hostile, tmp_path):
    rec = Recorder(tmp_path / "rec.sqlite")
    urls = [hostile.url(f"/t/echo-{w}?token={TOKEN}") for w in ("cenc", "label")]
    src = ScrapeSource([ScrapeTarget(u) for u in urls], timeout=2.0)
    poller = Poller([src], Store(), interval=0, sinks=[rec])
    cycle = await poller.poll_once()
    await poller.aclose()
    rec.close()
    cenc, label = cycle.polls
    assert not cenc.ok and "unsupported content coding" in (cenc.error or "")
    assert label.ok and label.info is not None and label.info.task == "w-***"
    assert not fragments(f"{cenc!r} {label!r}", TOKEN)
    _files_clean(tmp_path, TOKEN)


@pytest.mark.parametrize("attack", ["etype20", "rtype10", "cenc10", "label0", "label190"])
def test_snapshot_prints_and_records_no_fragment(hostile, attack, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PROMETHEUS_TOKEN", TOKEN)
    rec = tmp_path / "snap.sqlite"
    for extra in (["--json"], []):
        code = cli.main(["snapshot", "--prometheus", hostile.url(f"/p/{attack}"), "--samples", "1",
                         "--interval", "0", "--timeout", "2", "--record", str(rec), *extra])  # fmt: skip
        out = capsys.readouterr()
        assert code in (0, 1)
        assert not fragments(out.out, TOKEN) and not fragments(out.err, TOKEN), attack
        if attack.startswith("label"):
            assert "***" in out.out  # the task is shown, its labels redacted
    _files_clean(tmp_path, TOKEN)


async def test_the_app_shows_a_token_reflected_into_labels_redacted(hostile, monkeypatch):
    from cmdare.tui.app import CmdareApp
    from cmdare.tui.options import SessionOptions
    from cmdare.tui.session import MonitorSession
    from cmdare.tui.widgets.table import FilterTable

    monkeypatch.setenv("PROMETHEUS_TOKEN", TOKEN)
    opts = SessionOptions(prometheus=hostile.url("/p/label190"), refresh=0.2, read_only=True)
    app = CmdareApp(opts, MonitorSession(opts))
    async with app.run_test(size=(200, 45)) as pilot:
        table = app.query_one("#cluster-table", FilterTable)
        for _ in range(300):
            if table.row_count:
                break
            await pilot.pause(0.05)
        assert table.row_count == 1
        cells = " ".join(c.plain for r in range(table.row_count) for c in table.get_row_at(r))
        screen = " ".join([cells, str(app.query_one("#badges").render()), app.export_screenshot()])
        assert "***" in cells  # the task is shown, the token in its labels redacted
        assert not fragments(screen, TOKEN)
    await asyncio.sleep(0)


def test_a_remembered_credential_is_redacted_in_any_letter_case_and_encoding():
    from cmdare.collectors.prometheus.auth import BearerToken
    from cmdare.collectors.redaction import redact, redact_cut

    BearerToken(TOKEN)
    for echo in (TOKEN.lower(), TOKEN.upper(), quote(TOKEN, safe=""), quote(TOKEN, safe="").lower()):
        assert not fragments(redact(f"server says {echo}!"), TOKEN), echo
        assert not fragments(redact_cut("y" * 20 + echo, 30), TOKEN), echo
