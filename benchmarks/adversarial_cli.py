"""Adversarial suite, command line and files (issue 15): each attack runs the real ``cmdare-tui`` as a
process; per attack it prints held / degraded / failed, the process's peak RSS and its time, and the
ratios against ``cmdare-tui --version`` measured in the same run.

    python benchmarks/adversarial_cli.py [--quick]

held     = the documented exit status, one line on stderr (none for a success), no traceback, no
           escape byte on stdout or stderr, finished within its timeout, nothing written where it must not be;
degraded = the right exit status, but more than one line on stderr;
failed   = anything else (a traceback, a hang, a wrong status, an escape byte, a stray write).
Target: every row held, peak RSS <= 300 MB.

Issue 27's file cases: escape sequences in a workload's ``[current] region`` / ``[options] data_region``
(PS and sync), every file flag given a FIFO or ``/dev/zero``, a predict CSV with two ``model`` columns,
250,000 predict rows, a 60 MB line and a quote left open for 60 MB, a crashed WAL recording replayed read-only (by flag, environment and config:
nothing may be written beside it), a damaged recording, and ``--timeout 60`` against a target that
answers in 5.5 s (httpx's default 5 s capped it).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EX = REPO / "examples"
EXE = str(Path(sys.executable).with_name("cmdare-tui"))
TIMEOUT_S = 60.0
RSS_LIMIT_MB = 300.0


# Each attack is started by a small helper process, not by this one: a child's peak RSS (ru_maxrss) starts
# at its parent's resident size when it is forked, and this process grows to tens of MB building the files.
SPAWNER = r"""
import json, os, subprocess, sys, time
for line in sys.stdin:
    job = json.loads(line)
    with open(job["out"], "wb") as out, open(job["err"], "wb") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(job["argv"], cwd=job["cwd"], env=job["env"], stdout=out, stderr=err,
                                stdin=subprocess.DEVNULL)
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                code = os.waitstatus_to_exitcode(status)
                break
            if time.perf_counter() > t0 + job["timeout"]:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                code = -1
                break
            time.sleep(0.02)
        proc.returncode = 0  # reaped here: keep Popen from waiting again
    print(json.dumps([code, time.perf_counter() - t0, usage.ru_maxrss / 1024]), flush=True)
"""


class Spawner:
    """The helper process that starts each attack (see :data:`SPAWNER`)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", SPAWNER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)  # fmt: skip

    def run(self, argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, bytes, bytes, float, float]:
        """(status, stdout, stderr, seconds, peak RSS MB) of one ``cmdare-tui`` process."""
        import json

        with tempfile.TemporaryDirectory() as tmp:
            out, err = Path(tmp) / "out", Path(tmp) / "err"
            job = {"argv": [EXE, *argv], "cwd": str(cwd), "env": env, "out": str(out), "err": str(err),
                   "timeout": TIMEOUT_S}  # fmt: skip
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.proc.stdin.write(json.dumps(job) + "\n")
            self.proc.stdin.flush()
            code, secs, mb = json.loads(self.proc.stdout.readline())
            return code, out.read_bytes(), err.read_bytes(), secs, mb

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


Attack = tuple[str, list[str], set[int], Callable[[], bool], dict[str, str]]


def attacks(d: Path, slow_url: str) -> list[Attack]:
    """(name, argv, allowed statuses, check that nothing was written where it must not be, extra
    environment)."""
    w = (EX / "workload-resnet32.toml").read_text()
    g = (EX / "geo-3dc.toml").read_text()
    files = {
        "huge.toml": w.replace("batch_size = 128", "batch_size = " + "9" * 400),
        "maxps.toml": w.replace("max_ps = 4", "max_ps = 999999999999"),
        "geo1e308.toml": g.replace("params = 13e9", "params = 1e308"),
        "geomarkup.toml": g.replace('"europe"', '"[/][link=file:///etc/passwd]x\\u001b]52;c;aGk=\\u0007"'),
        "cfg-int.toml": "[sources]\ntensorboard = 5\n",
        "cfg-str.toml": '[sources]\njsonl = "logs"\n',
        "cfg-url.toml": '[sources]\nprometheus = "http://127.0.0.1:99999"\n',
        "cfg-deep.toml": "a = " + "[" * 5000 + "]" * 5000 + "\n",
        "big.csv": "model,model_flops,params,batch_size,gpu,workers,ps\n"
        + "x,1e308,1e308,9e99,P100,9e99,1\n",
        "esc.csv": "model,model_flops,params,batch_size,gpu,workers,ps\n\x1b]0;pwned\x07,1e9,1e6,32,\x1b[2JP100,1,1\n",
        "rec.db": "SQLite format 3\x00" + "\xff" * 5000,
    }
    for name, text in files.items():
        (d / name).write_bytes(text.encode("utf-8", "surrogateescape"))
    (d / "latin1.csv").write_bytes("model,model_flops\nréseau,1\n".encode("latin-1"))
    os.mkfifo(d / "fifo")
    (d / "keep.txt").write_text("keep\n")
    (d / "link.csv").symlink_to(d / "keep.txt")
    kept = lambda: (d / "keep.txt").read_text() == "keep\n" and (d / "link.csv").is_symlink()  # noqa: E731
    none = lambda: True  # noqa: E731
    p = str(d)
    return [(*a, {}) for a in [
        ("--target port 99999", ["--target", "http://127.0.0.1:99999/metrics"], {2}, none),
        ("--record under /proc (TUI)", ["--demo", "--record", "/proc/x.db"], {2}, none),
        ("--record through a symlink", ["snapshot", "--demo", "--record", f"{p}/link.csv"], {2}, kept),
        ("--config is a FIFO", ["--config", f"{p}/fifo", "--demo"], {2}, none),
        ("--workload /dev/zero", ["plan", "--workload", "/dev/zero"], {2}, none),
        ("workload: 400-digit integer", ["plan", "--workload", f"{p}/huge.toml"], {2}, none),
        ("workload: max_ps 1e12", ["plan", "--workload", f"{p}/maxps.toml"], {2}, none),
        ("geo: params = 1e308", ["plan", "--geo", f"{p}/geo1e308.toml"], {2}, none),
        ("geo: DC named with markup+OSC 52", ["plan", "--geo", f"{p}/geomarkup.toml", "--top", "1"], {0, 2}, none),
        ("config: tensorboard = 5", ["--config", f"{p}/cfg-int.toml", "--demo"], {2}, none),
        ("config: a string for a list", ["--config", f"{p}/cfg-str.toml", "--demo"], {2}, none),
        ("config: bad port", ["--config", f"{p}/cfg-url.toml"], {2}, none),
        ("config: 5000-deep array", ["--config", f"{p}/cfg-deep.toml"], {2}, none),
        ("predict: latin-1 CSV", ["predict", "--input", f"{p}/latin1.csv"], {2}, none),
        ("predict: 1e308 values", ["predict", "--input", f"{p}/big.csv"], {2}, none),
        ("predict: escapes in cells", ["predict", "--input", f"{p}/esc.csv"], {0, 2}, none),
        ("predict --output DIR", ["predict", "--input", str(EX / "predict.csv"), "--output", p], {2}, none),
        ("predict --output /dev/null", ["predict", "--input", str(EX / "predict.csv"), "--output", "/dev/null"], {2}, none),
        ("predict --output symlink", ["predict", "--input", str(EX / "predict.csv"), "--output", f"{p}/link.csv"], {2}, kept),
        ("predict --output FIFO", ["predict", "--input", str(EX / "predict.csv"), "--output", f"{p}/fifo"], {2}, none),
        ("--replay garbage SQLite", ["snapshot", "--replay", f"{p}/rec.db"], {2}, none),
        ("prices --read-only (no cache)", ["prices", "--read-only", "--billing-endpoint", "http://127.0.0.1:9"], {0},
         lambda: not (d / "home" / ".cache").exists()),
        ("serve --host 0.0.0.0 (no flag)", ["serve", "--host", "0.0.0.0"], {2}, none),
        ("serve --dry-run with a password", ["serve", "--dry-run", "--prometheus", "http://u:hunter2@127.0.0.1:9"], {0},
         none),
        ("serve --allow-origin 'http://[::1'", ["serve", "--dry-run", "--allow-origin", "http://[::1"], {2}, none),
        ("serve --host unresolvable", ["serve", "--host", "no-such-host.invalid", "--allow-remote"], {2}, none),
        ("serve --record (ignored once)", ["serve", "--dry-run", "--record", f"{p}/serve.db"], {2},
         lambda: not (d / "serve.db").exists()),
    ]] + file_attacks(d, slow_url)  # fmt: skip


def file_attacks(d: Path, slow_url: str) -> list[Attack]:
    """Issue 27's cases (see the module's docstring)."""
    p, ps, sync = (
        str(d),
        (EX / "workload-resnet32.toml").read_text(),
        (EX / "workload-sync-ddp.toml").read_text(),
    )
    osc = "\\u001b]0;PWNED\\u0007\\u001b]52;c;aGk=\\u0007"
    files = {
        "osc-region.toml": ps.replace('region = "us-central1"', f'region = "us-central1{osc}"'),
        "osc-data.toml": ps.replace('data_region = "us-central1"', f'data_region = "x{osc}"'),
        "osc-sync.toml": sync.replace('region = "us-central1"', f'region = "us-central1{osc}"', 1),
        "osc-sync-data.toml": sync.replace(
            "[options]", f'[options]\ndata_region = "x{osc}"\ndataset_gb = 1', 1
        ),
        "twomodel.csv": "model,model_flops,params,batch_size,gpu,workers,ps,model\nresnet32,1.66e9,1.86e6,128,P100,4,1,x\n",
        "rows250k.csv": "model,model_flops,params,batch_size,gpu,workers,ps\n"
        + "".join(
            f"ResNet-32,1658696889,1857722,128,{('K80', 'P100', 'V100', 'T4')[i % 4]},{1 + i % 64},{1 + i % 8}\n"
            for i in range(250_000)
        ),
        "ro.toml": "read_only = true\n",
        "longline.csv": "model,model_flops,params,batch_size,gpu,workers,ps\n"
        + "a" * 60_000_000
        + "\U0001f600\n",
        "openquote.csv": "model,model_flops,params,batch_size,gpu,workers,ps\n"
        + '"x'
        + '\n","x' * 12_000_000
        + '"\n',
    }
    for name, text in files.items():
        (d / name).write_text(text)
    (d / "rec").mkdir()
    crashed_recording(d / "rec")
    damaged_recording(d / "damaged.sqlite")
    unchanged = lambda: sorted(x.name for x in (d / "rec").iterdir()) == ["r.sqlite", "r.sqlite-wal"]  # noqa: E731
    none = lambda: True  # noqa: E731
    rec = str(d / "rec" / "r.sqlite")
    replay = ["snapshot", "--replay", rec, "--replay-speed", "1000", "--samples", "14", "--interval", "0"]
    out: list[Attack] = []
    for name in ("osc-region", "osc-data", "osc-sync", "osc-sync-data"):
        out.append((f"workload: OSC 0/52 in {name[4:]}", ["plan", "--workload", f"{p}/{name}.toml", "--top", "3"],
                    {0}, none, {}))  # fmt: skip
    for special in (f"{p}/fifo", "/dev/zero"):
        kind = "FIFO" if "fifo" in special else "/dev/zero"
        for flag, argv in (("predict --input", ["predict", "--input", special]),
                           ("plan --workload", ["plan", "--workload", special]),
                           ("plan --geo", ["plan", "--geo", special]),
                           ("--tf-config", ["snapshot", "--tf-config", special, "--samples", "1"]),
                           ("--prometheus-token-file", ["snapshot", "--prometheus", "http://127.0.0.1:9",
                                                        "--prometheus-token-file", special, "--samples", "1"]),
                           ("--replay", ["snapshot", "--replay", special]),
                           ("--jsonl", ["snapshot", "--jsonl", special, "--samples", "1"])):  # fmt: skip
            out.append((f"{flag} {kind}", argv, {2}, none, {}))
    out += [
        ("predict: two model columns", ["predict", "--input", f"{p}/twomodel.csv"], {2}, none, {}),
        ("predict: 250,000 rows", ["predict", "--input", f"{p}/rows250k.csv"], {0}, none, {}),
        ("predict: a 60 MB line ending in 😀", ["predict", "--input", f"{p}/longline.csv"], {2}, none, {}),
        ("predict: a quote open for 60 MB", ["predict", "--input", f"{p}/openquote.csv"], {2}, none, {}),
        ("replay WAL recording --read-only", [*replay, "--read-only"], {0}, unchanged, {}),
        ("replay WAL recording, env read-only", replay, {0}, unchanged, {"CMDARE_READ_ONLY": "1"}),
        ("replay WAL recording, config r-o", [*replay, "--config", f"{p}/ro.toml"], {0}, unchanged, {}),
        ("replay a damaged recording", ["snapshot", "--replay", f"{p}/damaged.sqlite"], {2}, none, {}),
        ("--timeout 60, target takes 5.5 s", ["snapshot", "--target", slow_url, "--timeout", "60", "--samples", "1"],
         {0}, none, {}),
    ]  # fmt: skip
    return out


def crashed_recording(folder: Path) -> None:
    """``folder/r.sqlite`` and its ``-wal`` as a crash leaves them: 6 cycles in the file, 6 more only in the
    ``-wal`` (the project's Recorder wrote the first; SQLite's own writer, never closed, the rest)."""
    import shutil
    import sqlite3

    from cmdare.collectors import metrics as M
    from cmdare.collectors.poller import Cycle
    from cmdare.collectors.recording.recorder import Recorder
    from cmdare.collectors.samples import TaskInfo, TaskPoll

    live = folder.parent / f"live-{folder.name}.sqlite"
    rec = Recorder(live, interval=2.0)
    for i in range(6):
        t = 1.7e9 + 2 * i
        poll = TaskPoll(
            source="http://w0/metrics",
            t=t,
            ok=True,
            info=TaskInfo(job="j", task="w0"),
            values={M.K_WORKER_STEPS: 10.0 * i},
        )
        rec.record(Cycle(t=t, elapsed=0.01, polls=[poll], transitions=[]))
    rec.close()
    c = sqlite3.connect(live)
    c.execute("PRAGMA wal_autocheckpoint = 0")
    with c:
        c.execute("INSERT INTO cycles SELECT id + 6, t + 12, elapsed, source_errors FROM cycles")
        c.execute(
            "INSERT INTO polls SELECT cycle + 6, seq, source, t + 12, ok, info, vals, error, facts, elapsed FROM polls"
        )
    shutil.copy(live, folder / "r.sqlite")
    shutil.copy(f"{live}-wal", folder / "r.sqlite-wal")
    c.close()


def damaged_recording(path: Path) -> None:
    """A recording whose polls table's root page is overwritten."""
    import sqlite3

    crashed_recording_dir = path.parent / "damaged-src"
    crashed_recording_dir.mkdir()
    crashed_recording(crashed_recording_dir)
    c = sqlite3.connect(crashed_recording_dir / "r.sqlite")  # folds the -wal in
    root = c.execute("SELECT rootpage FROM sqlite_master WHERE name = 'polls'").fetchone()[0]
    size = c.execute("PRAGMA page_size").fetchone()[0]
    c.close()
    data = bytearray((crashed_recording_dir / "r.sqlite").read_bytes())
    data[(root - 1) * size : root * size] = b"\xff" * size
    path.write_bytes(bytes(data))


class SlowExporter:
    """A /metrics page on 127.0.0.1 that takes 5.5 s to answer (past httpx's default 5 s)."""

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        page = b'# TYPE cmdare_task_info gauge\ncmdare_task_info{job="j",task="worker-0",role="worker"} 1\n'

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                time.sleep(5.5)
                try:
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(page)))
                    self.end_headers()
                    self.wfile.write(page)
                except OSError:
                    pass

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/metrics"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (from /proc)."""
    parent = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parent[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    out, todo = [pid], [pid]
    while todo:
        cur = todo.pop()
        kids = [c for c, p in parent.items() if p == cur]
        out += kids
        todo += kids
    return out


def _hwm_mb(pids: list[int]) -> float:
    """Sum of the peak RSS (VmHWM) of live processes."""
    total = 0
    for p in pids:
        try:
            line = next(
                ln for ln in Path(f"/proc/{p}/status").read_text().splitlines() if ln.startswith("VmHWM")
            )
            total += int(line.split()[1])
        except (OSError, StopIteration):
            pass
    return total / 1024


async def _serve_attacks(port: int, server_pid: int) -> list[tuple[str, bool, str]]:
    """Against a real `serve --max-sessions 4`: a cross-origin page, a same-origin page's focus/blur and huge
    resize, 12 sessions at once, abrupt drops."""
    import asyncio

    import aiohttp

    base = f"http://127.0.0.1:{port}"
    rows = []
    async with aiohttp.ClientSession() as s:
        try:
            await s.ws_connect(f"{base}/ws", headers={"Origin": "http://evil.example"})
            rows.append(("serve: cross-origin WebSocket", False, "accepted"))
        except aiohttp.WSServerHandshakeError as exc:
            rows.append(("serve: cross-origin WebSocket", exc.status == 403, f"HTTP {exc.status}"))
        # a same-origin page: one-item envelopes (a click, a tab switch), then a 20,000 x 20,000 terminal asked for
        ws = await s.ws_connect(f"{base}/ws?width=80&height=24", headers={"Origin": base})
        await ws.receive(timeout=60)
        for envelope in (["focus"], ["blur"], ["resize", {"width": 20000, "height": 20000}], ["ping", "1"]):
            await ws.send_json(envelope)
        alive = False
        for _ in range(10_000):  # frames until the pong: the session read every message and lives
            msg = await ws.receive(timeout=60)
            if msg.type not in (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY):
                break
            if msg.type == aiohttp.WSMsgType.TEXT and "pong" in msg.data:
                alive = True
                break
        drawn = False  # until the app draws its capped size's last row
        while alive and not drawn:
            try:
                msg = await ws.receive(timeout=60)
            except TimeoutError:
                break
            raw = msg.data if isinstance(msg.data, bytes) else str(msg.data).encode()
            drawn = b"\x1b[200;" in raw
        mb = max(_hwm_mb([k]) for k in _tree(server_pid)[1:]) if len(_tree(server_pid)) > 1 else 0.0
        rows.append(("serve: focus/blur, resize 20000x20000", alive and mb <= RSS_LIMIT_MB,
                     f"session {'alive' if alive else 'ended'}, drew {'500x200' if drawn else '?'}, "
                     f"its peak RSS {mb:.0f} MB"))  # fmt: skip
        await ws.close()
        for _ in range(100):
            if len(_tree(server_pid)) == 1:
                break
            await asyncio.sleep(0.1)
        opened, refused = [], 0
        for _ in range(12):
            try:
                opened.append(await s.ws_connect(f"{base}/ws?width=80&height=24", headers={"Origin": base}))
            except aiohttp.WSServerHandshakeError:
                refused += 1
        await asyncio.gather(*(ws.receive(timeout=60) for ws in opened), return_exceptions=True)
        mb = _hwm_mb(_tree(server_pid))
        rows.append(
            (
                "serve: 12 sessions asked, cap 4",
                len(opened) == 4 and mb <= RSS_LIMIT_MB * 2,
                f"{len(opened)} opened, {refused} refused, {mb:.0f} MB all processes",
            )
        )
        for ws in opened:  # the tabs are killed: no close frame
            ws._response.connection.transport.abort()
    for _ in range(100):
        if len(_tree(server_pid)) == 1:
            break
        await asyncio.sleep(0.1)
    left = len(_tree(server_pid)) - 1
    rows.append(("serve: 4 tabs killed", left == 0, f"{left} session processes left after drops"))
    return rows


def serve_suite(d: Path, env: dict[str, str]) -> int:
    """Print the serve rows; returns how many were not held."""
    import asyncio
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([EXE, "serve", "--port", str(port), "--demo"], cwd=d, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        for _ in range(150):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        t0 = time.perf_counter()
        rows = asyncio.run(_serve_attacks(port, proc.pid))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    print(f"serve attacks (one server, {time.perf_counter() - t0:.1f} s in all):")
    for name, ok, detail in rows:
        print(f"{name:<36} {'held' if ok else 'failed':<9} {detail}")
    return sum(not ok for _, ok, _ in rows)


def verdict(code: int, out: bytes, err: bytes, allowed: set[int], clean: bool) -> str:
    lines = err.decode("utf-8", "replace").splitlines()
    text = (out + err).decode("utf-8", "replace")  # C1 CSI is a character: its byte 0x9b occurs inside UTF-8
    bad = (code not in allowed or b"Traceback" in err or any(c in text for c in ("\x1b", "\x07", "\x9b"))
           or b"hunter2" in out + err or not clean or b"unexpected" in err)  # fmt: skip
    if bad:
        return "failed"
    return "held" if len(lines) <= 1 else "degraded"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--quick", action="store_true", help="accepted for run_all.py (the suite is already short)"
    )
    ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "home").mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "CMDARE_", "PROMETHEUS_"))}
        env.update(HOME=str(d / "home"), TERM="xterm-256color")
        spawner = Spawner()
        _, _, _, base_s, base_mb = spawner.run(["--version"], d, env)
        print(f"baseline `cmdare-tui --version`: {base_s:.2f} s, {base_mb:.0f} MB peak RSS")
        print(
            f"{'attack':<36} {'verdict':<9} {'exit':>4} {'time s':>7} {'×base':>6} {'RSS MB':>7} {'×base':>6}"
        )
        slow = SlowExporter()
        failed, suite = 0, attacks(d, slow.url)
        for name, args, allowed, clean, extra in suite:
            code, out, err, secs, mb = spawner.run(args, d, {**env, **extra})
            v = verdict(code, out, err, allowed, clean())
            v = "failed" if mb > RSS_LIMIT_MB else v
            failed += v != "held"
            print(
                f"{name:<36} {v:<9} {code:>4} {secs:>7.2f} {secs / base_s:>6.1f} {mb:>7.0f} {mb / base_mb:>6.1f}"
            )
        slow.server.shutdown()
        spawner.close()
        failed += serve_suite(d, env)
        total = len(suite) + 3
        print(f"{failed} of {total} attacks not held" if failed else f"all {total} attacks held")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
