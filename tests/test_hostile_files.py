"""Issue 27 items 4, 7 and 9: the files a user names are untrusted input.

* Escape sequences in a workload or geo file (``[current] region``, ``[options] data_region``, a DC's
  name) reach stdout only as visible text, in PS and sync mode: checked on the captured bytes and in a
  real terminal (a private tmux server whose pane output is recorded raw; its title and clipboard are
  the targets).
* Every file input of the command line refuses a FIFO and a device at once (one line, exit 2): a FIFO
  hung ``predict`` for ever, ``/dev/zero`` was read for 64 MiB.
* A predict CSV naming a column twice is refused (two ``model`` columns wrote the wrong name).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from cmdare.collectors.clock import SystemClock
from cmdare.collectors.logs.source import JsonlSource
from tests.cli_harness import check_discipline, run_main
from tests.test_readonly_mode import fresh_env
from tests.test_tmux_hostile import PrivateTmux, assert_clean_stream

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
EX = REPO / "examples"
EXE = str(Path(sys.executable).with_name("cmdare-tui"))
TITLE = "PWNED-27"
PAYLOAD = f"\\u001b]0;{TITLE}\\u0007\\u001b]52;c;aGk=\\u0007\\u001b[2J\\u009b31m"  # TOML escapes
ENV = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS", "LINES", "TMUX")}


def hostile_files(d: Path) -> dict[str, Path]:
    """Workload and geo files with the payload in every name the planner prints."""
    ps = (EX / "workload-resnet32.toml").read_text()
    sync = (EX / "workload-sync-ddp.toml").read_text()
    geo = (EX / "geo-3dc.toml").read_text()
    files = {
        "ps-region": ps.replace('region = "us-central1"', f'region = "us-central1{PAYLOAD}"'),
        "ps-data-region": ps.replace('data_region = "us-central1"', f'data_region = "x{PAYLOAD}"'),
        "sync-region": sync.replace('region = "us-central1"', f'region = "us-central1{PAYLOAD}"', 1),
        "sync-data-region": sync.replace(
            "[options]", f'[options]\ndata_region = "x{PAYLOAD}"\ndataset_gb = 1', 1
        ),
        "geo-dc": geo.replace('"europe"', f'"eu{PAYLOAD}"'),  # the DC and its links
    }
    out = {}
    for name, text in files.items():
        assert PAYLOAD in text, name
        out[name] = d / f"{name}.toml"
        out[name].write_text(text)
    return out


def _argv(name: str, path: Path) -> list[str]:
    return ["plan", "--geo" if name.startswith("geo") else "--workload", str(path), "--top", "3"]


@pytest.mark.parametrize("name", ["ps-region", "ps-data-region", "sync-region", "sync-data-region", "geo-dc"])
def test_workload_escapes_reach_stdout_as_visible_text(tmp_path: Path, name: str):
    path = hostile_files(tmp_path)[name]
    for extra in ([], ["--json"]) if name == "ps-region" else ([],):  # --json: one case (its encoder escapes)
        r = subprocess.run([EXE, *_argv(name, path), *extra], capture_output=True, timeout=120, env=ENV)
        assert r.returncode == 0, r.stderr
        text = (r.stdout + r.stderr).decode()
        assert not any(c in text for c in ("\x1b", "\x07", "\x9b")), name
        shown = json.dumps(json.loads(r.stdout), ensure_ascii=False) if extra else text
        assert f"␛]0;{TITLE}␇␛]52;c;aGk=␇" in shown  # the name is still there, as text


def test_workload_escapes_in_a_real_terminal(tmp_path: Path):
    """The terminal is the target: its title, its clipboard (tmux's paste buffers with set-clipboard
    on) and its byte stream, while the five hostile files are planned in it."""
    files = hostile_files(tmp_path)
    script = tmp_path / "plan-all.sh"
    script.write_text(
        "".join(" ".join([EXE, *_argv(n, p)]) + "\n" for n, p in files.items()) + "echo ALL-DONE\n"
    )
    t = PrivateTmux(f"sh {script}", tmp_path / "pty.raw", tmp_path / "pid", width=200, height=50)
    try:
        t.go()
        t.wait_for(lambda s: "ALL-DONE" in s, timeout=180)  # a hang bound, not a speed target
        raw = t.raw.read_bytes()
        assert_clean_stream(raw)
        assert b"\x1b]0;" + TITLE.encode() not in raw and b"\x1b]52;" not in raw
        assert "␛]52;c;aGk=␇".encode() in raw  # shown, not obeyed
        assert TITLE not in t.fmt("#{pane_title}")
        assert t.tmux("list-buffers").strip() == ""  # OSC 52 filled no clipboard
    finally:
        t.kill()


def _inputs(d: Path) -> dict[str, list[str]]:
    """Every file the command line reads, named by the flag that takes it: ``{}`` is the file."""
    return {
        "predict --input": ["predict", "--input", "{}"],
        "plan --workload": ["plan", "--workload", "{}"],
        "plan --geo": ["plan", "--geo", "{}"],
        "--config": ["--config", "{}", "snapshot", "--demo", "--samples", "1"],
        "--tf-config": ["snapshot", "--tf-config", "{}", "--samples", "1"],
        "--prometheus-token-file": [
            "snapshot",
            "--prometheus",
            "http://127.0.0.1:9",
            "--prometheus-token-file",
            "{}",
            "--samples",
            "1",
        ],  # fmt: skip
        "--replay": ["snapshot", "--replay", "{}", "--samples", "1"],
        "--jsonl": ["snapshot", "--jsonl", "{}", "--samples", "1"],
    }


@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
def test_every_file_input_refuses_a_fifo_or_a_device_at_once(tmp_path: Path, special: str):
    target = str(tmp_path / "fifo") if special == "fifo" else special
    if special == "fifo":
        os.mkfifo(target)
    words = "a FIFO, not a regular file" if special == "fifo" else "a device, not a regular file"
    for flag, argv in _inputs(tmp_path).items():
        code, _, err = run_main([a.replace("{}", target) for a in argv], seconds=60)  # a hang bound
        check_discipline(code, err, allowed=(2,))
        assert words in err, (flag, err)


def test_jsonl_named_in_the_config_is_checked_too(tmp_path: Path):
    os.mkfifo(tmp_path / "log.fifo")
    (tmp_path / "c.toml").write_text(f'[sources]\njsonl = ["{tmp_path / "log.fifo"}"]\n')
    code, _, err = run_main(["--config", str(tmp_path / "c.toml"), "snapshot", "--samples", "1"], seconds=60)
    check_discipline(code, err, allowed=(2,))
    assert "log.fifo: a FIFO, not a regular file" in err


def test_a_column_named_twice_is_refused(tmp_path: Path):
    csv = tmp_path / "two.csv"
    csv.write_text(
        "model,model_flops,params,batch_size,gpu,workers,ps,model\nresnet32,1.66e9,1.86e6,128,P100,4,1,x\n"
    )
    out = tmp_path / "out.csv"
    code, stdout, err = run_main(["predict", "--input", str(csv), "--output", str(out)])
    check_discipline(code, err, allowed=(2,))
    assert "column 'model' appears twice (columns 1 and 8)" in err
    assert stdout == "" and not out.exists()


def test_a_bad_row_after_many_leaves_the_output_untouched(tmp_path: Path):
    """Rows are predicted in chunks; --output is replaced only once every row was."""
    rows = "".join(f"ResNet-32,1658696889,1857722,128,P100,{1 + i % 8},{1 + i % 3}\n" for i in range(45_000))
    csv = tmp_path / "in.csv"
    csv.write_text("model,model_flops,params,batch_size,gpu,workers,ps\n" + rows + "x,1,1,1,P100,1,nan\n")
    out = tmp_path / "out.csv"
    out.write_text("before\n")
    code, _, err = run_main(["predict", "--input", str(csv), "--output", str(out)])
    check_discipline(code, err, allowed=(2,))
    assert "row 45001 (line 45002)" in err and out.read_text() == "before\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv", "out.csv"]


async def test_a_jsonl_log_replaced_by_a_fifo_is_a_failed_poll_not_a_hang(tmp_path: Path):
    log = tmp_path / "train.jsonl"
    log.write_text('{"job": "j", "task": "w0", "step": 1}\n')
    src = JsonlSource(log)
    async with httpx.AsyncClient() as client:
        (first,) = await src.poll(client, SystemClock())
        log.unlink()
        os.mkfifo(log)  # a writer that never comes: a plain open() would wait for ever
        (second,) = await asyncio.wait_for(src.poll(client, SystemClock()), 60)  # a hang bound
    assert first.ok and not second.ok and second.error == "cannot read log: not a regular file"


def test_price_files_that_are_fifos_fall_back_in_one_line(tmp_path: Path):
    """The price cache and GOOGLE_APPLICATION_CREDENTIALS are files too: google.auth opens the latter
    plainly (a FIFO blocked ``prices`` for ever)."""
    home = tmp_path / "home"
    env = fresh_env(home)
    cache = Path(env["XDG_CACHE_HOME"]) / "cmdare-tui"
    cache.mkdir(parents=True)
    os.mkfifo(cache / "gcp_prices_default.json")
    os.mkfifo(tmp_path / "creds.json")
    env["GOOGLE_APPLICATION_CREDENTIALS"] = str(tmp_path / "creds.json")
    r = subprocess.run([EXE, "prices", "--read-only", "--json", "--gpu", "V100", "--region", "us-central1"],
                       capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
    assert r.returncode == 0 and json.loads(r.stdout)
    assert r.stderr.count("\n") == 1 and "creds.json: a FIFO, not a regular file" in r.stderr


@pytest.mark.parametrize("shape", ["one long line", "a quoted field open across lines"])
def test_a_row_too_long_is_refused_before_it_grows(tmp_path: Path, shape: str):
    """A 64 MiB line held as text takes up to 256 MiB; a quoted field open across lines made one field a
    line (a 20 MB file peaked at 314 MB)."""
    head = "model,model_flops,params,batch_size,gpu,workers,ps\n"
    body = "a" * 3_000_000 + "\U0001f600\n" if shape == "one long line" else '"x' + '\n","x' * 400_000 + '"\n'
    (tmp_path / "long.csv").write_text(head + body)
    code, stdout, err = run_main(["predict", "--input", str(tmp_path / "long.csv")])
    check_discipline(code, err, allowed=(2,))
    assert stdout == "" and ("line 2 is longer than 1 MiB" in err or "a row longer than 1,048,576" in err)
