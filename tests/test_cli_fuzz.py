"""Issue 15 item 3: hostile values through every CLI entry point, in-process through ``main(argv)``
(test_cli_errors.py proves the real exit codes in subprocesses). Each example asserts the error
discipline of ``cli_harness.check_discipline`` and that nothing is left half-written.

The TUI itself is not started in-process: ``run_app`` is replaced by the part that validates
(``session_options``), so every app flag still goes through the real parser and checks."""

from __future__ import annotations

import os
import re
import socket
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cmdare.tui import cli
from tests.cli_harness import HOSTILE, check_discipline, leftovers, run_main

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
FUZZ = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# argv cannot hold NUL bytes (the OS forbids it); everything else goes
arg_text = st.one_of(st.sampled_from(HOSTILE), st.text(max_size=30)).filter(lambda s: "\0" not in s)
file_text = st.one_of(st.sampled_from(HOSTILE), st.text(max_size=60))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


DEAD = f"http://127.0.0.1:{_closed_port()}/metrics"


@pytest.fixture
def home(isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("CMDARE_READ_ONLY", "PROMETHEUS_URL", "PROMETHEUS_TOKEN", "TF_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(cli, "run_app", lambda args: (cli.session_options(args), 0)[1])
    return isolated_home


def _flags(names: list[str]) -> st.SearchStrategy[list[str]]:
    pair = st.tuples(st.sampled_from(names), arg_text).map(list)
    return st.lists(pair, max_size=4).map(lambda ps: [x for p in ps for x in p])


APP_FLAGS = ["--target", "--refresh", "--timeout", "--prometheus", "--selector", "--prometheus-token-file",
             "--tensorboard", "--jsonl", "--mlflow", "--mlruns", "--mlflow-experiment", "--tf-config", "--metrics-port", "--job", "--record", "--replay",
             "--replay-speed", "--prices", "--log-level", "--config"]  # fmt: skip


@FUZZ
@given(argv=_flags(APP_FLAGS), flags_first=st.booleans())
def test_app_flags(home: Path, argv: list[str], flags_first: bool):
    code, _, err = run_main(["--read-only", *argv] if flags_first else [*argv, "--read-only"])
    check_discipline(code, err)
    assert leftovers(home) == []


@settings(FUZZ, max_examples=12)
@given(argv=_flags(["--refresh", "--timeout", "--samples", "--interval", "--selector", "--metrics-port", "--job",
                    "--prices", "--log-level", "--replay-speed", "--target"]))  # fmt: skip
def test_snapshot(home: Path, argv: list[str]):
    code, _, err = run_main(
        ["snapshot", "--read-only", "--target", DEAD, *argv, "--samples", "1", "--timeout", "0.3"]
    )
    check_discipline(code, err)


def _toml_value() -> st.SearchStrategy[str]:
    nums = st.one_of(st.integers(min_value=-(2**63), max_value=2**63 - 1), st.floats(allow_nan=True))
    return st.one_of(
        nums.map(lambda x: "nan" if x != x else ("inf" if x == float("inf") else "-inf" if x == -float("inf") else repr(x))),
        file_text.map(lambda s: '"' + s.encode("unicode_escape").decode().replace('"', '\\"') + '"'),
        st.sampled_from(["true", "false", "[]", "[1, 2]", '["a", 5]', "{}", '{a = 1}', "1979-05-27", "[[1]]",
                         "[" * 3000 + "]" * 3000]),
    )  # fmt: skip


_ASSIGN = re.compile(r"^(\s*[\w\"'.-]+\s*=\s*)([^#\n]*)(.*)$", re.M)


def _mutate(text: str, picks: list[tuple[int, str]]) -> str:
    """Replace the values of some ``key = value`` lines of a TOML file."""
    lines = text.splitlines()
    assigns = [i for i, ln in enumerate(lines) if _ASSIGN.match(ln)]
    for k, value in picks:
        i = assigns[k % len(assigns)]
        lines[i] = _ASSIGN.sub(lambda m, v=value: m.group(1) + v, lines[i])
    return "\n".join(lines) + "\n"


mutations = st.lists(st.tuples(st.integers(0, 200), _toml_value()), min_size=1, max_size=3)


@settings(FUZZ, max_examples=30)
@given(picks=mutations, raw=st.one_of(st.none(), st.binary(max_size=200)))
def test_plan_workload_file(home: Path, picks: list[tuple[int, str]], raw: bytes | None):
    f = home / "w.toml"
    f.write_bytes(
        raw if raw is not None else _mutate((EXAMPLES / "workload-resnet32.toml").read_text(), picks).encode()
    )
    code, _, err = run_main(["plan", "--workload", str(f), "--top", "3"])
    check_discipline(code, err, (0, 2))


@settings(FUZZ, max_examples=30)
@given(picks=mutations)
def test_plan_sync_workload_file(home: Path, picks: list[tuple[int, str]]):
    """The same for a synchronous workload: hostile values in ``[parallel]`` and the sync ``[current]``."""
    f = home / "w.toml"
    f.write_text(_mutate((EXAMPLES / "workload-sync-ddp.toml").read_text(), picks))
    code, _, err = run_main(["plan", "--workload", str(f), "--top", "3"])
    check_discipline(code, err, (0, 2))


@settings(FUZZ, max_examples=30)
@given(picks=mutations, raw=st.one_of(st.none(), st.binary(max_size=200)))
def test_plan_geo_file(home: Path, picks: list[tuple[int, str]], raw: bytes | None):
    f = home / "g.toml"
    f.write_bytes(
        raw if raw is not None else _mutate((EXAMPLES / "geo-3dc.toml").read_text(), picks).encode()
    )
    code, _, err = run_main(["plan", "--geo", str(f), "--top", "2"])
    check_discipline(code, err, (0, 2))


@settings(FUZZ, max_examples=40)
@given(picks=mutations)
def test_config_file(home: Path, picks: list[tuple[int, str]]):
    text = (EXAMPLES / "config.toml").read_text().replace("# targets", "targets") + '\n[links]\n"a/b" = 1\n'
    f = home / "c.toml"
    f.write_text(_mutate(text, picks))
    code, _, err = run_main(["--config", str(f), "--read-only", "--target", DEAD])
    check_discipline(code, err, (0, 2))


SOURCE_KEYS = ["targets", "demo", "prometheus", "selector", "prometheus_token_file", "tensorboard", "jsonl",
               "tf_config", "metrics_port", "job", "record", "replay", "replay_speed"]  # fmt: skip


@settings(FUZZ, max_examples=40)
@given(key=st.sampled_from(SOURCE_KEYS), value=_toml_value())
def test_config_source_keys(home: Path, key: str, value: str):
    f = home / "c.toml"
    f.write_text(f"read_only = true\n[sources]\n{key} = {value}\n")
    code, _, err = run_main(["--config", str(f), "--target", DEAD])
    check_discipline(code, err, (0, 2))


CSV_HEAD = "model,model_flops,params,batch_size,gpu,workers,ps"
cell = st.one_of(st.sampled_from(["1", "128", "P100", "V100:1+K80:2", "1e9", "8"]), file_text)


@settings(FUZZ, max_examples=30)
@given(rows=st.lists(st.lists(cell, min_size=5, max_size=9), max_size=4), raw=st.one_of(st.none(), st.binary(max_size=120)),
       target=st.sampled_from(["stdout", "file", "dir", "symlink", "fifo", "device", "nofolder"]))  # fmt: skip
def test_predict(home: Path, rows: list[list[str]], raw: bytes | None, target: str):
    import csv
    import io

    buf = io.StringIO()
    csv.writer(buf).writerows([CSV_HEAD.split(","), *rows])
    src = home / "in.csv"
    src.write_bytes(raw if raw is not None else buf.getvalue().encode("utf-8", "surrogateescape"))
    out = _target(home, target)
    before = _describe(out)
    code, _, err = run_main(["predict", "--input", str(src), *(["--output", str(out)] if out else [])])
    check_discipline(code, err, (0, 2))
    if target in ("dir", "symlink", "fifo", "device", "nofolder"):
        assert code == 2 and _describe(out) == before  # never replaced, never written through
    assert leftovers(home) == []


def _target(home: Path, kind: str) -> Path | None:
    p = home / f"out-{kind}"
    if kind == "stdout":
        return None
    if kind == "device":
        return Path("/dev/null")
    if not os.path.lexists(p):
        if kind == "dir":
            p.mkdir()
        elif kind == "symlink":
            (home / "real.csv").write_text("keep\n")
            p.symlink_to(home / "real.csv")
        elif kind == "fifo":
            os.mkfifo(p)
    return home / "no" / "such" / "out.csv" if kind == "nofolder" else p


def _describe(p: Path | None) -> object:
    if p is None or not os.path.lexists(p):
        return None
    st_ = os.lstat(p)
    body = p.read_bytes() if p.is_file() and not p.is_symlink() else None
    link = (os.readlink(p), Path(p).resolve().read_bytes()) if p.is_symlink() else None
    return (st_.st_mode, body, link)


@FUZZ
@given(
    argv=_flags(["--gpu", "--region", "--max-age-hours", "--billing-endpoint", "--prices"]), js=st.booleans()
)
def test_prices(home: Path, argv: list[str], js: bool):
    code, _, err = run_main(
        ["prices", "--read-only", *argv, "--prices", "offline", *(["--json"] if js else [])]
    )
    check_discipline(code, err, (0, 2))
    assert list(home.rglob("*")) == [] or all(p.is_dir() for p in home.rglob("*"))


@FUZZ
@given(argv=_flags(["--host", "--port", "--max-sessions", "--allow-origin", "--prometheus", "--target", "--job",
                    "--refresh", "--prices"]))  # fmt: skip
def test_serve_dry_run(home: Path, argv: list[str]):
    code, out, err = run_main(["serve", "--dry-run", "--target", DEAD, *argv])
    check_discipline(code, err, (0, 2))
    if code == 0:
        assert "--read-only" in out


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real recording of the demo cluster (two polls), made by the CLI itself."""
    path = tmp_path_factory.mktemp("rec") / "demo.db"
    code, _, err = run_main(
        ["snapshot", "--demo", "--samples", "2", "--interval", "0.2", "--record", str(path)]
    )
    assert code == 0 and path.is_file(), err
    return path


COLUMNS = {"meta": ["value"], "cycles": ["t", "elapsed", "source_errors"],
           "polls": ["source", "t", "ok", "info", "vals", "error", "facts", "elapsed"],
           "transitions": ["task", "old", "new", "t", "reason"],
           "lifetimes": ["start", "end", "cause", "gpu", "region", "provisioning"]}  # fmt: skip
sql_value = st.one_of(st.none(), st.integers(min_value=-(2**63), max_value=2**63 - 1), st.floats(), file_text,
                      st.binary(max_size=20), st.sampled_from(['{"a": 1}', "[]", '{"job": 5}', "[" * 5000, "1e999"]))  # fmt: skip


@settings(FUZZ, max_examples=20)
@given(edits=st.lists(st.tuples(st.sampled_from(sorted(COLUMNS)), st.integers(0, 50), sql_value), min_size=1, max_size=4),
       garbage=st.one_of(st.none(), st.binary(max_size=300)))  # fmt: skip
def test_hostile_recording(home: Path, recording: Path, edits: list, garbage: bytes | None):
    rec = home / "hostile.db"
    for leftover in home.glob("hostile.db*"):
        leftover.unlink()
    if garbage is not None:
        rec.write_bytes(garbage)
    else:
        with sqlite3.connect(recording) as src, sqlite3.connect(rec) as conn:
            src.backup(conn)
            for table, k, value in edits:
                col = COLUMNS[table][k % len(COLUMNS[table])]
                conn.execute(f"UPDATE OR IGNORE {table} SET {col} = ? WHERE rowid = (SELECT rowid FROM {table} "
                             f"ORDER BY rowid LIMIT 1 OFFSET ?)", (value, k % 7))  # fmt: skip
    fast = ["--replay-speed", "1000"]
    for argv in (
        ["snapshot", "--replay", str(rec), "--samples", "2", "--interval", "0", *fast],
        ["--replay", str(rec)],
    ):
        code, _, err = run_main(argv, seconds=30)
        check_discipline(code, err)
