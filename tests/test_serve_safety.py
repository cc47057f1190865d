"""`cmdare-tui serve` is safe by default, against the real server and real app processes:
WebSockets only from the page's own Origin, a session cap, no static directory index, page URLs
built from the request's host, non-loopback binding refused without --allow-remote, every session's
process gone after an abrupt disconnect, and no secret on any process's command line."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import aiohttp
import pytest

EXE = str(Path(sys.executable).with_name("cmdare-tui"))
SECRET = "hunter2sekret"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (from /proc)."""
    parents: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parents[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parents.items() if pp == p]
        out += kids
        todo += kids
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


@pytest.fixture
def server(isolated_home: Path):
    port = _free_port()
    # a Prometheus URL with a password (given by environment, as the docs advise): the sessions must
    # get it, but never on a command line
    env = {**os.environ, "PROMETHEUS_URL": f"http://admin:{SECRET}@127.0.0.1:9/"}
    argv = [EXE, "serve", "--port", str(port), "--max-sessions", "1"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2).read()
            break
        except OSError:
            time.sleep(0.2)
    yield proc, port
    proc.terminate()
    proc.communicate(timeout=20)


def _status(url: str, headers: dict[str, str] | None = None) -> int:
    try:
        return urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=5).status
    except urllib.error.HTTPError as exc:
        return exc.code


async def _ws_status(port: int, origin: str | None) -> int:
    headers = {"Origin": origin} if origin else {}
    async with aiohttp.ClientSession() as s:
        try:
            async with s.ws_connect(f"http://127.0.0.1:{port}/ws?width=80&height=24", headers=headers):
                return 101
        except aiohttp.WSServerHandshakeError as exc:
            return exc.status


def test_serve_guards_origin_sessions_index_and_secrets(server):
    proc, port = server
    base = f"http://127.0.0.1:{port}"
    page = urllib.request.urlopen(base + "/", timeout=5).read().decode()
    assert f"ws://127.0.0.1:{port}/ws" in page
    # the page's URLs come from the host the browser used (so they work when bound to 0.0.0.0)
    req = urllib.request.Request(base + "/", headers={"Host": f"localhost:{port}"})
    assert f"ws://localhost:{port}/ws" in urllib.request.urlopen(req, timeout=5).read().decode()
    assert _status(base + "/static/") in (403, 404)  # no directory index
    assert _status(base + "/", {"Host": f"evil.example:{port}"}) == 403  # DNS rebinding
    assert asyncio.run(_ws_status(port, None)) == 403
    assert asyncio.run(_ws_status(port, "http://evil.example")) == 403

    async def session_then_abrupt_drop() -> tuple[int, list[int], str]:
        async with aiohttp.ClientSession() as s:
            ws = await s.ws_connect(f"{base}/ws?width=80&height=24", headers={"Origin": base})
            await ws.receive(timeout=30)  # the app has started and sent its first frame
            second = await _ws_status(port, base)  # over the cap of 1
            kids = _children(proc.pid)
            lines = " ".join(_cmdline(k) for k in kids)
            environ = b"".join(Path(f"/proc/{k}/environ").read_bytes() for k in kids)
            assert b"CMDARE_SESSION_ARGS" in environ  # the secret travels by environment (owner-only)
            ws._response.connection.transport.abort()  # no close frame: the browser tab was killed
            return second, kids, lines

    second, kids, cmdlines = asyncio.run(session_then_abrupt_drop())
    assert second == 503
    assert kids and "cmdare.tui.cli" in cmdlines
    assert SECRET not in cmdlines and SECRET not in _cmdline(proc.pid)
    deadline = time.monotonic() + 20
    while _children(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _children(proc.pid) == [], "a session process outlived its socket"
    assert oct(os.stat(f"/proc/{proc.pid}/environ").st_mode & 0o777) == "0o400"  # not world-readable


def test_serve_refuses_a_public_bind_without_allow_remote():
    out = subprocess.run([EXE, "serve", "--host", "0.0.0.0", "--dry-run"], capture_output=True, text=True,
                         timeout=30)  # fmt: skip
    assert out.returncode == 2 and "--allow-remote" in out.stderr and out.stderr.count("\n") == 1
    ok = subprocess.run([EXE, "serve", "--host", "0.0.0.0", "--allow-remote", "--dry-run"], capture_output=True,
                        text=True, timeout=30)  # fmt: skip
    assert ok.returncode == 0


def test_dry_run_prints_no_password():
    out = subprocess.run([EXE, "serve", "--dry-run", "--prometheus", f"http://admin:{SECRET}@127.0.0.1:9090",
                          "--target", f"http://127.0.0.1:9100/metrics?token={SECRET}"],
                         capture_output=True, text=True, timeout=30)  # fmt: skip
    assert out.returncode == 0 and SECRET not in out.stdout + out.stderr
    assert "CMDARE_SESSION_ARGS" in out.stdout


def test_stopping_the_server_ends_every_session(server):
    """The stock textual-serve server leaves its sessions' app processes running after SIGTERM (checked
    by hand on textual-serve 1.x); ours ends them."""
    proc, port = server
    base = f"http://127.0.0.1:{port}"

    async def open_then_stop_server() -> list[int]:
        async with aiohttp.ClientSession() as s:
            ws = await s.ws_connect(f"{base}/ws?width=80&height=24", headers={"Origin": base})
            await ws.receive(timeout=30)
            kids = _children(proc.pid)
            proc.terminate()
            await asyncio.to_thread(proc.wait, 20)
            return kids

    kids = asyncio.run(open_then_stop_server())
    assert kids
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{k}").exists() for k in kids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(Path(f"/proc/{k}").exists() and "cmdare" in _cmdline(k) for k in kids)


def test_bad_serve_flags_get_one_line_and_exit_2(isolated_home: Path):
    """Issue 27: a broken --allow-origin and a --host that does not resolve ended in "unexpected …" (exit 1);
    --record was ignored without a word; a port already taken said nothing before the server's first line."""
    from cli_harness import check_discipline, run_main

    src = ["--target", "http://127.0.0.1:9/metrics"]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        cases = [
            (["serve", *src, "--allow-origin", "http://[::1", "--dry-run"], "--allow-origin"),
            (["serve", *src, "--allow-origin", "http://127.0.0.1:8000/page", "--dry-run"], "without a path"),
            (["serve", *src, "--host", "no-such-host.invalid", "--allow-remote"], "does not resolve"),
            (["serve", *src, "--port", str(taken.getsockname()[1])], "cannot listen"),
            (["serve", *src, "--record", str(isolated_home / "r.sqlite"), "--dry-run"], "--record"),
        ]
        for argv, words in cases:
            code, out, err = run_main(argv)
            check_discipline(code, err, allowed=(2,))
            assert words in err and not out, (argv, err)
    assert not (isolated_home / "r.sqlite").exists()


def test_every_message_textual_js_sends_keeps_the_session(server):
    """textual.js sends one-item envelopes (["focus"], ["blur"]) that ended the session (issue 28 item 1); a kind
    the server does not know and a resize without numbers are ignored; a message that is not a JSON list ends it."""
    proc, port = server
    base = f"http://127.0.0.1:{port}"

    async def talk() -> tuple[list[str], bool]:
        async with aiohttp.ClientSession() as s:
            ws = await s.ws_connect(f"{base}/ws?width=80&height=24", headers={"Origin": base})
            await ws.receive(timeout=30)  # the app's first frame
            for envelope in (["focus"], ["blur"], ["focus"], ["selection", {}], ["resize", {"width": "80"}],
                             ["resize", {"width": True, "height": 2}], ["stdin", "r"], ["ping", "42"]):  # fmt: skip
                await ws.send_json(envelope)
            texts = []
            while not any(
                "pong" in t for t in texts
            ):  # everything before the ping was read, the session alive
                msg = await ws.receive(timeout=30)
                assert msg.type in (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY), msg
                if msg.type == aiohttp.WSMsgType.TEXT:
                    texts.append(msg.data)
            await ws.send_str("not json")
            while (msg := await ws.receive(timeout=30)).type in (
                aiohttp.WSMsgType.TEXT,
                aiohttp.WSMsgType.BINARY,
            ):
                pass
            return texts, msg.type in (
                aiohttp.WSMsgType.CLOSE,
                aiohttp.WSMsgType.CLOSED,
                aiohttp.WSMsgType.CLOSING,
            )

    texts, closed = asyncio.run(talk())
    assert '["pong", "42"]' in texts and closed
