"""MLflow sources (issue 31, item 8): a real tracking server (``mlflow server`` on 127.0.0.1, one per module)
and a real file store, both written by MLflow's own client with known steps and timestamps, read by the
same rules as TensorBoard and JSON-lines runs and compared with the writer's truth: steps/s, the last
loss, per-rank runs of one sync job, a resumed run's restart, finished by MLflow's status. No mock.

The server keeps its runs in a file store (``MLFLOW_ALLOW_FILE_STORE``): the REST handlers the source
reads are the same for every store, and it was ready in 26 s where an SQLite store's migrations made it
58 s (load 10 on 2 cores, side by side). Its history pages are the server's own (offset tokens) for
both stores; the restart test reads them 8 points a page to follow several tokens."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

mlflow = pytest.importorskip("mlflow")

from mlflow.entities import Metric  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402

from cmdare.collectors import writes  # noqa: E402
from cmdare.collectors.clock import ManualClock  # noqa: E402
from cmdare.collectors.mlflow import server as mlflow_server  # noqa: E402
from cmdare.collectors.mlflow.run import turning_points  # noqa: E402
from cmdare.collectors.mlflow.server import MlflowServerSource  # noqa: E402
from cmdare.collectors.mlflow.store import MlrunsSource  # noqa: E402
from cmdare.collectors.observed import build_jobs  # noqa: E402
from cmdare.collectors.poller import Poller  # noqa: E402
from cmdare.collectors.samples import TaskState  # noqa: E402
from cmdare.collectors.store import Store  # noqa: E402
from tests.cli_harness import run_main  # noqa: E402
from tests.prom_server import free_port  # noqa: E402

pytestmark = pytest.mark.slow

T0 = float(int(time.time()))  # the writer's timestamps are near now: a run of an hour ago is an old run


def _ms(t: float) -> int:
    return int(round(t * 1000))


@pytest.fixture(scope="module")
def tracking(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``mlflow server`` on 127.0.0.1 (file store), its URL; the process group is ended at the end."""
    work = tmp_path_factory.mktemp("mlflow-server")
    exe = shutil.which("mlflow", path=str(Path(sys.executable).parent)) or "mlflow"
    for _ in range(3):  # a port found free may be taken before the server binds it: another one
        port = free_port()
        argv = [exe, "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
                "--backend-store-uri", str(work / "mlruns"), "--default-artifact-root", str(work / "art")]  # fmt: skip
        env = {**os.environ, "MLFLOW_ALLOW_FILE_STORE": "true"}
        with (work / "server.log").open("ab") as log:
            proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, cwd=work, env=env, start_new_session=True
            )
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 180  # the server's imports: ~26 s on a busy machine
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.3)
        else:
            _end(proc)
            continue
        try:
            yield url
        finally:
            _end(proc)
        return
    pytest.fail(f"mlflow server did not start: {(work / 'server.log').read_text(errors='replace')[-2000:]}")


def _end(proc: subprocess.Popen) -> None:
    """End the server and its uvicorn worker (its own session: the whole group)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # a scratch server: nothing of it is kept
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def _experiment(client: MlflowClient) -> tuple[str, str]:
    name = f"exp-{uuid.uuid4().hex[:8]}"  # one experiment per test: the source is filtered to it
    return name, client.create_experiment(name)


async def test_server_rank_runs_in_lockstep_rate_loss_and_finished(tracking):
    """Two ranks logging the same steps at 10 steps/s: one sync job at 10 steps/s (not 20), the last loss
    the writer logged, and finished once MLflow says the runs are."""
    client = MlflowClient(tracking)
    name, exp = _experiment(client)
    runs = [client.create_run(exp, run_name=f"rank{r}").info.run_id for r in range(2)]
    clock = ManualClock(T0)
    source = MlflowServerSource(tracking, timeout=30, experiments=[name])
    poller = Poller([source], Store(), clock=clock, interval=2.0)
    last_loss = 0.0
    for k in range(5):  # 20 steps (every 10th logged) per 2 s, read every 2 s
        for r, run_id in enumerate(runs):
            points = [
                Metric("loss", 1.0 / (s + 1), _ms(T0 + s / 10 + 0.003 * r), s)
                for s in range(20 * k, 20 * (k + 1), 10)
            ]
            client.log_batch(run_id, metrics=points + [Metric("lr", 0.1, _ms(T0 + 2 * k), 20 * k)])
            last_loss = points[-1].value
        await poller.poll_once()
        clock.advance(2.0)
    (job,) = build_jobs(poller.store, poller.lifecycle, clock.now())
    assert job.name == name and [n.name for n in job.nodes] == ["rank0", "rank1"]
    assert (job.sync, job.sync_how) == ("sync-allreduce", "inferred")
    assert job.steps_per_sec == pytest.approx(10.0, rel=0.02)  # the writer's own steps over its own times
    assert job.training is not None and job.training.loss == pytest.approx(last_loss)
    assert job.global_step == 90 and not job.finished
    for run_id in runs:
        client.set_terminated(run_id, "FINISHED")
    cycle = await poller.poll_once()
    assert len(cycle.polls) == 2 and {n.state for n in poller.lifecycle.nodes.values()} == {
        TaskState.FINISHED
    }
    (job,) = build_jobs(poller.store, poller.lifecycle, clock.now())
    assert job.finished
    assert all("MLflow status FINISHED" in (n.last_error or "") for n in job.nodes)


async def test_server_resumed_run_restarts_and_rates_the_new_timeline(tracking, monkeypatch):
    """A run resumed from a checkpoint logs steps 110.. again after reaching 250: a restart, counted; the
    step and loss of the new timeline at once (the latest point MLflow keeps is still step 250's)."""
    monkeypatch.setattr(mlflow_server, "HISTORY_PAGE", 8)  # 26 points: 4 pages, the server's tokens followed
    client = MlflowClient(tracking)
    name, exp = _experiment(client)
    run_id = client.create_run(exp, run_name="train").info.run_id
    clock = ManualClock(T0 + 40)
    poller = Poller([MlflowServerSource(tracking, timeout=30, experiments=[name])], Store(), clock=clock)
    client.log_batch(run_id, metrics=[Metric("loss", 1.5, _ms(T0 + s / 10), s) for s in range(0, 260, 10)])
    await poller.poll_once()
    for k in range(4):  # resumed from the checkpoint at step 110, 5 steps/s now
        t = T0 + 50 + 4 * k
        steps = range(110 + 20 * k, 130 + 20 * k, 10)
        client.log_batch(
            run_id, metrics=[Metric("loss", 0.8, _ms(t + (s - 110 - 20 * k) / 5), s) for s in steps]
        )
        clock.set(t + 4)
        await poller.poll_once()
    (job,) = build_jobs(poller.store, poller.lifecycle, clock.now())
    (node,) = job.nodes
    assert node.restarts == 1 and job.global_step == 180  # not 250
    assert job.training is not None and job.training.loss == pytest.approx(0.8)
    assert job.steps_per_sec == pytest.approx(5.0, rel=0.02)


async def test_server_failed_run_is_finished_and_says_so(tracking):
    client = MlflowClient(tracking)
    name, exp = _experiment(client)
    run_id = client.create_run(exp, run_name="sweep-a").info.run_id
    client.log_batch(run_id, metrics=[Metric("train/loss", 2.0, _ms(T0), 7)])
    client.set_terminated(run_id, "FAILED")
    poller = Poller(
        [MlflowServerSource(tracking, timeout=30, experiments=[name])], Store(), clock=ManualClock(T0 + 5)
    )
    (p,) = (await poller.poll_once()).polls
    assert p.finished and p.error.startswith("run failed: MLflow status FAILED")
    assert p.values["cmdare_loss"] == 2.0 and p.values["cmdare_global_step"] == 7


def test_snapshot_reads_the_server_and_keeps_credentials_out(tracking):
    """``snapshot --json`` end to end; a URL's password never appears, even in an error's text."""
    client = MlflowClient(tracking)
    name, exp = _experiment(client)
    run_id = client.create_run(exp, run_name="rank0").info.run_id
    client.log_batch(run_id, metrics=[Metric("loss", 0.25, _ms(T0 + s), s) for s in range(0, 50, 10)])
    client.set_terminated(run_id, "KILLED")
    argv = ["snapshot", "--json", "--samples", "1", "--timeout", "30", "--mlflow", tracking]
    code, out, err = run_main([*argv, "--mlflow-experiment", name])
    assert code == 0, err
    (job,) = json.loads(out)["jobs"]  # the other tests' experiments are not shown
    assert job["name"] == name
    assert job["finished"] and job["global_step"] == 40 and job["training"]["loss"] == 0.25
    assert job["nodes"][0]["status"] == "finished" and "run killed" in job["nodes"][0]["last_error"]
    secret = "s3cr3t-pw-" + uuid.uuid4().hex[:6]
    bad = tracking.replace("http://", f"http://user:{secret}@") + "/no-such-prefix"
    code, out, err = run_main(["snapshot", "--json", "--samples", "1", "--timeout", "30", "--mlflow", bad])
    assert code == 1 and secret not in out and secret not in err  # 1: no source answered
    (src,) = [s for s in json.loads(out)["sources"] if "no-such-prefix" in s["name"]]
    assert not src["ok"] and "HTTP 404" in src["message"]


async def test_read_only_sends_no_post_and_says_why(tracking):
    writes.set_read_only(True)
    try:
        poller = Poller([MlflowServerSource(tracking, timeout=30)], Store(), clock=ManualClock(T0))
        (p,) = (await poller.poll_once()).polls
    finally:
        writes.set_read_only(False)
    assert not p.ok and "read-only mode sends no POST" in p.error and "--mlruns" in p.error


# --- the file store ---------------------------------------------------------------------------------


@pytest.fixture
def file_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A file-store tracking URI (MLflow 3 keeps its file store behind an opt-in)."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    root = tmp_path / "mlruns"
    mlflow.set_tracking_uri(root.as_uri())
    yield root
    mlflow.set_tracking_uri(None)


async def test_file_store_rate_loss_restart_and_finished(file_store: Path):
    """``mlflow.log_metric`` into ``mlruns/`` read while written: steps/s and the last loss of the writer;
    the run resumed (``start_run(run_id=…)``) from step 30 is a restart; ended, it is finished."""
    mlflow.set_experiment("fs-exp")
    clock = ManualClock(T0)
    poller = Poller([MlrunsSource(file_store.parent)], Store(), clock=clock, interval=2.0)
    with mlflow.start_run(run_name="train") as run:
        for k in range(4):  # 8 steps/s: 16 steps per 2 s, every 4th logged
            for s in range(16 * k, 16 * (k + 1), 4):
                mlflow.log_metric("loss", 1.0 / (s + 1), step=s, timestamp=_ms(T0 + s / 8))
            # system metrics as MLflow's monitor logs them: their own sample counter as the step
            mlflow.log_metric(
                "system/gpu_0_utilization_percentage", 80.0 + k, step=900 + k, timestamp=_ms(T0 + 2 * k)
            )
            await poller.poll_once()
            clock.advance(2.0)
    (job,) = build_jobs(poller.store, poller.lifecycle, clock.now())
    assert job.name == "fs-exp" and job.steps_per_sec == pytest.approx(8.0, rel=0.02)
    assert job.global_step == 60 and job.nodes[0].gpu_util == 83.0  # not step 903
    assert job.training is not None and job.training.loss == pytest.approx(1.0 / 61)
    with mlflow.start_run(run_id=run.info.run_id):  # resumed from the checkpoint at step 30
        for s in range(30, 50, 4):
            mlflow.log_metric("loss", 0.5, step=s, timestamp=_ms(T0 + 20 + (s - 30) / 4))
            clock.set(T0 + 20.5 + (s - 30) / 4)
            await poller.poll_once()
        (job,) = build_jobs(poller.store, poller.lifecycle, clock.now())
        (node,) = job.nodes
        assert node.restarts == 1 and job.global_step == 46 and job.training.loss == 0.5
        assert job.steps_per_sec == pytest.approx(4.0, rel=0.02)
    await poller.poll_once()  # the run's meta.yaml now says FINISHED
    (job,) = build_jobs(poller.store, poller.lifecycle, clock.now())
    assert job.finished and "MLflow status FINISHED" in job.nodes[0].last_error


async def test_file_store_runs_sharing_a_name_are_two_tasks(file_store: Path):
    mlflow.set_experiment("names")
    ids = []
    for loss in (0.5, 0.25):
        with mlflow.start_run(run_name="train") as run:
            mlflow.log_metric("loss", loss, step=5, timestamp=_ms(T0))
            ids.append(run.info.run_id)
    mlflow.set_experiment("other")  # not asked for
    with mlflow.start_run(run_name="train"):
        mlflow.log_metric("loss", 0.1, step=5, timestamp=_ms(T0))
    source = MlrunsSource(file_store, experiments=["names"])
    polls = (await Poller([source], Store(), clock=ManualClock(T0 + 1)).poll_once()).polls
    assert sorted(p.info.task for p in polls) == sorted(f"train#{i[:8]}" for i in ids)
    assert sorted(p.values["cmdare_loss"] for p in polls) == [0.25, 0.5]


async def test_file_store_hostile_files_cost_a_note_not_a_poll(file_store: Path):
    """A garbage line, an over-long line and a FIFO in place of a metric file: skipped and said; the rest
    is read."""
    mlflow.set_experiment("hostile")
    poller = Poller([MlrunsSource(file_store)], Store(), clock=ManualClock(T0 + 2))
    with mlflow.start_run(run_name="rank0") as run:  # running: its files are tailed
        mlflow.log_metric("loss", 0.5, step=10, timestamp=_ms(T0))
        await poller.poll_once()
        metrics = file_store / run.info.experiment_id / run.info.run_id / "metrics"
        with (metrics / "loss").open("ab") as f:
            f.write(b"not a point\n" + b"9" * 5000 + b"\n" + f"{_ms(T0 + 1)} 0.25 20\n".encode())
        os.mkfifo(metrics / "stuck")
        (p,) = (await poller.poll_once()).polls
    assert p.ok and p.values["cmdare_loss"] == 0.25 and p.values["cmdare_global_step"] == 20
    assert "loss: 2 malformed line(s) skipped" in p.error and "stuck:" in p.error


# --- a hostile server ---------------------------------------------------------------------------------


@pytest.fixture
def hostile() -> Iterator[tuple[str, dict]]:
    """A server on 127.0.0.1 speaking MLflow's paths with hostile answers (no real MLflow server sends
    these: a wrong or compromised one might); ``answers[path]`` is ``(status, body)``, or with a delay in
    seconds before the answer."""
    answers: dict[str, tuple] = {}

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status, body, *delay = answers.get(self.path.split("?")[0], (404, b"{}"))
            time.sleep(delay[0] if delay else 0)
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up waiting (its timeout): what the slow answer is for

        do_GET = do_POST = _answer  # noqa: N815

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True  # a delayed answer never holds the teardown
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", answers
    finally:
        server.shutdown()
        server.server_close()


async def test_hostile_answers_are_cleaned_bounded_and_redacted(hostile):
    url, answers = hostile
    secret = "tok-" + uuid.uuid4().hex
    exps = {"experiments": [{"experiment_id": "1", "name": "exp\x1b]52;c;cHduZWQ=\x07" + "x" * 10_000}]}
    answers["/api/2.0/mlflow/experiments/search"] = (200, json.dumps(exps).encode())
    echo = {"error_code": "UNAUTHENTICATED", "message": f"bad token Bearer {secret}\x1b[2J"}
    answers["/api/2.0/mlflow/runs/search"] = (401, json.dumps(echo).encode())
    source = MlflowServerSource(url, timeout=5, env={"MLFLOW_TRACKING_TOKEN": secret})
    poller = Poller([source], Store(), clock=ManualClock(T0))
    (p,) = (await poller.poll_once()).polls
    assert not p.ok and "HTTP 401: UNAUTHENTICATED bad token" in p.error
    assert secret[4:] not in p.error and "\x1b" not in p.error
    runs = {"runs": [{"info": {"run_id": "r" * 32, "experiment_id": "1", "status": "RUNNING",
                               "run_name": "rank0\x1b[31m" + "y" * 10_000},
                      "data": {"metrics": [{"key": "loss", "value": 0.5, "timestamp": _ms(T0), "step": 3}]}}]}  # fmt: skip
    answers["/api/2.0/mlflow/runs/search"] = (200, json.dumps(runs).encode())
    answers["/api/2.0/mlflow/metrics/get-history"] = (200, b"[" * 100_000)  # not JSON: said, not a crash
    (p,) = (await poller.poll_once()).polls
    assert p.ok and p.values["cmdare_loss"] == 0.5
    assert "\x1b" not in p.info.job + p.info.task and len(p.info.task) <= 200 and len(p.info.job) <= 200
    assert "history: /metrics/get-history: the answer is not a JSON object" in p.error
    answers["/api/2.0/mlflow/runs/search"] = (200, b" " * (17 * 1024 * 1024))
    (p,) = (await poller.poll_once()).polls
    assert not p.ok and "body larger than 16 MiB, refused" in p.error


def test_turning_points_keep_the_newest_and_every_step_going_back():
    points = [(1.0, 0.1, 10.0), (2.0, 0.2, 20.0), (3.0, 0.3, 5.0), (4.0, 0.4, 6.0), (5.0, 0.5, 7.0)]
    assert turning_points(points) == [points[1], points[2], points[4]]
    later = [(6.0, 0.6, 8.0), (7.0, 0.7, 9.0)]
    assert turning_points(later, before=30.0) == later  # a chunk that begins with the step going back
    assert turning_points(later, before=7.0) == later[1:]


@pytest.mark.parametrize("where", ["flag", "config"])
def test_a_missing_store_is_one_line_and_exit_2(tmp_path: Path, isolated_home: Path, where: str):
    missing = str(tmp_path / "no-mlruns")
    argv = ["snapshot", "--mlruns", missing]
    if where == "config":
        cfg = tmp_path / "c.toml"
        cfg.write_text(f'[sources]\nmlruns = ["{missing}"]\n')
        argv = ["snapshot", "--config", str(cfg)]
    code, _, err = run_main(argv)
    assert code == 2 and len(err.splitlines()) == 1 and "not a directory" in err, err


async def test_a_slow_history_leaves_the_poll_with_the_latest_points(hostile):
    """History answers slower than the timeout: the poll shows the latest points, says it is catching up,
    and reads the rest next time."""
    url, answers = hostile
    answers["/api/2.0/mlflow/experiments/search"] = (
        200,
        b'{"experiments": [{"experiment_id": "1", "name": "e"}]}',
    )
    runs = {"runs": [{"info": {"run_id": "a" * 32, "experiment_id": "1", "status": "RUNNING", "run_name": "rank0"},
                      "data": {"metrics": [{"key": "loss", "value": 0.5, "timestamp": _ms(T0), "step": 30}]}}]}  # fmt: skip
    answers["/api/2.0/mlflow/runs/search"] = (200, json.dumps(runs).encode())
    history = {"metrics": [{"key": "loss", "value": 0.5, "timestamp": _ms(T0), "step": 30}]}
    answers["/api/2.0/mlflow/metrics/get-history"] = (200, json.dumps(history).encode(), 2.0)
    poller = Poller([MlflowServerSource(url, timeout=0.5)], Store(), clock=ManualClock(T0 + 1))
    (p,) = (await poller.poll_once()).polls
    assert p.ok and p.catching_up and p.values["cmdare_global_step"] == 30
    assert "history: not all read within 0.5 s" in p.error
