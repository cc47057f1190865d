import argparse
import csv
import io

import pytest

from cmdare.tui.commands import UsageError, predict

HEADER = "model,model_flops,params,batch_size,gpu,workers,ps\n"


def _run(tmp_path, body: str, output: bool = False):
    src = tmp_path / "in.csv"
    src.write_text(body)
    parser = argparse.ArgumentParser()
    predict.register(parser.add_subparsers())
    argv = ["predict", "--input", str(src)] + (["--output", str(tmp_path / "out.csv")] if output else [])
    args = parser.parse_args(argv)
    return args.func(args)


def test_happy_path_stdout(tmp_path, capsys):
    body = HEADER + "ResNet-32,1658696889,1857722,128,P100,8,1\nnew,3e9,4e6,64,V100:1+P100:1+K80:2,4,2\n"
    assert _run(tmp_path, body) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["model"] for r in rows] == ["ResNet-32", "new"]
    assert rows[0]["bottleneck"] == "ps" and 40 < float(rows[0]["steps_per_sec"]) < 52
    for r in rows:
        assert float(r["examples_per_sec"]) == pytest.approx(
            float(r["steps_per_sec"]) * int(r["batch_size"]), rel=1e-4
        )
        assert 0 < float(r["ps_utilization"]) <= 1
        assert float(r["steps_per_sec_p10"]) < float(r["steps_per_sec"]) < float(r["steps_per_sec_p90"])
    # ResNet-32 on 8 P100 with 1 PS was measured; the unnamed mix on V100/P100/K80 with 2 PS was not
    assert [r["extrapolation"] for r in rows] == ["none", "gpu"]


def test_output_file(tmp_path):
    assert _run(tmp_path, HEADER + ",1e9,1e6,128,t4,2,1\n", output=True) == 0
    text = (tmp_path / "out.csv").read_text()
    assert (
        text.splitlines()[0]
        == HEADER.strip()
        + ",steps_per_sec,steps_per_sec_p10,steps_per_sec_p90,extrapolation,examples_per_sec,bottleneck,ps_utilization"
    )
    row = next(csv.DictReader(io.StringIO(text)))
    assert float(row["steps_per_sec_p10"]) <= float(row["steps_per_sec"]) <= float(row["steps_per_sec_p90"])
    assert row["extrapolation"] == "gpu"  # unnamed network on T4: both unseen; the unseen GPU sets the band


@pytest.mark.parametrize(
    "body,match",
    [
        (HEADER + "a,1e9,1e6,128,P100,1,1\nb,1e9,1e6,128,GTX480,1,1\n", r"row 2 .*unknown GPU 'GTX480'"),
        ("model,model_flops,params,gpu,workers,ps\na,1,1,K80,1,1\n", "missing column.*batch_size"),
        (HEADER + "a,1e9,1e6,128,V100:1+K80:2,4,1\n", "row 1 .*3 workers but workers=4"),
        (HEADER + "a,1e9,,128,K80,1,1\n", "row 1 .*missing value for 'params'"),
        (HEADER + "a,1e9,1e6,128,K80,0,1\n", "row 1 .*workers"),
        (HEADER + "a,1e9,1e-300,128,P100,4,1\n", r"row 1 .*params='1e-300' is implausibly small"),  # was 0/0
    ],
)
def test_errors_name_the_row(tmp_path, body, match):
    with pytest.raises(UsageError, match=match):
        _run(tmp_path, body)


def test_missing_input_file(tmp_path):
    parser = argparse.ArgumentParser()
    predict.register(parser.add_subparsers())
    args = parser.parse_args(["predict", "--input", str(tmp_path / "nope.csv")])
    with pytest.raises(UsageError, match="nope.csv: no such file"):
        args.func(args)


def test_cli_entry_point_exit_codes(tmp_path):
    import subprocess
    import sys

    good, bad = tmp_path / "good.csv", tmp_path / "bad.csv"
    good.write_text(HEADER + "ResNet-15,630989589,693818,128,K80,4,1\n")
    bad.write_text(HEADER + "x,1e9,1e6,128,Z9000,1,1\n")
    cmd = [sys.executable, "-m", "cmdare.tui.cli", "predict", "--input"]
    ok = subprocess.run(
        [*cmd, str(good), "--output", str(tmp_path / "o.csv")], capture_output=True, text=True
    )
    assert ok.returncode == 0, ok.stderr
    assert "steps_per_sec" in (tmp_path / "o.csv").read_text()
    err = subprocess.run([*cmd, str(bad)], capture_output=True, text=True)
    assert err.returncode == 2 and "row 1" in err.stderr and "Z9000" in err.stderr
