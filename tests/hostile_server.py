"""A hostile HTTP server on 127.0.0.1, for tests and ``benchmarks/adversarial.py``: every path is an
attack on a scraper or on a Prometheus API client.

    with HostileProcess() as srv: url = srv.url("/t/bomb2")   # own process (tests, benchmarks)
    with HostileServer() as srv: ...                              # in a thread
    python tests/hostile_server.py                                # own process: prints the port

Targets (``/t/<attack>``): ``ok``, ``bomb2`` (3.5 kB, ``Content-Encoding: gzip, gzip``, 4 GiB
inflated), ``bomb1`` (one gzip, 1 GiB inflated), ``huge`` (60 MB, streamed), ``slowloris`` (headers
one byte every 0.5 s), ``garbage``, ``slowparse<mib>`` (8 MiB by default that the parser is slow on), ``nan`` (NaN/inf/huge/negative values and job facts), ``biglabels``
(1 MB label values), ``implausible`` (GPU utilisation 5e28 %, 1e29 MiB, MemAvailable > MemTotal), ``esc`` (ESC sequences in labels). Prometheus API (``/p/<attack>/api/v1/query``):
``ok``, ``rows<n>`` (``n`` value rows; 250,000 by default: more than allowed), ``bytes`` (100 MB), ``badjson``, ``deep`` (nesting
100,000 deep), ``nanrows``, ``bomb2``, ``echo<k>`` (an error whose text holds the bearer token
received, at offset ``k``); the credential received (a bearer token, or the bare base64 of basic
auth) echoed into the fields that are cut short: ``etype<k>`` (``errorType``), ``rtype<k>``
(``resultType``), ``cenc<k>`` (``Content-Encoding``), each after ``k`` characters, ``urlenc`` (the
error, URL-encoded) and ``label<k>`` (every task label value). A scrape target ``/t/echo-<where>``
echoes the ``token=`` of its URL into ``cenc`` or ``label``. ``GET /methods`` lists the method of
every request so far (JSON).
"""

from __future__ import annotations

import asyncio
import functools
import gzip
import json
import random
import struct
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
import zlib
from collections.abc import Callable

HOST = "127.0.0.1"
STALL_S = 0.5  # slowloris: one header byte per this many seconds


def page(task: str = "worker-0", step: int = 100, extra: str = "") -> str:
    """A small valid exposition page."""
    return (
        f'cmdare_task_info{{job="hostile",task="{task}",role="worker",gpu="K80"}} 1\n'
        f'cmdare_job_info{{job="hostile",model="resnet",batch_size="64"}} 1\n'
        f"cmdare_worker_steps_total {step}\ncmdare_examples_total {step * 64}\ncmdare_global_step {step}\n"
        + extra
    )


@functools.cache
def gzip_zeros(mib: int) -> bytes:
    """A gzip stream of ``mib`` MiB of zeros, built from one flushed 1 MiB block (no 4 GiB pass).
    Its CRC is left 0: only a reader that inflates it all (no cap) would reach the trailer."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    one = c.compress(bytes(1 << 20)) + c.flush(zlib.Z_FULL_FLUSH)  # byte-aligned, self-contained
    trailer = struct.pack("<II", 0, (mib << 20) & 0xFFFFFFFF)
    return b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff" + one * mib + c.flush() + trailer


@functools.cache
def double_bomb() -> bytes:
    """~3.5 kB that inflates to 4 GiB through ``gzip, gzip``."""
    return gzip.compress(gzip_zeros(4096), 9)


@functools.cache
def slow_page(mib: int = 8) -> bytes:
    """Just under ``mib`` MiB of valid exposition with exemplars: the fast scanner hands it to
    prometheus_client's parser, which takes about 0.5 s a MiB over it."""
    line = 'node_cpu_seconds_total{cpu="0",mode="idle"} 1 # {a="b"} 1\n'
    return (page() + line * ((mib << 20) // len(line) - 100)).encode()


def _implausible_page() -> str:
    """A task page with its host's detail out of every range: GPU utilisation 5e28 % on one GPU (50 %
    on the other), 1e29 MiB of GPU memory, and more memory available than the host has."""
    dcgm = "".join(
        f'{name}{{gpu="{g}",UUID="GPU-{g}",modelName="NVIDIA A100-SXM4-40GB"}} {v}\n'
        for g, util, used in ((0, "5e28", "1e29"), (1, "50", "20000"))
        for name, v in (
            ("DCGM_FI_DEV_GPU_UTIL", util),
            ("DCGM_FI_DEV_FB_USED", used),
            ("DCGM_FI_DEV_FB_FREE", "20000"),
        )
    )
    node = "node_memory_MemTotal_bytes 8e9\nnode_memory_MemAvailable_bytes 9e9\n"
    return page(extra=dcgm + node)


def _vector(rows: list[dict]) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": rows}}).encode()


def _nan_page() -> str:
    return page(
        extra=(
            'cmdare_job_info{job="hostile",batch_size="NaN",params="1e400",target_steps="-5"} 1\n'
            "process_cpu_seconds_total NaN\ncmdare_stage_wait_seconds_total +Inf\n"
            'cmdare_stage_compute_seconds_total 1e308\ncmdare_ps_bytes_total{direction="in"} -7\n'
        )
    )


@functools.cache
def rows_body(n: int) -> bytes:
    """An answer of ``n`` distinct value rows (each its own task and series)."""
    rows = b",".join(
        b'{"metric":{"job":"j","instance":"h%d:1","cmdare_key":"cmdare_global_step"},'
        b'"value":[1.7e9,"%d"]}' % (i, i)
        for i in range(n)
    )
    return b'{"status":"success","data":{"resultType":"vector","result":[' + rows + b"]}}"


def _prom_rows(kind: str, query: str) -> bytes:
    """The answer to ``query``: task identities, job facts, down targets or values by query."""
    if kind.startswith("rows"):
        return rows_body(int(kind[4:] or 250_000))
    if query.startswith("cmdare_task_info"):
        return _vector(
            [
                {
                    "metric": {"__name__": "cmdare_task_info", "job": "j", "instance": "h:1", "task": "w0"},
                    "value": [time.time(), "1"],
                }
            ]
        )
    if "cmdare_job_info" in query:
        facts = {"batch_size": "NaN", "params": "-1"} if kind == "nanrows" else {"batch_size": "64"}
        return _vector([{"metric": {"job": "j", **facts}, "value": [time.time(), "1"]}])
    if "== 0" in query:
        return _vector([])
    bad = (
        ("cmdare_worker_steps_total", "NaN"),
        ("cmdare_examples_total", "-5"),
        ("cmdare_global_step", "1e308"),
    )
    good = (("__scrape_time", str(time.time())), ("cmdare_step_seconds_sum", "12"))
    rows = [*bad, *good] if kind == "nanrows" else good
    return _vector(
        [
            {"metric": {"job": "j", "instance": "h:1", "cmdare_key": k}, "value": [time.time(), v]}
            for k, v in rows
            if f'"{k}"' in query
        ]
    )


def _label_rows(kind: str, query: str, credential: str) -> bytes:
    """The ``ok`` answers, the task's identity with ``credential`` in every label value (after
    ``k`` characters: ``label<k>``)."""
    if not query.startswith("cmdare_task_info"):
        return _prom_rows("ok", query)
    v = "x" * int(kind[5:] or 0) + credential
    labels = {"job": "j" + v, "instance": "h:1", "task": "w" + v, "gpu": v, "region": v, "zone": v}
    return _vector([{"metric": {"__name__": "cmdare_task_info", **labels}, "value": [time.time(), "1"]}])


class HostileServer:
    def __init__(self, port: int = 0) -> None:
        self.port = port
        self.methods: list[str] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    def url(self, path: str) -> str:
        return f"http://{HOST}:{self.port}{path}"

    # --- serving -------------------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
                method, target = head.split(" ", 2)[:2]
                self.methods.append(method)
                headers = {
                    k.strip().lower(): v.strip()
                    for k, _, v in (line.partition(":") for line in head.split("\r\n")[1:] if line)
                }
                if int(headers.get("content-length", 0) or 0):
                    await reader.readexactly(int(headers["content-length"]))
                path, _, query = target.partition("?")
                params = urllib.parse.parse_qs(query)
                headers[":query"] = params.get("query", [""])[0]
                headers[":token"] = params.get("token", [""])[0]
                if not await self._route(path, headers, writer):
                    return
        except (
            asyncio.IncompleteReadError,
            ConnectionError,
            asyncio.LimitOverrunError,
            ValueError,
            asyncio.CancelledError,
        ):  # cancelled: the server is stopping
            pass
        finally:
            if not writer.is_closing():
                writer.close()

    async def _send(
        self,
        writer: asyncio.StreamWriter,
        body: bytes,
        *,
        status: int = 200,
        ctype: str = "text/plain",
        encoding: str = "",
    ) -> None:
        enc = f"Content-Encoding: {encoding}\r\n" if encoding else ""
        writer.write(
            f"HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\n{enc}"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()

    async def _route(self, path: str, headers: dict[str, str], writer: asyncio.StreamWriter) -> bool:
        parts = path.strip("/").split("/")
        if path == "/methods":
            await self._send(writer, json.dumps(self.methods).encode(), ctype="application/json")
            return True
        if len(parts) >= 2 and parts[0] == "t" and parts[1].startswith("echo-"):
            return await self._echo_target(parts[1][5:], headers[":token"], writer)
        if len(parts) >= 2 and parts[0] == "t":
            return await self._target(parts[1], writer)
        if len(parts) >= 2 and parts[0] == "p":
            return await self._prom(parts[1], headers, writer)
        await self._send(writer, b"not found", status=404)
        return True

    async def _target(self, kind: str, writer: asyncio.StreamWriter) -> bool:
        simple: dict[str, Callable[[], str]] = {
            "ok": page,
            "nan": _nan_page,
            "implausible": _implausible_page,
            "biglabels": lambda: page(extra=f'cmdare_global_step{{x="{"A" * (1 << 20)}"}} 5\n'),
            "esc": lambda: page(task="w\x1b]0;pwned\x07\x1b]52;c;ZXZpbA==\x07\x1b[2J"),
        }
        if kind in simple:
            await self._send(writer, simple[kind]().encode())
        elif kind == "bomb2":
            await self._send(writer, double_bomb(), encoding="gzip, gzip")
        elif kind.startswith("slowparse"):
            await self._send(writer, slow_page(int(kind[9:] or 8)))
        elif kind == "gz":
            await self._send(writer, gzip.compress(page().encode()), encoding="gzip")
        elif kind.startswith("enc-"):  # the page under the coding named (gzip and deflate applied)
            coding = urllib.parse.unquote(kind[4:])
            body = page().encode()
            body = (
                gzip.compress(body)
                if "gzip" in coding
                else zlib.compress(body)
                if "deflate" in coding
                else body
            )
            await self._send(writer, body, encoding=coding)
        elif kind == "bomb1":
            await self._send(writer, gzip_zeros(1024), encoding="gzip")
        elif kind == "garbage":
            await self._send(writer, b"\x00\xff{{" + random.Random(7).randbytes(4096) + b"\n}} 1 2\n")
        elif kind == "huge":
            await self._stream(writer, 60 << 20)
            return False
        elif kind == "slowloris":
            await self._drip(writer)
            return False
        else:
            await self._send(writer, b"no such attack", status=404)
        return True

    async def _echo_target(self, where: str, token: str, writer: asyncio.StreamWriter) -> bool:
        """A scrape target echoing the ``token=`` of its own URL (``cenc``: as its content coding,
        ``label``: in its task name)."""
        if where == "cenc":
            await self._send(writer, page().encode(), encoding="x" * 6 + token)
        else:
            await self._send(writer, page(task="w-" + token).encode())
        return True

    async def _echo_credential(self, kind: str, credential: str, writer: asyncio.StreamWriter) -> bool:
        """``credential`` echoed into a field the client cuts short (see the module docstring)."""
        js = "application/json"
        k = int("".join(c for c in kind if c.isdigit()) or 0)
        pad = "x" * k
        if kind.startswith("etype"):
            doc = {"status": "error", "errorType": pad + credential, "error": "no"}
            await self._send(writer, json.dumps(doc).encode(), status=400, ctype=js)
        elif kind.startswith("rtype"):
            doc = {"status": "success", "data": {"resultType": pad + credential, "result": []}}
            await self._send(writer, json.dumps(doc).encode(), ctype=js)
        elif kind.startswith("cenc"):
            await self._send(writer, _vector([]), ctype=js, encoding=pad + credential)
        elif kind == "urlenc":
            err = "refused " + urllib.parse.quote(credential, safe="")
            doc = {"status": "error", "errorType": "bad_data", "error": err}
            await self._send(writer, json.dumps(doc).encode(), status=400, ctype=js)
        else:  # label<k>: every label value of the task's identity carries it
            return False
        return True

    async def _prom(self, kind: str, headers: dict[str, str], writer: asyncio.StreamWriter) -> bool:
        js = "application/json"
        credential = headers.get("authorization", "").partition(" ")[2]
        if kind.startswith(("etype", "rtype", "cenc", "urlenc")):
            return await self._echo_credential(kind, credential, writer)
        if kind.startswith("label"):
            await self._send(writer, _label_rows(kind, headers[":query"], credential), ctype=js)
        elif kind.startswith("echo"):
            token = headers.get("authorization", "").partition(" ")[2]
            err = "x" * int(kind[4:] or 0) + token + " was refused"
            body = json.dumps({"status": "error", "errorType": "bad_data", "error": err}).encode()
            await self._send(writer, body, status=400, ctype=js)
        elif kind == "bytes":
            await self._stream(writer, 100 << 20)
            return False
        elif kind == "badjson":
            await self._send(writer, b'{"status": "success", "data": {"result": [' + b"\xff" * 64, ctype=js)
        elif kind == "deep":
            await self._send(writer, b"[" * 100_000 + b"]" * 100_000, ctype=js)
        elif kind == "bomb2":
            await self._send(writer, double_bomb(), ctype=js, encoding="gzip, gzip")
        else:
            await self._send(writer, _prom_rows(kind, headers[":query"]), ctype=js)
        return True

    async def _stream(self, writer: asyncio.StreamWriter, size: int) -> None:
        chunk = b"A" * (1 << 20)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size)
        for _ in range(size >> 20):
            writer.write(chunk)
            await writer.drain()  # raises once the client gives up

    async def _drip(self, writer: asyncio.StreamWriter) -> None:
        for byte in b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Slow: " + b"z" * 1000:
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(STALL_S)

    async def _start(self) -> None:
        double_bomb(), gzip_zeros(1024), rows_body(250_000)  # built before any request, not inside one
        self._server = await asyncio.start_server(self._handle, HOST, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    # --- thread mode (tests) -------------------------------------------------------------------
    def start(self) -> HostileServer:
        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self._start())
            self._ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="hostile-server", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        return self

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return

        async def shutdown() -> None:
            if self._server is not None:
                self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()
        self._loop = self._thread = None

    def __enter__(self) -> HostileServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class HostileProcess:
    """The server in its own process, so that its memory never counts as the client's."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.port = 0

    def url(self, path: str) -> str:
        return f"http://{HOST}:{self.port}{path}"

    def methods(self) -> list[str]:
        """Methods of the requests so far (the ``/methods`` request itself excluded)."""
        with urllib.request.urlopen(self.url("/methods"), timeout=5) as r:
            return json.load(r)[:-1]

    def __enter__(self) -> HostileProcess:
        self.proc = subprocess.Popen([sys.executable, __file__], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)


async def _main() -> None:
    srv = HostileServer()
    await srv._start()
    print(srv.port, flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    try:
        asyncio.run(_main())
    except KeyboardInterrupt:
        pass
