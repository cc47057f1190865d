"""Issue 32 item 1: one declared contract per source. The flags, the config's ``[sources]`` checks, the
session's options and the docs' table all come from the options the session and each source's spec
declare, so a config key no option declares (an internal one included) or a value of the wrong type is
one line naming the file and its line, exit 2, through the real command line; what a source can do
beyond polling is a protocol checked with ``isinstance``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cmdare.collectors.capabilities import (
    CapNoting,
    Closable,
    Displayed,
    FleetReading,
    Focusable,
    PacedPolling,
    StatusNoting,
    UnchangedCounting,
)
from cmdare.collectors.source_contract import SourceSpec, SourceValues, all_options, all_specs
from cmdare.tui.options import SessionOptions, source_options
from tests.cli_harness import check_discipline, run_main

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def home(isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("CMDARE_READ_ONLY", "PROMETHEUS_URL", "PROMETHEUS_TOKEN", "TF_CONFIG"):
        monkeypatch.delenv(var, raising=False)

    def no_app(*args: object, **kw: object) -> None:
        raise AssertionError("the config should have been refused before the app starts")

    monkeypatch.setattr("cmdare.tui.app.CmdareApp", no_app)
    return isolated_home


def _refused(home: Path, text: str, *argv: str) -> str:
    """The one error line of starting with ``text`` as the config (the app, then ``snapshot``)."""
    f = home / "c.toml"
    f.write_text(text)
    lines = []
    for command in ([], ["snapshot", "--samples", "1"]):
        code, out, err = run_main([*command, "--config", str(f), *argv])
        check_discipline(code, err, (2,))
        lines.append(err.strip().removeprefix("cmdare-tui: error: "))
    assert lines[0] == lines[1] and lines[0].startswith(f"{f}:"), lines
    return lines[0].removeprefix(str(f))


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("tf_config_env_error", '"this key is internal, yet accepted"'),
        ("tf_config_from_env", '"yes please"'),
        ("notes", '["a status line of my own"]'),
        ("sources", "{}"),
        ("refresh", "1"),  # a session setting, but not a [sources] key (it is top-level)
        ("promethues", '"http://127.0.0.1:9090"'),
    ],
)
def test_a_key_no_option_declares_is_refused_with_its_line(home: Path, key: str, value: str):
    where = _refused(home, f"[sources]\ndemo = true\n{key} = {value}\n")
    assert where.startswith(f":3: [sources] {key}: unknown key (allowed: demo, targets, "), where


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('demo = "yes please"', ":2: [sources] demo: must be true or false"),
        ('tensorboard = "runs"', ":2: [sources] tensorboard: must be a list of directory paths"),
        ("jsonl = [1]", ":2: [sources] jsonl: must be a list of file paths"),
        ('replay_speed = "fast"', ":2: [sources] replay_speed: must be a number > 0"),
        ("replay_speed = 0", ":2: [sources] replay_speed: must be a finite number > 0"),
        ("job = 7", ":2: [sources] job: must be a string"),
        ('prometheus = "ftp://x"', ":2: [sources] prometheus: not an http(s) URL"),
        (
            "targets = ['http://127.0.0.1:0/']",
            ":2: [sources] targets: must be a list of http(s) URLs: bad port",
        ),
        ("selector = 'job=resnet'", ":2: [sources] selector: not a label selector"),
        ('metrics_port = "70000"', ":2: [sources] metrics_port: metrics port out of range"),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_with_its_line(home: Path, text: str, where: str):
    assert _refused(home, f"[sources]\n{text}\n", "--demo").startswith(where)


def test_paths_are_probed_with_their_line_only_by_commands_that_monitor(home: Path):
    missing = home / "gone.jsonl"
    text = f'[sources]\ndemo = true\njsonl = ["{missing}"]\n'
    assert _refused(home, text).startswith(f":3: [sources] jsonl: {missing}: no such file")
    code, out, err = run_main(["rules", "--config", str(home / "c.toml"), "--read-only"])
    assert code == 0 and "groups:" in out, err  # a command that monitors nothing is not held up by it


def test_a_flag_of_each_option_and_a_config_key_of_each_flag():
    from cmdare.tui.cli import build_parser
    from cmdare.tui.config import source_keys

    help_text = build_parser().format_help()
    for option in source_options():
        assert re.search(rf"\s{re.escape(option.flag)}\b", help_text), option.flag
    assert source_keys() == tuple(o.name for o in source_options())
    assert not {"tf_config_from_env", "tf_config_env_error", "notes", "sources"} & set(source_keys())


def test_every_spec_module_is_found_and_its_options_are_named_once():
    found = {p.parent.name for p in (REPO / "collectors").rglob("spec.py")}
    assert {"scrape", "prometheus", "tensorboard", "logs"} <= found and len(all_specs()) == len(found)
    assert all(isinstance(s, SourceSpec) and s.options for s in all_specs())
    names = [o.name for o in all_options()]
    assert len(names) == len(set(names))
    assert [s.order for s in all_specs()] == sorted(s.order for s in all_specs())


def test_source_values_are_read_by_option_and_unknown_names_refused():
    from cmdare.collectors.prometheus import spec as prometheus_spec
    from cmdare.collectors.scrape import spec as scrape_spec

    opts = SessionOptions.of(prometheus="http://127.0.0.1:9", targets=["http://a:1/"], refresh=1.0)
    assert opts.refresh == 1.0 and opts.sources[prometheus_spec.URL] == "http://127.0.0.1:9"
    assert (
        opts.sources[scrape_spec.TARGETS] == ["http://a:1/"] and opts.sources[scrape_spec.METRICS] == "9400"
    )
    assert SourceValues()[scrape_spec.TARGETS] == [] and SessionOptions().sources == SourceValues()
    with pytest.raises(TypeError, match="tf_config_from_env"):
        SessionOptions.of(tf_config_from_env=True)


def test_the_docs_table_is_the_generated_one():
    from cmdare.tui.source_docs import with_table

    doc = (REPO / "docs" / "config.md").read_text()
    assert with_table(doc) == doc, "docs/config.md: run python scripts/source_table.py"
    sources_md = (REPO / "docs" / "sources.md").read_text()
    table = "\n".join(line for line in sources_md.splitlines() if line.startswith("| "))
    for option in all_options():  # every source flag is in the per-source table of docs/sources.md
        assert f"`{option.flag}" in table, option.flag


def test_capabilities_are_what_each_source_has(tmp_path: Path):
    """Real sources, checked the way the poller and the session check them."""
    from cmdare.collectors.logs.source import JsonlSource
    from cmdare.collectors.prometheus.source import PrometheusAPISource
    from cmdare.collectors.scrape.source import ScrapeSource
    from cmdare.collectors.tensorboard.source import TensorBoardSource

    log = tmp_path / "m.jsonl"
    log.write_text("")
    every = (
        Focusable,
        FleetReading,
        UnchangedCounting,
        PacedPolling,
        CapNoting,
        StatusNoting,
        Displayed,
        Closable,
    )
    expected = {
        PrometheusAPISource("http://127.0.0.1:9", ""): set(every) - {PacedPolling},
        ScrapeSource([]): {Closable, StatusNoting, PacedPolling},
        TensorBoardSource(str(tmp_path)): {Closable},
        JsonlSource(log): {CapNoting},
    }
    for source, caps in expected.items():
        assert {c for c in every if isinstance(source, c)} == caps, source
