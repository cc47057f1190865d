"""The typed planner answer (issue 19 item 1) and its one JSON rendering (docs/planner_view.schema.json):
real ``snapshot --json`` output of the demo (a subprocess) and a real ``e`` export (the app under its Pilot)
validate against the checked-in schema, and a renamed field fails it. The rules read a typed RuleInputs."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from cmdare.collectors import writes
from cmdare.planner.rules.alerts import AlertContext
from cmdare.planner.rules.inputs import RuleInputs
from cmdare.planner.view import PlannerView
from cmdare.planner.view_json import planner_view_json
from tests.pilot_app import fast_demo_app, wait_for

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((REPO / "docs" / "planner_view.schema.json").read_text("utf-8"))
JOB = "resnet32-p100"


def validate(doc: dict) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``doc`` matches the checked-in schema."""
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)


def run_snapshot(
    *extra: str, columns: int | None = None, samples: int = 3
) -> subprocess.CompletedProcess[str]:
    """``cmdare-tui snapshot`` of the demo as a real process with its stdout piped."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR")}
    if columns is not None:
        env["COLUMNS"] = str(columns)
    cmd = [sys.executable, "-m", "cmdare.tui.cli", "snapshot", "--samples", str(samples), "--interval", "0.5",
           "--read-only", *extra]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, check=False)


@pytest.fixture(scope="module")
def snapshot_doc() -> dict:
    out = run_snapshot("--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def job_part(doc: dict, name: str = JOB) -> dict:
    return next(j for j in doc["planner"]["jobs"] if j["job"] == name)


def test_schema_is_a_valid_json_schema():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def test_snapshot_json_matches_the_schema_and_carries_cost_prediction_prices_and_ranking(snapshot_doc):
    validate(snapshot_doc)
    p = snapshot_doc["planner"]
    assert p["prices"]["source"] == "offline" and p["prices"]["date"]
    job = job_part(snapshot_doc)
    pred = job["prediction"]
    assert pred["p10"] <= pred["steps_per_sec"] <= pred["p90"] and pred["source"]
    assert job["cost"]["usd_per_hour"] > 0 and job["cost"]["price_source"] == "offline"
    rows = job["ranking"]["rows"]
    assert rows[0]["current"] and rows[0]["delta_time"] == 0.0 and len(rows) >= 4
    assert all(r["rank"] >= 1 for r in rows[1:]) and [r["rank"] for r in rows[1:4]] == [1, 2, 3]


@pytest.mark.parametrize(
    "path",
    [
        ("prices", "date"),
        ("jobs", 0, "cost", "accrued_usd"),
        ("jobs", 0, "prediction", "p10"),
        ("jobs", 0, "ranking", "rows", 1, "delta_cost"),
        ("jobs", 0, "ranking", "calibration_samples"),
        ("jobs", 0, "outlook", 0, "steps_per_sec"),
    ],
)
def test_a_renamed_field_fails_the_schema(snapshot_doc, path):
    doc = copy.deepcopy(snapshot_doc)
    doc["planner"]["jobs"] = [job_part(doc)]
    *parent_path, key = path
    parent = doc["planner"]
    for k in parent_path:
        parent = parent[k]
    parent[key + "_renamed"] = parent.pop(key)
    with pytest.raises(jsonschema.ValidationError):
        validate(doc)


def test_the_empty_view_renders_and_validates():
    """Before the planner has loaded (the first poll), the state still exports a valid planner part."""
    doc = {"time": 0.0, "demo": False, "read_only": True, "jobs": [], "alerts": [], "sources": [],
           "planner": planner_view_json(PlannerView())}  # fmt: skip
    validate(doc)


async def test_export_key_writes_a_document_that_matches_the_schema(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    writes.set_read_only(False)
    app = fast_demo_app(first_revocation_s=1000)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(
            pilot, lambda: getattr(app.state and app.state.planner.job(JOB), "ranked", None) is not None
        )
        await pilot.press("e")
        await pilot.pause()
    (path,) = tmp_path.glob("cmdare-snapshot-*.json")
    doc = json.loads(path.read_text("utf-8"))
    validate(doc)
    job = job_part(doc)
    assert job["ranking"]["rows"] and job["prediction"]["p90"] and job["cost"]["usd_per_hour"]


CUT = re.compile(r"\w…(\s|$)")  # a word cut short by an ellipsis ("worke…"); "+25%…+73%" is a range


@pytest.mark.parametrize("width", [80, 120])
def test_snapshot_report_fits_the_width_and_says_cost_prediction_and_top_plans(width):
    out = run_snapshot(columns=width)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= width
    assert not any(CUT.search(line) for line in lines), out.stdout
    text = out.stdout
    for name in [f"worker-{i}" for i in range(8)] + ["ps-0", "stage-0", JOB]:
        assert re.search(rf"(^|\s){re.escape(name)}(\s|$|\))", text, re.M), name  # whole, never folded
    assert re.search(r"Cost \$[\d.]+ accrued while monitored, \$[\d.]+/h \(offline prices, ", text)
    assert re.search(r"Predicted [\d.]+ steps/s \(P10–P90 [\d.]+–[\d.]+\)", text)
    assert re.search(r"model:\s", text)
    assert "Top 3 plans (ranked by" in text
    for rank in ("now", "#1", "#2", "#3"):
        assert re.search(rf"^{rank} +\d+×\w+·\d+PS", text, re.M), rank
    assert re.search(r"Δ time +Δ cost +P\(≥1 rev\)", text)


def test_snapshot_report_defaults_to_80_columns_when_piped():
    out = run_snapshot(columns=None, samples=2)  # two polls: the planner joins at the second, then ranks
    assert out.returncode == 0, out.stderr
    assert max(len(line.rstrip()) for line in out.stdout.splitlines()) <= 80
    assert "Top 3 plans (ranked by" in out.stdout


def test_rules_read_only_fields_that_rule_inputs_has():
    """Every ``ctx.inputs.NAME`` in the rules is a field of RuleInputs: renaming a field without its
    readers fails here (and in a type check), never as a silent default."""
    fields = {f.name for f in dataclasses.fields(RuleInputs)}
    used = set()
    for src in (REPO / "planner" / "rules").glob("*.py"):
        used |= set(re.findall(r"ctx\.inputs\.(\w+)", src.read_text("utf-8")))
    assert used and used <= fields, used - fields
    assert "extras" not in {f.name for f in dataclasses.fields(AlertContext)}
    with pytest.raises(dataclasses.FrozenInstanceError):
        RuleInputs().price_book = object()  # type: ignore[misc]


def test_no_string_keyed_extras_left_in_the_tui():
    offenders = [p for p in (REPO / "tui").rglob("*.py") if re.search(r"\bextras\b", p.read_text("utf-8"))]
    assert offenders == []


def test_renderers_read_ranked_rows_typed():
    """The panes, widgets and the report read a ranked shape as a RankedRow, never as a row dict."""
    renderers = [
        *(REPO / "tui" / "panes").glob("*.py"),
        *(REPO / "tui" / "widgets").glob("*.py"),
        REPO / "tui" / "plain.py",
    ]
    assert [p.name for p in renderers if re.search(r"\.row\(|\.current\b\[", p.read_text("utf-8"))] == []


@pytest.mark.parametrize("workload", ["workload-sync-ddp.toml", "workload-resnet32.toml"])
def test_a_ranked_row_is_typed_frozen_and_a_renamed_column_fails_in_the_planner(workload: str):
    from cmdare.planner.risk_cost.shapes import ShapeTable
    from cmdare.planner.view_json import ranked_row_json
    from cmdare.tui.commands.plan import build_table

    table = build_table(REPO / "examples" / workload, "balanced", prices="study-era")
    i = int(table.view[0])
    row, doc = table.ranked_row(i), ranked_row_json(table, i, 1)
    assert (row.shape, row.region, row.sync) == (doc["shape"], doc["region"], doc["mode"] == "sync")
    assert row.hours_p50 == table.row(i)["hours_p50"] and isinstance(row.pareto, bool)
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.gpu = "K80"  # type: ignore[misc]
    cols = {("region_renamed" if k == "region" else k): v for k, v in table.columns.items()}
    with pytest.raises(KeyError, match="region"):
        ShapeTable(cols, table.order, table.objective, table.terms).ranked_row(i)


@pytest.mark.parametrize(
    ("columns", "width"), [("abc", 80), ("", 80), ("-3", 40), ("10", 40), ("99999999", 1000)]
)
def test_report_width_takes_a_bad_columns_value_as_a_bound(monkeypatch, columns, width):
    from cmdare.tui import plain

    monkeypatch.setattr(plain.sys.stdout, "isatty", lambda: False)
    monkeypatch.setenv("COLUMNS", columns)
    assert plain.report_width() == width


@pytest.mark.parametrize("width", [80, 120])
def test_alerts_table_wraps_a_long_alert_within_the_width(width):
    """The Alerts table of the report (issue 18: 212 characters wide when piped) stays within the width and
    wraps a long message and subject instead of cutting them."""
    import io

    from rich.console import Console

    from cmdare.planner.rules.alerts import Alert
    from cmdare.tui.plain import print_overview
    from cmdare.tui.session import MonitorState

    subject = "a-rather-long-job-name-from-a-real-cluster/worker-12345"
    message = "parameter server saturated: " + " ".join(f"figure-{i}" for i in range(60))
    alert = Alert("ps-saturation", subject, "warning", message, {}, "add a parameter server", 0.0, 0.0)
    state = MonitorState(
        t=0.0, cycles=3, jobs=[], alerts=[alert], alert_history=[], sources=[], demo=False, read_only=True
    )
    out = io.StringIO()
    print_overview(state, Console(file=out, width=width, no_color=True, markup=False, emoji=False))
    lines = out.getvalue().splitlines()
    assert max(len(line.rstrip()) for line in lines) <= width
    text = " ".join(line.strip() for line in lines)
    assert "ps-saturation" in text and "▲ warning" in text and "figure-59 → add a parameter server" in text
    assert not any(CUT.search(line) for line in lines)


@pytest.mark.parametrize("workload", ["workload-sync-ddp.toml", "workload-resnet32.toml"])
def test_ranked_rows_of_both_modes_match_the_schema(workload: str):
    """A synchronous (all-reduce) ranking carries nodes × GPUs per node, the predicted all-reduce share
    and the revocation policy; a PS ranking carries them as null; both validate as ranked rows."""
    from cmdare.planner.view_json import ranked_indices, ranked_row_json
    from cmdare.tui.commands.plan import build_table

    table = build_table(REPO / "examples" / workload, "balanced", prices="study-era")
    row_schema = {"$defs": SCHEMA["$defs"], "$ref": "#/$defs/ranked_row"}
    rows = [ranked_row_json(table, i, None) for i in ranked_indices(table, 5)]
    for row in rows:
        jsonschema.Draft202012Validator(row_schema).validate(row)
    sync = workload.startswith("workload-sync")
    assert {r["mode"] for r in rows} == {"sync" if sync else "async-ps"}
    if sync:
        assert all(r["nodes"] * r["gpus_per_node"] == r["workers"] and r["ps"] == 0 for r in rows)
        assert all(0 <= r["comm_share"] <= 1 and r["policy"] in ("restart", "elastic") for r in rows)
    else:
        assert all(r["nodes"] is None and r["comm_share"] is None and r["policy"] is None for r in rows)


def test_the_planner_pane_lists_the_rows_snapshot_lists():
    """The pane shows ``n`` ranked rows, the current shape's among them, the very rows and order ``snapshot``
    and the JSON take from the planner (:func:`ranked_indices`): not ``n`` best plus the current one."""
    from cmdare.planner.view_json import ranked_indices
    from cmdare.tui.commands.plan import build_table
    from cmdare.tui.panes.planner import ranked_rows

    table = build_table(REPO / "examples" / "workload-resnet32.toml", "balanced", prices="study-era")
    assert 0 not in [int(x) for x in table.view[:5]]  # the current shape ranks below the top five
    keys = [row.key for row in ranked_rows(table, 5)]
    assert keys == [str(i) for i in ranked_indices(table, 5)] and len(keys) == 5 and keys[0] == "0"
