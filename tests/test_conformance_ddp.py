"""Conformance: a real PyTorch DDP job (examples/pytorch_ddp: gloo, CPU, 2 processes launched with
torchrun), watched by direct scrape and through Debian's real Prometheus.

Synchronous training: both ranks take every global step together. The job's steps/s must equal the
global step's own rate (read from the job's own counter ~20 times a second) within 2% over a 10 s
window, not the sum of the ranks' rates (which would double it); declared ``sync-allreduce`` and,
with the declaration removed, inferred the same way. Examples/s is the sum over ranks.

The exporter's sync mode splits each step into compute (``cmdare_step_seconds``) and exposed all-reduce
(``cmdare_allreduce_seconds``, from the DDP communication hook): both are read per rank, with ``rank``
and ``local_rank``, and compute + all-reduce must account for the step's wall time (1 / steps/s)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from cmdare.collectors import metrics as M
from cmdare.collectors.clock import SystemClock
from cmdare.collectors.jobrate import job_rate
from cmdare.collectors.lifecycle import Lifecycle
from cmdare.collectors.observed import build_jobs
from cmdare.collectors.poller import Poller
from cmdare.collectors.prometheus.source import PrometheusAPISource
from cmdare.collectors.scrape.source import ScrapeSource, ScrapeTarget
from cmdare.collectors.store import Store
from tests.prom_server import free_port, prometheus_server  # noqa: F401 (fixture)
from tests.training_jobs import CounterSampler
from tests.training_jobs import ddp_job as run_ddp

pytest.importorskip("torch")
pytestmark = pytest.mark.slow

WINDOW_S = 10.0
POLLS = 12


@pytest.fixture
def ddp(tmp_path: Path) -> Iterator[int]:
    with run_ddp(tmp_path) as base:
        yield base


def _own_rate(sampler: CounterSampler, store: Store) -> float:
    """The global step's own rate over the span the chief's samples cover in the window."""
    ts = store.tasks["pytorch-ddp/worker-0"]
    t, _ = ts.window(M.K_GLOBAL_STEP, WINDOW_S)
    return sampler.rate(0, float(t[0]), float(t[-1]))


async def test_ddp_job_rate_is_the_global_step_rate_not_the_sum(ddp, prometheus_server):  # noqa: F811
    urls = [f"http://127.0.0.1:{ddp + r}/metrics" for r in range(2)]
    prom = prometheus_server([f"127.0.0.1:{ddp + r}" for r in range(2)], scrape_interval="1s")
    await asyncio.to_thread(prom.wait_for_targets, 2, 60.0)
    clock = SystemClock()
    scrape_store, prom_store = Store(), Store()
    # interval 2 s: the job rate's window is 5 polls' worth = 10 s; polled every second below
    pollers = [
        Poller(
            [ScrapeSource([ScrapeTarget(u) for u in urls])],
            scrape_store,
            lifecycle=Lifecycle(),
            clock=clock,
            interval=2.0,
        ),
        Poller(
            [PrometheusAPISource(prom.url, 'job="cmdare-test"')],
            prom_store,
            lifecycle=Lifecycle(),
            clock=clock,
            interval=2.0,
        ),
    ]
    sampler = CounterSampler([urls[0]], key=M.K_GLOBAL_STEP)
    sampler.start()
    for _ in range(POLLS):
        await asyncio.gather(*(p.poll_once() for p in pollers))
        await asyncio.sleep(1.0)
    sampler.stop()
    shares: list[dict[str, float]] = []  # per source: rank → all-reduce share
    for poller, store in zip(pollers, (scrape_store, prom_store), strict=True):
        shares.append({})
        (job,) = build_jobs(store, poller.lifecycle, clock.now())
        own = _own_rate(sampler, store)
        ranks = sum(store.tasks[f"pytorch-ddp/worker-{r}"].rate(M.K_WORKER_STEPS, WINDOW_S) for r in range(2))
        print(
            f"{type(poller.sources[0]).__name__}: job {job.steps_per_sec:.2f} steps/s, own global step "
            f"{own:.2f}, sum of ranks {ranks:.2f}"
        )
        assert (job.sync, job.sync_how) == ("sync-allreduce", "declared")
        # within 5%: Prometheus stamps a sample when its scrape began, the sampler when it read, so on a busy
        # machine the two spans differ by a scrape's jitter (2.2% seen over 10 s); the sum would be 100% off
        assert own > 0 and job.steps_per_sec == pytest.approx(own, rel=0.05)
        assert ranks == pytest.approx(2 * own, rel=0.05)  # what the old sum showed
        assert job.examples_per_sec == pytest.approx(32 * 2 * own, rel=0.06)  # 32 examples a rank a step
        assert {n.name: n.role for n in job.nodes} == {"worker-0": "chief", "worker-1": "worker"}
        assert not any(n.flags for n in job.nodes)
        assert {(n.rank, n.local_rank) for n in job.nodes} == {("0", "0"), ("1", "1")}
        for n in job.nodes:
            assert n.step_seconds and n.allreduce_seconds is not None
            share = n.allreduce_seconds / (n.step_seconds + n.allreduce_seconds)
            wall = (n.step_seconds + n.allreduce_seconds) * job.steps_per_sec
            print(
                f"  {n.name}: compute {n.step_seconds * 1e3:.1f} ms, all-reduce {share:.0%}, wall share {wall:.2f}"
            )
            assert 0.0 < share < 1.0
            shares[-1][n.name] = share
            # compute + all-reduce are timed parts of each step (the loop's few lines outside are the rest);
            # the histograms and the rate cover windows a poll apart, so the account holds to what those
            # windows can differ by on a loaded machine (1.036 seen at load 6), not to the percent
            assert 0.7 <= wall <= 1.15
        undeclared = job_rate(list(store.tasks.values()), None, WINDOW_S)
        assert undeclared.sync == "sync-allreduce" and undeclared.how == "inferred"
        assert undeclared.steps_per_sec == pytest.approx(
            own, rel=0.05
        )  # as the declared rate: the same spans
    direct, through_prometheus = shares  # one histogram per rank, read two ways
    assert direct.keys() == through_prometheus.keys()
    assert all(abs(direct[k] - through_prometheus[k]) < 0.1 for k in direct)
    await asyncio.gather(*(p.aclose() for p in pollers))
