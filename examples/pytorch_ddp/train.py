"""A real synchronous data-parallel job: PyTorch DDP over gloo (CPU), instrumented with cmdare's
exporter, declared ``sync="sync-allreduce"``.

Every rank trains the same tiny CNN on its own synthetic CIFAR-shaped batches; DDP all-reduces the
gradients each step, so all ranks take every global step together: the job's steps/s is the rate of
the global step, not the sum of the ranks' rates. Rank r is ``worker-r`` (rank 0 is the chief) and
serves ``/metrics`` on ``127.0.0.1:<port-base + r>``.

Instrumented in the exporter's sync mode (two lines): a DDP communication hook stamps each gradient
bucket's all-reduce, and ``exp.sync_step`` splits the step into compute (``cmdare_step_seconds``)
and exposed all-reduce (``cmdare_allreduce_seconds``). With ``--checkpoint-dir`` rank 0 saves a checkpoint
every ``--checkpoint-every`` steps inside ``exp.checkpoint()`` (the planner's work at risk).

    torchrun --nproc-per-node 2 examples/pytorch_ddp/train.py --steps 500 --port-base 9500
    python -m torch.distributed.run --nproc-per-node 2 examples/pytorch_ddp/train.py   # the same

``--steps 0`` trains until killed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from cmdare.collectors.exporter import TrainingExporter

JOB = "pytorch-ddp"
# TinyCNN's forward multiply-adds per example: conv 32·32·8·27 + conv 16·16·16·72 + linear 1024·10
FORWARD_MACS = 32 * 32 * 8 * 27 + 16 * 16 * 16 * 72 + 1024 * 10
N_BATCHES = 8  # distinct synthetic batches a rank cycles through


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


def exporter_for(rank: int, local_rank: int, args: argparse.Namespace, params: int) -> TrainingExporter:
    """Rank 0 is the chief; every rank is ``worker-<rank>`` of one synchronous job."""
    return TrainingExporter(
        JOB,
        "chief" if rank == 0 else "worker",
        f"worker-{rank}",
        gpu=args.gpu,
        region=args.region,
        provisioning=args.provisioning,
        model="TinyCNN",
        model_flops=3 * 2 * FORWARD_MACS * args.batch,  # forward + backward FLOPs of one step
        params=params,
        batch_size=args.batch,
        target_steps=args.target_steps if args.target_steps is not None else args.steps,
        sync="sync-allreduce",
        rank=rank,
        local_rank=local_rank,
    )


def train(args: argparse.Namespace) -> None:
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", str(rank)))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = DistributedDataParallel(TinyCNN())
    exporter = exporter_for(rank, local_rank, args, sum(p.numel() for p in model.parameters()))
    model.register_comm_hook(None, exporter.ddp_comm_hook())  # cmdare hook 1: time each bucket's all-reduce
    exporter.start(args.port_base + rank)
    gen = torch.Generator().manual_seed(rank)
    data = [
        (
            torch.randn(args.batch, 3, 32, 32, generator=gen),
            torch.randint(0, 10, (args.batch,), generator=gen),
        )
        for _ in range(N_BATCHES)
    ]
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()
    step = 0
    launcher = os.getppid()
    while args.steps == 0 or step < args.steps:
        if os.getppid() != launcher:  # torchrun is gone (killed): never train on as an orphan
            exporter.stop()
            return
        x, y = data[step % N_BATCHES]
        with exporter.sync_step(examples=args.batch):  # cmdare hook 2: compute vs exposed all-reduce
            if rank == args.slow_rank:
                time.sleep(args.slow_seconds)  # a deliberate straggler: this rank's compute is slower
            opt.zero_grad()
            loss_fn(model(x), y).backward()  # DDP all-reduces the gradients here: every rank waits for all
            opt.step()
        step += 1
        exporter.set_global_step(step)  # the same on every rank: one global step per all-reduce
        if args.checkpoint_dir and rank == 0 and step % args.checkpoint_every == 0:
            with exporter.checkpoint():  # cmdare hook 3: the write time, and when the last checkpoint was
                torch.save(
                    {"step": step, "model": model.module.state_dict()}, args.checkpoint_dir / "last.pt"
                )
    dist.barrier()
    time.sleep(args.linger)
    exporter.stop()
    dist.destroy_process_group()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=500, help="global steps (0 = until killed)")
    p.add_argument("--port-base", type=int, default=9500, help="rank r serves /metrics on port-base + r")
    p.add_argument("--batch", type=int, default=32, help="examples per rank per step")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument(
        "--gpu", default="cpu", help="GPU label the ranks declare (planning a GPU cluster from a CPU run)"
    )
    p.add_argument("--region", default="", help="region label the ranks declare")
    p.add_argument("--provisioning", default="standard", help="spot | preemptible | standard")
    p.add_argument("--target-steps", type=int, default=None, help="steps the job declares as its target")
    p.add_argument("--slow-rank", type=int, default=-1, help="make this rank a straggler (testing)")
    p.add_argument("--slow-seconds", type=float, default=0.02, help="extra compute a step of the slow rank")
    p.add_argument("--linger", type=float, default=0.0, help="seconds to keep /metrics up after training")
    p.add_argument(
        "--checkpoint-dir", type=Path, default=None, help="rank 0 saves a checkpoint here (last.pt)"
    )
    p.add_argument("--checkpoint-every", type=int, default=200, help="global steps between checkpoints")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    train(parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
