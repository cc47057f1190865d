"""The all-reduce speed model (planner/speed/allreduce.py) against published scaling figures.

    python benchmarks/allreduce_public.py

Scaling factor = speed on N GPUs / (N × speed on one GPU), same batch per GPU (weak scaling); for the
model that is compute / (compute + exposed all-reduce). The model's link figures are line rates
(planner/data/interconnect.csv); a run that uses the network at a fraction u of its line rate is the
model with ``comm_scale = 1/u`` (what the live calibration measures).

Papers:
* Zhang, Chang, Lin, Wang, Arora, Jin, "Is Network the Bottleneck of Distributed Training?",
  ACM SIGCOMM NetAI workshop 2020 (arXiv:2006.10103). Setup: 8 servers × 8 V100 (NVLink), 100 Gbit/s,
  Horovod. Figure 1: measured scaling factors of 60–76% at 64 GPUs for the CNNs studied; Section 4
  (what-if, full network utilisation): "close to one" at 100 Gbit/s; abstract: at 10 Gbit/s a gradient
  compression ratio of only 2–5× gives almost linear scale-out.
  Verified here: the range 60–76%, "close to one" and "2–5×" (from the paper's abstract and a summary of
  Figure 1; the per-model values of Figure 1 could not be read here and are not used).
* Sergeev & Del Balso, "Horovod: fast and easy distributed deep learning in TensorFlow",
  arXiv:1802.05799 (2018), the 128-GPU benchmark (Pascal GPUs, 25 GbE): about 90% for Inception V3
  and ResNet-101 and 68% for VGG-16. NOT verified here (recalled; the paper's text could not be
  read in this environment): printed for comparison, never counted as a pass or a miss.

Compute per GPU is not in either paper's text as read here; it is the roofline
``3 × forward FLOPs × batch / (peak FP32 × MFU)`` with forward FLOPs from the networks' own papers
(He et al. 2016 Table 1: ResNet-50 3.8 GFLOPs, ResNet-101 7.6 — multiply-adds), Inception V3 5.7 and
VGG-16 15.5 G multiply-adds (commonly quoted; assumption), batch 64 per GPU and MFU 0.5
(assumptions), peaks from planner/data/gpus.csv. The comparison is of ratios, so it is sensitive to
these: the script prints the batch-32 and MFU-0.35 variants too.

Tolerance: a verified figure is reproduced when the model lies within ±0.05 of a point figure or
inside a range's bounds ±0.05 ("close to one": ≥ 0.85); for "2–5×" the compression the model needs
for ≥ 0.9 must lie in [2/1.5, 5×1.5]. Figure 1's measured 60–76% is printed as the share of line rate
the model needs to show it (the paper attributes the gap to low network utilisation).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from cmdare.planner.speed.allreduce import SyncParams, sync_step
from cmdare.planner.speed.gpu_catalog import get_gpu
from cmdare.planner.speed.interconnect import links

TOL = 0.05
COMPRESSION_TOL = 1.5  # "2–5×" is reproduced by a need within [2/1.5, 5×1.5]


@dataclass(frozen=True)
class Net:
    name: str
    params: float
    fwd_gmacs: float


RESNET50 = Net("ResNet-50", 25.6e6, 3.8)
RESNET101 = Net("ResNet-101", 44.5e6, 7.6)
VGG16 = Net("VGG-16", 138e6, 15.5)
INCEPTION3 = Net("Inception V3", 23.8e6, 5.7)


def factor(
    net: Net,
    gpu: str,
    nodes: int,
    g: int,
    nic_gbps: float,
    intra: str,
    batch: int = 64,
    mfu: float = 0.5,
    p: SyncParams | None = None,
) -> float:
    """The model's weak-scaling factor of ``net`` on ``nodes`` × ``g`` GPUs."""
    compute = 3 * 2 * net.fwd_gmacs * 1e9 * batch / (get_gpu(gpu).fp32_tflops * 1e12 * mfu)
    link, nic = links()[intra], links()["gvnic-100"]
    t = sync_step(
        np.array([compute]),
        net.params,
        np.array([nodes]),
        np.array([g]),
        np.array([link.gbps]),
        np.array([nic_gbps]),
        np.array([link.latency_s]),
        np.array([nic.latency_s]),
        p or SyncParams(),
    )
    return float(t.compute[0] / t.step[0])


def compression_for(net: Net, target: float, **kw: object) -> float:
    """The smallest compression ratio (bisection over 1–1000) giving a scaling factor ≥ ``target``."""
    lo, hi = 1.0, 1000.0
    if factor(net, p=SyncParams(compression=lo), **kw) >= target:  # type: ignore[arg-type]
        return 1.0
    for _ in range(40):
        mid = (lo * hi) ** 0.5
        if factor(net, p=SyncParams(compression=mid), **kw) >= target:  # type: ignore[arg-type]
            hi = mid
        else:
            lo = mid
    return hi


def use_for(net: Net, target: float, **kw: object) -> float:
    """The share of line rate (bisection) at which the model's scaling factor is ``target``."""
    lo, hi = 1e-4, 1.0
    for _ in range(40):
        mid = (lo * hi) ** 0.5
        if factor(net, p=SyncParams(comm_scale=1 / mid), **kw) >= target:  # type: ignore[arg-type]
            hi = mid
        else:
            lo = mid
    return hi


def zhang_rows(batch: int, mfu: float) -> list[tuple[str, str, float, str, bool]]:
    """(figure, paper, model, verdict, counted) for Zhang et al."""
    rows = []
    kw = dict(gpu="V100", nodes=8, g=8, intra="nvlink2", batch=batch, mfu=mfu)
    for net in (RESNET50, RESNET101, VGG16):
        full = factor(net, nic_gbps=100, **kw)  # type: ignore[arg-type]
        ok = full >= 0.9 - TOL
        rows.append((f"§4 what-if, 100G full use, {net.name}", "close to 1", full, _v(ok), True))
        for target in (0.76, 0.60):
            u = use_for(net, target, nic_gbps=100, **kw)
            rows.append(
                (f"Fig. 1 {target:.2f}: network use implied, {net.name}", "(measured)", u, "info", False)
            )
        need = compression_for(net, 0.9, nic_gbps=10, **kw)
        ok = 2.0 / COMPRESSION_TOL <= need <= 5.0 * COMPRESSION_TOL
        rows.append((f"abstract, 10G compression for ≥0.9, {net.name}", "2–5×", need, _v(ok), True))
    return rows


def horovod_rows(batch: int, mfu: float) -> list[tuple[str, str, float, str, bool]]:
    rows = []
    for net, paper in ((INCEPTION3, "~0.90"), (RESNET101, "~0.90"), (VGG16, "0.68")):
        f = factor(net, gpu="P100", nodes=32, g=4, nic_gbps=25, intra="pcie3", batch=batch, mfu=mfu)
        rows.append((f"128 GPUs 25GbE line rate, {net.name}", f"{paper} (unverified)", f, "info", False))
    return rows


def _v(ok: bool) -> str:
    return "reproduced" if ok else "MISSED"


def main() -> int:
    counted = missed = 0
    for batch, mfu in ((64, 0.5), (32, 0.5), (64, 0.35)):
        print(f"\n== batch {batch}/GPU, MFU {mfu} ==")
        print(f"{'figure':<52} {'paper':>18} {'model':>7}  verdict")
        for fig, paper, model, verdict, count in zhang_rows(batch, mfu) + horovod_rows(batch, mfu):
            shown = (
                f"{model:.1f}×"
                if "compression" in fig
                else f"{model:.0%}"
                if "use" in fig
                else f"{model:.3f}"
            )
            print(f"{fig:<52} {paper:>18} {shown:>7}  {verdict}")
            if count and (batch, mfu) == (64, 0.5):
                counted += 1
                missed += verdict == "MISSED"
    print(
        f"\nverified figures reproduced (main assumptions): {counted - missed}/{counted} (tolerance ±{TOL})"
    )
    print("Fig. 1 rows: the share of line rate at which the model shows the measured 60-76% (the paper")
    print("reports low network utilisation as the cause; a live job's calibration measures its own).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
