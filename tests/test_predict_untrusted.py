"""Issue 18: ``predict`` copies the input CSV's fields to its output; a field is cleaned once where it
enters (``clean_text``), so escape sequences in a CSV never reach the terminal. The real command, run
as a process, its stdout read as bytes."""

from __future__ import annotations

import csv
import io
import subprocess
import sys
from pathlib import Path

from cmdare.planner.predict.batch import FIELD_LIMIT, predict_csv_text

REPO = Path(__file__).resolve().parents[1]
OSC52 = "\x1b]52;c;aGVsbG8=\x07"  # write to the clipboard
HOSTILE = [
    OSC52,
    "\x1b[2J\x1b[31m",
    "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\",
    "\x9b31m",
    "\u202eevil",
    "a\x00b",
]
FORBIDDEN = ("\x1b", "\x07", "\x9b", "\u202e", "\x00")


def hostile_csv() -> str:
    fields = '"' + '","'.join(h.replace('"', '""') for h in HOSTILE) + '"'
    head = "model,model_flops,params,batch_size,gpu,workers,ps," + ",".join(
        f"n{i}" for i in range(len(HOSTILE))
    )
    return (
        head.replace("n0", "n\x1b[0m0") + "\n"
        + f'"res{OSC52}net",1.66e9,1.86e6,128,P100,4,1,{fields}\n'
    )  # fmt: skip


def test_no_escape_from_a_csv_field_reaches_stdout(tmp_path):
    src = tmp_path / "in.csv"
    src.write_text(hostile_csv(), encoding="utf-8")
    out = subprocess.run([sys.executable, "-m", "cmdare.tui.cli", "predict", "--input", str(src)],
                         capture_output=True, cwd=REPO, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    text = out.stdout.decode("utf-8")
    assert not any(c in text for c in FORBIDDEN), repr(text)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows[0]["model"] == "res␛]52;c;aGVsbG8=␇net"  # shown visibly, not dropped
    assert float(rows[0]["steps_per_sec"]) > 0  # the prediction itself is unchanged


def test_fields_are_bounded_and_clean_fields_unchanged():
    text = "model,model_flops,params,batch_size,gpu,workers,ps,note\n"
    text += f"ResNet-32,1.66e9,1.86e6,128,P100,4,1,{'x' * (FIELD_LIMIT * 3)}\n"
    row = next(csv.DictReader(io.StringIO(predict_csv_text(text))))
    assert row["model"] == "ResNet-32" and row["gpu"] == "P100"
    assert len(row["note"]) == FIELD_LIMIT and row["note"].endswith("…")
