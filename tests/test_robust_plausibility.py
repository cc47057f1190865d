"""Plausible ranges per kind of value (issue 27): GPU utilisation 0–100 %, GPU and host memory up to a
physical bound, memory available at most the memory there is, counters growing no faster than a NIC
or the CPUs can. A value out of range is refused with a note naming it, never the poll, never the
healthy values beside it: through a real hostile target and ``snapshot``, through Prometheus' host
detail answer, and through the real store's rates."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from cmdare.collectors import metrics as M
from cmdare.collectors.plausibility import checked
from cmdare.collectors.prometheus.hosts import KEY_LABEL, host_polls
from cmdare.collectors.samples import TaskInfo, TaskPoll
from cmdare.collectors.store import Store
from cmdare.tui import cli
from tests.hostile_server import HostileProcess


@pytest.fixture(scope="module")
def hostile() -> Iterator[HostileProcess]:
    with HostileProcess() as srv:
        yield srv


def test_each_kind_has_its_range():
    dev = M.device_key
    assert M.value_refusal(M.K_GPU_UTIL, 5e28) and M.value_refusal(M.K_GPU_UTIL, -1)
    assert (
        M.value_refusal(M.K_GPU_UTIL, 100.0) is None and M.value_refusal(dev(M.K_GPU_UTIL, "0|U"), 37) is None
    )
    assert M.value_refusal(M.GPU_GR_ACTIVE.name, 1.5) and M.value_refusal(M.GPU_GR_ACTIVE.name, 0.5) is None
    assert M.value_refusal(dev(M.K_GPU_FB_USED, "0|U"), 1e29)
    assert M.value_refusal(dev(M.K_GPU_FB_USED, "0|U"), 2 * M.GPU_MEMORY_MAX_MIB)
    assert M.value_refusal(M.K_GPU_FB_USED, 8 * 192 * 1024) is None  # 8 GPUs' sum: within the folded bound
    assert M.value_refusal(M.K_MEM_TOTAL, 2e12) is None and M.value_refusal(M.K_MEM_TOTAL, 1e29)
    assert "refused" in (M.value_refusal(M.K_MEM_AVAIL, -5) or "")
    assert M.rate_bound(M.K_NET_RX).high == M.NIC_MAX_BYTES_PER_S
    assert M.rate_bound(M.stage_bytes_key("s1")) is not None and M.rate_bound(M.K_WORKER_STEPS) is None


def test_snapshot_refuses_implausible_host_values_and_keeps_the_rest(hostile, capsys):
    code = cli.main(["snapshot", "--target", hostile.url("/t/implausible"), "--samples", "1",
                     "--interval", "0", "--timeout", "2", "--json"])  # fmt: skip
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    (node,) = doc["jobs"][0]["nodes"]
    assert node["gpu_util"] == 50.0  # the healthy GPU's, the 5e28 % one refused
    assert node["gpu_mem_used_mib"] == 20000.0  # 1e29 MiB refused: that GPU's memory left out whole
    assert node["gpu_mem_total_mib"] == 40000.0
    assert node["mem_used_bytes"] is None and node["mem_total_bytes"] == 8e9  # never negative
    message = " ".join(s["message"] for s in doc["sources"])
    assert "GPU utilisation 5e+28 % refused" in message
    assert "host memory available 9e+09 B over its total 8e+09 B refused" in message


def test_prometheus_host_detail_refuses_per_device_and_says_so():
    t = time.time()

    def row(labels: dict, v: str) -> dict:
        return {"metric": {"instance": "n1:9400", **labels}, "value": [t, v]}

    rows = [
        row({"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "0", "UUID": "G0"}, "5e28"),
        row({"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "1", "UUID": "G1"}, "40"),
        row({"__name__": "DCGM_FI_DEV_FB_USED", "gpu": "1", "UUID": "G1"}, "1e29"),
        row({"__name__": "DCGM_FI_DEV_FB_FREE", "gpu": "1", "UUID": "G1"}, "1000"),
        row({KEY_LABEL: M.K_MEM_TOTAL}, "8e9"),
        row({KEY_LABEL: M.K_MEM_AVAIL}, "9e9"),
        row({"instance": "n2:9400", KEY_LABEL: M.K_MEM_TOTAL}, "1e40"),  # the host's only value
    ]
    polls = {p.host: checked(p, Store()) for p in host_polls(rows, "prom", t)}
    n1, n2 = polls["n1"], polls["n2"]
    assert n1.values[M.K_GPU_UTIL] == 40.0  # the healthy GPU's
    assert M.K_GPU_FB_USED not in n1.values and M.K_GPU_FB_FREE not in n1.values  # GPU 1's memory whole
    assert M.K_MEM_AVAIL not in n1.values and n1.values[M.K_MEM_TOTAL] == 8e9
    assert "2 implausible value(s) refused: GPU utilisation 5e+28 %" in (n1.error or "")
    assert "host memory available" in (n1.error or "")
    assert n2.ok and not n2.values and "refused" in (n2.error or "")  # said, not silently gone


def test_a_counter_jump_faster_than_any_nic_is_refused_then_rates_recover():
    store = Store()
    info = TaskInfo(job="j", task="ps-0", role="ps")
    notes, rates = [], []
    series = [1e6, 2e6] + [1e15 + 1e6 * k for k in range(12)]  # +1e15 B in 2 s: 500 TB/s
    for i, v in enumerate(series):
        p = checked(TaskPoll(source="ps", t=1000.0 + 2 * i, ok=True, info=info, values={M.K_PS_IN: v}), store)
        notes.append(p.error)
        store.add(p)
        rates.append(store.tasks[info.key].rate(M.K_PS_IN, 10.0))
    assert notes[2] is not None and f"{M.K_PS_IN} rate: traffic 5e+14 B/s refused" in notes[2]
    assert [n for i, n in enumerate(notes) if i != 2] == [None] * (len(series) - 1)
    assert rates[1] == pytest.approx(5e5) and rates[2] is None  # refused while the jump is in the window
    assert rates[-1] == pytest.approx(5e5, rel=1e-3)  # then plausible again, from the points after it
