"""The simulated clusters of :mod:`alert_sim` served over HTTP: one ``/metrics`` page per task on its own
127.0.0.1 port (as each task's exporter would be), the cluster advanced by the wall-clock time since the
last page was read. Real scrapers (Debian's Prometheus, VictoriaMetrics, the app's own scrape source) then
read the same counters. Also :class:`SimSync`, a synchronous all-reduce job (compute and exposed all-reduce
per step, per rank). A support module, not a test module (used by ``test_rules_live.py``)."""

from __future__ import annotations

import random
import threading
import time
from http.server import ThreadingHTTPServer

from cmdare.collectors import metrics as M
from cmdare.collectors.samples import JobFacts, ModelSpec, TaskInfo, TaskPoll
from tests.alert_sim import SimCluster, SimPipeline, SimTask
from tests.page_server import close_server, serve_pages


class SimSync:
    """Synchronous data-parallel training (DDP-like): every rank computes ``compute_s`` then waits
    ``allreduce_s`` (exposed) per step; one global step per step; ±``noise`` multiplicative."""

    def __init__(
        self, ranks: int, compute_s: float, allreduce_s: float, *, noise: float = 0.03, seed: int = 0,
        job: str = "sync", gpu: str = "V100",
    ) -> None:  # fmt: skip
        self.c, self.e, self.noise, self.rng, self.job = (
            compute_s,
            allreduce_s,
            noise,
            random.Random(seed),
            job,
        )
        self.workers = [
            SimTask(
                TaskInfo(
                    job=job,
                    task=f"rank-{i}",
                    role="chief" if i == 0 else "worker",
                    gpu=gpu,
                    region="us-central1",
                    zone="",
                    provisioning="standard",
                    rank=str(i),
                )
            )  # fmt: skip
            for i in range(ranks)
        ]
        keys = (M.K_WORKER_STEPS, M.K_STEP_SECONDS_SUM, M.K_STEP_SECONDS_COUNT, M.K_ALLREDUCE_SECONDS_SUM,
                M.K_ALLREDUCE_SECONDS_COUNT)  # fmt: skip
        for w in self.workers:
            w.counters = dict.fromkeys(keys, 0.0)
        self.facts = JobFacts(
            job,
            ModelSpec(
                name="resnet50",
                model_flops=4.1e9 * 3,
                params=25_557_032,
                batch_size=64,
                sync="sync-allreduce",
            ),
            10**7,
        )
        self.global_step = 0.0

    def advance(self, dt: float) -> None:
        c = self.c * self.rng.uniform(1 - self.noise, 1 + self.noise)
        e = self.e * self.rng.uniform(1 - self.noise, 1 + self.noise)
        n = dt / (c + e)
        for w in self.workers:
            k = w.counters
            for key, inc in ((M.K_WORKER_STEPS, n), (M.K_STEP_SECONDS_SUM, n * c), (M.K_STEP_SECONDS_COUNT, n),
                             (M.K_ALLREDUCE_SECONDS_SUM, n * e), (M.K_ALLREDUCE_SECONDS_COUNT, n)):  # fmt: skip
                k[key] += inc
        self.global_step += n

    def polls(self, t: float) -> list[TaskPoll]:
        return [
            TaskPoll(
                source=f"sim://{w.info.key}",
                t=t,
                ok=True,
                info=w.info,
                values={**w.counters, M.K_GLOBAL_STEP: self.global_step},
                job_facts=self.facts,
            )  # fmt: skip
            for w in self.workers
        ]


Cluster = SimCluster | SimPipeline | SimSync


def _quote(value: object) -> str:
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def render_page(poll: TaskPoll) -> str:
    """One task's ``/metrics`` page from its simulated values (series keys → exposition samples)."""
    i = poll.info
    assert i is not None
    labels = {"job": i.job, "task": i.task, "role": i.role, "gpu": i.gpu, "region": i.region,
              "provisioning": i.provisioning, "rank": i.rank}  # fmt: skip
    lines = [f"{M.TASK_INFO.name}{{{','.join(f'{k}={_quote(v)}' for k, v in labels.items())}}} 1"]
    if poll.job_facts is not None:
        facts = poll.job_facts.labels()
        lines.append(f"{M.JOB_INFO.name}{{{','.join(f'{k}={_quote(v)}' for k, v in facts.items())}}} 1")
    for key, value in (poll.values or {}).items():
        name, _, rest = key.partition("{")
        if rest:  # e.g. cmdare_ps_bytes_total{direction=in}
            label, _, v = rest.rstrip("}").partition("=")
            name += f"{{{label}={_quote(v)}}}"
        lines.append(f"{name} {value!r}")
    return "\n".join(lines) + "\n"


class SimExporters:
    """Every task of ``clusters`` on its own port; ``urls`` / ``targets`` in task order."""

    def __init__(self, *clusters: Cluster) -> None:
        self.clusters = list(clusters)
        self.lock = threading.Lock()
        self.last = time.monotonic()
        self.servers: list[ThreadingHTTPServer] = []
        self.tasks: list[tuple[Cluster, str]] = []  # (cluster, task key) of each server
        for c in self.clusters:
            for p in c.polls(time.time()):
                assert p.info is not None
                self.tasks.append((c, p.info.key))
        for cluster, key in self.tasks:
            self.servers.append(self._serve(cluster, key))
        self.targets = [f"127.0.0.1:{s.server_address[1]}" for s in self.servers]
        self.urls = [f"http://{t}/metrics" for t in self.targets]

    def _page(self, cluster: Cluster, key: str) -> bytes | None:
        with self.lock:
            now = time.monotonic()
            if now > self.last:
                for c in self.clusters:
                    c.advance(now - self.last)
                self.last = now
            poll = next(p for p in cluster.polls(time.time()) if p.info is not None and p.info.key == key)
        return render_page(poll).encode() if poll.ok else None

    def _serve(self, cluster: Cluster, key: str) -> ThreadingHTTPServer:
        # a dead task: the connection is refused in life; here a 503
        return serve_pages(lambda _path: self._page(cluster, key), missing_status=503)

    def close(self) -> None:
        for s in self.servers:
            close_server(s)

    def __enter__(self) -> SimExporters:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
