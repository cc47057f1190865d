"""A farm of loopback Prometheus exporters served from ONE separate process (so its CPU is not
counted against the monitor): ``N`` ports on 127.0.0.1, each answering ``/metrics`` with ~300
series shaped like node_exporter + DCGM exporter + the cmdare job exporter.

    python benchmarks/exporter_farm.py --targets 200            # prints one port per line, then READY
    from exporter_farm import Farm; with Farm(200) as farm: farm.urls

The body of each target is pre-rendered once; per request only the training counters move (a few
string substitutions), so the farm itself stays cheap. Minimal HTTP/1.1 with keep-alive.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

HOST = "127.0.0.1"
CPUS = 16  # per simulated node: 16 vCPUs (assumption: an n1-standard-16 host with 4 GPUs)
CPU_MODES = ("idle", "iowait", "irq", "nice", "softirq", "steal", "system", "user")
NICS = ("eth0", "eth1", "lo")
NIC_FAMILIES = (
    "receive_bytes",
    "transmit_bytes",
    "receive_packets",
    "transmit_packets",
    "receive_errs",
    "transmit_errs",
    "receive_drop",
    "transmit_drop",
)
GPUS = 4  # per simulated node (assumption: a 4-GPU host)
DCGM = (
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_MEM_COPY_UTIL",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_MEM_CLOCK",
)
MEMINFO = (
    "MemTotal",
    "MemFree",
    "MemAvailable",
    "Buffers",
    "Cached",
    "SwapTotal",
    "SwapFree",
    "Active",
    "Inactive",
    "Dirty",
    "Writeback",
    "Slab",
    "SReclaimable",
    "SUnreclaim",
    "PageTables",
    "Shmem",
    "HugePages_Total",
    "HugePages_Free",
    "Mapped",
    "Committed_AS",
)
BUCKETS = (
    "0.005",
    "0.01",
    "0.02",
    "0.05",
    "0.1",
    "0.2",
    "0.5",
    "1.0",
    "2.0",
    "5.0",
    "10.0",
    "30.0",
    "60.0",
    "+Inf",
)


def render_template(i: int) -> str:
    """One node's exposition with ``{step}``/``{ex}``/``{cpu}`` holes for the moving counters."""
    task = "ps-0" if i == 0 else f"worker-{i - 1}"
    role = "ps" if i == 0 else ("chief" if i == 1 else "worker")
    lines = [
        "# HELP cmdare_task_info Identity of a training task.",
        "# TYPE cmdare_task_info gauge",
        f'cmdare_task_info{{job="bench",role="{role}",task="{task}",gpu="P100",region="us-central1",'
        f'zone="us-central1-c",provisioning="preemptible",dc="",stage=""}} 1.0',
        "# TYPE cmdare_job_info gauge",
        'cmdare_job_info{job="bench",model="ResNet-32",model_flops="1.4e+08",params="467000",'
        'batch_size="128",target_steps="64000"} 1.0',
        "# TYPE cmdare_global_step gauge",
        "cmdare_global_step {gstep}",
        "# TYPE cmdare_worker_steps_total counter",
        "cmdare_worker_steps_total {step}",
        "# TYPE cmdare_examples_total counter",
        "cmdare_examples_total {ex}",
        "# TYPE cmdare_step_seconds histogram",
    ]
    lines += [f'cmdare_step_seconds_bucket{{le="{b}"}} {{step}}' for b in BUCKETS]
    lines += [
        "cmdare_step_seconds_sum {ssum}",
        "cmdare_step_seconds_count {step}",
        "# TYPE cmdare_instance_preempted gauge",
        "cmdare_instance_preempted 0.0",
        "# TYPE node_cpu_seconds_total counter",
    ]
    lines += [
        f'node_cpu_seconds_total{{cpu="{c}",mode="{m}"}} {{cpu}}.{c}{k}'
        for c in range(CPUS)
        for k, m in enumerate(CPU_MODES)
    ]
    for fam in ("running", "waiting"):
        lines.append(f"# TYPE node_schedstat_{fam}_seconds_total counter")
        lines += [f'node_schedstat_{fam}_seconds_total{{cpu="{c}"}} {{cpu}}.{c}' for c in range(CPUS)]
    for fam in NIC_FAMILIES:
        lines.append(f"# TYPE node_network_{fam}_total counter")
        lines += [f'node_network_{fam}_total{{device="{d}"}} {{net}}' for d in NICS]
    for m in MEMINFO:
        lines += [f"# TYPE node_memory_{m}_bytes gauge", f"node_memory_{m}_bytes 1.6e+10"]
    for fs in ("/", "/boot", "/data", "/scratch"):
        for f in ("size", "free", "avail", "files", "files_free"):
            lines.append(
                f'node_filesystem_{f}_bytes{{device="sda1",fstype="ext4",mountpoint="{fs}"}} 1.0e+11'
            )
    for name in ("node_load1", "node_load5", "node_load15", "node_boot_time_seconds", "node_time_seconds"):
        lines += [f"# TYPE {name} gauge", f"{name} 1.5"]
    for g in range(GPUS):
        for d in DCGM:
            lines.append(
                f'{d}{{gpu="{g}",UUID="GPU-{i:04d}-{g}",device="nvidia{g}",modelName="Tesla P100"}} 87'
            )
    for d in ("sda", "sdb", "nvme0n1"):
        for f in ("reads_completed", "writes_completed", "read_bytes", "written_bytes", "io_time_seconds"):
            lines.append(f'node_disk_{f}_total{{device="{d}"}} {{net}}')
    lines += [
        "process_cpu_seconds_total {cpu}.5",
        "process_resident_memory_bytes 1.2e+08",
        "process_open_fds 42",
        "process_start_time_seconds 1.7e+09",
    ]
    return "\n".join(lines) + "\n"


def series_count() -> int:
    return sum(1 for ln in render_template(1).splitlines() if ln and not ln.startswith("#"))


class NodePage:
    """One simulated node's /metrics page: its template, rendered with counters that advance with time."""

    __slots__ = ("template", "t0", "hits")

    def __init__(self, i: int) -> None:
        self.template = render_template(i).replace("{", "{{").replace("}", "}}")
        for hole in ("gstep", "step", "ex", "ssum", "cpu", "net"):
            self.template = self.template.replace("{{" + hole + "}}", "{" + hole + "}")
        self.t0 = time.monotonic()
        self.hits = 0

    def body(self) -> bytes:
        """The page as it reads now (counted in ``hits``)."""
        self.hits += 1
        s = int((time.monotonic() - self.t0) * 12.0)  # ~12 steps/s (P100 ResNet-32, one worker)
        return self.template.format(
            gstep=s * 8, step=s, ex=s * 128, ssum=s * 0.08, cpu=s, net=s * 1_000_000
        ).encode()


async def _serve_conn(node: NodePage, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            if not head:
                break
            body = node.body()
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
                b"Content-Length: %d\r\n\r\n" % len(body) + body
            )
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


async def _main(n: int) -> None:
    servers = []
    for i in range(n):
        node = NodePage(i)
        srv = await asyncio.start_server(lambda r, w, node=node: _serve_conn(node, r, w), HOST, 0, backlog=64)
        servers.append(srv)
        print(srv.sockets[0].getsockname()[1], flush=True)
    print("READY", flush=True)
    await asyncio.Event().wait()


def raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


class Farm:
    """Start the farm in a child process; ``urls`` are its targets; ``cpu_seconds()`` its CPU."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.proc: subprocess.Popen[str] | None = None
        self.ports: list[int] = []

    def __enter__(self) -> Farm:
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--targets", str(self.n)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        deadline = time.monotonic() + 60
        for line in self.proc.stdout:
            if line.strip() == "READY" or time.monotonic() > deadline:
                break
            self.ports.append(int(line))
        if len(self.ports) != self.n:
            self.__exit__()
            raise RuntimeError(f"exporter farm started {len(self.ports)} of {self.n} ports")
        return self

    @property
    def urls(self) -> list[str]:
        return [f"http://{HOST}:{p}/metrics" for p in self.ports]

    def cpu_seconds(self) -> float:
        assert self.proc is not None
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            self.proc = None


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", type=int, default=50)
    args = ap.parse_args()
    raise_fd_limit()
    try:
        asyncio.run(_main(args.targets))
    except KeyboardInterrupt:
        pass
