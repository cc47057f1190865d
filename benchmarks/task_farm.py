"""A farm of N synthetic training-task exporters served by ONE process on ONE loopback port: task ``i``
answers at ``/t/<i>`` with the series a data-parallel worker's cmdare exporter publishes (identity,
job facts, global step, worker steps, examples, step-time sum/count, preempted, process CPU: 10 series;
no histogram buckets, no node_exporter/DCGM), counters moving with time at a per-task rate.

Prometheus reads them through a file_sd list (:func:`file_sd`) in which every target sets its own
``instance`` label (``10.<a>.<b>.<c>:9400``) and ``__metrics_path__``: 10,000 distinct scrape targets
that cost one process and one port, not 10,000 (benchmarks/app_scale.py).

    python benchmarks/task_farm.py 10000        # prints the port, then serves
"""

from __future__ import annotations

import asyncio
import json
import re
import resource
import time
from pathlib import Path

from child_server import ChildServer

START = time.time()
STEP_S = 0.25  # seconds a step (4 steps/s a task), the slowest tasks up to 2x that
PAGE = (
    "# TYPE cmdare_task_info gauge\n"
    'cmdare_task_info{{job="big",task="worker-{i}",role="{role}",gpu="V100",region="us-central1",'
    'provisioning="spot"}} 1\n'
    "# TYPE cmdare_job_info gauge\n"
    'cmdare_job_info{{job="big",model="ResNet-50",params="2.56e+07",batch_size="32",sync="sync"}} 1\n'
    "# TYPE cmdare_global_step gauge\ncmdare_global_step {gs}\n"
    "# TYPE cmdare_worker_steps_total counter\ncmdare_worker_steps_total {s}\n"
    "# TYPE cmdare_examples_total counter\ncmdare_examples_total {ex}\n"
    "# TYPE cmdare_step_seconds summary\ncmdare_step_seconds_sum {ss}\ncmdare_step_seconds_count {s}\n"
    "# TYPE cmdare_instance_preempted gauge\ncmdare_instance_preempted 0\n"
    "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total {cpu}\n"
    "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds {start}\n"
)
_PATH = re.compile(rb"GET /t/(\d+) ")


def instance(i: int) -> str:
    return f"10.{i // 62500}.{i // 250 % 250}.{i % 250}:9400"


def page(i: int, now: float) -> bytes:
    """Task ``i``'s page at ``now``: every task steps together (synchronous), task i a bit slower."""
    step_s = STEP_S * (1 + (i % 97) / 97)  # tasks differ: quantiles mean something
    up = now - START
    s = int(up / step_s)
    gs = int(up / (STEP_S * 2))  # the job's global step: paced by the slowest task
    role = "chief" if i == 0 else "worker"
    return PAGE.format(
        i=i, role=role, gs=gs, s=s, ex=s * 32, ss=round(s * step_s, 3), cpu=round(up * 0.9, 2), start=START
    ).encode()


def file_sd(path: Path, port: int, n: int) -> None:
    """The file_sd list of ``n`` targets on ``127.0.0.1:port``, each its own instance and path."""
    groups = [
        {"targets": [f"127.0.0.1:{port}"], "labels": {"instance": instance(i), "__metrics_path__": f"/t/{i}"}}
        for i in range(n)
    ]
    path.write_text(json.dumps(groups))


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            m = _PATH.match(head)
            body = page(int(m.group(1)), time.time()) if m else b"not found\n"
            status = b"200 OK" if m else b"404 Not Found"
            writer.write(
                b"HTTP/1.1 %s\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: %d\r\n\r\n"
                % (status, len(body))
                + body
            )
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


async def serve() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    srv = await asyncio.start_server(_handle, "127.0.0.1", 0, backlog=4096)
    print(srv.sockets[0].getsockname()[1], flush=True)
    async with srv:
        await srv.serve_forever()


class TaskFarm(ChildServer):
    """``with TaskFarm() as farm: farm.port`` (one process serving every task)."""

    def __init__(self) -> None:
        super().__init__(__file__)


if __name__ == "__main__":
    asyncio.run(serve())
