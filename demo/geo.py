"""The demo's second job: an LM pipeline over 3 datacenters with one slow WAN link, served through
the project's exporter on loopback (each pipeline stage is one task with stage metrics).

Steady-state pipeline physics (background.md §2): every stage is paced by the period
``τ = max(c, max_k D·A/B_k)`` per micro-batch — compute ``c`` per stage, activations ``A`` sent over
each DC boundary by ``D`` pipelines sharing a link of bandwidth ``B_k``. A stage computes ``c`` and
waits ``τ − c`` per micro-batch; boundary stages send ``D·A`` bytes forward (and the same gradients
backward). Figures: ``demo/data/demo_geo.json`` with their provenance.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

from cmdare.collectors.exporter import TrainingExporter
from cmdare.collectors.samples import TaskInfo
from cmdare.collectors.scrape.source import ScrapeTarget

if TYPE_CHECKING:
    from cmdare.collectors.exporter.page_host import PageHost


def load_geo_scenario() -> dict:
    return json.loads(resources.files("cmdare.demo").joinpath("data/demo_geo.json").read_text())


@dataclass
class _Stage:
    index: int
    info: TaskInfo
    exporter: TrainingExporter
    port: int


class GeoPipelineDemo:
    def __init__(self, seed: int = 11) -> None:
        self.sc = load_geo_scenario()
        self.rng = random.Random(seed)
        self.stages: list[_Stage] = []
        self._mb_frac = 0.0
        self.microbatches = 0
        self.iterations = 0

    @property
    def job(self) -> str:
        return self.sc["job"]

    def dc_of(self, stage: int) -> str:
        return next(d["name"] for d in self.sc["dcs"] if stage in d["stages"])

    def link_gbps(self, a: str, b: str) -> float | None:
        for link in self.sc["links"]:
            if {link["a"], link["b"]} == {a, b}:
                return float(link["gbps"])
        return None

    def period(self) -> float:
        """Seconds per micro-batch in steady state: the slowest of compute and each WAN transfer."""
        c, d, a = self.sc["stage_compute_seconds"], self.sc["dp_pipelines"], self.sc["activation_bytes"]
        transfers = [
            d * a * 8 / (g * 1e9)
            for s in range(self.sc["stages"] - 1)
            if (g := self._boundary_gbps(s)) is not None
        ]
        return max([c, *transfers])

    def _boundary_gbps(self, s: int) -> float | None:
        a, b = self.dc_of(s), self.dc_of(s + 1)
        return None if a == b else self.link_gbps(a, b)

    def start(self, pages: PageHost | None = None) -> list[ScrapeTarget]:
        """Start each stage's exporter (answered by ``pages``' thread when given) on 127.0.0.1; the targets."""
        for s in range(self.sc["stages"]):
            dc = self.dc_of(s)
            info = TaskInfo(
                job=self.job,
                task=f"stage-{s}",
                role="stage",
                gpu=self.sc["gpu"],
                region=dc,
                zone=f"{dc}-a",
                provisioning="standard",
                dc=dc,
                stage=str(s),
            )
            exp = TrainingExporter(
                info.job,
                "stage",
                info.task,
                gpu=info.gpu,
                region=dc,
                zone=info.zone,
                provisioning="standard",
                dc=dc,
                stage=str(s),
                model=self.sc["model"],
                sync="pipeline",  # the rate of the shared global step, not a sum over stages
            )
            self.stages.append(_Stage(s, info, exp, exp.start(0, host=pages)))
        return self.targets()

    def targets(self) -> list[ScrapeTarget]:
        return [ScrapeTarget(f"http://127.0.0.1:{st.port}/metrics", st.info) for st in self.stages]

    def advance(self, dt: float) -> None:
        """Run the pipeline for ``dt`` seconds of (demo) time."""
        tau = self.period() * self.rng.uniform(0.97, 1.03)
        self._mb_frac += dt / tau
        k = int(self._mb_frac)
        if not k:
            return
        self._mb_frac -= k
        c, d, a = self.sc["stage_compute_seconds"], self.sc["dp_pipelines"], self.sc["activation_bytes"]
        for st in self.stages:
            sent: dict[str, int] = {}
            if st.index + 1 < len(self.stages):
                sent[f"stage-{st.index + 1}"] = d * a * k  # activations forward
            if st.index > 0:
                sent[f"stage-{st.index - 1}"] = d * a * k  # gradients backward
            for _ in range(k):
                st.exporter.stage_microbatch(c, max(0.0, tau - c), {p: n // k for p, n in sent.items()})
        self.microbatches += k
        done = (self.microbatches // self.sc["microbatches"]) - self.iterations
        if done > 0:
            self.iterations += done
            last = self.stages[-1].exporter
            last.step(tau * self.sc["microbatches"], steps=done)
            for st in self.stages:
                st.exporter.set_global_step(self.iterations)

    def exporters(self) -> list[TrainingExporter]:
        return [st.exporter for st in self.stages]

    def stop(self) -> None:
        for st in self.stages:
            st.exporter.stop()
