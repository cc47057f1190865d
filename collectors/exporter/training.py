"""Exporter for training scripts: a few lines in a training loop expose the metric contract.

    from cmdare.collectors.exporter import TrainingExporter
    exp = TrainingExporter(job="resnet", role="worker", task="worker-0", gpu="V100",
                           region="us-central1", provisioning="spot", sync="async-ps")
    exp.start(port=9400)            # serves /metrics (binds 127.0.0.1 unless addr is given)
    for step in ...:
        t0 = time.perf_counter(); loss = train_step(); exp.step(time.perf_counter() - t0, examples=128)
        exp.set_global_step(global_step)

Synchronous data parallelism (DDP, Horovod): one exporter per process (per GPU), with ``rank`` and
``local_rank``; two lines split each step into compute (``cmdare_step_seconds``) and exposed all-reduce
(``cmdare_allreduce_seconds``)::

    model.register_comm_hook(None, exp.ddp_comm_hook())      # DDP: time each bucket's all-reduce
    with exp.sync_step(examples=batch): train_step(x, y)     # forward + backward + optimizer step

Checkpoints: ``with exp.checkpoint(): save(...)`` records the write time and when the last checkpoint was
written (the planner's work at risk and checkpoint interval).

Horovod: ``with exp.sync_step(examples=batch):`` around the step and, inside it,
``with exp.allreduce_wait(): optimizer.synchronize()`` before ``with optimizer.skip_synchronize():
optimizer.step()``.

``sync`` declares how the job trains (``async-ps``: each worker's step is a global step, the job's
steps/s is the sum of the workers'; ``sync-allreduce`` or ``pipeline``: all workers take each global
step together, the job's steps/s is the global step's rate). Undeclared, cmdare-tui infers it (see
docs/metrics.md). ``gpu_ids`` names the GPUs the task uses (DCGM ``gpu`` indices or UUIDs) so that
host GPU detail joins only the tasks that own those GPUs.

Built on prometheus_client; each exporter has its own registry so several can live in one process.
"""

from __future__ import annotations

import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from cmdare.collectors import metrics as M
from cmdare.collectors.exporter.allreduce_timer import AllreduceTimer
from cmdare.collectors.exporter.page_host import PageHost

log = logging.getLogger(__name__)

GCE_PREEMPTED_URL = "http://metadata.google.internal/computeMetadata/v1/instance/preempted"
# Buckets for one local step's compute time: 5 ms .. 60 s.
STEP_BUCKETS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
# Buckets for one checkpoint write: 0.1 s .. 10 min (CM-DARE: 3.7 s + 0.02 s/MB to cloud storage).
CHECKPOINT_BUCKETS = (0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)


class TrainingExporter:
    def __init__(
        self,
        job: str,
        role: str,
        task: str,
        *,
        gpu: str = "",
        region: str = "",
        zone: str = "",
        provisioning: str = "",
        dc: str = "",
        stage: str = "",
        model: str = "",
        model_flops: float = 0.0,
        params: float = 0.0,
        batch_size: int = 0,
        target_steps: int = 0,
        sync: str = "",
        gpu_ids: str = "",
        rank: int | None = None,
        local_rank: int | None = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        if sync and sync not in M.SYNC_MODES:
            raise ValueError(f"sync must be one of {', '.join(M.SYNC_MODES)} (or empty), not {sync!r}")
        self.registry = registry or CollectorRegistry()
        r = self.registry
        info = Gauge(M.TASK_INFO.name, M.TASK_INFO.help, list(M.TASK_INFO.labels), registry=r)
        ranks = ("" if rank is None else str(int(rank)), "" if local_rank is None else str(int(local_rank)))
        info.labels(job, role, task, gpu, region, zone, provisioning, dc, stage, gpu_ids, *ranks).set(1)
        if model or model_flops or params or sync or target_steps:
            jinfo = Gauge(M.JOB_INFO.name, M.JOB_INFO.help, list(M.JOB_INFO.labels), registry=r)
            jinfo.labels(
                job, model, f"{model_flops:g}", f"{params:g}", str(batch_size), str(target_steps), sync
            ).set(1)
        self.global_step = Gauge(M.GLOBAL_STEP.name, M.GLOBAL_STEP.help, registry=r)
        self.worker_steps = Counter(M.WORKER_STEPS.name, M.WORKER_STEPS.help, registry=r)
        self.examples = Counter(M.EXAMPLES.name, M.EXAMPLES.help, registry=r)
        self.step_seconds = Histogram(
            M.STEP_SECONDS.name, M.STEP_SECONDS.help, buckets=STEP_BUCKETS, registry=r
        )
        self.allreduce_seconds: Histogram | None = None
        self._timer = AllreduceTimer()
        if sync == "sync-allreduce" or rank is not None:
            self.allreduce_seconds = Histogram(
                M.ALLREDUCE_SECONDS.name, M.ALLREDUCE_SECONDS.help, buckets=STEP_BUCKETS, registry=r
            )
        self.preempted = Gauge(M.PREEMPTED.name, M.PREEMPTED.help, registry=r)
        self.checkpoint_seconds = Histogram(
            M.CHECKPOINT_SECONDS.name, M.CHECKPOINT_SECONDS.help, buckets=CHECKPOINT_BUCKETS, registry=r
        )
        self.last_checkpoint = Gauge(M.LAST_CHECKPOINT.name, M.LAST_CHECKPOINT.help, registry=r)
        Gauge(M.PROCESS_START.name, M.PROCESS_START.help, registry=r).set(time.time())  # the task's uptime
        self._ps_bytes: Counter | None = None
        self._stage: tuple[Counter, Counter, Counter, Counter] | None = None
        if role == "ps":
            self._ps_bytes = Counter(M.PS_BYTES.name, M.PS_BYTES.help, ["direction"], registry=r)
        if role == "stage" or stage:
            self._stage = (
                Counter(M.STAGE_COMPUTE.name, M.STAGE_COMPUTE.help, registry=r),
                Counter(M.STAGE_WAIT.name, M.STAGE_WAIT.help, registry=r),
                Counter(M.STAGE_BYTES_SENT.name, M.STAGE_BYTES_SENT.help, ["peer"], registry=r),
                Counter(M.STAGE_MICROBATCHES.name, M.STAGE_MICROBATCHES.help, registry=r),
            )
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None
        self._host: PageHost | None = None  # the host answering for this exporter (start(host=...)), if any
        self._stop = threading.Event()
        self.port: int | None = None

    # --- training-loop calls -------------------------------------------------------------
    def step(self, compute_seconds: float, examples: int = 0, steps: int = 1) -> None:
        """Record ``steps`` local steps that took ``compute_seconds`` each of pure compute."""
        self.worker_steps.inc(steps)
        if examples:
            self.examples.inc(examples)
        for _ in range(steps):
            self.step_seconds.observe(compute_seconds)

    def observe_allreduce(self, seconds: float) -> None:
        """Record one synchronous step's exposed all-reduce time (the sync mode's histogram)."""
        if self.allreduce_seconds is None:
            raise ValueError("the all-reduce histogram exists only with sync='sync-allreduce' or a rank")
        self.allreduce_seconds.observe(max(0.0, seconds))

    def ddp_comm_hook(self) -> Callable[[Any, Any], Any]:
        """DDP communication hook (PyTorch's default all-reduce, timed):
        ``model.register_comm_hook(None, exp.ddp_comm_hook())``."""
        return self._timer.ddp_hook()

    @contextmanager
    def allreduce_wait(self) -> Iterator[None]:
        """Time an explicit wait for reduced gradients (Horovod: ``optimizer.synchronize()``)."""
        with self._timer.waiting():
            yield

    @contextmanager
    def sync_step(self, examples: int = 0) -> Iterator[None]:
        """Time one synchronous step: its wall time less the exposed all-reduce (from the DDP hook
        or :meth:`allreduce_wait`) is compute (``cmdare_step_seconds``); the rest is all-reduce."""
        self._timer.take()  # anything stamped between steps belongs to no step
        t0 = time.perf_counter()
        yield
        wall = time.perf_counter() - t0
        exposed = min(self._timer.take(), wall)
        self.step(wall - exposed, examples=examples)
        self.observe_allreduce(exposed)

    @contextmanager
    def checkpoint(self) -> Iterator[None]:
        """Time one checkpoint write: ``with exp.checkpoint(): torch.save(state, path)``. On success the write
        time goes to ``cmdare_checkpoint_seconds`` and ``cmdare_last_checkpoint_timestamp_seconds`` is now (a
        failed write records nothing: the last good checkpoint is still the one a restart resumes from)."""
        t0 = time.perf_counter()
        yield
        self.checkpoint_done(time.perf_counter() - t0)

    def checkpoint_done(self, seconds: float, at: float | None = None) -> None:
        """Record a checkpoint written in ``seconds``, finished at Unix time ``at`` (default now)."""
        self.checkpoint_seconds.observe(max(0.0, seconds))
        self.last_checkpoint.set(time.time() if at is None else at)

    def set_global_step(self, step: int) -> None:
        self.global_step.set(step)

    def add_ps_bytes(self, direction: str, n: int) -> None:
        if self._ps_bytes is None:
            raise ValueError("PS byte counters exist only on role='ps' exporters")
        self._ps_bytes.labels(direction).inc(n)

    def stage_microbatch(
        self, compute_seconds: float, wait_seconds: float, sent: dict[str, int] | None = None
    ) -> None:
        """Record one micro-batch of a pipeline stage: compute, waiting for peers, bytes sent per peer."""
        if self._stage is None:
            raise ValueError("stage counters exist only on role='stage' exporters")
        compute, wait, bytes_sent, mbs = self._stage
        compute.inc(compute_seconds)
        wait.inc(wait_seconds)
        mbs.inc()
        for peer, n in (sent or {}).items():
            bytes_sent.labels(peer).inc(n)

    def set_preempted(self, preempted: bool) -> None:
        self.preempted.set(1 if preempted else 0)

    # --- serving ----------------------------------------------------------------------------
    def start(self, port: int = 0, addr: str = "127.0.0.1", host: PageHost | None = None) -> int:
        """Serve ``/metrics`` on ``addr:port`` (0 = any free port); returns the port. With ``host``, that
        host's thread answers (several exporters in one process), else a thread of the exporter's own."""
        if host is not None:
            server = host.add(self.registry, port, addr)
            self._host = host
        else:
            server, self._thread = start_http_server(port, addr=addr, registry=self.registry)
        self._server = server
        self.port = server.server_address[1]
        return self.port

    def stop(self) -> None:
        self._stop.set()
        if self._server is not None:
            if self._host is not None:
                self._host.remove(self._server)
            else:
                self._server.shutdown()
                self._server.server_close()
            self._server = None

    def watch_gce_preemption(self, interval: float = 5.0, url: str = GCE_PREEMPTED_URL) -> threading.Thread:
        """Poll the GCE metadata server's ``instance/preempted`` (header ``Metadata-Flavor: Google``)
        in a daemon thread and mirror it into ``cmdare_instance_preempted``."""

        def loop() -> None:
            while not self._stop.wait(interval):
                try:
                    req = urllib.request.Request(url, headers={"Metadata-Flavor": "Google"})
                    with urllib.request.urlopen(req, timeout=2) as resp:
                        self.set_preempted(resp.read().strip().upper() == b"TRUE")
                except (urllib.error.URLError, OSError) as exc:
                    log.debug("metadata server not reachable: %s", exc)

        t = threading.Thread(target=loop, name="cmdare-preemption-watch", daemon=True)
        t.start()
        return t
