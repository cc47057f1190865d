"""Issue 27 item 2: one hostile DCGM page (GPU and UUID labels past the label cap) must cost at most its own
host's columns: never the refresh, never the healthy target beside it. Against real parts: the project's
exporter, a DCGM page served over HTTP (dcgm_page.py: MOCK of NVIDIA's exporter, no GPU here), the real
``snapshot`` command, and Debian's Prometheus for the node-detail path."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from cmdare.collectors import hostdetail as H
from cmdare.collectors import metrics as M
from cmdare.collectors.exporter import TrainingExporter
from tests.dcgm_page import DcgmServer, Gpu, page
from tests.prom_server import prometheus_server  # noqa: F401 (fixture)

pytestmark = pytest.mark.slow

LONG_UUID = "GPU-" + "7" * 300  # past the 200-character label cap
LONG_INDEX = "1" * 250
V100 = "Tesla V100-SXM2-16GB"


@pytest.fixture
def hostile_host() -> Iterator[tuple[TrainingExporter, DcgmServer]]:
    """A worker declaring the long UUID as its GPU, and a DCGM page on its host with that GPU (80 %) and
    one whose index label is 250 characters long."""
    dcgm = DcgmServer(
        page([Gpu(0, LONG_UUID, V100, 80.0, 12000, 4160), Gpu(LONG_INDEX, "GPU-2", V100, 40.0, 1, 2)], "h")  # type: ignore[arg-type]
    )
    exp = TrainingExporter("j", "worker", "0", gpu_ids=LONG_UUID)
    exp.start(0, addr="127.0.0.1")
    for i in range(20):
        exp.step(0.01, examples=32)
        exp.set_global_step(i)
    yield exp, dcgm
    exp.stop()
    dcgm.close()


def _snapshot(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "cmdare.tui.cli", "snapshot", "--read-only", "--json", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def _worker(out: str) -> dict:
    doc = json.loads(out)
    return next(n for j in doc["jobs"] for n in j["nodes"] if n["name"] == "worker-0")


def test_devices_in_passes_over_a_cut_key() -> None:
    cut = H.DEV_PREFIX + "0|GPU-" + "7" * 190  # no closing brace: cut on the way
    good = H.DEV_PREFIX + "1|GPU-1}DCGM_FI_DEV_GPU_UTIL"
    assert H.devices_in([cut, good, "dcgm{dev=", H.DEV_PREFIX + "}x"]) == ["1|GPU-1"]


def test_device_ids_are_bounded_and_still_match_the_declared_gpu() -> None:
    dev = H.device_id({"gpu": LONG_INDEX, "UUID": LONG_UUID, "GPU_I_ID": "x}|y"})
    assert len(dev) <= 3 * H.ID_PART_CHARS + 2 and dev.count("|") == 1 and "}" not in dev
    other = H.device_id(
        {"gpu": "0", "UUID": LONG_UUID[:150] + "8" + LONG_UUID[151:]}
    )  # same head, another GPU
    assert other != H.device_id({"gpu": "0", "UUID": LONG_UUID})
    assert H.owned_devices([dev, other], LONG_UUID) == [dev]


def test_snapshot_beside_a_hostile_dcgm_page_keeps_every_figure(hostile_host) -> None:
    """Direct scrape: the worker and the DCGM page with 300-character labels. It failed before with
    "unexpected ValueError" (exit 1): the series key was cut past its ``}``."""
    exp, dcgm = hostile_host
    p = _snapshot("--target", f"http://127.0.0.1:{exp.port}/metrics", "--target", f"http://{dcgm.addr}/metrics",
                  "--samples", "2", "--interval", "0.2")  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr and "unexpected" not in p.stderr
    w = _worker(p.stdout)
    assert w["status"] == "up" and w["gpu_util"] == 80.0 and w["gpu_mem_used_mib"] == 12000.0


# --- issue 27, degraded list: a page announcing 100,000 GPUs, fleet columns of 1e308, ranks claimed twice ---
def _many_gpus(n: int) -> str:
    lines = []
    for name in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE"):
        lines += [f"# TYPE {name} gauge", *(f'{name}{{gpu="{i}",UUID="GPU-{i}"}} 5' for i in range(n))]
    return "\n".join(lines) + "\n"


def test_a_page_with_more_gpus_than_a_host_has_is_read_up_to_the_cap_and_says_so() -> None:
    from cmdare.collectors.samples import TaskInfo
    from cmdare.collectors.scrape.exposition import parse_exposition

    parsed = parse_exposition(_many_gpus(5000), TaskInfo(job="hosts", task="h", role="node"))
    assert parsed.values[M.K_GPU_COUNT] == H.MAX_DEVICES
    assert any(f"more than {H.MAX_DEVICES} devices" in n for n in parsed.notes)


async def test_prometheus_node_detail_of_hostile_dcgm_pages(prometheus_server, hostile_host) -> None:  # noqa: F811
    """Debian's Prometheus scrapes the hostile page beside the worker (host 127.0.0.1) and a page of 2,000 GPUs
    beside another worker (127.0.0.2): node detail joins the first to the worker (it failed before: exit 1,
    "unexpected ValueError"); of the second it asks for device indices up to 99 and at most MAX_DEVICES of
    each metric, and the status line says the host was cut."""
    import asyncio

    exp, dcgm = hostile_host
    many = DcgmServer(_many_gpus(2000), "127.0.0.2")
    other = TrainingExporter("j", "worker", "1", gpu="V100")  # a task on that host
    other.start(0, addr="127.0.0.2")
    try:
        prom = prometheus_server([f"127.0.0.1:{exp.port}", dcgm.addr, many.addr, f"127.0.0.2:{other.port}"])
        await asyncio.to_thread(prom.wait_for_targets, 4)
        await asyncio.to_thread(
            prom.wait_for, "count(DCGM_FI_DEV_FB_USED)", lambda r: bool(r) and r[0]["value"][1] == "2002"
        )
        p = await asyncio.to_thread(
            _snapshot, "--prometheus", prom.url, "--samples", "4", "--interval", "0.5", "--timeout", "5"
        )
        refused = await _node_detail_note(
            prom.url, max_bytes=20_000
        )  # the tasks' answers fit, node detail not
    finally:
        many.close()
        other.stop()
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr and "unexpected" not in p.stderr
    w = _worker(p.stdout)
    assert w["status"] == "up" and w["gpu_util"] == 80.0
    said = " ".join(s["message"] for s in json.loads(p.stdout)["sources"])
    assert f"127.0.0.2: GPU detail: {3 * H.MAX_DEVICES} of 300 DCGM series read" in said, said  # indices 0-99
    assert refused is not None and refused.startswith("node detail: body ") and refused.endswith("refused"), (
        refused
    )


async def _node_detail_note(url: str, max_bytes: int) -> str | None:
    """What the status line says of node detail once it has been read (a few refreshes)."""
    import asyncio

    from cmdare.collectors.poller import Poller
    from cmdare.collectors.prometheus.source import PrometheusAPISource
    from cmdare.collectors.store import Store

    src = PrometheusAPISource(url, max_bytes=max_bytes, timeout=5.0)
    poller = Poller([src], Store(), interval=0)
    try:
        for _ in range(20):
            cycle = await poller.poll_once()
            if note := cycle.notes.get(src.display):
                return note
            await asyncio.sleep(0.3)
        return None
    finally:
        await poller.aclose()


def test_fleet_columns_bound_their_values() -> None:
    import warnings

    from cmdare.collectors.prometheus.fleet import FleetColumns
    from cmdare.collectors.samples import TaskInfo

    tasks = {f"10.0.0.{i}:9400": TaskInfo(job="big", task=f"worker-{i}") for i in range(4)}
    cols = FleetColumns(tasks)
    rows = [
        {"metric": {"instance": k}, "value": [0, v]}
        for k, v in zip(tasks, ("1e308", "1e308", "2", "-1"), strict=True)
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's overflow warning fails the test
        cols.take("steps", rows, 1.0)
        fleet = cols.fleet()
    assert cols.implausible == 3
    assert fleet is not None and fleet.roles[0].steps_per_sec == 2.0


def test_four_targets_claiming_rank_zero_are_flagged_and_said() -> None:
    exporters = [
        TrainingExporter("ddp", "worker", str(i), gpu="V100", sync="sync-allreduce", rank=0) for i in range(4)
    ]
    for e in exporters:
        e.start(0, addr="127.0.0.1")
        e.step(0.01, examples=32)
    try:
        targets = [a for e in exporters for a in ("--target", f"http://127.0.0.1:{e.port}/metrics")]
        p = _snapshot(*targets, "--samples", "2", "--interval", "0.2")
    finally:
        for e in exporters:
            e.stop()
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    nodes = [n for j in doc["jobs"] for n in j["nodes"]]
    assert len(nodes) == 4 and all("duplicate-rank" in n["flags"] for n in nodes)
    said = " ".join(s["message"] for s in doc["sources"])
    assert "ddp: 4 tasks claim rank 0" in said
