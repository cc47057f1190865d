"""Workload TOML schema: defaults, extensions, and errors naming file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from cmdare.planner.risk_cost.workload import WorkloadError, load_workload, parse_workload

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
MINIMAL = """
[model]
name = "resnet32"
model_flops = 1658696889
params = 1857722

[target]
steps = 64000

[current]
gpu = "K80"
workers = 4
ps = 1
region = "us-east1"
provisioning = "spot"
"""


def test_examples_parse() -> None:
    files = sorted(EXAMPLES.glob("workload-*.toml"))
    assert len(files) >= 2
    for f in files:
        assert load_workload(f).target.steps > 0


def test_minimal_defaults() -> None:
    w = parse_workload(MINIMAL)
    assert w.model.batch_size == 0 and w.model.effective_batch_size == 128  # undeclared: the study's
    assert (
        w.allowed.gpus == ("K80",) and w.allowed.max_workers == 4 and w.allowed.ps_provisioning == "standard"
    )
    assert w.options.checkpoint_interval_steps is None and w.options.checkpoint_interval_s == 600


def test_epochs_give_steps() -> None:
    text = MINIMAL.replace("steps = 64000", "epochs = 10\ndataset_size = 50000")
    assert parse_workload(text).target.steps == round(10 * 50000 / 128)


def test_unknown_key_names_file_line_and_key() -> None:
    text = MINIMAL.replace("\nps = 1", "\nps = 1\nzone = 'a'")
    with pytest.raises(WorkloadError, match=r"w\.toml:14: current\.zone: unknown key"):
        parse_workload(text, source="w.toml")


@pytest.mark.parametrize(
    ("old", "new", "pattern"),
    [
        ('provisioning = "spot"', 'provisioning = "cheap"', r"current\.provisioning: must be one of"),
        ("workers = 4", 'workers = "4"', r"current\.workers: wrong type str"),
        ("workers = 4", "workers = 0", r"current\.workers: must be > 0"),
        ("steps = 64000", "", r"target\.steps: give steps"),
        ("[target]", "[targets]", r"\[targets\]: unknown table"),
        ('name = "resnet32"\n', "", r"model\.name: missing required key"),
        ("steps = 64000", "steps = ", r"invalid TOML"),
    ],
)
def test_bad_files(old: str, new: str, pattern: str) -> None:
    with pytest.raises(WorkloadError, match=pattern):
        parse_workload(MINIMAL.replace(old, new), source="w.toml")


def test_missing_file() -> None:
    with pytest.raises(WorkloadError, match="cannot read"):
        load_workload("/nonexistent/w.toml")
