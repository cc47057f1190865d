"""The embedded demo: a simulated parameter-server training cluster that really serves Prometheus
``/metrics`` on loopback (through the project's own exporter), calibrated from CM-DARE measurements.
With ``geo=True`` a second job runs beside it: an LM pipeline over 3 datacenters with one slow WAN
link (:mod:`cmdare.demo.geo`).

Scenario (``demo/data/demo_calibration.json``, derived by ``scripts/derive_demo_calibration.py``):
8 preemptible P100 workers + 1 on-demand PS train ResNet-32. The cluster's global steps/s follows the
measured 1-PS curve (it plateaus near 44–47 steps/s from 5 workers: the PS saturates) while each
worker's own compute time per step stays at its measured single-worker value. Every
``revoke_every_s`` one worker receives a preemption notice, goes away, and a replacement joins after
the measured replacement delay (67 s for P100) divided by ``time_factor``.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

from cmdare.collectors.exporter import TrainingExporter
from cmdare.collectors.exporter.page_host import PageHost
from cmdare.collectors.samples import TaskInfo
from cmdare.collectors.scrape.source import ScrapeTarget
from cmdare.demo.geo import GeoPipelineDemo

log = logging.getLogger(__name__)

DEMO_TIME_FACTOR = 10.0  # demo events (notice, replacement delay) run 10x faster than measured
DEMO_REGION = "us-central1"  # scenario setting: a region where CM-DARE measured P100 lifetimes
TICK_S = 0.25
# The chief checkpoints every 600 s (TensorFlow 1.x's default save_checkpoint_secs, the study's setup) and a
# write takes the CM-DARE fit 3.65 s + 0.0199 s/MB (planner/data/overheads.json); both run time_factor faster,
# like the demo's other events.
CHECKPOINT_EVERY_S = 600.0
CHECKPOINT_WRITE_S = 3.65 + 0.0199 * 1857722.0 * 7.913e-06  # ResNet-32's 14.7 MB checkpoint


def interp(x: float, xs: Sequence[float], ys: Sequence[float]) -> float:
    """Linear interpolation of ``(xs, ys)`` (``xs`` increasing) at ``x``, held at the end values
    outside ``xs``: ``numpy.interp``'s values, without numpy on the demo's start-up."""
    if x <= xs[0]:
        return ys[0]
    if x >= xs[-1]:
        return ys[-1]
    j = bisect_right(xs, x) - 1
    if xs[j] == x:
        return ys[j]
    slope = (ys[j + 1] - ys[j]) / (xs[j + 1] - xs[j])
    return slope * (x - xs[j]) + ys[j]


def load_calibration() -> dict:
    return json.loads(resources.files("cmdare.demo").joinpath("data/demo_calibration.json").read_text())


@dataclass
class _Task:
    info: TaskInfo
    exporter: TrainingExporter | None
    port: int
    steps_frac: float = 0.0
    down_until: float = 0.0  # monotonic time when a replacement comes up (0 = up)
    notice_until: float = 0.0  # preemption notice shown until then, then the task goes away


class DemoCluster:
    def __init__(
        self,
        *,
        workers: int = 8,
        time_factor: float = DEMO_TIME_FACTOR,
        first_revocation_s: float = 20.0,
        revoke_every_s: float = 120.0,
        seed: int = 7,
        geo: bool = False,
    ) -> None:
        self.cal = load_calibration()
        self.workers = workers
        self.time_factor = time_factor
        self.first_revocation_s = first_revocation_s
        self.revoke_every_s = revoke_every_s
        self.rng = random.Random(seed)
        curve = self.cal["cluster_curve_1ps"]  # rows of (workers, mean steps/s, std)
        self._curve_n = [float(row[0]) for row in curve]
        self._curve_mean = [float(row[1]) for row in curve]
        self._curve_std = [float(row[2]) for row in curve]
        self.tasks: list[_Task] = []
        self.global_step = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._t0 = 0.0
        self._next_revocation = 0.0
        self._next_checkpoint = 0.0
        self.revocations = 0
        self.geo = GeoPipelineDemo() if geo else None
        self.pages: PageHost | None = None  # one thread answers every exporter's /metrics (start())

    @property
    def job(self) -> str:
        return self.cal["job"]

    def _exporter(self, info: TaskInfo) -> TrainingExporter:
        c = self.cal
        return TrainingExporter(
            info.job,
            info.role,
            info.task,
            gpu=info.gpu,
            region=info.region,
            zone=info.zone,
            provisioning=info.provisioning,
            model=c["model"],
            model_flops=c["model_flops"],
            params=c["params"],
            batch_size=c["batch_size"],
            target_steps=c["target_steps"],
        )

    def start(self) -> list[ScrapeTarget]:
        """Start every task's exporter on 127.0.0.1 and the simulation thread; returns the targets."""
        zone = f"{DEMO_REGION}-c"
        infos = [
            TaskInfo(
                job=self.job,
                task="ps-0",
                role="ps",
                gpu="",
                region=DEMO_REGION,
                zone=zone,
                provisioning="standard",
            )
        ]
        infos += [
            TaskInfo(
                job=self.job,
                task=f"worker-{i}",
                role="chief" if i == 0 else "worker",
                gpu=self.cal["gpu"],
                region=DEMO_REGION,
                zone=zone,
                provisioning="preemptible",
            )
            for i in range(self.workers)
        ]
        self.pages = PageHost("cmdare-demo-pages")
        for info in infos:
            exp = self._exporter(info)
            port = exp.start(0, host=self.pages)
            self.tasks.append(_Task(info, exp, port))
        if self.geo is not None:
            self.geo.start(self.pages)
        self._t0 = time.monotonic()
        self._next_revocation = self._t0 + self.first_revocation_s
        self._next_checkpoint = self._t0 + CHECKPOINT_EVERY_S / self.time_factor
        self._thread = threading.Thread(target=self._run, name="cmdare-demo", daemon=True)
        self._thread.start()
        return self.targets()

    def targets(self) -> list[ScrapeTarget]:
        own = [ScrapeTarget(f"http://127.0.0.1:{t.port}/metrics", t.info) for t in self.tasks]
        return own + (self.geo.targets() if self.geo is not None else [])

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        with self._lock:
            exporters = [t.exporter for t in self.tasks if t.exporter is not None]
            exporters += self.geo.exporters() if self.geo is not None else []
            for t in self.tasks:
                t.exporter = None
        for exp in exporters:
            exp.stop()  # its port closed by the host (no thread of its own to wait for)
        if self.pages is not None:
            self.pages.close()

    # --- simulation ---------------------------------------------------------------------------
    def cluster_speed(self, n_workers: float) -> float:
        """Measured mean cluster steps/s for ``n_workers`` (1 PS), interpolated between the measured
        points and held at the end values outside them (numpy.interp's rule)."""
        if n_workers <= 0:
            return 0.0
        return interp(n_workers, self._curve_n, self._curve_mean)

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(TICK_S):
            now = time.monotonic()
            with self._lock:
                self._lifecycle(now)
                self._advance(now - last)
                if self.geo is not None:
                    self.geo.advance(now - last)
            last = now

    def _checkpoint(self, now: float) -> None:
        """The chief writes a checkpoint every CHECKPOINT_EVERY_S (demo time), when it is up."""
        if now < self._next_checkpoint:
            return
        self._next_checkpoint = now + CHECKPOINT_EVERY_S / self.time_factor
        chief = next((t for t in self.tasks if t.info.role == "chief" and t.exporter is not None), None)
        if chief is not None and chief.exporter is not None:
            chief.exporter.checkpoint_done(CHECKPOINT_WRITE_S / self.time_factor)

    def _lifecycle(self, now: float) -> None:
        self._checkpoint(now)
        workers = [t for t in self.tasks if t.info.role == "worker"]
        if now >= self._next_revocation and workers:
            victim = self.rng.choice(
                [t for t in workers if t.down_until == 0 and t.notice_until == 0] or workers
            )
            if victim.exporter is not None and victim.notice_until == 0:
                victim.exporter.set_preempted(True)
                victim.notice_until = now + self.cal["gce_preemption_notice_seconds"] / self.time_factor
                log.info("demo: %s received a preemption notice", victim.info.task)
            self._next_revocation = now + self.revoke_every_s
        for t in self.tasks:
            if t.notice_until and now >= t.notice_until and t.exporter is not None:
                t.exporter.stop()
                t.exporter = None
                t.notice_until = 0.0
                join = self.rng.gauss(
                    self.cal["replacement_join_seconds_mean"], self.cal["replacement_join_seconds_std"]
                )
                t.down_until = now + max(join, 1.0) / self.time_factor
                self.revocations += 1
            elif t.down_until and now >= t.down_until:
                exp = self._exporter(t.info)
                try:
                    exp.start(t.port, host=self.pages)
                except OSError as exc:  # port taken meanwhile: take a new one
                    log.warning("demo: port %d busy (%s), replacement moves", t.port, exc)
                    t.port = exp.start(0, host=self.pages)
                exp.set_global_step(int(self.global_step))
                t.exporter, t.down_until = exp, 0.0

    def _advance(self, dt: float) -> None:
        active = [
            t for t in self.tasks if t.info.role != "ps" and t.exporter is not None and not t.notice_until
        ]
        if not active:
            return
        c = self.cal
        mean, std = c["worker_steps_per_sec_mean"], c["worker_steps_per_sec_std"]
        n = len(active)
        idx = min(range(len(self._curve_n)), key=lambda i: abs(self._curve_n[i] - n))
        cluster = max(0.0, self.rng.gauss(self.cluster_speed(n), self._curve_std[idx]))
        done = 0
        for t in active:
            t.steps_frac += cluster / n * dt
            k = int(t.steps_frac)
            if k:
                t.steps_frac -= k
                own = max(self.rng.gauss(mean, std), mean / 2)
                assert t.exporter is not None
                t.exporter.step(1.0 / own, examples=k * c["batch_size"], steps=k)
                done += k
        self.global_step += done
        ps_bytes = int(done * c["params"] * 4)  # one push and one pull of float32 parameters per step
        for t in self.tasks:
            if t.exporter is None:
                continue
            if t.info.role == "ps":
                t.exporter.add_ps_bytes("in", ps_bytes)
                t.exporter.add_ps_bytes("out", ps_bytes)
            t.exporter.set_global_step(int(self.global_step))
