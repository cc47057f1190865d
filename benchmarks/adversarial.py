"""Adversarial suite (issue 15): hostile targets, a hostile Prometheus, hostile files and hostile
recordings, each attack in its own process (so its peak RSS is its own), against a benign target
measured in the same run. Loopback only (tests/hostile_server.py, in its own process).

    python benchmarks/adversarial.py [--quick] [--only bomb2,nan]

Issue 27's cases on secrets and values (secrets echoed into cut fields, implausible host values, a
counter jump, an all-reduce 50x the step, a 1 GiB TFRecord length, an absurd price) live in
``benchmarks/adversarial_values.py``.

Per attack: held (every promise kept), degraded (kept, but slower than the poll timeout or more than
100 MB more than the baseline's memory), or failed (a traceback or a raised source, a healthy target lost, a
secret fragment or an escape byte in the output, peak RSS over 300 MB, or no end within the limit).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the repository root: helpers import as tests.*

from adversarial_values import ATTACKS as VALUE_ATTACKS  # noqa: E402

from tests.hostile_server import HostileProcess  # noqa: E402

TIMEOUT_S = 2.0  # per poll, the app's default
LIMIT_S = 60.0  # an attack that has not ended by then hangs
RSS_LIMIT_MB = 300.0
TOKEN = "Q7vK2xZp9LmW4tRbHy3N"
Result = tuple[str, str]  # (hard failure or "", detail)


def _show(text: str) -> str:
    """``text`` safe for this terminal: control characters shown as ``?``."""
    return "".join(c if c.isprintable() else "?" for c in text)


def _one_line(text: str | None) -> bool:
    return text is not None and "\n" not in text and "Traceback" not in text and len(text) <= 400


# --- attacks (run in the child) -------------------------------------------------------------------
async def _scrape_pair(url: str, attack: str) -> Result:
    """A benign target beside the hostile one, through the real poller and a recorder."""
    from cmdare.collectors.poller import Poller
    from cmdare.collectors.recording.recorder import Recorder
    from cmdare.collectors.scrape.source import ScrapeSource, ScrapeTarget
    from cmdare.collectors.store import Store

    with tempfile.TemporaryDirectory() as tmp:
        rec = Recorder(Path(tmp) / "rec.sqlite")
        src = ScrapeSource(
            [ScrapeTarget(f"{url}/t/ok"), ScrapeTarget(f"{url}/t/{attack}")], timeout=TIMEOUT_S
        )
        poller = Poller([src], Store(), interval=0, sinks=[rec])
        cycle = await poller.poll_once()
        await poller.aclose()
        rec.close()
    ok, bad = cycle.polls
    if cycle.source_errors:
        return f"source raised: {cycle.source_errors}", ""
    if not ok.ok:
        return f"healthy target lost: {ok.error}", ""
    if bad.error is not None and not _one_line(bad.error):
        return "multi-line error", ""
    kept = " (ESC kept in the data)" if bad.info and "\x1b" in bad.info.task else ""
    return "", f"{'answered' if bad.ok else 'refused'}{kept}: {bad.error or 'no note'}"


async def _snapshot_bytes(url: str, attack: str) -> Result:
    """`snapshot` text through a pipe: no ESC byte may reach it."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cmdare.tui.cli",
        "snapshot",
        "--target",
        f"{url}/t/{attack}",
        "--samples",
        "1",
        "--timeout",
        str(TIMEOUT_S),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    if b"\x1b" in out or b"\x1b" in err or b"\x07" in out:
        return "ESC/BEL byte in snapshot output", ""
    if b"Traceback" in err:
        return "traceback", ""
    return "", f"snapshot exit {proc.returncode}, {len(out)} bytes, no ESC"


async def _prometheus(url: str, attack: str) -> Result:
    import httpx

    from cmdare.collectors import writes
    from cmdare.collectors.prometheus.source import PrometheusAPISource

    writes.set_read_only(True)  # read-only: every request must be a GET
    src = PrometheusAPISource(f"{url}/p/{attack}", token=TOKEN, timeout=TIMEOUT_S)
    async with httpx.AsyncClient() as client:
        polls = await src.poll(client, _clock())
        methods = json.loads((await client.get(f"{url}/methods")).text)
    await src.aclose()
    text = " ".join(p.error or "" for p in polls)
    if any(TOKEN[i : i + 4] in text for i in range(len(TOKEN) - 3)):
        return "secret fragment in a status", ""
    if set(methods[:-1]) - {"GET"}:
        return f"non-GET requests in read-only mode: {sorted(set(methods))}", ""
    if not all(_one_line(p.error) or p.error is None for p in polls):
        return "multi-line status", ""
    if attack == "nanrows" and not any(p.ok for p in polls):
        return "task lost to one bad value", ""
    return "", f"{sum(p.ok for p in polls)}/{len(polls)} ok: {text[:90]}"


async def _jsonl(url: str, attack: str) -> Result:
    from cmdare.collectors.logs.source import JsonlSource

    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "train.jsonl"
        good = '{"step": %d, "time": 1.7e9}\n'
        with log.open("w") as fh:
            fh.write(good % 1)
            if attack == "deep_jsonl":
                fh.write("[" * 500_000 + "]" * 500_000 + "\n" + '{"a":' * 200_000 + "\n")
            else:  # huge lines: 40 lines of 2 MiB, then one of 30 MiB without a newline yet
                fh.writelines('{"pad": "' + "x" * (2 << 20) + '"}\n' for _ in range(40))
            fh.write(good % 2)
        src, polls = JsonlSource(log), []
        for _ in range(40):  # at most 4 MiB a poll
            polls += await src.poll(None, _clock())  # type: ignore[arg-type]
    last = polls[-1]
    if not last.ok or last.values.get("cmdare_global_step") != 2:
        return f"source stopped: {last.error}", ""
    return "", f"{src.bad_lines} bad line(s) skipped, source kept going"


async def _recording(url: str, attack: str) -> Result:
    from cmdare.collectors.clock import ManualClock
    from cmdare.collectors.recording.replay import ReplayFinished, ReplaySource

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rec.sqlite"
        hostile_recording(path, attack)
        clock, notes, n = ManualClock(), [], 0
        src = ReplaySource(path, clock, speed=100.0)
        try:
            while True:
                polls = await src.poll(None, clock)  # type: ignore[arg-type]
                n += sum(p.ok for p in polls)
                notes += [p.error for p in polls if not p.ok and p.error]
        except ReplayFinished:
            pass
        src.close()
    return "", f"{n} polls replayed; {'; '.join(notes)[:90]}"


def hostile_recording(path: Path, attack: str) -> None:
    """Write a recording at ``path`` that carries ``attack`` (one of the recording attacks above)."""
    from cmdare.collectors.poller import Cycle
    from cmdare.collectors.recording.recorder import Recorder
    from cmdare.collectors.samples import TaskInfo, TaskPoll

    rec = Recorder(path, interval=2.0)
    info = TaskInfo(job="j", task="w0")
    for i in range(4):
        t = 1.7e9 + 2 * i
        rec.record(
            Cycle(
                t=t,
                elapsed=0.0,
                polls=[TaskPoll(source="w", t=t, ok=True, info=info, values={"cmdare_global_step": i})],
                transitions=[],
            )
        )
    rec.close()
    c = sqlite3.connect(path)
    with c:
        if attack == "huge_cycle":  # 200,000 more polls in cycles 2 and 4 each
            c.execute(
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200000) "
                "INSERT INTO polls SELECT cycle, i, source, t, ok, info, vals, error, facts, elapsed "
                "FROM polls, n WHERE cycle IN (2, 4) AND seq = 0"
            )
        if attack == "absurd_times":
            c.execute("UPDATE cycles SET t = 9e999 WHERE id = 2")
            c.execute("UPDATE cycles SET t = 1e300 WHERE id = 3")
            c.execute("UPDATE meta SET value = '1e300' WHERE key = 'interval'")
        else:  # three oversized rows (20 MiB of "[") in the last huge cycle
            c.execute("UPDATE polls SET vals = ? WHERE cycle = 4 AND seq < 3", ("[" * (20 << 20),))
    c.close()


# --- issue 27 round two (many PSs, hostile DCGM pages, replaced VMs, fleet columns, ranks) -----------------
def _cli(argv: list[str]) -> tuple[int, str, str]:
    """``cmdare-tui`` in this process (its peak RSS is this attack's): (exit status, stdout, stderr)."""
    import contextlib
    import io

    from cmdare.tui.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


def _cli_verdict(rc: int, out: str, err: str) -> str:
    """A hard failure of a command run (exit status, traceback, "unexpected …"), or ""."""
    if "Traceback" in err or "unexpected" in err:
        return f"exit {rc}: {_show(err.strip().splitlines()[-1] if err.strip() else '')[:100]}"
    if "\x1b" in out or "\x1b" in err:
        return "ESC byte in the output"
    return ""


def many_ps_recording(path: Path, n_ps: int, claimants: int = 0, cycles: int = 3) -> None:
    """A recording of a job with model facts, 4 workers and ``n_ps`` PSs (``cycles`` of them); ``claimants``: as
    many more polls of ps-0 in cycle 2, each from its own source (one PS announced 200,000 times)."""
    from cmdare.collectors.poller import Cycle
    from cmdare.collectors.recording.recorder import Recorder
    from cmdare.collectors.samples import JobFacts, ModelSpec, TaskInfo, TaskPoll

    facts = JobFacts(
        "big", ModelSpec(name="ResNet-32", model_flops=1.4e11, params=4.6e5, batch_size=128), 64000
    )
    rec = Recorder(path, interval=2.0)
    for c in range(cycles):
        t = 1.7e9 + 2 * c
        polls = [
            TaskPoll(
                source=f"w{i}",
                t=t,
                ok=True,
                job_facts=facts,
                values={
                    "cmdare_global_step": 100 * c,
                    "cmdare_worker_steps_total": 25 * c,
                    "cmdare_step_seconds_sum": 10.0 * c,
                    "cmdare_step_seconds_count": 25 * c,
                },
                info=TaskInfo(
                    job="big",
                    task=f"worker-{i}",
                    role="chief" if i == 0 else "worker",
                    gpu="K80",
                    region="us-central1",
                    provisioning="spot",
                ),
            )
            for i in range(4)
        ]
        polls += [
            TaskPoll(
                source=f"p{i}",
                t=t,
                ok=True,
                info=TaskInfo(job="big", task=f"ps-{i}", role="ps"),
                values={"process_cpu_seconds_total": c},
            )
            for i in range(n_ps)
        ]
        rec.record(Cycle(t=t, elapsed=0.0, polls=polls, transitions=[]))
    rec.close()
    if claimants:
        c = sqlite3.connect(path)
        with c:
            c.execute(
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
                "INSERT INTO polls SELECT cycle, 100 + i, source || i, t, ok, info, vals, error, facts, elapsed "
                "FROM polls, n WHERE cycle = 2 AND seq = 4",
                (claimants,),
            )
        c.close()


async def _many_ps(url: str, attack: str) -> Result:
    """``snapshot --replay`` of a job with many PSs and model facts (the planner ranks its shapes)."""
    n_ps, _, claimants = attack.partition("+")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rec.sqlite"
        many_ps_recording(path, int(n_ps), int(claimants or 0))
        rc, out, err = await asyncio.to_thread(
            _cli, ["snapshot", "--read-only", "--replay", str(path), "--samples", "3", "--interval", "0"]
        )
    if hard := _cli_verdict(rc, out, err):
        return hard, ""
    if "Top 3 plans" not in out:
        return "no plans ranked", ""
    tried = "PS counts tried" in out
    shape = re.search(r"· ([\d,]+) PS", out)
    return (
        "",
        f"exit {rc}, {shape.group(1) if shape else '?'} PS tasks, plans ranked{', PS counts tried said' if tried else ''}",
    )


def _dcgm_text(gpus: int, uuid_chars: int = 0, names: int = 3) -> str:
    """A DCGM page of ``gpus`` devices (``names`` of its metrics), UUIDs padded to ``uuid_chars``."""
    lines = []
    for name in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE")[:names]:
        lines.append(f"# TYPE {name} gauge")
        lines += [f'{name}{{gpu="{i}",UUID="GPU-{str(i).rjust(uuid_chars, "7")}"}} 5' for i in range(gpus)]
    return "\n".join(lines) + "\n"


async def _dcgm(url: str, attack: str) -> Result:
    """``snapshot`` of a healthy target beside a hostile DCGM page: 300-character UUIDs, or 100,000 GPUs
    (one metric: under the 8 MiB page cap)."""
    from tests.dcgm_page import DcgmServer

    text = (
        _dcgm_text(1, 300) if attack == "long" else _dcgm_text(100_000).split("# TYPE DCGM_FI_DEV_FB_USED")[0]
    )
    srv = DcgmServer(text)
    try:
        rc, out, err = await asyncio.to_thread(
            _cli,
            [
                "snapshot",
                "--read-only",
                "--json",
                "--target",
                f"{url}/t/ok",
                "--target",
                f"http://{srv.addr}/metrics",
                "--samples",
                "2",
                "--interval",
                "0.2",
            ],  # fmt: skip
        )
    finally:
        srv.close()
    if hard := _cli_verdict(rc, out, err):
        return hard, ""
    doc = json.loads(out)
    if rc != 0 or not any(n["status"] == "up" for j in doc["jobs"] for n in j["nodes"]):
        return f"healthy target lost (exit {rc})", ""
    said = [
        s["message"] for s in doc["sources"] if "GPU detail" in s["message"] or "label value" in s["message"]
    ]
    return "", f"exit {rc}, healthy target up; {_show(said[0])[:80] if said else 'no note'}"


async def _fleet_1e308(url: str, attack: str) -> Result:
    """10,000 tasks' fleet columns answering 1e308 (numpy must neither overflow nor warn)."""
    import warnings

    from cmdare.collectors.prometheus.fleet import FleetColumns
    from cmdare.collectors.samples import TaskInfo

    tasks = {
        f"10.{i // 250}.{i % 250}.1:9400": TaskInfo(job="big", task=f"worker-{i}") for i in range(10_000)
    }
    cols = FleetColumns(tasks)
    rows = [{"metric": {"instance": k}, "value": [0, "1e308"]} for k in tasks]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in ("steps", "examples", "compute"):
            cols.take(name, rows, 1.0)
        fleet = cols.fleet()
    role = fleet.roles[0] if fleet else None
    if role is None or role.steps_per_sec is not None:
        return f"1e308 taken: {role}", ""
    return "", f"{cols.implausible:,} implausible value(s) ignored a column, no overflow"


async def _rank_zero(url: str, attack: str) -> Result:
    """Four exporters of one synchronous job all claiming rank 0."""
    from cmdare.collectors.exporter import TrainingExporter

    exporters = [
        TrainingExporter("ddp", "worker", str(i), gpu="V100", sync="sync-allreduce", rank=0) for i in range(4)
    ]
    for e in exporters:
        e.start(0, addr="127.0.0.1")
    try:
        argv = ["snapshot", "--read-only", "--json", "--samples", "2", "--interval", "0.2"]
        argv += [a for e in exporters for a in ("--target", f"http://127.0.0.1:{e.port}/metrics")]
        rc, out, err = await asyncio.to_thread(_cli, argv)
    finally:
        for e in exporters:
            e.stop()
    if hard := _cli_verdict(rc, out, err):
        return hard, ""
    said = [s["message"] for s in json.loads(out)["sources"] if "claim rank" in s["message"]]
    if not said:
        return "four tasks claiming rank 0 passed silently", ""
    return "", _show(said[0])[:90]


async def _replaced(url: str, attack: str) -> Result:
    """Debian's Prometheus (file-based discovery): worker-1's VM replaced at a new address, 4 refreshes
    later. Skipped (held, said) where prometheus is not installed."""
    from cmdare.collectors.exporter import TrainingExporter
    from cmdare.collectors.lifecycle import Lifecycle
    from cmdare.collectors.poller import Poller
    from cmdare.collectors.prometheus.source import PrometheusAPISource
    from cmdare.collectors.samples import TaskState
    from cmdare.collectors.store import Store
    from tests.prom_server import PROMETHEUS, PromServer

    if not Path(PROMETHEUS).exists():
        return "", "skipped: prometheus not installed"

    def exporter(task: str) -> TrainingExporter:
        e = TrainingExporter("resnet", "worker", task, gpu="K80", provisioning="spot")
        e.start(0, addr="127.0.0.1")
        return e

    def write(sd: Path, exps: dict[str, TrainingExporter]) -> None:
        sd.with_suffix(".tmp").write_text(
            json.dumps([{"targets": [f"127.0.0.1:{e.port}" for e in exps.values()]}])
        )
        sd.with_suffix(".tmp").replace(sd)

    exps = {t: exporter(t) for t in ("worker-0", "worker-1", "worker-2", "worker-3")}
    with tempfile.TemporaryDirectory() as tmp:
        sd = Path(tmp) / "sd.json"
        write(sd, exps)
        cfg = f"  - job_name: 'train'\n    file_sd_configs:\n      - files: ['{sd}']\n        refresh_interval: 1s\n"
        lc = Lifecycle(silent_after=2, vanished_after=3)
        with PromServer([], Path(tmp) / "prom", scrape_configs=cfg) as prom:
            src = PrometheusAPISource(prom.url, 'job="train"')
            poller = Poller([src], Store(), lifecycle=lc, interval=0)
            await asyncio.to_thread(prom.wait_for, "cmdare_task_info", lambda r: len(r) >= 4)
            await poller.poll_once()
            old = exps.pop("worker-1")
            exps["worker-1"] = exporter("worker-1")
            write(sd, exps)
            old.stop()
            new = f"127.0.0.1:{exps['worker-1'].port}"
            await asyncio.to_thread(prom.wait_for, "cmdare_task_info",
                                    lambda r: new in {x["metric"]["instance"] for x in r} and len(r) == 4)  # fmt: skip
            for _ in range(4):
                cycle = await poller.poll_once()
                await asyncio.sleep(0.5)
            await poller.aclose()
        for e in exps.values():
            e.stop()
    node = lc.nodes.get("resnet/worker-1")
    if node is None or node.state is not TaskState.UP or len(lc.nodes) != 4:
        return f"replacement not followed: {len(lc.nodes)} tasks, worker-1 {node and node.state.value}", ""
    if cycle.answered != len(cycle.polls):
        return f"{cycle.answered}/{len(cycle.polls)} targets answered", ""
    return "", f"{src.replaced} replaced, 4 tasks, all up, {cycle.answered}/{len(cycle.polls)} answered"


def _clock():  # noqa: ANN202
    from cmdare.collectors.clock import SystemClock

    return SystemClock()


Attack = Callable[[str, str], Awaitable[Result]]
_TARGETS = ("bomb2", "bomb1", "huge", "slowloris", "garbage", "slowparse", "nan", "biglabels", "esc")
_PROM = ("rows", "rows100000", "bytes", "badjson", "deep", "nanrows", "bomb2", "echo150")
# name -> (kind, attack function, its argument: the server path's attack or the file's)
ATTACKS: dict[str, tuple[str, Attack, str]] = {
    "benign": ("target", _scrape_pair, "ok"),
    **{a: ("target", _scrape_pair, a) for a in _TARGETS},
    "esc_snapshot": ("target", _snapshot_bytes, "esc"),
    "prom_benign": ("prometheus", _prometheus, "ok"),
    **{f"prom_{a}": ("prometheus", _prometheus, a) for a in _PROM},
    "deep_jsonl": ("file", _jsonl, "deep_jsonl"),
    "huge_lines": ("file", _jsonl, "huge_lines"),
    "absurd_times": ("recording", _recording, "absurd_times"),
    "huge_cycle": ("recording", _recording, "huge_cycle"),
}
ATTACKS.update(VALUE_ATTACKS)  # issue 27: secrets through cut fields, implausible values, prices
# issue 27 round two (h27a): many PSs with model facts, one PS announced 200,000 times, hostile DCGM pages,
# a replaced VM through Prometheus, fleet columns of 1e308, four tasks claiming rank 0
ATTACKS.update({
    "many_ps_250": ("planner", _many_ps, "250"),
    "many_ps_1000": ("planner", _many_ps, "1000"),
    "many_ps_2500": ("planner", _many_ps, "2500"),
    "ps_200k_polls": ("recording", _many_ps, "1+200000"),
    "dcgm_long_labels": ("hosts", _dcgm, "long"),
    "dcgm_100k_gpus": ("hosts", _dcgm, "100k"),
    "fleet_1e308": ("fleet", _fleet_1e308, ""),
    "rank_zero_x4": ("identity", _rank_zero, ""),
    "replaced_vm": ("identity", _replaced, ""),
})  # fmt: skip


def child(name: str, port: int) -> None:
    """Run one attack in this process; print one JSON line (verdict inputs, time, peak RSS)."""
    _, fn, arg = ATTACKS[name]
    took = [0.0]

    async def timed() -> Result:  # the attack's own time (not the worker threads' wind-down after it)
        t0 = time.monotonic()
        try:
            return await fn(f"http://127.0.0.1:{port}", arg)
        finally:
            took[0] = time.monotonic() - t0

    try:
        hard, detail = asyncio.run(timed())
    except Exception as exc:  # what the suite exists to rule out
        hard, detail = f"raised {type(exc).__name__}: {str(exc)[:100]}", ""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"hard": hard, "detail": detail, "time": took[0], "rss": rss}))


# --- parent ------------------------------------------------------------------------------------------
def run(name: str, port: int) -> dict:
    t0 = time.monotonic()
    try:
        p = subprocess.run(
            [sys.executable, __file__, "--child", name, "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=LIMIT_S,
            cwd=REPO,
        )
        out = json.loads(p.stdout.strip().splitlines()[-1])
    except subprocess.TimeoutExpired:
        out = {"hard": f"no end within {LIMIT_S:.0f} s", "detail": "", "time": LIMIT_S, "rss": float("nan")}
    except (json.JSONDecodeError, IndexError):
        out = {
            "hard": f"crashed: {p.stderr[-200:]!r}",
            "detail": "",
            "time": time.monotonic() - t0,
            "rss": float("nan"),
        }
    return out


def verdict(r: dict, base: dict) -> str:
    if r["hard"] or not r["rss"] <= RSS_LIMIT_MB:
        return "failed"
    slow = r["time"] > base["time"] + TIMEOUT_S + 0.5 and ATTACKS[r["name"]][0] in ("target", "prometheus")
    return "degraded" if slow or r["rss"] > base["rss"] + 100 else "held"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="")
    ap.add_argument("--quick", action="store_true", help="same attacks (each is already bounded)")
    ap.add_argument("--child", default="")
    ap.add_argument("--port", type=int, default=0)
    a = ap.parse_args(argv)
    if a.child:
        child(a.child, a.port)
        return 0
    names = [n for n in a.only.split(",") if n] or [n for n in ATTACKS if n != "benign"]
    rows = []
    with HostileProcess() as srv:
        base = {**run("benign", srv.port), "name": "benign"}
        print(
            f"baseline (benign target + poller + recorder): {base['time']:.2f} s, peak RSS {base['rss']:.0f} MB"
        )
        print(f"{'kind':<11}{'attack':<17}{'verdict':<10}{'time s':>7}{'RSS MB':>8}{'RSS ratio':>10}  detail")
        for n in names:
            r = {**run(n, srv.port), "name": n}
            r["verdict"] = verdict(r, base)
            rows.append(r)
            print(
                f"{ATTACKS[n][0]:<11}{n:<17}{r['verdict']:<10}{r['time']:>7.2f}{r['rss']:>8.0f}"
                f"{r['rss'] / base['rss']:>9.2f}x  {_show(r['hard'] or r['detail'])[:110]}",
                flush=True,
            )
    failed = [r["name"] for r in rows if r["verdict"] == "failed"]
    worst = max((r["rss"] for r in rows), default=0.0)
    print(
        f"peak RSS of any attack {worst:.0f} MB (target <= {RSS_LIMIT_MB:.0f} MB): "
        f"{'PASS' if worst <= RSS_LIMIT_MB else 'MISS'}"
    )
    print(
        f"attacks held {sum(r['verdict'] == 'held' for r in rows)}, degraded "
        f"{sum(r['verdict'] == 'degraded' for r in rows)}, failed {len(failed)} (target 0 failed): "
        f"{'PASS' if not failed else 'MISS ' + ', '.join(failed)}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
