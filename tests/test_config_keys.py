"""Issue 18: every key documented in docs/config.md does what the page says — one case per key, each
set in a config file and observed where it lands (the session's options or the app's settings) when
``cmdare-tui --config FILE`` starts. The app itself is replaced by a recorder of what it was given
(its own tests show what it does with each setting); the keys list is read from the docs page, so a
key documented without a case here fails."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import cmdare.tui.app as app_module
from tests.cli_harness import run_main

REPO = Path(__file__).resolve().parents[1]
DOC = (REPO / "docs" / "config.md").read_text()


class _NoSession:
    """What run_app closes after the app ends: this stand-in opened no source."""

    def close_sources(self) -> None:
        return None


class FakeApp:
    """Stands in for CmdareApp: records the options and settings it was started with."""

    seen: dict[str, Any] = {}

    def __init__(self, options: Any, **kw: Any) -> None:
        FakeApp.seen = {"options": options, **kw}
        self.return_code = 0
        self.session = _NoSession()

    def run(self) -> None:
        return None


def _started(tmp_path: Path, text: str, *argv: str) -> dict[str, Any]:
    f = tmp_path / "c.toml"
    f.write_text(text)
    FakeApp.seen = {}
    code, _, err = run_main(["--config", str(f), *argv])
    assert code == 0, err
    return FakeApp.seen


@pytest.fixture(autouse=True)
def _fake_app(isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(app_module, "CmdareApp", FakeApp)
    for var in ("CMDARE_READ_ONLY", "PROMETHEUS_URL", "TF_CONFIG"):
        monkeypatch.delenv(var, raising=False)


def _paths(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "tb").mkdir(exist_ok=True)
    (tmp_path / "log.jsonl").write_text("")
    (tmp_path / "token").write_text("t0ken\n")
    return {
        "tb": str(tmp_path / "tb"),
        "jsonl": str(tmp_path / "log.jsonl"),
        "token": str(tmp_path / "token"),
    }


TF = '{"cluster": {"worker": ["127.0.0.1:2222"]}, "task": {"type": "worker", "index": 0}}'
# key -> (TOML, check(seen, paths)); [sources] keys also need a source, given by `targets` or the key
CASES: dict[str, tuple[str, Any]] = {
    "refresh": ("refresh = 7\n", lambda s, p: s["options"].refresh == 7),
    "timeout": ("timeout = 0.5\n", lambda s, p: s["options"].timeout == 0.5),
    "read_only": ("read_only = true\n", lambda s, p: s["options"].read_only is True),
    "theme": ('theme = "nord"\n', lambda s, p: s["theme"] == "nord"),
    "animations": ("animations = true\n", lambda s, p: s["animations"] is True),
    "prices": ('prices = "study-era"\n', lambda s, p: s["prices"] == "study-era"),
    "targets": ('[sources]\ntargets = ["http://127.0.0.1:9/metrics"]\n',
                lambda s, p: s["options"].targets == ["http://127.0.0.1:9/metrics"]),
    "demo": ("[sources]\ndemo = true\n", lambda s, p: s["options"].demo is True),
    "prometheus": ('[sources]\nprometheus = "http://127.0.0.1:9"\n',
                   lambda s, p: s["options"].prometheus == "http://127.0.0.1:9"),
    "selector": ('[sources]\ndemo = true\nselector = \'job="r"\'\n', lambda s, p: s["options"].selector == 'job="r"'),
    "prometheus_token_file": ('[sources]\ndemo = true\nprometheus_token_file = "{token}"\n',
                              lambda s, p: s["options"].prometheus_token_file == p["token"]),
    "tensorboard": ('[sources]\ntensorboard = ["{tb}"]\n', lambda s, p: s["options"].tensorboard == [p["tb"]]),
    "jsonl": ('[sources]\njsonl = ["{jsonl}"]\n', lambda s, p: s["options"].jsonl == [p["jsonl"]]),
    "mlflow": ('[sources]\nmlflow = ["http://127.0.0.1:5000"]\n', lambda s, p: s["options"].mlflow == ["http://127.0.0.1:5000"]),
    "mlruns": ('[sources]\nmlruns = ["{tb}"]\n', lambda s, p: s["options"].mlruns == [p["tb"]]),
    "mlflow_experiment": (
        '[sources]\nmlruns = ["{tb}"]\nmlflow_experiment = ["resnet"]\n',
        lambda s, p: s["options"].mlflow_experiment == ["resnet"],
    ),
    "tf_config": (f"[sources]\ntf_config = '{TF}'\n", lambda s, p: s["options"].tf_config == TF),
    "metrics_port": ('[sources]\ndemo = true\nmetrics_port = "+5"\n', lambda s, p: s["options"].metrics_port == "+5"),
    "job": ('[sources]\ndemo = true\njob = "bert"\n', lambda s, p: s["options"].job == "bert"),
    "record": ('[sources]\ndemo = true\nrecord = "rec.db"\n', lambda s, p: s["options"].record == "rec.db"),
    "silent_after": ("[thresholds]\nsilent_after = 5\n", lambda s, p: s["options"].silent_after == 5),
    "raise_after": ("[thresholds]\nraise_after = 6\n", lambda s, p: s["options"].raise_after == 6),
    "clear_after": ("[thresholds]\nclear_after = 7\n", lambda s, p: s["options"].clear_after == 7),
    "usd": ("[budget]\nusd = 40\n", lambda s, p: s["options"].budget_usd == 40),
    "deadline_hours": ("[budget]\ndeadline_hours = 3\n", lambda s, p: s["options"].deadline_hours == 3),
    "keys": ('[keys]\n"app.quit" = "ctrl+q"\n', lambda s, p: s["keys"] == {"app.quit": "ctrl+q"}),
    "links": ('[links]\n"a/b" = 0.5\n', lambda s, p: s["options"].link_capacity_gbps == {frozenset("ab"): 0.5}),
    "jobs": ('[[jobs]]\nname = "r"\nmodel = "ResNet-32"\nmodel_flops = 1.6e9\nparams = 1.8e6\nbatch_size = 64\n'
             "target_steps = 1000\nbudget_usd = 9\ndeadline_hours = 2\n",
             lambda s, p: (s["options"].job_facts[0].model.name, s["options"].job_facts[0].model.model_flops,
                           s["options"].job_facts[0].model.params, s["options"].job_facts[0].model.batch_size,
                           s["options"].job_facts[0].target_steps, s["options"].budget_usd,
                           s["options"].deadline_hours) == ("ResNet-32", 1.6e9, 1.8e6, 64, 1000, 9, 2)),
    **{key: (f"[caps]\n{key} = {n}\n", lambda s, p, key=key, n=n: s["options"].caps == {key: n})
       for key, n in (("tasks", 50), ("series_per_task", 40), ("tags_per_task", 8), ("label_length", 64),
                      ("rows_per_answer", 900), ("cycle_polls", 70), ("history_mb", 32))},
}  # fmt: skip


def _section(title: str) -> str:
    return DOC.split(f"## `{title}`")[1].split("\n## ")[0]


def documented_keys() -> set[str]:
    """Keys named in docs/config.md: table rows, the ``key (type…)`` lists, and the tables themselves
    (``[keys]``, ``[links]`` and ``[[jobs]]`` are one case each)."""
    rows = set(re.findall(r"^\| `(\w+)` \|", DOC, re.M))
    sources = _section("[sources]")
    from cmdare.tui.config import source_keys

    named = set(re.findall(r"`(\w+)`", sources)) & set(source_keys())
    named |= set(re.findall(r"`(\w+)`\s*\(", _section("[budget]")))
    return rows | named | {"keys", "links", "jobs"}


def test_every_documented_key_has_a_case():
    assert documented_keys() <= set(CASES), documented_keys() - set(CASES)


@pytest.mark.parametrize("key", sorted(CASES))
def test_documented_key_takes_effect(tmp_path: Path, key: str):
    paths = _paths(tmp_path)
    text, check = CASES[key]
    text = (
        text.replace("{tb}", paths["tb"])
        .replace("{jsonl}", paths["jsonl"])
        .replace("{token}", paths["token"])
    )
    if "[sources]" not in text:
        text = (
            "[sources]\ndemo = true\n" + text if text.startswith("[") else text + "[sources]\ndemo = true\n"
        )
    seen = _started(tmp_path, text)
    assert check(seen, paths), seen


def test_a_flag_still_wins_over_every_kind_of_key(tmp_path: Path):
    seen = _started(tmp_path, 'refresh = 7\nprices = "study-era"\n[sources]\ndemo = true\njob = "a"\n',
                    "--refresh", "3", "--prices", "live", "--job", "b")  # fmt: skip
    assert (seen["options"].refresh, seen["prices"], seen["options"].job) == (3, "live", "b")


def test_jobs_link_capacity_is_rejected_with_a_pointer_to_links(tmp_path: Path):
    f = tmp_path / "c.toml"
    f.write_text('[[jobs]]\nname = "r"\nlink_capacity_gbps = 1\n')
    code, _, err = run_main(["--config", str(f), "--demo"])
    assert code == 2 and "[links]" in err and ":3:" in err


def test_demo_false_and_no_source_says_so(tmp_path: Path):
    FakeApp.seen = {}
    code, _, err = run_main(["--config", str(REPO / "examples" / "config.toml")])
    assert code == 2 and "nothing to monitor" in err and "demo = false" in err and FakeApp.seen == {}
    for argv in (["--demo"], ["--target", "http://127.0.0.1:9/metrics"]):
        code, _, err = run_main(["--config", str(REPO / "examples" / "config.toml"), *argv])
        assert code == 0, err
    code, _, err = run_main(["snapshot", "--config", str(REPO / "examples" / "config.toml")])
    assert code == 2 and "nothing to monitor" in err


def test_config_job_facts_reach_the_job_when_the_exporter_publishes_none(tmp_path: Path):
    """A real snapshot of a plain exporter (no cmdare_job_info): the [[jobs]] facts name the model."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Plain(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = b"# TYPE up gauge\nup 1\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a: object) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Plain)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        f = tmp_path / "c.toml"
        f.write_text('[[jobs]]\nname = "resnet"\nmodel = "ResNet-32"\ntarget_steps = 64000\n')
        code, out, err = run_main(["snapshot", "--config", str(f), "--read-only", "--job", "resnet", "--target",
                                   f"http://127.0.0.1:{srv.server_address[1]}/metrics", "--samples", "1", "--json"])  # fmt: skip
    finally:
        srv.shutdown()
    job = json.loads(out)["jobs"][0]
    assert code == 0 and job["model"] == "ResNet-32" and job["target_steps"] == 64000, err


def test_caps_keys_are_the_caps_fields_and_a_bad_value_is_one_line(tmp_path: Path):
    from dataclasses import fields

    from cmdare.collectors.caps import Caps
    from cmdare.tui.config import CAP_KEYS

    assert CAP_KEYS == tuple(f.name for f in fields(Caps))
    f = tmp_path / "c.toml"
    f.write_text("[caps]\ntasks = 0\n")
    code, _, err = run_main(["--config", str(f), "--demo"])
    assert code == 2 and ":2: [caps] tasks: must be an integer >= 1" in err
    f.write_text("[caps]\nrows = 5\n")
    code, _, err = run_main(["--config", str(f), "--demo"])
    assert code == 2 and "[caps] rows: unknown key" in err
