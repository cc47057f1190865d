"""A real parameter-server training job, instrumented with cmdare's exporter.

CPU only: a tiny CNN on synthetic CIFAR-shaped data (3x32x32 images, 10 classes), asynchronous SGD
through one parameter server (``torch.distributed.rpc``), like CM-DARE's TensorFlow PS setup:
each worker pulls the parameters, computes a gradient on its own batch and pushes it; the PS applies
it at once and counts the global step.

Processes (ranks): 0 = ``ps-0`` (role ps), 1 = ``worker-0`` (role chief), 2.. = ``worker-N``.
Each serves its own ``/metrics`` on ``127.0.0.1:<port-base + rank>``.

    python examples/pytorch_ps/train.py --steps 500 --port-base 9400          # launches all ranks
    python examples/pytorch_ps/train.py --rank 1 --steps 500 --port-base 9400 # one rank (tests, clusters)
    python -m examples.pytorch_ps --steps 500                                   # from the repo root

``--steps 0`` trains until killed.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
import warnings

import torch
import torch.distributed.rpc as rpc
from torch import nn

from cmdare.collectors.exporter import TrainingExporter

JOB = "pytorch-ps"
N_BATCHES = 8  # distinct synthetic batches a worker cycles through
warnings.filterwarnings("ignore", message="You are using a Backend")  # torch.distributed.rpc internals


class TinyCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.head = nn.Linear(16 * 8 * 8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def tensor_bytes(ts: list[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in ts)


class ParameterServer:
    """Holds the parameters; applies each pushed gradient immediately (asynchronous SGD)."""

    instance: ParameterServer | None = None

    def __init__(self, exporter: TrainingExporter, lr: float) -> None:
        torch.manual_seed(0)
        self.model = TinyCNN()
        self.lr = lr
        self.lock = threading.Lock()
        self.global_step = 0
        self.exporter = exporter

    def params(self) -> list[torch.Tensor]:
        with self.lock:
            out = [p.detach().clone() for p in self.model.parameters()]
        self.exporter.add_ps_bytes("out", tensor_bytes(out))
        return out

    def apply(self, grads: list[torch.Tensor]) -> int:
        self.exporter.add_ps_bytes("in", tensor_bytes(grads))
        with self.lock, torch.no_grad():
            for p, g in zip(self.model.parameters(), grads, strict=True):
                p.add_(g, alpha=-self.lr)
            self.global_step += 1
            step = self.global_step
        self.exporter.set_global_step(step)
        return step


def get_params() -> list[torch.Tensor]:  # runs on the PS (called through RPC)
    assert ParameterServer.instance is not None
    return ParameterServer.instance.params()


def push_grads(grads: list[torch.Tensor]) -> int:  # runs on the PS (called through RPC)
    assert ParameterServer.instance is not None
    return ParameterServer.instance.apply(grads)


def identity(rank: int) -> tuple[str, str]:
    """(task, role) of a rank."""
    if rank == 0:
        return "ps-0", "ps"
    return f"worker-{rank - 1}", "chief" if rank == 1 else "worker"


def work(args: argparse.Namespace, exporter: TrainingExporter) -> None:
    gen = torch.Generator().manual_seed(args.rank)
    data = [
        (
            torch.randn(args.batch, 3, 32, 32, generator=gen),
            torch.randint(0, 10, (args.batch,), generator=gen),
        )
        for _ in range(N_BATCHES)
    ]
    model = TinyCNN()
    loss_fn = nn.CrossEntropyLoss()
    step = 0
    while args.steps == 0 or step < args.steps:
        params = rpc.rpc_sync("ps-0", get_params)
        with torch.no_grad():
            for p, v in zip(model.parameters(), params, strict=True):
                p.copy_(v)
        x, y = data[step % N_BATCHES]
        t0 = time.perf_counter()
        model.zero_grad(set_to_none=False)
        loss_fn(model(x), y).backward()
        compute = time.perf_counter() - t0
        gstep = rpc.rpc_sync("ps-0", push_grads, args=([p.grad for p in model.parameters()],))
        exporter.step(compute, examples=args.batch)
        exporter.set_global_step(gstep)
        step += 1


def run_rank(args: argparse.Namespace) -> None:
    torch.set_num_threads(1)
    task, role = identity(args.rank)
    world = args.workers + 1
    exporter = TrainingExporter(
        JOB,
        role,
        task,
        provisioning="standard",
        model="TinyCNN",
        params=n_params(TinyCNN()),
        batch_size=args.batch,
        target_steps=args.steps * args.workers,
        sync="async-ps",  # each worker's push is a global step: the job's steps/s is the workers' sum
    )
    exporter.start(args.port_base + args.rank)
    if role == "ps":
        ParameterServer.instance = ParameterServer(exporter, args.lr)
    opts = rpc.TensorPipeRpcBackendOptions(
        num_worker_threads=8, init_method=f"tcp://127.0.0.1:{args.rpc_port}"
    )
    rpc.init_rpc(task, rank=args.rank, world_size=world, rpc_backend_options=opts)
    if role != "ps":
        work(args, exporter)
    rpc.shutdown()  # graceful: the PS serves until every worker is done
    time.sleep(args.linger)
    exporter.stop()


def _die_with_launcher() -> None:
    """In a rank, before it runs: the kernel sends it SIGTERM when the launcher dies, however the
    launcher dies (SIGKILL included), so that no rank trains on as an orphan (Linux: prctl)."""
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _end(procs: list[subprocess.Popen], grace: float = 5.0) -> None:
    """SIGTERM every rank still running, then SIGKILL whichever outlives ``grace`` seconds."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
    deadline = time.monotonic() + grace
    for p in procs:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def launch(args: argparse.Namespace) -> int:
    """Start every rank as its own process and wait for them. SIGTERM, SIGHUP or ctrl+c to the
    launcher ends every rank (as torchrun does); a launcher killed outright takes its ranks with it."""
    procs: list[subprocess.Popen] = []

    def stop(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    try:
        for rank in range(args.workers + 1):
            cmd = [
                sys.executable,
                os.path.abspath(__file__),
                "--rank",
                str(rank),
                "--steps",
                str(args.steps),
                "--port-base",
                str(args.port_base),
                "--rpc-port",
                str(args.rpc_port),
                "--workers",
                str(args.workers),
                "--batch",
                str(args.batch),
                "--lr",
                str(args.lr),
                "--linger",
                str(args.linger),
            ]
            procs.append(subprocess.Popen(cmd, preexec_fn=_die_with_launcher))
        return max(p.wait() for p in procs)
    except KeyboardInterrupt:
        return 130
    except SystemExit as exc:
        return int(exc.code or 0)
    finally:
        _end(procs)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=500, help="local steps per worker (0 = until killed)")
    p.add_argument("--port-base", type=int, default=9400, help="rank r serves /metrics on port-base + r")
    p.add_argument("--rpc-port", type=int, default=None, help="rendezvous port (default port-base + 99)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--rank", type=int, default=None, help="run only this rank (default: launch all)")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--linger", type=float, default=0.0, help="seconds to keep /metrics up after training")
    args = p.parse_args(argv)
    if args.rpc_port is None:
        args.rpc_port = args.port_base + 99
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.rank is None:
        return launch(args)
    run_rank(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
