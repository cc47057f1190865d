"""The exposition parser turns real exporter output into task values, and bad input into one-line errors."""

from __future__ import annotations

import math
import urllib.request

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from cmdare.collectors import metrics as M
from cmdare.collectors.exporter import TrainingExporter
from cmdare.collectors.samples import TaskInfo
from cmdare.collectors.scrape.exposition import ExpositionError, parse_exposition
from cmdare.demo.cluster import DemoCluster


def test_demo_endpoints_speak_valid_prometheus_exposition():
    demo = DemoCluster()
    try:
        targets = demo.start()
        assert len(targets) == 9
        roles = set()
        for t in targets:
            text = urllib.request.urlopen(t.url, timeout=5).read().decode()
            families = {f.name: f for f in text_string_to_metric_families(text)}  # the reference parser
            assert "cmdare_task_info" in families
            assert families["cmdare_worker_steps"].type == "counter"
            assert families["cmdare_step_seconds"].type == "histogram"
            parsed = parse_exposition(text)
            roles.add(parsed.info.role)
            assert parsed.facts.model.name == "ResNet-32" and parsed.facts.model.params > 1e6
        assert roles == {"chief", "worker", "ps"}
    finally:
        demo.stop()


def test_exporter_contract_round_trip():
    exp = TrainingExporter("j", "stage", "s1", stage="1", dc="dc-a", gpu="A100")
    exp.step(0.1, examples=32, steps=3)
    exp.set_global_step(42)
    exp.stage_microbatch(0.2, 0.05, {"s2": 1000})
    from prometheus_client import generate_latest

    parsed = parse_exposition(generate_latest(exp.registry).decode())
    v = parsed.values
    assert v[M.K_WORKER_STEPS] == 3 and v[M.K_EXAMPLES] == 32 and v[M.K_GLOBAL_STEP] == 42
    assert v[M.K_STEP_SECONDS_COUNT] == 3 and v[M.K_STEP_SECONDS_SUM] == pytest.approx(0.3)
    assert v[M.stage_bytes_key("s2")] == 1000 and v[M.K_STAGE_COMPUTE] == pytest.approx(0.2)
    assert parsed.info == TaskInfo(job="j", task="s1", role="stage", gpu="A100", dc="dc-a", stage="1")


def test_standard_exporters_fold_into_one_value_per_task():
    text = """# TYPE node_network_receive_bytes_total counter
node_network_receive_bytes_total{device="eth0"} 100
node_network_receive_bytes_total{device="eth1"} 50
node_network_receive_bytes_total{device="lo"} 999
# TYPE node_cpu_seconds_total counter
node_cpu_seconds_total{cpu="0",mode="idle"} 10
node_cpu_seconds_total{cpu="0",mode="user"} 3
node_cpu_seconds_total{cpu="1",mode="system"} 2
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0"} 80
DCGM_FI_DEV_GPU_UTIL{gpu="1"} 60
"""
    p = parse_exposition(text, TaskInfo(job="j", task="n1", role="node"))
    assert p.values[M.K_NET_RX] == 150
    assert p.values[M.K_CPU_BUSY] == 5
    assert p.values[M.K_GPU_UTIL] == 70


def test_html_error_page_is_refused_in_one_line():
    with pytest.raises(ExpositionError, match="HTML"):
        parse_exposition("<!DOCTYPE html><html><body>502 Bad Gateway</body></html>")


def test_malformed_text_is_one_line_error():
    with pytest.raises(ExpositionError) as err:
        parse_exposition("cmdare_global_step{job= 12 x y z\n")
    assert "\n" not in str(err.value)


def test_nan_inf_and_duplicates_are_dropped_with_a_note():
    text = "cmdare_global_step 5\ncmdare_global_step 7\ncmdare_worker_steps_total NaN\nprocess_cpu_seconds_total +Inf\n"
    p = parse_exposition(text, TaskInfo(job="j", task="t"))
    assert p.values[M.K_GLOBAL_STEP] == 5
    assert M.K_WORKER_STEPS not in p.values
    assert any("non-finite" in n for n in p.notes) and any("duplicate" in n for n in p.notes)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_parser_never_raises_anything_but_exposition_error(text: str):
    try:
        p = parse_exposition(text, TaskInfo(job="j", task="t"))
    except ExpositionError:
        return
    assert all(math.isfinite(v) for v in p.values.values())


#: Series keys as recordings store them (recorded files name them): derived from the catalogue, never moved.
RECORDED_KEYS = {
    "K_GLOBAL_STEP": "cmdare_global_step",
    "K_WORKER_STEPS": "cmdare_worker_steps_total",
    "K_EXAMPLES": "cmdare_examples_total",
    "K_STEP_SECONDS_SUM": "cmdare_step_seconds_sum",
    "K_STEP_SECONDS_COUNT": "cmdare_step_seconds_count",
    "K_ALLREDUCE_SECONDS_SUM": "cmdare_allreduce_seconds_sum",
    "K_CHECKPOINT_SECONDS_SUM": "cmdare_checkpoint_seconds_sum",
    "K_CHECKPOINT_SECONDS_COUNT": "cmdare_checkpoint_seconds_count",
    "K_LAST_CHECKPOINT": "cmdare_last_checkpoint_timestamp_seconds",
    "K_ALLREDUCE_SECONDS_COUNT": "cmdare_allreduce_seconds_count",
    "K_PS_IN": "cmdare_ps_bytes_total{direction=in}",
    "K_PS_OUT": "cmdare_ps_bytes_total{direction=out}",
    "K_PREEMPTED": "cmdare_instance_preempted",
    "K_STAGE_COMPUTE": "cmdare_stage_compute_seconds_total",
    "K_STAGE_WAIT": "cmdare_stage_wait_seconds_total",
    "K_STAGE_MICROBATCHES": "cmdare_stage_microbatches_total",
    "K_STAGE_BYTES_PREFIX": "cmdare_stage_bytes_sent_total{peer=",
    "K_NET_RX": "node_network_receive_bytes_total",
    "K_NET_TX": "node_network_transmit_bytes_total",
    "K_CPU_BUSY": "node_cpu_seconds_total{mode!=idle}",
    "K_CPU_ALL": "node_cpu_seconds_total",
    "K_MEM_TOTAL": "node_memory_MemTotal_bytes",
    "K_MEM_AVAIL": "node_memory_MemAvailable_bytes",
    "K_GPU_UTIL": "DCGM_FI_DEV_GPU_UTIL",
    "K_GPU_FB_USED": "DCGM_FI_DEV_FB_USED",
    "K_GPU_FB_FREE": "DCGM_FI_DEV_FB_FREE",
    "K_GPU_COUNT": "dcgm_gpus",
    "K_PROCESS_CPU": "process_cpu_seconds_total",
    "K_PROCESS_START": "process_start_time_seconds",
    "K_LOSS": "cmdare_loss",
    "K_LEARNING_RATE": "cmdare_learning_rate",
    "K_EXAMPLES_RATE": "cmdare_examples_per_second",
    "K_LOG_RESTARTS": "cmdare_log_restarts",
}


def test_series_keys_derived_from_the_catalogue_are_the_recorded_ones():
    keys = {name: value for name, value in vars(M).items() if name.startswith("K_")}
    assert keys == RECORDED_KEYS
