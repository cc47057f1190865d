"""A simulated PS / pipeline cluster built from the CM-DARE measurements, fed through the real Poller →
Store → Lifecycle → build_jobs path into the alert engine (shared by the scenario tests and
``benchmarks/detection.py``: a support module, not a test module; its own checks are in test_alerts_sim.py)."""

from __future__ import annotations

import csv
import random
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from cmdare.collectors import metrics as M
from cmdare.collectors.clock import ManualClock
from cmdare.collectors.lifecycle import Lifecycle
from cmdare.collectors.observed import build_jobs
from cmdare.collectors.poller import RATE_WINDOW_POLLS, Poller
from cmdare.collectors.pricing import load_offline_book
from cmdare.collectors.samples import JobFacts, ModelSpec, TaskInfo, TaskPoll
from cmdare.collectors.store import Store
from cmdare.planner.live.outlook import current_shape, network_of
from cmdare.planner.rules.alerts import Alert, AlertContext, AlertEngine
from cmdare.planner.rules.bottlenecks import DEFAULT_RULES, rule_inputs, shipped_overheads
from cmdare.planner.rules.thresholds import Thresholds
from cmdare.planner.speed.network_catalog import lookup_network
from cmdare.planner.speed.speed_model import SpeedModel

CMDARE = Path(__file__).resolve().parents[1] / "data" / "cmdare"  # vendored (data/cmdare/PROVENANCE.md)
CURVES_CSV = CMDARE / "derived/cluster_speed_vs_workers.csv"


def load_curves(path: Path = CURVES_CSV) -> dict[tuple[str, str], dict[int, float]]:
    """(GPU, model) → {workers: measured mean cluster steps/s} for the 1-PS runs."""
    out: dict[tuple[str, str], dict[int, float]] = {}
    with path.open() as fh:
        for r in csv.DictReader(fh):
            if r["num_ps"] == "1":
                out.setdefault((r["gpu"], r["model"]), {})[int(r["num_workers"])] = float(
                    r["speed_steps_per_sec_mean"]
                )
    return out


@dataclass
class SimTask:
    info: TaskInfo
    slow: float = 1.0  # compute-time multiplier (a straggler)
    busy: float = 1.0  # share of time the GPU is fed (input-bound < 1)
    alive: bool = True
    preempted: bool = False
    counters: dict[str, float] = field(default_factory=dict)


class SimCluster:
    """Async-PS training: cluster steps/s follows the measured curve at the number of up workers
    (interpolated for mixed GPUs by single-worker speed); each worker's step time is its measured
    single-worker step time × its slow factor, with multiplicative uniform noise ±``noise``."""

    def __init__(
        self,
        model: str,
        curves: dict[str, dict[int, float]],
        gpus: list[str],
        *,
        ps: int = 1,
        regions: list[str] | None = None,
        noise: float = 0.05,
        seed: int = 0,
        dcgm: bool = False,
        provisioning: str = "preemptible",
        job: str = "sim",
        facts: bool = True,
    ) -> None:
        net = lookup_network(model)
        assert net is not None, model
        self.net, self.curves, self.noise, self.dcgm = net, curves, noise, dcgm
        self.rng = random.Random(seed)
        self.job = job
        regions = regions or ["us-central1"] * len(gpus)
        self.ps = [
            SimTask(
                TaskInfo(
                    job=job,
                    task=f"ps-{i}",
                    role="ps",
                    gpu="",
                    region=regions[0],
                    zone="",
                    provisioning="standard",
                )
            )
            for i in range(ps)
        ]
        self.workers = [
            SimTask(
                TaskInfo(
                    job=job,
                    task=f"worker-{i}",
                    role="chief" if i == 0 else "worker",
                    gpu=g,
                    region=regions[i],
                    zone="",
                    provisioning=provisioning,
                )
            )
            for i, g in enumerate(gpus)
        ]
        self.facts = (
            JobFacts(
                job,
                ModelSpec(name=net.name, model_flops=net.model_flops, params=net.params, batch_size=128),
                10**7,
            )
            if facts
            else None
        )
        for w in self.workers:  # exporters report their counters from the first scrape on
            w.counters = dict.fromkeys(
                (M.K_WORKER_STEPS, M.K_EXAMPLES, M.K_STEP_SECONDS_SUM, M.K_STEP_SECONDS_COUNT), 0.0
            )
        for p in self.ps:
            p.counters = dict.fromkeys((M.K_PS_IN, M.K_PS_OUT), 0.0)
        self.global_step = 0.0

    def _single(self, gpu: str) -> float:
        return self.curves[gpu][1]

    def cluster_speed(self, up: list[SimTask]) -> float:
        """Measured curve at len(up) workers, of the majority GPU, scaled by mean relative single speed."""
        gpus = [w.info.gpu for w in up]
        main = max(set(gpus), key=gpus.count)
        curve = self.curves[main]
        n = np.array(sorted(curve))
        x = float(np.interp(len(up), n, [curve[k] for k in n]))
        return x * float(np.mean([self._single(g) / self._single(main) for g in gpus]))

    def advance(self, dt: float) -> None:
        up = [w for w in self.workers if w.alive and not w.preempted]
        if not up:
            return
        x = self.cluster_speed(up)
        weights = [1.0 / w.slow * w.busy for w in up]
        total = 0.0
        for w, wt in zip(up, weights, strict=True):
            rate = x / len(up) * wt * self.rng.uniform(1 - self.noise, 1 + self.noise)
            step_s = w.slow / self._single(w.info.gpu) * self.rng.uniform(1 - self.noise, 1 + self.noise)
            n = rate * dt
            c = w.counters
            for key, inc in (
                (M.K_WORKER_STEPS, n),
                (M.K_EXAMPLES, n * 128),
                (M.K_STEP_SECONDS_SUM, n * step_s),
                (M.K_STEP_SECONDS_COUNT, n),
            ):
                c[key] = c.get(key, 0.0) + inc
            total += n
        self.global_step += total
        for p in self.ps:
            for key in (M.K_PS_IN, M.K_PS_OUT):
                p.counters[key] = p.counters.get(key, 0.0) + total * self.net.params * 4 / len(self.ps)

    def polls(self, t: float) -> list[TaskPoll]:
        out = []
        for task in [*self.ps, *self.workers]:
            src = f"sim://{task.info.key}"
            if not task.alive:
                out.append(TaskPoll(source=src, t=t, ok=False, info=None, error="connection refused"))
                continue
            values = {
                **task.counters,
                M.K_GLOBAL_STEP: self.global_step,
                M.K_PREEMPTED: float(task.preempted),
            }
            if self.dcgm and task.info.role != "ps":
                values[M.K_GPU_UTIL] = 100.0 * task.busy * self.rng.uniform(1 - self.noise, 1 + self.noise)
            out.append(
                TaskPoll(source=src, t=t, ok=True, info=task.info, values=values, job_facts=self.facts)
            )
        return out


class SimPipeline:
    """A pipeline of stages over DCs paced by ``max(c, D·A/B)`` per micro-batch (background.md §2)."""

    def __init__(
        self,
        dcs: list[str],
        link_gbps: dict[frozenset, float],
        *,
        compute_s: float = 0.21,
        activation_bytes: float = 50e6,
        dp: int = 2,
        noise: float = 0.05,
        seed: int = 0,
        job: str = "pipe",
    ) -> None:
        self.dcs, self.links, self.c, self.a, self.dp = dcs, link_gbps, compute_s, activation_bytes, dp
        self.noise, self.rng = noise, random.Random(seed)
        self.stages = [
            SimTask(
                TaskInfo(
                    job=job,
                    task=f"stage-{i}",
                    role="stage",
                    gpu="A100",
                    region=dc,
                    zone="",
                    provisioning="standard",
                    dc=dc,
                    stage=str(i),
                )
            )
            for i, dc in enumerate(dcs)
        ]
        for i, st in enumerate(self.stages):
            peers = [M.stage_bytes_key(f"stage-{j}") for j in (i - 1, i + 1) if 0 <= j < len(dcs)]
            st.counters = dict.fromkeys(
                (M.K_STAGE_MICROBATCHES, M.K_STAGE_COMPUTE, M.K_STAGE_WAIT, *peers), 0.0
            )

    def period(self) -> float:
        t = [
            self.dp * self.a * 8 / (self.links[frozenset((a, b))] * 1e9)
            for a, b in zip(self.dcs, self.dcs[1:], strict=False)
            if a != b
        ]
        return max([self.c, *t])

    def advance(self, dt: float) -> None:
        tau = self.period() * self.rng.uniform(1 - self.noise, 1 + self.noise)
        mb = dt / tau
        for i, st in enumerate(self.stages):
            c = st.counters
            c[M.K_STAGE_MICROBATCHES] = c.get(M.K_STAGE_MICROBATCHES, 0.0) + mb
            c[M.K_STAGE_COMPUTE] = c.get(M.K_STAGE_COMPUTE, 0.0) + mb * self.c
            c[M.K_STAGE_WAIT] = c.get(M.K_STAGE_WAIT, 0.0) + mb * max(tau - self.c, 0.0)
            for j in (i - 1, i + 1):
                if 0 <= j < len(self.stages):
                    key = M.stage_bytes_key(f"stage-{j}")
                    c[key] = c.get(key, 0.0) + mb * self.dp * self.a

    def polls(self, t: float) -> list[TaskPoll]:
        return [
            TaskPoll(source=f"sim://{s.info.key}", t=t, ok=True, info=s.info, values=dict(s.counters))
            for s in self.stages
        ]


class SimSource:
    """A poller Source over simulated clusters: each poll advances them by the clock's elapsed time."""

    name = "sim"

    def __init__(self, *clusters: SimCluster | SimPipeline) -> None:
        self.clusters = list(clusters)
        self._last: float | None = None

    async def poll(self, client: object, clock: ManualClock) -> list[TaskPoll]:
        now = clock.now()
        dt = 0.0 if self._last is None else now - self._last
        self._last = now
        out: list[TaskPoll] = []
        for c in self.clusters:
            if dt > 0:
                c.advance(dt)
            out += c.polls(now)
        return out


class Harness:
    """Poller → Store → Lifecycle → build_jobs → planner rule inputs → AlertEngine, on a ManualClock."""

    def __init__(
        self,
        *clusters: SimCluster | SimPipeline,
        interval: float = 2.0,
        thresholds: Thresholds | None = None,
        book: object | None = None,
        link_capacity_gbps: dict | None = None,
        source: object | None = None,
        clock: object | None = None,
        client: object | None = None,
    ) -> None:
        # source/clock/client: another source (e.g. the real scrape source over sim_exporter's pages) on the
        # wall clock; by default the clusters are polled in-process on a ManualClock
        self.clock = clock or ManualClock()
        self.store = Store()
        self.lifecycle = Lifecycle(silent_after=3, vanished_after=6)
        self.source = source or SimSource(*clusters)
        self.poller = Poller(
            [self.source],
            self.store,
            lifecycle=self.lifecycle,
            clock=self.clock,
            interval=interval,
            client=client or object(),
        )  # type: ignore[arg-type]
        self.th = thresholds or Thresholds()
        self.engine = AlertEngine(
            DEFAULT_RULES,
            raise_after=self.th.raise_after,
            clear_after=self.th.clear_after,
            raise_after_by_kind=self.th.raise_after_by_kind,
        )
        self.model = SpeedModel.load()
        self.book = book if book is not None else load_offline_book()
        self.links = link_capacity_gbps or {}
        self.interval = interval
        self.refreshes = 0
        self.goals: dict = {}

    async def refresh(self) -> list[Alert]:
        if self.refreshes and isinstance(self.clock, ManualClock):
            self.clock.advance(self.interval)
        await self.poller.poll_once()
        self.refreshes += 1
        now = self.clock.now()
        jobs = build_jobs(self.store, self.lifecycle, now)
        predicted = {}
        for job in jobs:
            shape, net = current_shape(job), network_of(job)
            if shape and net:
                predicted[job.name] = self.model.predict(net, dict(shape.gpus), ps=shape.ps)
        inputs = replace(
            rule_inputs(self.store, jobs, self.interval * RATE_WINDOW_POLLS),
            predicted=predicted,
            model=self.model,
            price_book=self.book,
            thresholds=self.th,
            overheads=shipped_overheads(),
            link_capacity_gbps=self.links,
            goals=self.goals,
            replacement_seconds=self.engine.measured_replacement_seconds(),
        )
        self.jobs = jobs
        return self.engine.evaluate(AlertContext(now, jobs, inputs))


def kinds(alerts: list[Alert]) -> set[tuple[str, str]]:
    return {(a.kind, a.subject) for a in alerts}
