"""Conformance: TF_CONFIG documents as TensorFlow's guides write them (parameter-server strategy,
multi-worker mirrored, a sidecar evaluator, TF1 estimator's ``master``, single-worker without a
cluster), and their precedence: explicit flags win; ``$TF_CONFIG`` is used only when no other source
is given, and the status line says so."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from cmdare.collectors.exporter import TrainingExporter
from cmdare.collectors.scrape import tf_config
from cmdare.tui.cli import main
from tests.prom_server import refused_port

# tensorflow.org/tutorials/distribute/parameter_server_training (ports filled in)
PS_STRATEGY = {
    "cluster": {
        "worker": ["host1:2222", "host2:2222", "host3:2222"],
        "ps": ["host4:2222", "host5:2222"],
        "chief": ["host6:2222"],
    },
    "task": {"type": "worker", "index": 1},
}
# tensorflow.org/tutorials/distribute/multi_worker_with_keras
MULTI_WORKER = {
    "cluster": {"worker": ["localhost:12345", "localhost:23456"]},
    "task": {"type": "worker", "index": 0},
}
# the parameter-server guide's sidecar evaluator
EVALUATOR = {"cluster": {"evaluator": ["host7:2222"]}, "task": {"type": "evaluator", "index": 0}}
# tf.estimator (TF1): "master" is the chief
MASTER = {
    "cluster": {"master": ["host0:2222"], "worker": ["host1:2222"], "ps": ["host2:2222"]},
    "task": {"type": "master", "index": 0},
    "environment": "cloud",
}
SINGLE_WORKER = {"task": {"type": "worker", "index": 0}}


@pytest.fixture(autouse=True)
def _clean_env(isolated_home, monkeypatch):
    for var in ("TF_CONFIG", "PROMETHEUS_URL", "PROMETHEUS_TOKEN"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def exporter() -> Iterator[TrainingExporter]:
    e = TrainingExporter("mnist", "worker", "0")
    e.step(0.01, examples=64)
    e.start(0)
    yield e
    e.stop()


def _names(spec: dict, port: str = "9400") -> dict[str, str]:
    ts = tf_config.targets(tf_config.load(json.dumps(spec)), metrics_port=tf_config.MetricsPort.parse(port))
    return {t.default_info.task: t.default_info.role for t in ts if t.default_info}


def test_documents_from_tensorflow_guides():
    assert _names(PS_STRATEGY) == {
        "worker-0": "worker",
        "worker-1": "worker",
        "worker-2": "worker",
        "ps-0": "ps",
        "ps-1": "ps",
        "chief-0": "chief",
    }
    assert _names(MASTER) == {"master-0": "chief", "worker-0": "worker", "ps-0": "ps"}
    assert _names(EVALUATOR) == {} and _names(SINGLE_WORKER) == {}  # accepted, nothing to scrape
    assert _names(MULTI_WORKER, "+1000") == {"worker-0": "worker", "worker-1": "worker"}


def test_several_tasks_behind_one_metrics_url_are_detected():
    spec = tf_config.load(json.dumps(MULTI_WORKER))
    (target,) = tf_config.targets(spec)  # localhost:9400 for both: scraped once, named by its own page
    assert target.url == "http://localhost:9400/metrics" and target.default_info is None
    (note,) = tf_config.shared_urls(spec)
    assert "worker-0, worker-1 share http://localhost:9400/metrics" in note and "--metrics-port +N" in note
    assert tf_config.shared_urls(spec, metrics_port=tf_config.MetricsPort.parse("+1000")) == []


def _snapshot(capsys, *flags: str) -> tuple[int, dict | None]:
    code = main(["snapshot", "--json", "--samples", "2", "--interval", "0.2", *flags])
    out = capsys.readouterr().out
    return code, (json.loads(out) if out.strip() else None)


def test_an_evaluator_tf_config_does_not_break_an_explicit_source(capsys, monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps(EVALUATOR))
    with refused_port() as port:
        code, doc = _snapshot(capsys, "--prometheus", f"http://127.0.0.1:{port}")
    assert code == 1 and doc is not None  # nothing answered (no server there): not a usage error


def test_a_cluster_less_tf_config_does_not_break_the_demo(capsys, monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps(SINGLE_WORKER))
    code, doc = _snapshot(capsys, "--demo")
    assert code == 0 and doc["demo"] is True


def test_explicit_targets_win_over_tf_config(capsys, monkeypatch, exporter):
    monkeypatch.setenv("TF_CONFIG", json.dumps(PS_STRATEGY))
    code, doc = _snapshot(capsys, "--target", f"http://127.0.0.1:{exporter.port}/metrics")
    assert code == 0 and [j["name"] for j in doc["jobs"]] == ["mnist"]  # no TF_CONFIG tasks added
    assert not any(s["name"] == "tf_config" for s in doc["sources"])


def test_tf_config_alone_is_used_and_the_status_line_says_so(capsys, monkeypatch, exporter):
    spec = {
        "cluster": {"worker": [f"127.0.0.1:{exporter.port - 1000}"]},
        "task": {"type": "worker", "index": 0},
    }
    monkeypatch.setenv("TF_CONFIG", json.dumps(spec))
    code, doc = _snapshot(capsys, "--metrics-port", "+1000")
    assert code == 0 and doc["demo"] is False
    assert [(j["name"], [n["name"] for n in j["nodes"]]) for j in doc["jobs"]] == [("mnist", ["worker-0"])]
    assert any("tasks from $TF_CONFIG (no other source given)" in s["message"] for s in doc["sources"])


def test_tasks_sharing_one_url_are_reported_in_the_status_line(capsys, exporter):
    spec = {"cluster": {"worker": ["127.0.0.1:2222", "127.0.0.1:2223"], "ps": ["127.0.0.1:2224"]}}
    code, doc = _snapshot(capsys, "--tf-config", json.dumps(spec), "--metrics-port", str(exporter.port))
    assert code == 0
    assert [n["name"] for j in doc["jobs"] for n in j["nodes"]] == ["worker-0"]  # the page names itself
    (note,) = [s["message"] for s in doc["sources"] if s["name"] == "tf_config"]
    assert "worker-0, worker-1, ps-0 share" in note


def test_an_unusable_tf_config_alone_is_ignored_and_said(capsys, monkeypatch):
    monkeypatch.setenv("TF_CONFIG", "{not json")
    code, doc = _snapshot(capsys)
    assert code == 0 and doc["demo"] is True  # nothing else given: the demo, with a word on why
    assert any(
        s["message"].startswith("$TF_CONFIG ignored: TF_CONFIG is not valid JSON") for s in doc["sources"]
    )
