"""Source flags: bad values are one-line errors (exit 2); ``snapshot --json`` works with every
source and exits 1 when none answered; TF_CONFIG discovery."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cmdare.collectors.exporter import TrainingExporter
from cmdare.collectors.scrape import tf_config
from cmdare.tui.cli import main
from tests.prom_server import refused_port

NODE_KEYS = {
    "name",
    "role",
    "gpu",
    "region",
    "provisioning",
    "status",
    "steps_per_sec",
    "gpu_util",
    "net_in_bps",
    "net_out_bps",
}
JOB_KEYS = {"name", "steps_per_sec", "examples_per_sec", "global_step", "nodes"}


@pytest.fixture(autouse=True)
def _clean_env(isolated_home, monkeypatch):
    for var in ("TF_CONFIG", "PROMETHEUS_URL", "PROMETHEUS_TOKEN"):
        monkeypatch.delenv(var, raising=False)


def _snapshot(capsys, *flags: str) -> tuple[int, dict | None]:
    code = main(["snapshot", "--json", "--samples", "2", "--interval", "0.3", *flags])
    out = capsys.readouterr().out
    return code, (json.loads(out) if out.strip() else None)


@pytest.mark.parametrize(
    "flags",
    [
        ["--prometheus", "not-a-url"],
        ["--selector", "job="],
        ["--tf-config", "{bad json"],
        ["--tf-config", '{"cluster": {"worker": ["nohostport"]}}', "--metrics-port", "9400"],
        ["--metrics-port", "70000"],
        ["--tensorboard", "/nonexistent/dir"],
        ["--jsonl", "/nonexistent.jsonl"],
        ["--replay", "/nonexistent.sqlite"],
        ["--replay-speed", "0"],
        ["--prometheus-token-file", "/nonexistent-token"],
        ["--record", "x.sqlite", "--read-only"],
    ],
)
def test_bad_values_are_one_line_errors(capsys, flags):
    code = main(["snapshot", "--samples", "1", *flags])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("cmdare-tui: error:") and "\n" not in err and "Traceback" not in err


def test_replay_refuses_live_sources_and_non_recordings(capsys, tmp_path):
    bogus = tmp_path / "bogus.sqlite"
    bogus.write_bytes(b"not a database at all" * 10)
    assert main(["snapshot", "--replay", str(bogus)]) == 2
    err = capsys.readouterr().err
    assert "not a cmdare recording" in err and str(bogus) in err and "Traceback" not in err
    assert main(["snapshot", "--replay", str(bogus), "--target", "http://127.0.0.1:1/metrics"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("cmdare-tui: error:") and "--replay" in err and "live sources" in err
    assert "\n" not in err


def test_tf_config_targets_and_ports():
    spec = tf_config.load(
        json.dumps(
            {
                "cluster": {
                    "chief": ["h0:2222"],
                    "worker": ["h1:2222", "[::1]:2223"],
                    "ps": ["h3:2222"],
                    "evaluator": ["h4:2222"],
                },
                "task": {"type": "worker", "index": 0},
            }
        )
    )
    ts = tf_config.targets(spec, job="r", metrics_port=tf_config.MetricsPort.parse("+1000"))
    assert [(t.url, t.default_info.task, t.default_info.role) for t in ts] == [
        ("http://h0:3222/metrics", "chief-0", "chief"),
        ("http://h1:3222/metrics", "worker-0", "worker"),
        ("http://[::1]:3223/metrics", "worker-1", "worker"),
        ("http://h3:3222/metrics", "ps-0", "ps"),
    ]
    assert tf_config.targets(spec)[0].url == "http://h0:9400/metrics"


def _check_shape(doc: dict) -> None:
    assert isinstance(doc["alerts"], list) and doc["jobs"]
    for job in doc["jobs"]:
        assert JOB_KEYS <= set(job)
        for node in job["nodes"]:
            assert NODE_KEYS <= set(node) and node["status"] in ("up", "silent", "revoked", "finished")


def test_snapshot_with_tf_config_discovery_and_record_then_replay(capsys, tmp_path, monkeypatch):
    exps = [
        TrainingExporter("tfjob", role, task) for role, task in (("chief", "chief-0"), ("worker", "worker-0"))
    ]
    ports = [e.start(0) for e in exps]
    for e in exps:
        e.step(0.01, examples=32, steps=50)
    spec = {
        "cluster": {"chief": [f"127.0.0.1:{ports[0] - 1000}"], "worker": [f"127.0.0.1:{ports[1] - 1000}"]}
    }
    monkeypatch.setenv("TF_CONFIG", json.dumps(spec))  # the default of --tf-config
    rec = tmp_path / "rec.sqlite"
    try:
        code, doc = _snapshot(capsys, "--metrics-port", "+1000", "--record", str(rec))
    finally:
        for e in exps:
            e.stop()
    assert code == 0
    _check_shape(doc)
    (job,) = doc["jobs"]
    assert {(n["name"], n["role"], n["status"]) for n in job["nodes"]} == {
        ("chief-0", "chief", "up"),
        ("worker-0", "worker", "up"),
    }
    monkeypatch.delenv("TF_CONFIG")
    code, replayed = _snapshot(capsys, "--replay", str(rec), "--replay-speed", "100", "--read-only")
    assert code == 0 and [n["name"] for n in replayed["jobs"][0]["nodes"]] == [
        n["name"] for n in job["nodes"]
    ]


def test_snapshot_with_logs(capsys, tmp_path):
    log = tmp_path / "train.jsonl"
    log.write_text("".join(json.dumps({"time": 100.0 + i, "step": 10 * i}) + "\n" for i in range(5)))
    tb = Path(__file__).parent / "fixtures" / "collect_tfevents"
    code, doc = _snapshot(capsys, "--jsonl", str(log), "--tensorboard", str(tb), "--job", "logs")
    assert code == 0
    _check_shape(doc)
    (job,) = doc["jobs"]
    assert job["name"] == "logs" and job["global_step"] == 2000
    by = {n["name"]: n for n in job["nodes"]}
    assert by["collect_tfevents"]["status"] == "finished"  # its events are from 2023 (issue 31, item 5)


def test_snapshot_exits_1_when_no_source_answered(capsys):
    with refused_port() as port:
        code, doc = _snapshot(capsys, "--target", f"http://127.0.0.1:{port}/metrics")
    assert code == 1
