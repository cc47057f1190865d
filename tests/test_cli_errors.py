"""The real process's exit status and stderr for the cases issue 15 found as tracebacks, and the
issue 18 command-line items (global flags in either place, one --prices vocabulary, plan --geo's
[search] top and conflicting flags, predict --help, --log-level)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_harness import run_main

from cmdare.tui import cli
from cmdare.tui.cli_args import PRICE_MODES

REPO = Path(__file__).resolve().parents[1]
EX = REPO / "examples"
EXE = str(Path(sys.executable).with_name("cmdare-tui"))


def _run(
    *argv: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run([EXE, *argv], capture_output=True, text=True, timeout=60, cwd=cwd, env=env)


def _one_line_exit_2(out: subprocess.CompletedProcess, *words: str) -> None:
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("cmdare-tui: error: "), out.stderr
    assert "Traceback" not in out.stderr and all(w in out.stderr for w in words), out.stderr


def test_issue_cases_exit_2_with_one_line(tmp_path: Path, isolated_home: Path):
    latin1 = tmp_path / "latin1.csv"
    latin1.write_bytes(
        "model,model_flops,params,batch_size,gpu,workers,ps\nréseau,1e9,1e6,32,P100,1,1\n".encode("latin-1")
    )
    bad_cfg = tmp_path / "c.toml"
    bad_cfg.write_text("[sources]\ntensorboard = 5\n")
    str_cfg = tmp_path / "s.toml"
    str_cfg.write_text('[sources]\ntensorboard = "logs"\n')  # a string, once iterated char by char
    geo = tmp_path / "g.toml"
    geo.write_text((EX / "geo-3dc.toml").read_text().replace("params = 13e9", "params = 1e308"))
    geo_dc = tmp_path / "dc.toml"
    geo_dc.write_text((EX / "geo-3dc.toml").read_text().replace('"europe"', '"[/]"'))
    work = tmp_path / "w.toml"
    work.write_text(
        (EX / "workload-resnet32.toml")
        .read_text()
        .replace("batch_size = 128", "batch_size = 99999999999999999999999")
    )
    cases = [
        (("--target", "http://127.0.0.1:99999/metrics"), ("port",)),
        (("snapshot", "--target", "http://127.0.0.1:99999/metrics"), ("port",)),
        (("--record", "/proc/cmdare.db", "--demo"), ("--record",)),  # the TUI must not start (nor exit 0)
        (("predict", "--input", str(latin1)), ("UTF-8",)),
        (("predict", "--input", str(EX / "predict.csv"), "--output", str(tmp_path)), ("directory",)),
        (("predict", "--input", str(EX / "predict.csv"), "--output", "/dev/null"), ("device",)),
        (("plan", "--workload", str(work)), ("batch_size",)),
        (("plan", "--geo", str(geo)), ("params",)),
        (("--config", str(bad_cfg), "--demo"), ("tensorboard", ":2:")),
        (("--config", str(str_cfg), "--demo"), ("tensorboard", "list")),
        (("serve", "--host", "0.0.0.0"), ("--allow-remote",)),
    ]  # fmt: skip
    for argv, words in cases:
        _one_line_exit_2(_run(*argv, cwd=tmp_path), *words)
    out = _run("plan", "--geo", str(geo_dc), "--top", "1")
    assert out.returncode == 0 and "[/]" in out.stdout and not out.stderr


def test_record_refuses_a_symlink(tmp_path: Path, isolated_home: Path):
    (tmp_path / "real.db").write_text("")
    (tmp_path / "link.db").symlink_to(tmp_path / "real.db")
    code, _, err = run_main(["snapshot", "--demo", "--record", str(tmp_path / "link.db")])
    assert code == 2 and "symlink" in err


def test_global_flags_before_or_after_the_command(isolated_home: Path):
    for argv in (["--prices", "study-era", "plan", "--workload", str(EX / "workload-resnet32.toml"), "--top", "1"],
                 ["plan", "--workload", str(EX / "workload-resnet32.toml"), "--top", "1", "--prices", "study-era"],
                 ["--read-only", "--prices=study-era", "--log-level", "info", "plan", "--workload",
                  str(EX / "workload-resnet32.toml"), "--top", "1"]):  # fmt: skip
        code, out, err = run_main(argv)
        assert code == 0 and "2019-02-15" in out, err  # the study-era book
    code, _, err = run_main(["--read-only", "--bogus", "plan"])
    assert code == 2 and "--bogus" in err
    code, _, err = run_main(["--target", "http://127.0.0.1:9/metrics", "snapshot"])  # a command's flag first
    assert code == 2 and "cmdare-tui snapshot [its flags]" in err and err.count("\n") == 1


def test_snapshot_prices_with_the_book_it_is_given_in_either_place(isolated_home: Path, monkeypatch):
    """``--prices`` before or after ``snapshot`` chooses the book the report and the JSON price with (it
    was accepted and then ignored: the offline book priced every snapshot); a live request that falls back
    says why on stderr."""
    demo = ["--demo", "--samples", "2", "--interval", "0.3"]
    for argv in (["--prices", "study-era", "snapshot", *demo], ["snapshot", *demo, "--prices", "study-era"]):
        code, out, err = run_main(argv)
        assert code == 0 and "prices of 2019-02-15" in out, (out, err)
    code, out, _ = run_main(["--read-only", "--prices", "study-era", "snapshot", *demo, "--json"])
    prices = json.loads(out)["planner"]["prices"]
    assert code == 0 and prices["as_of"] == "2019-02-15" and prices["dated"], prices
    from cmdare.collectors.pricing import loader

    monkeypatch.setattr(loader, "default_credentials", lambda: (None, "no Google credentials"))  # no network
    code, out, err = run_main(["--prices", "live", "snapshot", *demo])
    assert (
        code == 0
        and "offline prices" in out
        and "prices: live prices not used: " in err
        and "credentials" in err
    ), err


@pytest.mark.parametrize("command", [None, *cli.COMMANDS])
def test_one_prices_vocabulary(command: str | None):
    parser = cli.build_parser() if command is None else cli._command_parser(command)[1]
    prices = next(a for a in parser._actions if "--prices" in a.option_strings)
    assert tuple(prices.choices) == PRICE_MODES
    for flag in ("--read-only", "--log-level", "--config"):
        assert any(flag in a.option_strings for a in parser._actions), (command, flag)


def test_config_prices_is_every_commands_default(tmp_path: Path, isolated_home: Path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('prices = "study-era"\n')
    code, out, err = run_main(["prices", "--config", str(cfg), "--json"])
    assert code == 0 and json.loads(out)[0]["as_of"] == "2019-02-15", err
    code, out, err = run_main(
        ["plan", "--config", str(cfg), "--workload", str(EX / "workload-resnet32.toml")]
    )
    assert code == 0 and "2019-02-15" in out, err
    code, out, err = run_main(["plan", "--config", str(cfg), "--geo", str(EX / "geo-3dc.toml"), "--json"])
    assert code == 0, err  # a config's prices is no conflict with --geo


def test_plan_geo_top_and_conflicts(isolated_home: Path):
    geo, work = str(EX / "geo-3dc.toml"), str(EX / "workload-resnet32.toml")
    code, out, _ = run_main(["plan", "--geo", geo, "--json"])
    assert code == 0 and len(json.loads(out)["placements"]) == 5  # the file's [search] top
    code, out, _ = run_main(["plan", "--geo", geo, "--json", "--top", "2"])
    assert code == 0 and len(json.loads(out)["placements"]) == 2
    for extra in (["--objective", "time"], ["--workload", work], ["--prices", "live"]):
        code, _, err = run_main(["plan", "--geo", geo, *extra])
        assert code == 2 and err.count("\n") == 1, err


def test_predict_output_symlink_only_when_asked(tmp_path: Path, isolated_home: Path):
    real, link = tmp_path / "real.csv", tmp_path / "link.csv"
    real.write_text("keep\n")
    link.symlink_to(real)
    argv = ["predict", "--input", str(EX / "predict.csv"), "--output", str(link)]
    code, _, err = run_main(argv)
    assert code == 2 and "--follow-symlinks" in err and real.read_text() == "keep\n"
    code, _, err = run_main([*argv, "--follow-symlinks"])
    assert code == 0 and link.is_symlink() and real.read_text().startswith("model,"), err


def test_predict_help_lists_columns_and_the_example_runs():
    out = _run("predict", "--help")
    assert out.returncode == 0
    for col in (
        "model_flops",
        "params",
        "batch_size",
        "gpu",
        "workers",
        "ps",
        "steps_per_sec",
        "examples/predict.csv",
    ):
        assert col in out.stdout
    assert "issue 5" not in out.stdout and "through :mod:" not in out.stdout  # not the module docstring
    code, csv_out, err = run_main(["predict", "--input", str(EX / "predict.csv")])
    assert code == 0 and len(csv_out.splitlines()) == 5, err


def test_log_level_logs_somewhere(tmp_path: Path, isolated_home: Path):
    from cmdare.collectors import writes
    from cmdare.tui import logsetup

    code, _, err = run_main(["--log-level", "DEBUG", "snapshot", "--target", "http://127.0.0.1:9/metrics",
                             "--samples", "1", "--timeout", "0.2"])  # fmt: skip
    assert code == 1 and "DEBUG" in err  # a command: on stderr
    log = logsetup.setup_logging("INFO", to_stderr=False)  # the app: a file in the state dir, never stderr
    assert log is not None and log.is_relative_to(isolated_home)
    import logging

    logging.getLogger("cmdare.test").info("hello %s", "there")
    assert "hello there" in log.read_text()
    log.unlink()
    writes.set_read_only(True)
    try:
        assert logsetup.setup_logging("INFO", to_stderr=False) is None
        logging.getLogger("cmdare.test").warning("not written")
        assert not log.exists()
    finally:
        writes.set_read_only(False)
        logsetup.setup_logging(None, to_stderr=True)


@pytest.mark.parametrize("flag", ["--prometheus-token-file", "--jsonl", "--tensorboard"])
def test_path_too_long_for_the_file_system_is_one_line(flag: str, isolated_home: Path):
    """A name longer than the file system allows (ENAMETOOLONG) is a usage error, not an OSError."""
    out = _run("--read-only", "snapshot", "--prometheus", "http://127.0.0.1:9", flag, "a" * 5000)
    _one_line_exit_2(out, flag)
    assert "a" * 300 not in out.stderr  # the echoed name is bounded


def test_token_file_is_read_bounded(tmp_path: Path, isolated_home: Path):
    """A token file larger than 64 KiB is refused with one line that never echoes its content."""
    big = tmp_path / "token"
    big.write_text("s3cr3t-" * 20_000)
    out = _run(
        "--read-only", "snapshot", "--prometheus", "http://127.0.0.1:9", "--prometheus-token-file", str(big)
    )
    _one_line_exit_2(out, "--prometheus-token-file", "larger than")
    assert "s3cr3t" not in out.stderr
