"""Conformance, pure parts: job-rate semantics by training mode, the exporter's own sample times,
which tasks own GPUs, DCGM pages (MOCK pages from NVIDIA's counter list, see dcgm_page.py)."""

from __future__ import annotations

import pytest

from cmdare.collectors import metrics as M
from cmdare.collectors.hostdetail import owns_gpus
from cmdare.collectors.jobrate import job_rate
from cmdare.collectors.samples import JobFacts, ModelSpec, TaskInfo
from cmdare.collectors.scrape.exposition import parse_exposition
from cmdare.collectors.store import TaskSeries
from tests.dcgm_page import Gpu, page


def _series(
    task: str,
    rate: float,
    global_rate: float,
    offset: float = 0.0,
    role: str = "worker",
    histogram: bool = True,
) -> TaskSeries:
    ts = TaskSeries(TaskInfo(job="j", task=task, role=role), 64)
    for i in range(11):
        values = {
            M.K_WORKER_STEPS: rate * i,
            M.K_GLOBAL_STEP: offset + global_rate * i,
            M.K_EXAMPLES: 32 * rate * i,
        }
        if histogram:  # the step-time histogram (a log run has none)
            values[M.K_STEP_SECONDS_COUNT] = rate * i
        ts.append(float(i), values)
    return ts


def test_sync_jobs_take_the_global_step_rate_async_jobs_the_sum():
    ddp = [_series(f"worker-{i}", 71.0, 71.0) for i in range(2)]  # one shared global step
    ps = [_series(f"worker-{i}", 20.0, 60.0) for i in range(3)]  # each push is a global step
    runs = [_series("a", 20.0, 20.0, 0.0), _series("b", 50.0, 50.0, 5000.0)]  # independent runs
    assert job_rate(ddp, None, 10.0).steps_per_sec == pytest.approx(71.0)  # the issue: 141 shown for 71
    assert (job_rate(ddp, None, 10.0).sync, job_rate(ddp, None, 10.0).how) == ("sync-allreduce", "inferred")
    assert job_rate(ps, None, 10.0).steps_per_sec == pytest.approx(60.0)
    assert job_rate(ps, None, 10.0).sync == "async-ps"
    assert job_rate(runs, None, 10.0).steps_per_sec == pytest.approx(70.0)  # not shared: summed
    declared = job_rate(ps, JobFacts("j", ModelSpec(sync="sync-allreduce")), 10.0)
    assert (declared.steps_per_sec, declared.how) == (pytest.approx(60.0), "declared")  # the global step
    assert job_rate(ddp, None, 10.0).examples_per_sec == pytest.approx(2 * 32 * 71.0)  # summed in every mode
    # the same steps from two log runs named for ranks (no step-time histogram): the per-rank logs of one
    # sync job (issue 31)
    ddp = [_series(f"worker-{i}", 71.0, 71.0, histogram=False) for i in range(2)]
    assert (job_rate(ddp, None, 10.0).steps_per_sec, job_rate(ddp, None, 10.0).sync) == (
        pytest.approx(71.0),
        "sync-allreduce",
    )
    sweep = [_series(name, 71.0, 71.0, histogram=False) for name in ("lr_a", "lr_b")]  # other names: summed
    assert job_rate(sweep, None, 10.0).steps_per_sec == pytest.approx(142.0)


def test_the_exporters_own_sample_time_is_read():
    text = 'cmdare_task_info{job="j",task="0",role="worker"} 1\ncmdare_worker_steps_total 10 1700000000500\n'
    parsed = parse_exposition(text)
    assert parsed.sample_time == 1700000000.5 and parsed.info.key == "j/worker-0"
    weird = text + '# TYPE other_thing counter\nother_thing_total{a="b"} 1e3 1700000000900\n'
    assert parse_exposition(weird).sample_time == 1700000000.5  # only the task's own samples count


def test_gpu_owners():
    assert owns_gpus("worker", "", "", host_has_gpus=True)  # a worker on a DCGM host
    assert not owns_gpus("ps", "", "", host_has_gpus=True)  # a CPU-only PS never gets DCGM detail
    assert not owns_gpus("worker", "cpu", "", host_has_gpus=True)
    assert owns_gpus("ps", "", "0", host_has_gpus=True) and owns_gpus(
        "worker", "V100", "", host_has_gpus=False
    )


def test_dcgm_pages_mig_and_not():
    v100 = parse_exposition(
        page(
            [
                Gpu(0, "GPU-a", "Tesla V100-SXM2-16GB", 80, 100, 16060),
                Gpu(1, "GPU-b", "Tesla V100-SXM2-16GB", 40, 200, 15960),
            ]
        )
    )
    assert v100.gpu_model == "Tesla V100-SXM2-16GB" and v100.values[M.K_GPU_UTIL] == 60
    assert (v100.values[M.K_GPU_FB_USED], v100.values[M.K_GPU_FB_FREE], v100.values[M.K_GPU_COUNT]) == (
        300,
        32020,
        2,
    )
    mig = parse_exposition(
        page(
            [
                Gpu(
                    0,
                    "GPU-c",
                    "NVIDIA A100-SXM4-40GB",
                    0,
                    0,
                    0,
                    mig=(("1g.5gb", 1, 0.25, 10, 4854), ("1g.5gb", 2, 0.75, 20, 4844)),
                )
            ]
        )
    )
    assert mig.values[M.K_GPU_UTIL] == pytest.approx(50.0)  # no GPU_UTIL on MIG: GR_ENGINE_ACTIVE x 100
    assert mig.values[M.K_GPU_COUNT] == 2 and not mig.own_info
