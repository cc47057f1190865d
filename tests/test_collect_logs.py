"""Training-log sources: TFRecord framing with CRC checks, TensorBoard event decoding (checked
against a file written by torch's real SummaryWriter) and JSON-lines tailing."""

from __future__ import annotations

import json
import logging
import math
import struct
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cmdare.collectors import metrics as M
from cmdare.collectors.clock import ManualClock
from cmdare.collectors.logs.source import JsonlSource
from cmdare.collectors.store import Store
from cmdare.collectors.tensorboard.proto import decode_event_full
from cmdare.collectors.tensorboard.source import TensorBoardSource, decode_event, scalar_key
from cmdare.collectors.tensorboard.tfrecord import crc32c, frame, masked_crc32c, read_records

# Written by torch.utils.tensorboard.SummaryWriter (torch 2.13.0, tensorboard 2.21.0): scalars
# "global_step/sec" = 10 + 0.5 i and "loss" = 2 / i at step 100 i, wall time 1.7e9 + 10 i (i = 1..20),
# then "new_style" 3.25 (tensor float) and "dbl" 7.5 (tensor double) at step 2000.
REFERENCE = Path(__file__).parent / "fixtures" / "collect_tfevents"


# --- a tiny Event writer (protobuf wire format by hand) ---------------------------------------
def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(num: int, wire: int, payload: bytes) -> bytes:
    body = _varint(len(payload)) + payload if wire == 2 else payload
    return _varint(num << 3 | wire) + body


def event(wall: float, step: int, **scalars: float) -> bytes:
    values = b"".join(
        _field(1, 2, _field(1, 2, tag.replace("__", "/").encode()) + _field(2, 5, struct.pack("<f", v)))
        for tag, v in scalars.items()
    )
    return _field(1, 1, struct.pack("<d", wall)) + _field(2, 0, _varint(step)) + _field(5, 2, values)


def test_crc32c_known_answer_and_mask():
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value (RFC 3720 B.4)
    assert masked_crc32c(b"") == ((0 >> 15 | (0 << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def test_reference_file_from_torch_summary_writer():
    (path,) = REFERENCE.glob("events.out.tfevents.*")
    res = read_records(path.read_bytes())
    assert res.corrupt == 0 and res.broken is None and res.consumed == path.stat().st_size
    events = [decode_event(r) for r in res.records]
    sps = [
        (e.step, e.wall_time, e.scalars["global_step/sec"]) for e in events if "global_step/sec" in e.scalars
    ]
    assert sps[0] == (100, 1_700_000_010.0, 10.5) and sps[-1] == (2000, 1_700_000_200.0, 20.0)
    tensors = {k: v for e in events for k, v in e.scalars.items() if k in ("new_style", "dbl")}
    assert tensors == {"new_style": 3.25, "dbl": 7.5}


async def test_tensorboard_source_reads_reference_and_rates_use_event_times():
    src = TensorBoardSource(REFERENCE, job="ref", poll_budget_s=30)
    async with httpx.AsyncClient() as c:
        (p,) = await src.poll(c, ManualClock())
    assert p.ok and p.info.job == "ref" and p.info.role == "chief"
    assert p.values[M.K_GLOBAL_STEP] == 2000 and p.values[scalar_key("global_step/sec")] == 20.0
    assert p.t == 1_700_000_202.0


def _write(path: Path, records: list[bytes], mode: str = "wb") -> None:
    with path.open(mode) as fh:
        fh.write(b"".join(frame(r) for r in records))


async def test_tail_partial_record_then_corrupt_crc_is_skipped_and_reported(tmp_path, caplog):
    run = tmp_path / "run1"
    run.mkdir()
    f = run / "events.out.tfevents.1.host"
    _write(f, [event(100.0, 0, global_step__sec=1.0), event(110.0, 100, global_step__sec=10.0)])
    good = frame(event(120.0, 200, global_step__sec=10.0))
    with f.open("ab") as fh:
        fh.write(good[:20])  # the writer is mid-record
    src, store, clock = TensorBoardSource(tmp_path, job="j", poll_budget_s=30), Store(), ManualClock()
    async with httpx.AsyncClient() as c:
        (p,) = await src.poll(c, clock)
        assert p.ok and p.info.task == "run1" and p.values[M.K_GLOBAL_STEP] == 100
        store.add(p)
        bad = bytearray(frame(event(125.0, 250, global_step__sec=99.0)))
        bad[-6] ^= 0xFF  # flip a data byte: data CRC mismatch
        with f.open("ab") as fh:
            fh.write(good[20:] + bytes(bad) + frame(event(130.0, 300, global_step__sec=10.0)))
        with caplog.at_level(logging.WARNING):
            (p,) = await src.poll(c, clock)
    store.add(p)
    assert p.ok and p.values[M.K_GLOBAL_STEP] == 300 and p.values[scalar_key("global_step/sec")] == 10.0
    assert "bad CRC skipped" in p.error and any("bad CRC" in r.getMessage() for r in caplog.records)
    (ts,) = store.tasks.values()
    assert ts.rate(M.K_WORKER_STEPS, 1e9) == pytest.approx((300 - 100) / (130 - 110))


def test_length_crc_failure_stops_the_file():
    data = bytearray(frame(b"abc") + frame(b"def"))
    data[len(frame(b"abc")) + 8] ^= 0x01  # corrupt the second record's length CRC
    res = read_records(bytes(data))
    assert res.records == [b"abc"] and res.broken and "length CRC" in res.broken


async def test_missing_dir_is_a_status(tmp_path):
    async with httpx.AsyncClient() as c:
        (p,) = await TensorBoardSource(tmp_path / "nope").poll(c, ManualClock())
    assert not p.ok and "not found" in p.error


async def test_jsonl_truncated_and_garbage_lines_are_skipped_with_a_count(tmp_path, caplog):
    f = tmp_path / "metrics.jsonl"
    lines = [
        json.dumps({"time": 1_700_001_000.0 + i, "step": 50 * i, "examples": 6400 * i, "loss": 1 / (i + 1)})
        for i in range(5)
    ]
    f.write_text("\n".join(lines[:3]) + "\n" + lines[3][:17])  # crash mid-line
    src, clock = JsonlSource(f, job="j"), ManualClock(2000.0)
    async with httpx.AsyncClient() as c:
        (p,) = await src.poll(c, clock)
        assert p.ok and p.values[M.K_GLOBAL_STEP] == 100 and p.t == 1_700_001_002.0 and p.error is None
        with f.open("a") as fh:  # the restarted script appends right after the fragment (one bad line)
            fh.write(lines[4] + "\nnot json\n[1, 2]\n" + lines[4] + "\n")
        with caplog.at_level(logging.WARNING):
            (p,) = await src.poll(c, clock)
    assert p.ok and p.values[M.K_GLOBAL_STEP] == 200 and p.values[M.K_WORKER_STEPS] == 200
    assert p.values[M.K_EXAMPLES] == 6400 * 4 and scalar_key("loss") in p.values
    assert p.error == "3 bad or truncated line(s) skipped" and src.bad_lines == 3
    assert any("skipped" in r.getMessage() for r in caplog.records)


async def test_jsonl_tasks_by_label_and_contract_keys(tmp_path):
    f = tmp_path / "log.jsonl"
    rows = [
        {
            "t": 10.0,
            "job": "a",
            "task": "worker-1",
            "role": "worker",
            "cmdare_worker_steps_total": 7,
            "step": 20,
        },
        {"t": 10.0, "job": "a", "task": "ps-0", "role": "ps", "cmdare_ps_bytes_total{direction=in}": 5e6},
    ]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    async with httpx.AsyncClient() as c:
        polls = await JsonlSource(f).poll(c, ManualClock())
    by = {p.info.task: p for p in polls}
    assert by["worker-1"].values[M.K_WORKER_STEPS] == 7 and by["worker-1"].info.role == "worker"
    assert by["ps-0"].values[M.K_PS_IN] == 5e6 and by["ps-0"].info.job == "a"


async def test_jsonl_unreadable_file_is_a_status(tmp_path):
    async with httpx.AsyncClient() as c:
        (p,) = await JsonlSource(tmp_path / "missing.jsonl").poll(c, ManualClock())
    assert not p.ok and "cannot read" in p.error


# --- hostile or unusual event files never stop the tail silently (issue 15) ---------------------
async def test_non_finite_wall_times_are_rejected_with_a_note_and_tailing_goes_on(tmp_path):
    f = tmp_path / "events.out.tfevents.1.host"
    bad = [event(float("nan"), 50, loss=9.0), event(float("inf"), 60, loss=9.0), event(-5.0, 70, loss=9.0)]
    _write(f, [event(100.0, 10, loss=1.0), *bad, event(110.0, 20, loss=0.5)])
    src = TensorBoardSource(tmp_path, job="j", poll_budget_s=30)
    (p,) = await src.poll(None, ManualClock())  # type: ignore[arg-type]
    assert p.ok and p.values[M.K_GLOBAL_STEP] == 20 and p.values[M.K_LOSS] == 0.5 and p.t == 110.0
    assert "3 event(s) with a non-finite or absurd wall time rejected" in p.error
    _write(f, [event(120.0, 30, loss=0.25)], mode="ab")
    (p,) = await src.poll(None, ManualClock())  # type: ignore[arg-type]
    assert p.ok and p.values[M.K_GLOBAL_STEP] == 30 and "rejected" in p.error  # a note stays a few polls
    for _ in range(5):
        (p,) = await src.poll(None, ManualClock())  # type: ignore[arg-type]
    assert p.error is None


async def test_records_over_the_chunk_size_are_read_and_over_the_cap_skipped_with_a_note(
    tmp_path, monkeypatch
):
    from cmdare.collectors.tensorboard import source as tensorboard
    from cmdare.collectors.tensorboard import tfrecord

    monkeypatch.setattr(tensorboard, "READ_CHUNK_BYTES", 64 * 1024)  # a 5 MiB record is then 80 chunks big
    monkeypatch.setattr(tfrecord, "MAX_RECORD_BYTES", 8 * 1024 * 1024)
    monkeypatch.setattr(tensorboard, "MAX_RECORD_BYTES", 8 * 1024 * 1024)
    big = event(101.0, 15, loss=0.9) + _field(
        9, 2, b"x" * (5 * 2**20)
    )  # unknown field 9: skipped by decoders
    huge = _field(9, 2, b"y" * (9 * 2**20))
    f = tmp_path / "events.out.tfevents.1.host"
    _write(f, [event(100.0, 10, loss=1.0), big, huge, event(110.0, 20, loss=0.5)])
    src = TensorBoardSource(tmp_path, job="j", poll_budget_s=30)
    (p,) = await src.poll(None, ManualClock())  # type: ignore[arg-type]
    assert p.ok and p.values[M.K_GLOBAL_STEP] == 20 and p.values[M.K_LOSS] == 0.5
    assert "skipped (over 8 MiB)" in p.error


def test_crc32c_c_and_python_agree():
    from cmdare.collectors.tensorboard.tfrecord import crc32c_py

    for data in (b"", b"123456789", bytes(range(256)) * 3):
        assert crc32c(data) == crc32c_py(data)


async def test_jsonl_loss_and_learning_rate_become_training_figures(tmp_path):
    f = tmp_path / "train.jsonl"
    f.write_text('{"time": 1.0, "step": 10, "loss": 0.41, "val_loss": 0.5, "lr": 0.001}\n')
    (p,) = await JsonlSource(f).poll(None, ManualClock())  # type: ignore[arg-type]
    assert p.values[M.K_LOSS] == 0.41 and p.values[M.K_LEARNING_RATE] == 0.001


async def test_walk_bounds_are_said_in_the_status(tmp_path, monkeypatch):
    from cmdare.collectors.tensorboard import runs as tbruns

    monkeypatch.setattr(tbruns, "MAX_RUNS", 2)
    monkeypatch.setattr(tbruns, "MAX_DEPTH", 3)
    for name in ("r1", "r2", "r3", "a/b/c/d/too_deep"):
        (tmp_path / name).mkdir(parents=True)
        _write(tmp_path / name / "events.out.tfevents.1.host", [event(100.0, 10, loss=1.0)])
    polls = await TensorBoardSource(tmp_path, job="j", poll_budget_s=30).poll(None, ManualClock())  # type: ignore[arg-type]
    assert [p.info.task for p in polls] == ["r1", "r2"]
    assert "3 runs: only the first 2 shown" in polls[0].error and "more than 3 levels deep" in polls[0].error


@settings(max_examples=200, deadline=None)
@given(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(2**63), 2**63 - 1),
    st.dictionaries(st.text(max_size=300), st.floats(width=32), max_size=4),
)
def test_fast_event_decoder_agrees_with_the_full_one(wall: float, step: int, scalars: dict[str, float]):
    values = b"".join(
        _field(1, 2, _field(1, 2, tag.encode()) + _field(2, 5, struct.pack("<f", v)))
        for tag, v in scalars.items()
    )
    rec = (
        _field(1, 1, struct.pack("<d", wall))
        + _field(2, 0, _varint(step & (2**64 - 1)))
        + _field(5, 2, values)
    )
    fast, full = decode_event(rec), decode_event_full(rec)
    assert fast.step == full.step and fast.scalars == full.scalars
    assert fast.wall_time == full.wall_time or (math.isnan(fast.wall_time) and math.isnan(full.wall_time))
    (path,) = REFERENCE.glob("events.out.tfevents.*")
    for r in read_records(path.read_bytes()).records[:40]:
        assert decode_event(r) == decode_event_full(r)


async def test_a_file_that_cannot_be_read_further_says_so_on_every_poll(tmp_path):
    f = tmp_path / "events.out.tfevents.1.host"
    data = bytearray(frame(event(100.0, 10, loss=1.0)) + frame(event(110.0, 20, loss=0.5)))
    data[len(frame(event(100.0, 10, loss=1.0))) + 8] ^= 0x01  # the second record's length CRC
    f.write_bytes(bytes(data))
    src = TensorBoardSource(tmp_path, job="j", poll_budget_s=30)
    for _ in range(8):
        (p,) = await src.poll(None, ManualClock())  # type: ignore[arg-type]
        assert p.ok and p.values[M.K_GLOBAL_STEP] == 10 and "length CRC mismatch" in p.error


async def test_a_small_file_that_grows_is_not_taken_for_a_rewritten_one(tmp_path):
    f = tmp_path / "events.out.tfevents.1.host"
    f.write_bytes(frame(b"\x09" + struct.pack("<d", 99.0)))  # 29 bytes: shorter than the compared head
    src = TensorBoardSource(tmp_path, job="j", poll_budget_s=30)
    await src.poll(None, ManualClock())  # type: ignore[arg-type]
    for i in range(3):
        _write(f, [event(100.0 + i, 10 * i, loss=1.0)], mode="ab")
        (p,) = await src.poll(None, ManualClock())  # type: ignore[arg-type]
        assert p.ok and p.values[M.K_GLOBAL_STEP] == 10 * i and "rewritten" not in (p.error or "")


async def test_the_tag_cap_is_said_once(tmp_path):
    f = tmp_path / "events.out.tfevents.1.host"
    _write(f, [event(100.0 + i, i, **{f"t{i}_{k}": 1.0 for k in range(10)}) for i in range(8)])
    src = TensorBoardSource(tmp_path, job="j", poll_budget_s=30)
    (p,) = await src.poll(None, ManualClock())  # type: ignore[arg-type]
    assert (
        sum(k.startswith("scalar{") for k in p.values) == 64
        and "more than 64 scalar tags: 16 not kept" in p.error
    )


@pytest.mark.parametrize(
    ("tag", "kind"),
    [
        ("loss", "loss"),
        ("train/loss", "loss"),
        ("Loss/train", "loss"),
        ("epoch_loss", "loss"),
        ("train_loss", "loss"),
        ("Loss_train/Loss", "loss"),
        ("val_loss", None),
        ("validation/epoch_loss", None),
        ("eval/loss", None),
        ("Loss_val/Loss", None),
        ("lr", "learning_rate"),
        ("learning_rate", "learning_rate"),
        ("lr-Adam", "learning_rate"),
        ("train/learning_rate", "learning_rate"),
        ("epoch_learning_rate", "learning_rate"),
        ("examples/sec", "examples_per_sec"),
        ("train/train_samples_per_second", "examples_per_sec"),
        ("eval/samples_per_second", None),
        ("global_step/sec", None),
        ("accuracy", None),
    ],
)
def test_training_tags_people_use_are_recognised(tag: str, kind: str | None):
    """Tags as torch examples, Keras, Lightning and Hugging Face's Trainer write them."""
    hit = M.log_scalar_kind(tag)
    assert (hit[0] if hit else None) == kind


def test_the_plainest_loss_tag_wins():
    keys = M.training_keys({"epoch_loss": 3.0, "train/loss": 2.0, "loss": 1.0, "val_loss": 9.0})
    assert keys == {M.K_LOSS: 1.0}


def test_run_grouping_rules(tmp_path):
    from cmdare.collectors.tensorboard.runs import find_runs, run_name

    for folder in (
        "est",
        "est/eval",
        "keras/train",
        "keras/validation",
        "pl/version_0",
        "pl/version_1",
        "runs/a",
        "runs/a/Loss_train",
        "runs/a/1712345678.9",
        "runs/a/1712345678.9/x_y",
    ):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / folder / "events.out.tfevents.1.host").write_bytes(b"")
    layout = find_runs(tmp_path)
    assert sorted(run_name(r, tmp_path) for r in layout.runs) == [
        "est",
        "keras",
        "pl/version_0",
        "pl/version_1",
        "runs/a",
    ]
    assert len(layout.runs[tmp_path / "runs" / "a"]) == 4 and not layout.notes
    keras = find_runs(tmp_path / "keras")  # pointed at the Keras log dir itself
    assert (
        list(keras.runs) == [tmp_path / "keras"]
        and run_name(tmp_path / "keras", tmp_path / "keras") == "keras"
    )


async def test_values_out_of_range_are_dropped_with_a_note(tmp_path):
    _write(tmp_path / "events.out.tfevents.1.host", [event(100.0, 10, loss=0.5, huge=3e38)])
    (p,) = await TensorBoardSource(tmp_path, job="j", poll_budget_s=30).poll(None, ManualClock())  # type: ignore[arg-type]
    assert p.ok and p.values[M.K_LOSS] == 0.5 and scalar_key("huge") not in p.values
    assert "1 value(s) out of range dropped" in p.error


async def test_a_crc_valid_1_gib_length_is_skipped_once_not_read_again_every_poll(tmp_path, monkeypatch):
    """A length prefix of 1 GiB whose CRC holds, in a file far shorter: the record is skipped once,
    with a note, and the file is neither taken as rewritten nor read again on later polls."""
    from cmdare.collectors.tensorboard import source as tensorboard

    reads: list[int] = []
    real = tensorboard.read_records
    monkeypatch.setattr(
        tensorboard, "read_records", lambda buf, **kw: reads.append(len(buf)) or real(buf, **kw)
    )
    length = struct.pack("<Q", 1 << 30)
    f = tmp_path / "events.out.tfevents.1.host"
    _write(f, [event(100.0, 10, loss=1.0), event(102.0, 20, loss=0.5)])
    with f.open("ab") as fh:
        fh.write(length + struct.pack("<I", masked_crc32c(length)) + b"z" * 4096)
    src = TensorBoardSource(tmp_path, job="j", poll_budget_s=30)
    errors = []
    for _ in range(6):
        (p,) = await src.poll(None, ManualClock())  # type: ignore[arg-type]
        errors.append(p.error or "")
    assert p.ok and p.values[M.K_GLOBAL_STEP] == 20 and p.values[M.K_LOSS] == 0.5
    text = " ".join(errors)
    assert "record of 1,073,741,824 bytes" in text and "rewritten" not in text
    assert len(reads) == 1  # read once: later polls read nothing (the record's end is not there yet)
