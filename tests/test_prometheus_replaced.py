"""Issue 27 item 3: a replacement VM keeps its task's name and gets a new address. Through Debian's real
Prometheus (file-based service discovery, the way a cloud's instance list reaches it), the task must stay
one task, up, counted as replaced and never revoked; an address that is simply gone ages out."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from cmdare.collectors.clock import SystemClock
from cmdare.collectors.exporter import TrainingExporter
from cmdare.collectors.lifecycle import Lifecycle
from cmdare.collectors.poller import Poller
from cmdare.collectors.prometheus.source import PrometheusAPISource
from cmdare.collectors.samples import TaskState
from cmdare.collectors.store import Store
from tests.prom_server import prometheus_server  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow

ROLES = {"worker-0": "chief", "worker-1": "worker", "worker-2": "worker", "ps-0": "ps"}


def _exporter(task: str) -> TrainingExporter:
    e = TrainingExporter("resnet", ROLES[task], task, gpu="K80" if ROLES[task] != "ps" else "",
                         region="us-east1", provisioning="spot")  # fmt: skip
    e.start(0, addr="127.0.0.1")
    e.step(0.01, examples=32)
    return e


def _write_sd(path: Path, exporters: dict[str, TrainingExporter]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps([{"targets": [f"127.0.0.1:{e.port}" for e in exporters.values()]}]))
    tmp.replace(path)  # atomically: Prometheus never reads half a list


async def test_a_task_at_a_new_address_is_the_same_task_and_a_gone_one_ages_out(prometheus_server, tmp_path):  # noqa: F811
    sd = tmp_path / "targets.json"
    exporters = {t: _exporter(t) for t in ROLES}
    _write_sd(sd, exporters)
    config = ("  - job_name: 'train'\n    file_sd_configs:\n"
              f"      - files: ['{sd}']\n        refresh_interval: 1s\n")  # fmt: skip
    prom = prometheus_server([], scrape_configs=config)
    src = PrometheusAPISource(prom.url, 'job="train"', forget_after_s=1.5)
    lc = Lifecycle(silent_after=2, vanished_after=3)
    poller = Poller([src], Store(), lifecycle=lc, interval=0, clock=SystemClock())
    try:
        await asyncio.to_thread(prom.wait_for_targets, 4)
        await asyncio.to_thread(prom.wait_for, "cmdare_task_info", lambda r: len(r) >= 4)
        for _ in range(20):  # every task read once (a loaded machine may answer a scrape late)
            cycle = await poller.poll_once()
            if cycle.answered == 4:
                break
            await asyncio.sleep(0.3)
        assert cycle.answered == 4 and len(cycle.polls) == 4, [(p.source, p.error) for p in cycle.polls]

        # worker-1's VM is replaced (same name, a new address); ps-0 goes for good
        old = exporters.pop("worker-1")
        gone = exporters.pop("ps-0")
        exporters["worker-1"] = _exporter("worker-1")
        _write_sd(sd, exporters)
        old.stop()
        gone.stop()
        new_addr = f"127.0.0.1:{exporters['worker-1'].port}"
        await asyncio.to_thread(
            prom.wait_for, "cmdare_task_info", lambda r: {x["metric"]["instance"] for x in r} >= {new_addr}
        )
        await asyncio.to_thread(
            prom.wait_for, "count(cmdare_task_info)", lambda r: r and r[0]["value"][1] == "3"
        )
        revoked, polls = [], []
        t_end = time.monotonic() + 2.5  # past forget_after_s
        while time.monotonic() < t_end or not polls:
            cycle = await poller.poll_once()
            revoked += [tr.task for tr in cycle.transitions if tr.new is TaskState.REVOKED]
            polls.append(cycle)
            await asyncio.sleep(0.3)
    finally:
        await poller.aclose()
        for e in [*exporters.values()]:
            e.stop()

    assert src.replaced == 1
    assert "1 task(s) replaced" in (cycle.notes.get(src.display) or "")
    assert "resnet/worker-1" not in revoked
    node = lc.nodes["resnet/worker-1"]
    assert node.state is TaskState.UP
    names = {n.info.key for n in lc.nodes.values()}
    assert not any("@" in k for k in names), names  # no duplicate row for the new address
    # the task that went for good was reported, then aged out: the last refresh answers 3 of 3
    assert any(not p.ok and p.info and p.info.name == "ps-0" for c in polls for p in c.polls)
    last = polls[-1]
    assert len(last.polls) == 3 and last.answered == 3, [(p.source, p.error) for p in last.polls]


def test_names_follow_tasks_when_addresses_are_swapped_and_reused() -> None:
    """Addresses are reused: two tasks swap theirs, then one address answers for a new task while the
    task it had is found nowhere (reported gone under its own name), then comes back elsewhere. Each task
    keeps its source name throughout (the identity read alone: no server needed for this bookkeeping)."""
    src = PrometheusAPISource("http://127.0.0.1:9", forget_after_s=10.0)

    def read(where: dict[str, str], now: float) -> dict[str, str]:
        rows = [
            {"metric": {"instance": i, "job": "j", "task": t, "role": "worker"}} for i, t in where.items()
        ]
        return {tg.info.name: src._source(i) for i, tg in src._targets(rows, now).items()}

    first = read({"a:1": "w1", "c:1": "w2", "d:1": "w3"}, 0.0)
    assert read({"a:1": "w2", "c:1": "w1", "d:1": "w3"}, 1.0) == first and src.replaced == 2
    reused = read({"a:1": "w4", "c:1": "w1", "d:1": "w3"}, 2.0)
    assert reused["w4"] not in first.values() and list(src._lost) == ["j/w2"]
    assert read({"a:1": "w4", "c:1": "w1", "e:1": "w3", "f:1": "w2"}, 3.0) == {**first, "w4": reused["w4"]}
    assert src.replaced == 4 and not src._lost and "d:1" not in src._known  # d's task moved to e
