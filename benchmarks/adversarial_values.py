"""Adversarial cases of issue 27 on secrets and values, run by ``benchmarks/adversarial.py`` (each in
its own process, its peak RSS its own): credentials echoed into the fields the app cuts short,
implausible host values, a counter jump no NIC makes, an all-reduce 50x the step time, a CRC-valid
1 GiB TFRecord length, and one absurd Catalog price. Each attack returns (hard failure or "", detail).

    python benchmarks/adversarial.py --only secret_etype20,implausible_host,price_units1e300
    python benchmarks/adversarial_values.py [name ...]   # in one process, without the baseline
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import logging
import os
import resource
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from urllib.parse import quote

TIMEOUT_S = 2.0
TOKEN = "Gq7/Vx2+Kp9zLw4=Tb8nRj3Y"  # '/', '+', '=': its URL-encoded form differs
USER, PASSWORD = "ops", "Zr5/Hw8+Qn2vXk6"
BASIC = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
Result = tuple[str, str]


def fragments(text: str, *secrets: str) -> list[str]:
    """Pieces (4 characters or more, any letter case) of the secrets found in ``text``."""
    low = text.lower()
    return sorted({p for s in secrets for i in range(len(s) - 3) if (p := s[i : i + 4].lower()) in low})


def _log_capture() -> io.StringIO:
    """Every log record of the process, at DEBUG (httpcore's header traces too), into a buffer."""
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    handler.setLevel(logging.DEBUG)
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    return buf


def _snapshot(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "cmdare.tui.cli",
            "snapshot",
            "--samples",
            "1",
            "--interval",
            "0",
            "--timeout",
            str(TIMEOUT_S),
            *args,
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


# --- secrets through cut fields ---------------------------------------------------------------------
async def _secret_field(url: str, attack: str) -> Result:
    """A credential echoed into ``errorType``, ``resultType``, ``Content-Encoding``, the error
    URL-encoded or every label (``basic-…``: basic auth, echoed as bare base64): no fragment of it
    in a status, the log, the recording or ``snapshot``'s output."""
    import httpx

    from cmdare.collectors.poller import Poller
    from cmdare.collectors.prometheus.source import PrometheusAPISource
    from cmdare.collectors.recording.recorder import Recorder
    from cmdare.collectors.store import Store

    basic = attack.startswith("basic-")
    path = attack.removeprefix("basic-")
    host = url.removeprefix("http://")
    src_url = f"http://{USER}:{quote(PASSWORD, safe='')}@{host}/p/{path}" if basic else f"{url}/p/{path}"
    secrets = (PASSWORD, BASIC) if basic else (TOKEN,)
    log = _log_capture()
    texts: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        rec = Recorder(Path(tmp) / "rec.sqlite")
        src = PrometheusAPISource(src_url, token=None if basic else TOKEN, timeout=TIMEOUT_S)
        async with httpx.AsyncClient() as client:
            poller = Poller([src], Store(), interval=0, sinks=[rec], client=client)
            cycle = await poller.poll_once()
            await src.aclose()
        rec.close()
        texts += [p.error or "" for p in cycle.polls] + [repr(p.info) for p in cycle.polls]
        texts += list(cycle.source_errors.values())
        recorded = " ".join(f.read_bytes().decode("latin-1") for f in Path(tmp).iterdir())
        env = {} if basic else {"PROMETHEUS_TOKEN": TOKEN}
        snap = _snapshot(["--prometheus", src_url, "--json", "--record", str(Path(tmp) / "snap.sqlite")], env)
        recorded += " ".join(f.read_bytes().decode("latin-1") for f in Path(tmp).iterdir())
    where = {
        "status": " ".join(texts),
        "log": log.getvalue(),
        "recording": recorded,
        "stdout": snap.stdout,
        "stderr": snap.stderr,
    }
    leaks = {k: fragments(v, *secrets) for k, v in where.items() if fragments(v, *secrets)}
    if leaks:
        return f"secret fragment(s) in {', '.join(sorted(leaks))}: {len(sum(leaks.values(), []))}", ""
    if "Traceback" in snap.stderr:
        return "traceback", ""
    shown = next(
        (t for t in texts if "***" in t or "refused" in t or "unsupported" in t), texts[0] if texts else ""
    )
    return "", f"no fragment anywhere; {shown[:80]}"


async def _secret_target(url: str, where: str) -> Result:
    """A scrape target echoing the ``token=`` of its URL into its content coding or its labels."""
    from cmdare.collectors.poller import Poller
    from cmdare.collectors.scrape.source import ScrapeSource, ScrapeTarget
    from cmdare.collectors.store import Store

    log = _log_capture()
    src = ScrapeSource(
        [ScrapeTarget(f"{url}/t/echo-{where}?token={quote(TOKEN, safe='')}")], timeout=TIMEOUT_S
    )
    poller = Poller([src], Store(), interval=0)
    cycle = await poller.poll_once()
    await poller.aclose()
    text = " ".join(repr(p) for p in cycle.polls) + log.getvalue()
    if fragments(text, TOKEN):
        return "secret fragment in a poll or the log", ""
    return "", f"redacted: {(cycle.polls[0].error or repr(cycle.polls[0].info))[:80]}"


# --- implausible values -----------------------------------------------------------------------------
async def _implausible_host(url: str, attack: str) -> Result:
    """GPU utilisation 5e28 %, 1e29 MiB of GPU memory, MemAvailable over MemTotal, through ``snapshot``."""
    snap = _snapshot(["--target", f"{url}/t/{attack}", "--json"])
    if snap.returncode not in (0, 1) or "Traceback" in snap.stderr:
        return f"snapshot exit {snap.returncode}", ""
    doc = json.loads(snap.stdout)
    (node,) = doc["jobs"][0]["nodes"]
    util, used, mem = node["gpu_util"], node["gpu_mem_used_mib"], node["mem_used_bytes"]
    if util is not None and not 0 <= util <= 100:
        return f"GPU utilisation {util:g} % shown", ""
    if mem is not None and mem < 0 or used is not None and used > 2**20:
        return f"memory shown: host {mem}, GPU {used} MiB", ""
    notes = " ".join(s["message"] for s in doc["sources"])
    if "refused" not in notes:
        return "values refused without a note", ""
    return "", f"GPU {util} %, host memory used {mem}; note: {notes[notes.find('GPU') :][:70]}"


async def _nic_jump(url: str, attack: str) -> Result:
    """A PS's byte counter jumping by 1e15 in 2 s (500 TB/s), then growing at 0.5 MB/s."""
    from cmdare.collectors import metrics as M
    from cmdare.collectors.plausibility import checked
    from cmdare.collectors.samples import TaskInfo, TaskPoll
    from cmdare.collectors.store import Store

    store, info, notes, rates = Store(), TaskInfo(job="j", task="ps-0", role="ps"), [], []
    for i, v in enumerate([1e6, 2e6] + [1e15 + 1e6 * k for k in range(12)]):
        p = checked(TaskPoll(source="ps", t=1000.0 + 2 * i, ok=True, info=info, values={M.K_PS_IN: v}), store)
        notes += [p.error] if p.error else []
        store.add(p)
        rates.append(store.tasks[info.key].rate(M.K_PS_IN, 10.0))
    shown = [r for r in rates if r is not None and r > M.NIC_MAX_BYTES_PER_S]
    if shown:
        return f"rate {max(shown):.3g} B/s shown", ""
    if not notes:
        return "jump refused without a note", ""
    return (
        "",
        f"{sum(r is None for r in rates[2:])} rate(s) refused, then {rates[-1]:.3g} B/s; {notes[0][:60]}",
    )


async def _allreduce(url: str, attack: str) -> Result:
    """One rank reporting an exposed all-reduce 50x its step time beside three honest ranks."""
    from cmdare.collectors.observed import JobView, NodeView
    from cmdare.collectors.pricing.loader import load_offline_book
    from cmdare.collectors.samples import JobFacts, ModelSpec
    from cmdare.planner.live.plan import LivePlanner
    from cmdare.planner.speed.speed_model import SpeedModel

    def rank(r: int, exposed: float) -> NodeView:
        return NodeView(
            name=f"worker-{r}",
            role="worker",
            gpu="T4",
            region="us-central1",
            zone="",
            provisioning="spot",
            status="up",
            steps_per_sec=2.0,
            step_seconds=0.2,
            gpu_util=None,
            net_in_bps=None,
            net_out_bps=None,
            started_at=100.0,
            last_error=None,
            restarts=0,
            cause="",
            allreduce_seconds=exposed,
            rank=str(r),
            local_rank="0",
        )

    nodes = [rank(r, 0.3) for r in range(3)] + [rank(3, 10.0)]  # 0.5 s a step at 2 steps/s; 10 s
    facts = JobFacts(
        "ddp",
        ModelSpec(name="shakebig", model_flops=2.3e10, params=26e6, batch_size=128, sync="sync-allreduce"),
        10_000,
    )
    job = JobView(
        name="ddp",
        facts=facts,
        steps_per_sec=2.0,
        examples_per_sec=None,
        global_step=100.0,
        eta_seconds=None,
        nodes=nodes,
        sync="sync-allreduce",
        sync_how="declared",
    )
    plan = LivePlanner(SpeedModel.load(), load_offline_book()).update(job, now=0.0)
    if plan.table is None or plan.calibration_samples != 3:
        return f"calibrated on {plan.calibration_samples} ranks: {plan.note}", ""
    if not plan.note or "refused" not in plan.note:
        return "all-reduce refused without a note", ""
    return "", f"comm {plan.comm_scale:.3g}x link figures; {plan.note[:70]}"


# --- a CRC-valid 1 GiB TFRecord length --------------------------------------------------------------
def _event_file(path: Path, bad_length: bool) -> None:
    from cmdare.collectors.tensorboard.tfrecord import frame, masked_crc32c

    def field(num: int, wire: int, payload: bytes) -> bytes:
        return bytes([(num << 3) | wire]) + bytes([len(payload)]) + payload

    # Event{wall_time=1, step=10, summary{value{tag="loss", simple_value=1.0}}}
    value = field(1, 2, b"loss") + bytes([(2 << 3) | 5]) + struct.pack("<f", 1.0)
    event = (
        bytes([(1 << 3) | 1])
        + struct.pack("<d", 1.7e9)
        + bytes([2 << 3, 10])
        + field(5, 2, field(1, 2, value))
    )
    data = frame(event) * 200
    if bad_length:
        length = struct.pack("<Q", 1 << 30)
        data += length + struct.pack("<I", masked_crc32c(length)) + b"z" * 4096
    path.write_bytes(data)


async def _tfrecord(url: str, attack: str) -> Result:
    """30 polls of an event file ending in a CRC-valid 1 GiB length, against the same file without
    it: CPU ratio and how often the file is read (once: it must not look rewritten every poll)."""
    from cmdare.collectors.clock import ManualClock
    from cmdare.collectors.tensorboard import source as tensorboard

    reads: list[int] = []
    real = tensorboard.read_records
    tensorboard.read_records = lambda buf, **kw: reads.append(len(buf)) or real(buf, **kw)  # type: ignore[assignment]
    cpu: dict[bool, float] = {}
    notes = ""
    for bad in (False, True):
        with tempfile.TemporaryDirectory() as tmp:
            _event_file(Path(tmp) / "events.out.tfevents.1.host", bad)
            src = tensorboard.TensorBoardSource(tmp, job="j", poll_budget_s=5)
            reads.clear()
            t0 = time.process_time()
            for _ in range(30):
                (p,) = await src.poll(None, ManualClock())  # type: ignore[arg-type]
                notes += p.error or ""
            cpu[bad] = time.process_time() - t0
            await src.aclose()
    if "rewritten" in notes:
        return f"file taken as rewritten, read {len(reads)} times in 30 polls", ""
    return (
        "",
        f"read {len(reads)} time(s) in 30 polls, CPU {cpu[True] / max(cpu[False], 1e-6):.2f}x the clean file's",
    )


# --- one absurd Catalog price -----------------------------------------------------------------------
async def _price(url: str, attack: str) -> Result:
    """One SKU priced 1e300 (units past int64) beside healthy ones, through the real Catalog client."""
    from google.auth.credentials import AnonymousCredentials

    from cmdare.collectors.pricing import load_price_book
    from tests.catalog_server import CatalogServer, gpu_sku, host_sku

    us = ["us-central1"]
    bad = {"units1e300": (10**300, 0), "9e18": (9 * 10**18, 0)}[attack]
    skus = [gpu_sku("V100", 2.48, us), host_sku("n1", "Core", 0.03, us), host_sku("n1", "Ram", 0.004, us),
            gpu_sku("T4", bad, us)]  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp, CatalogServer(skus, page_size=2) as server:
        book = await asyncio.to_thread(
            load_price_book, endpoint=server.endpoint, credentials=AnonymousCredentials(),
            cache_dir=Path(tmp), timeout=TIMEOUT_S,
        )  # fmt: skip
    if book.source != "live":
        return f"every live price discarded: {book.reason}", ""
    if "T4" in book.gpus():
        return "the absurd price was kept", ""
    return "", f"{len(book.rates)} live rates kept; {(book.reason or '')[:80]}"


Attack = Callable[[str, str], Awaitable[Result]]
_FIELDS = ("etype20", "etype35", "rtype10", "cenc10", "cenc15", "urlenc", "label0", "label190")
ATTACKS: dict[str, tuple[str, Attack, str]] = {
    **{f"secret_{a}": ("secret", _secret_field, a) for a in _FIELDS},
    **{f"b64_{a}": ("secret", _secret_field, f"basic-{a}") for a in ("echo0", "etype10", "label0")},
    "target_tok_cenc": ("secret", _secret_target, "cenc"),
    "target_tok_label": ("secret", _secret_target, "label"),
    "implausible_host": ("value", _implausible_host, "implausible"),
    "nic_jump": ("value", _nic_jump, "jump"),
    "allreduce_50x": ("value", _allreduce, "50x"),
    "tfrecord_1gib": ("file", _tfrecord, "1gib"),
    "price_units1e300": ("price", _price, "units1e300"),
    "price_9e18": ("price", _price, "9e18"),
}


if __name__ == "__main__":  # one attack in this process, against a server of tests/hostile_server.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.hostile_server import HostileProcess

    with HostileProcess() as srv:
        for name in sys.argv[1:] or ATTACKS:
            _, fn, arg = ATTACKS[name]
            hard, detail = asyncio.run(fn(srv.url(""), arg))
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(f"{name:<24}{'failed' if hard else 'held':<8}{rss:>6.0f} MB  {hard or detail}")
