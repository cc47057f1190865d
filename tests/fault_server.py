"""A fault-injecting exposition server on 127.0.0.1: ``/t/<i>/metrics`` is target ``i``; each request
gets one fault drawn at random (seeded, per target and request) from :data:`FAULTS`.

    with FaultServer(seed=1) as srv: url = srv.url(3)            # in a thread (tests)
    python tests/fault_server.py --seed 1                         # own process: prints the port

``GET /faults`` returns ``{target: [[fault, arrival unix time], ...]}`` in request order, so a benchmark
can tell what each poll met (a poll that timed out before its request was even read has no entry). Expected outcome of each fault for the scraper: :data:`EXPECT`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import socket
import struct
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

HOST = "127.0.0.1"
# fault -> relative weight (a clean page is the most common answer)
FAULTS: dict[str, float] = {
    "ok": 8,
    "timeout": 1,
    "reset": 1,
    "truncated": 1,
    "garbage": 1,
    "huge": 0.3,
    "drip": 1,
    "http500": 1,
    "http503": 1,
    "flap": 1,
    "backwards": 1,
    "nan_inf": 1,
    "duplicates": 1,
}
# what a correct scraper makes of each: usable (ok), usable with a remark (noted), or failed
EXPECT: dict[str, str] = {
    "ok": "ok",
    "flap": "ok",
    "backwards": "ok",
    "nan_inf": "noted",
    "duplicates": "noted",
    "timeout": "failed",
    "reset": "failed",
    "truncated": "failed",
    "garbage": "failed",
    "huge": "failed",
    "drip": "failed",
    "http500": "failed",
    "http503": "failed",
}
HUGE_BYTES = 60 * 1024 * 1024  # >= 50 MB, streamed, never held in memory here
STALL_S = 5.0  # timeout / drip faults stall this long (the scraper's timeout must be shorter)


def page(target: int, step: int, *, task: str | None = None) -> str:
    """A small valid exposition page for one worker."""
    task = task or f"worker-{target}"
    return (
        "# TYPE cmdare_task_info gauge\n"
        f'cmdare_task_info{{job="faulty",role="worker",task="{task}",gpu="K80",region="us-east1",'
        f'provisioning="preemptible"}} 1\n'
        "# TYPE cmdare_worker_steps_total counter\n"
        f"cmdare_worker_steps_total {step}\n"
        "# TYPE cmdare_examples_total counter\n"
        f"cmdare_examples_total {step * 128}\n"
        "# TYPE cmdare_global_step gauge\n"
        f"cmdare_global_step {step * 4}\n"
        "# TYPE node_cpu_seconds_total counter\n"
        f'node_cpu_seconds_total{{cpu="0",mode="idle"}} {step}\n'
        f'node_cpu_seconds_total{{cpu="0",mode="user"}} {step / 2}\n'
    )


@dataclass
class _Target:
    requests: int = 0
    step: int = 0
    served: list[tuple[str, float]] = field(default_factory=list)


class FaultServer:
    def __init__(self, seed: int = 0, faults: dict[str, float] | None = None, port: int = 0) -> None:
        self.seed = seed
        self.faults = dict(faults or FAULTS)
        self.port = port
        self.targets: dict[int, _Target] = defaultdict(_Target)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._ready = threading.Event()

    def url(self, target: int) -> str:
        return f"http://{HOST}:{self.port}/t/{target}/metrics"

    def fault_for(self, target: int, k: int) -> str:
        """The fault request ``k`` (0-based) of ``target`` gets: reproducible from the seed."""
        rng = random.Random(f"{self.seed}/{target}/{k}")
        names = list(self.faults)
        return rng.choices(names, weights=[self.faults[n] for n in names])[0]

    # --- serving ------------------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                path = head.split(b" ", 2)[1].decode("latin-1")
                if path == "/faults":
                    body = json.dumps({str(k): v.served for k, v in self.targets.items()}).encode()
                    await self._send(writer, 200, body, "application/json")
                    continue
                parts = path.strip("/").split("/")
                if len(parts) != 3 or parts[0] != "t" or not parts[1].isdigit():
                    await self._send(writer, 404, b"not found\n")
                    continue
                if not await self._serve_target(int(parts[1]), writer):
                    return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError, IndexError):
            pass
        finally:
            if not writer.is_closing():
                writer.close()

    async def _send(
        self, writer: asyncio.StreamWriter, status: int, body: bytes, ctype: str = "text/plain; version=0.0.4"
    ) -> None:
        reason = {200: "OK", 404: "Not Found", 500: "Internal Server Error", 503: "Service Unavailable"}[
            status
        ]
        writer.write(
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()

    async def _serve_target(self, i: int, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; False when the connection was dropped on purpose."""
        tg = self.targets[i]
        fault = self.fault_for(i, tg.requests)
        tg.requests += 1
        tg.served.append((fault, time.time()))
        tg.step += 10
        step = tg.step
        if fault == "backwards":
            step = max(0, step - 1000)  # a counter going backwards (a restart, or a broken exporter)
        text = page(i, step, task=f"worker-{i}-b" if fault == "flap" and tg.requests % 2 else None)
        if fault == "nan_inf":
            text += 'cmdare_examples_total{replica="x"} NaN\nprocess_cpu_seconds_total +Inf\n'
        elif fault == "duplicates":
            text += f"cmdare_worker_steps_total {step}\ncmdare_global_step {step * 4}\n"
        body = text.encode()
        if fault == "http500":
            await self._send(writer, 500, b"internal error\n")
        elif fault == "http503":
            await self._send(writer, 503, b"unavailable\n")
        elif fault == "timeout":
            await asyncio.sleep(STALL_S)
            return False
        elif fault == "reset":
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body[: len(body) // 2]
            )
            await writer.drain()
            self._reset(writer)
            return False
        elif fault == "truncated":  # a whole response whose text stops mid-sample
            cut = text.index("{", text.index("node_cpu_seconds_total{")) + 1
            await self._send(writer, 200, body[:cut])
        elif fault == "garbage":
            rng = random.Random(f"g{self.seed}/{i}/{tg.requests}")
            await self._send(writer, 200, b"\x00\xff{{" + rng.randbytes(300) + b"\n}} 1 2 3\n")
        elif fault == "huge":
            await self._huge(writer)
            return False
        elif fault == "drip":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body))
            for k in range(len(body)):
                writer.write(body[k : k + 1])
                await writer.drain()
                await asyncio.sleep(STALL_S / 20)
        else:
            await self._send(writer, 200, body)
        return True

    async def _huge(self, writer: asyncio.StreamWriter) -> None:
        chunk = (b'node_filesystem_size_bytes{mountpoint="/x"} 1\n' * 20000)[: 1024 * 1024]
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % HUGE_BYTES)
        sent = 0
        while sent < HUGE_BYTES:
            writer.write(chunk)
            sent += len(chunk)
            await writer.drain()  # raises once the client gives up: the rest is never produced
        writer.close()

    @staticmethod
    def _reset(writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:  # SO_LINGER 0: close() sends RST instead of FIN
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._handle, HOST, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    # --- thread mode (tests) --------------------------------------------------------------------
    def start(self) -> FaultServer:
        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self._start())
            self._ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="fault-server", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        return self

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        me = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks() if t is not me]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
            self._loop.close()
            self._loop = self._thread = None

    def __enter__(self) -> FaultServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def _main(seed: int, port: int) -> None:
    srv = FaultServer(seed, port=port)
    await srv._start()
    print(srv.port, flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--port", type=int, default=0)
    a = ap.parse_args()
    try:
        asyncio.run(_main(a.seed, a.port))
    except KeyboardInterrupt:
        pass
