"""The TOML config: typed, rejects unknown keys with file, line and key; found by --config or in the
XDG config dir; CLI flags beat it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cmdare.tui.cli import build_parser, load_config_defaults, session_options
from cmdare.tui.config import ConfigError, load_config, parse_config

REPO = Path(__file__).resolve().parents[1]


def test_example_config_parses():
    cfg = load_config(REPO / "examples" / "config.toml")
    assert cfg.refresh == 2.0 and cfg.read_only is False
    assert cfg.budget_usd == 50.0 and cfg.thresholds["silent_after"] == 3
    assert cfg.jobs[0].name == "resnet32-p100" and cfg.keys["app.quit"] == "q"


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("refresh = 2\nbogus = 1\n", ":2: bogus: unknown key"),
        (
            "[thresholds]\nsilent_after = 3\nraise_after = 0\n",
            ":3: [thresholds] raise_after: must be an integer >= 1",
        ),
        ("[sources]\ntargets = ['ftp://x']\n", ":2: [sources] targets: must be a list of http(s) URLs"),
        ("[budget]\nusd = -5\n", ":2: [budget] usd: must be a number > 0"),
        ("[[jobs]]\nname = 'a'\nmodle = 'x'\n", ":3: [jobs] modle: unknown key"),
        ("read_only = 'yes'\n", ":1: read_only: must be true or false"),
        ("refresh = \n", "config.toml: Invalid value"),
    ],
)
def test_errors_name_file_line_and_key(text: str, where: str):
    with pytest.raises(ConfigError) as exc:
        parse_config(text, "/etc/x/config.toml")
    msg = str(exc.value)
    assert msg.startswith("/etc/x/config.toml") and where in msg and "\n" not in msg


def test_default_file_in_xdg_config_dir(isolated_home: Path):
    assert load_config().path is None  # absent default file: defaults
    d = isolated_home / "xdg_config_home" / "cmdare-tui"
    d.mkdir(parents=True)
    (d / "config.toml").write_text("refresh = 7\nread_only = true\n[budget]\nusd = 12.5\n")
    cfg = load_config()
    assert cfg.refresh == 7 and cfg.read_only and cfg.budget_usd == 12.5


def test_flags_win_over_config(tmp_path: Path):
    f = tmp_path / "c.toml"
    f.write_text("refresh = 7\n[thresholds]\nraise_after = 5\n[budget]\nusd = 9\n")
    for argv, expect in ((["--config", str(f)], 7.0), (["--config", str(f), "--refresh", "1"], 1.0)):
        p = build_parser()
        config = load_config_defaults(argv, p)
        opts = session_options(p.parse_args(argv), config)
        assert opts.refresh == expect and opts.raise_after == 5 and opts.budget_usd == 9


def test_cli_reports_bad_config_in_one_line(tmp_path: Path):
    f = tmp_path / "bad.toml"
    f.write_text("[sources]\ndemo = true\nnope = 1\n")
    for argv in (
        ["--config", str(f)],
        ["snapshot", "--config", str(f)],
        ["--config", str(tmp_path / "missing.toml")],
    ):
        r = subprocess.run(
            [sys.executable, "-m", "cmdare.tui.cli", *argv], capture_output=True, text=True, timeout=30
        )
        assert r.returncode == 2
        assert (
            r.stderr.count("\n") == 1
            and r.stderr.startswith("cmdare-tui: error: ")
            and "Traceback" not in r.stderr
        )
    assert f"{f}:3: [sources] nope: unknown key" in r.stderr or "missing.toml" in r.stderr


def test_version_flag():
    r = subprocess.run(
        [sys.executable, "-m", "cmdare.tui.cli", "--version"], capture_output=True, text=True, timeout=30
    )
    assert r.returncode == 0 and r.stdout.startswith("cmdare-tui ")


def test_links_give_wan_capacities_to_the_session(tmp_path):
    from cmdare.tui import cli
    from cmdare.tui.config import ConfigError, parse_config

    cfg = parse_config('[links]\n"us-west1/europe-west4" = 0.36\n"us-central1 / us-west1" = 5\n', "c.toml")
    assert cfg.links == {
        frozenset({"us-west1", "europe-west4"}): 0.36,
        frozenset({"us-central1", "us-west1"}): 5.0,
    }
    with pytest.raises(ConfigError, match=r"c.toml:2: \[links\] us-west1: must name two DCs"):
        parse_config('[links]\n"us-west1" = 1\n', "c.toml")
    path = tmp_path / "c.toml"
    path.write_text('[links]\n"a/b" = 2.5\n')
    parser = cli.build_parser()
    argv = ["--config", str(path)]
    config = cli.load_config_defaults(argv, parser)
    opts = cli.session_options(parser.parse_args(argv), config)
    assert opts.link_capacity_gbps == {frozenset({"a", "b"}): 2.5}
