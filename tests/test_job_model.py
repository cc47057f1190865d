"""One model of what a job trains (:class:`ModelSpec`) and one of a server's lifetime (:class:`Lifetime`):
the config, the exporter's labels, a workload file and a recording all give the same value, with the
same defaults, so the speed model sees one job the same way whichever door it came in by."""

from __future__ import annotations

import pytest

from cmdare.collectors import metrics as M
from cmdare.collectors.samples import STUDY_BATCH_SIZE, JobFacts, Lifetime, ModelSpec
from cmdare.collectors.scrape.exposition import facts_from_labels, parse_exposition
from cmdare.planner.risk_cost.workload import parse_workload
from cmdare.planner.speed.speed_model import SpeedModel
from cmdare.tui.config import parse_config

RESNET32 = ModelSpec(name="ResNet-32", model_flops=1658696889.0, params=1857722.0)
WORKLOAD = """
[model]
name = "ResNet-32"
model_flops = 1658696889
params = 1857722
[target]
steps = 64000
[current]
gpu = "P100"
workers = 8
ps = 1
region = "us-central1"
provisioning = "preemptible"
"""
CONFIG = '[[jobs]]\nname = "resnet"\nmodel = "ResNet-32"\nmodel_flops = 1658696889\nparams = 1857722\n'
PAGE = (
    'cmdare_task_info{job="resnet",task="worker-0",role="worker",gpu="P100"} 1\n'
    'cmdare_job_info{job="resnet",model="ResNet-32",model_flops="1.658696889e+09",params="1857722"} 1\n'
)


def test_config_labels_and_workload_describe_one_job_alike():
    """No batch_size anywhere: each door gives the same ModelSpec (0 = undeclared), and the models
    count the study's batch of 128 for all of them."""
    from_config = parse_config(CONFIG).jobs[0].facts.model
    from_labels = parse_exposition(PAGE).facts.model
    from_workload = parse_workload(WORKLOAD).model
    assert from_config == from_labels == from_workload == RESNET32
    assert RESNET32.batch_size == 0 and RESNET32.effective_batch_size == STUDY_BATCH_SIZE == 128
    pred = SpeedModel.load().predict(from_labels, {"P100": 8}, ps=1)
    assert pred.examples_per_sec == pytest.approx(pred.steps_per_sec * 128)


def test_recorded_facts_are_the_job_info_labels_and_parse_back():
    facts = JobFacts(
        "resnet",
        ModelSpec(name="ResNet-32", model_flops=1.66e9, params=1.86e6, batch_size=64, sync="async-ps"),
        64000,
    )
    assert tuple(facts.labels()) == M.JOB_INFO.labels  # one vocabulary: exporter, parser, recording
    assert facts_from_labels({k: str(v) for k, v in facts.labels().items()}) == facts


def test_model_text_is_cleaned_once_where_it_enters():
    spec = ModelSpec(name="\x1b]52;c;ZXZpbA==\x07net")
    assert "\x1b" not in spec.name and "\x07" not in spec.name


def test_a_running_lifetime_has_an_age_only_against_now():
    done = Lifetime(
        task="j/w0",
        start=0.0,
        end=5400.0,
        cause="preempted",
        gpu="P100",
        region="us-central1",
        provisioning="preemptible",
    )
    running = Lifetime(
        task="j/w1",
        start=0.0,
        end=None,
        cause="running",
        gpu="P100",
        region="us-central1",
        provisioning="preemptible",
    )
    assert done.revoked and done.hours() == 1.5 and not running.revoked
    assert running.hours(now=7200.0) == 2.0
    with pytest.raises(ValueError, match="still running"):
        running.hours()


def test_job_info_labels_are_parsed_once_and_long_ones_never_cached():
    from cmdare.collectors.scrape import exposition

    labels = {"job": "resnet", "model": "ResNet-32", "batch_size": "NaN"}
    first, again = [], []
    assert exposition.facts_from_labels(labels, first) is exposition.facts_from_labels(labels, again)
    assert first == again == ["job info: batch_size is not a plausible number, ignored"]  # notes every poll
    tiny: list[str] = []  # a parameter count below one took the speed model to 0 steps/s
    assert exposition.facts_from_labels({"job": "j", "params": "1e-300"}, tiny).model.params == 0.0
    assert tiny == ["job info: params is not a plausible number, ignored"]
    size = exposition._cached_facts.cache_info().currsize
    hostile = {"job": "resnet", "model": "x" * 20_000}
    assert exposition.facts_from_labels(hostile).model.name.endswith("…")  # cut where it entered
    assert exposition._cached_facts.cache_info().currsize == size
