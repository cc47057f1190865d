"""Conformance of the TensorBoard source with the tools people run: event files written by torch's
``SummaryWriter`` (scalars, ``add_scalars``, ``add_hparams``), ``tensorboardX``, tensorboard's own
writers (``RecordWriter`` for every scalar encoding, packed and unpacked; ``EventFileWriter`` for a
Keras-style ``train/`` + ``validation/`` layout), checked against tensorboard's own reader (``EventAccumulator`` +
``tensor_util.make_ndarray(...).item()``, which is what its scalar dashboard shows).

No mock: every input is written by the real library."""

from __future__ import annotations

import asyncio
import math
import os
import struct
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tensorboard")
pytest.importorskip("tensorboardX")
torch_tb = pytest.importorskip("torch.utils.tensorboard")

import tensorboardX  # noqa: E402
from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator  # noqa: E402
from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2  # noqa: E402
from tensorboard.plugins.scalar import metadata as scalar_metadata  # noqa: E402
from tensorboard.summary.writer.event_file_writer import EventFileWriter  # noqa: E402
from tensorboard.summary.writer.record_writer import RecordWriter  # noqa: E402
from tensorboard.util import tensor_util  # noqa: E402

from cmdare.collectors import metrics as M  # noqa: E402
from cmdare.collectors.clock import ManualClock  # noqa: E402
from cmdare.collectors.lifecycle import Lifecycle  # noqa: E402
from cmdare.collectors.observed import build_jobs  # noqa: E402
from cmdare.collectors.poller import Poller  # noqa: E402
from cmdare.collectors.samples import TaskState  # noqa: E402
from cmdare.collectors.store import Store  # noqa: E402
from cmdare.collectors.tensorboard.source import TensorBoardSource, scalar_key  # noqa: E402

T0 = 1_700_000_000.0
STEPS = 40  # per phase; each layout is written in two phases (a poll in between)


# --- writers ------------------------------------------------------------------------------------
def _torch_run(d: Path, sps: float, phase: int, writer_cls=torch_tb.SummaryWriter) -> None:
    """A training loop as the torch docs show it: loss, lr, add_scalars, add_hparams; `sps` steps/s."""
    kw = {"log_dir": str(d)} if writer_cls is torch_tb.SummaryWriter else {"logdir": str(d)}
    w = writer_cls(**kw)
    for i in range(phase * STEPS, (phase + 1) * STEPS):
        step, wall = 10 * i, T0 + 10 * i / sps
        w.add_scalar("loss", 2.0 / (i + 1), step, walltime=wall)
        w.add_scalar("lr", 0.1 * 0.99**i, step, walltime=wall)
        w.add_scalars("Loss", {"train": 2.0 / (i + 1), "val": 2.5 / (i + 1)}, step, walltime=wall)
    if phase == 1:
        w.add_hparams({"lr": 0.1, "bs": 128}, {"hparam/accuracy": 0.91})
    w.close()


def _keras_run(d: Path, phase: int) -> None:
    """The Keras TensorBoard callback's layout: <log_dir>/train and <log_dir>/validation, epoch steps,
    tf.summary-style tensors (scalar metadata on a tag's first value only), by tensorboard's own
    EventFileWriter."""
    for split, scale in (("train", 1.0), ("validation", 1.3)):
        w = EventFileWriter(str(d / split), filename_suffix=f".{phase}.v2")
        for epoch in range(phase * 5, phase * 5 + 5):
            wall = T0 + 2.0 * epoch + (0.5 if split == "validation" else 0.0)
            values = [_tensor_value("epoch_loss", _float_tensor(scale / (epoch + 1)), epoch == 0)]
            if split == "train":
                values.append(_tensor_value("epoch_learning_rate", _float_tensor(0.01), epoch == 0))
            w.add_event(
                event_pb2.Event(wall_time=wall, step=epoch, summary=summary_pb2.Summary(value=values))
            )
        w.close()


def _float_tensor(x: float) -> tensor_pb2.TensorProto:
    return tensor_pb2.TensorProto(dtype=1, float_val=[x], tensor_shape=tensor_shape_pb2.TensorShapeProto())


def _tensor_value(
    tag: str, t: tensor_pb2.TensorProto, with_metadata: bool = True
) -> summary_pb2.Summary.Value:
    md = scalar_metadata.create_summary_metadata(display_name=tag, description="")
    return summary_pb2.Summary.Value(tag=tag, tensor=t, metadata=md if with_metadata else None)


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _ld(num: int, payload: bytes) -> bytes:
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def _encodings() -> list[tuple[str, bytes]]:
    """(tag, serialized Summary.Value) for every scalar encoding; the unpacked int lists by hand
    (protobuf's Python runtime always packs them, TensorFlow's C++ writer may not)."""
    f16 = int(np.float16(0.5).view(np.uint16))
    bf16 = int(np.array([1.5], dtype=np.float32).view(np.uint32)[0]) >> 16
    T = tensor_pb2.TensorProto
    shape1 = tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=1)])
    protos = {
        "enc/float": T(dtype=1, float_val=[2.5]),
        "enc/double": T(dtype=2, double_val=[3.25]),
        "enc/half": T(dtype=19, half_val=[f16]),
        "enc/bfloat16": T(dtype=14, half_val=[bf16]),
        "enc/int32_packed": T(dtype=3, int_val=[-7]),
        "enc/int64_packed": T(dtype=9, int64_val=[123_456_789_012]),
        "enc/int8": T(dtype=6, int_val=[-3]),
        "enc/uint8": T(dtype=4, int_val=[200]),
        "enc/int16": T(dtype=5, int_val=[-300]),
        "enc/float_content": T(dtype=1, tensor_content=struct.pack("<f", 6.5)),
        "enc/double_content": T(dtype=2, tensor_content=struct.pack("<d", 7.125)),
        "enc/int32_content": T(dtype=3, tensor_content=struct.pack("<i", -42)),
        "enc/int64_content": T(dtype=9, tensor_content=struct.pack("<q", 2**40 + 3)),
        "enc/half_content": T(dtype=19, tensor_content=np.float16(0.25).tobytes()),
        "enc/float_shape1": T(dtype=1, float_val=[4.0], tensor_shape=shape1),
    }
    md = scalar_metadata.create_summary_metadata(display_name="", description="").SerializeToString()
    out = [("enc/simple", summary_pb2.Summary.Value(tag="enc/simple", simple_value=1.5).SerializeToString())]
    out += [(tag, _tensor_value(tag, t).SerializeToString()) for tag, t in protos.items()]
    unpacked = {
        "enc/int32_unpacked": _varint(1 << 3) + _varint(3) + _varint(7 << 3) + _varint(-9),
        "enc/int64_unpacked": _varint(1 << 3) + _varint(9) + _varint(10 << 3) + _varint(-(2**35)),
    }
    out += [(tag, _ld(1, tag.encode()) + _ld(9, md) + _ld(8, raw)) for tag, raw in unpacked.items()]
    return out


def _encodings_run(d: Path, phase: int) -> None:
    d.mkdir(parents=True, exist_ok=True)
    with open(d / f"events.out.tfevents.{int(T0)}.enc.{phase}", "wb") as fh:
        rw = RecordWriter(fh)
        for i in range(phase * 3, phase * 3 + 3):
            for _tag, raw in _encodings():
                event = _ld(5, _ld(1, raw))  # Event.summary = Summary{value: [raw]}
                rw.write(b"\x09" + struct.pack("<d", T0 + i) + _varint(2 << 3) + _varint(100 * i) + event)


def _write_all(root: Path, phase: int) -> None:
    _torch_run(root / "pt20", 20.0, phase)
    _torch_run(root / "tbx50", 50.0, phase, tensorboardX.SummaryWriter)
    _keras_run(root / "keras", phase)
    _torch_run(root / "a" / "b" / "c" / "d" / "e" / "deep", 5.0, phase)
    _encodings_run(root / "encodings", phase)


EXPECTED_TASKS = {"pt20", "tbx50", "keras", "a/b/c/d/e/deep", "encodings"}


# --- the reference reader ---------------------------------------------------------------------
def reference(tb_run: Path) -> dict[str, list[tuple[int, float, float]]]:
    """{tag: [(step, wall, value)]} as TensorBoard's scalar dashboard reads one (TensorBoard) run."""
    acc = EventAccumulator(str(tb_run), size_guidance={"tensors": 0})
    acc.Reload()
    out: dict[str, list[tuple[int, float, float]]] = {}
    for tag in acc.Tags()["tensors"]:
        md = acc.summary_metadata.get(tag)
        if md is not None and md.plugin_data.plugin_name not in ("scalars", ""):
            continue
        rows = []
        for te in acc.Tensors(tag):
            try:
                arr = tensor_util.make_ndarray(te.tensor_proto)
            except TypeError:  # bfloat16 without TensorFlow: TensorBoard cannot show it
                break
            if arr.size == 1:
                rows.append((te.step, te.wall_time, float(arr.item())))
        if rows:
            out[tag] = rows
    return out


def _tb_runs(root: Path) -> list[Path]:
    return sorted(Path(r) for r, _, files in os.walk(root) if any(f.startswith("events.out") for f in files))


def _owner(tb_run: Path, root: Path) -> tuple[str, str]:
    """(our task, tag prefix) the test expects for a TensorBoard run folder."""
    rel = tb_run.relative_to(root).as_posix()
    for task in sorted(EXPECTED_TASKS, key=len, reverse=True):
        if rel == task:
            return task, ""
        if rel.startswith(task + "/"):
            return task, rel[len(task) + 1 :] + "/"
    raise AssertionError(f"unexpected run folder {rel}")


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    root = tmp_path_factory.mktemp("tb")
    src, store = TensorBoardSource(root, job="conf", poll_budget_s=30), Store()
    polls = []
    for phase in (0, 1):
        _write_all(root, phase)
        polls = asyncio.run(src.poll(None, ManualClock()))  # type: ignore[arg-type]
        for p in polls:
            store.add(p)
    return root, polls, store


def test_one_task_per_training_run_in_every_layout(layouts):
    root, polls, _ = layouts
    assert {p.info.task for p in polls} == EXPECTED_TASKS
    assert all(p.ok and p.info.role == "chief" and p.info.job == "conf" for p in polls), [
        p.error for p in polls
    ]


def test_every_scalar_matches_tensorboards_own_reader(layouts):
    root, polls, _ = layouts
    ours = {p.info.task: p.values for p in polls}
    compared = 0
    for tb_run in _tb_runs(root):
        task, prefix = _owner(tb_run, root)
        for tag, rows in reference(tb_run).items():
            got = ours[task].get(scalar_key(prefix + tag))
            assert got is not None, f"{task}: {prefix + tag} missing"
            newest = max(rows, key=lambda r: (r[0], r[1]))  # by step: files are not read in time order
            assert got == pytest.approx(newest[2], rel=0.01), (task, tag)
            compared += 1
    assert compared >= 35
    enc = ours["encodings"]
    assert enc[scalar_key("enc/int32_unpacked")] == -9 and enc[scalar_key("enc/int64_unpacked")] == -(2**35)
    assert enc[scalar_key("enc/int64_packed")] == 123_456_789_012 and enc[scalar_key("enc/half")] == 0.5
    assert enc[scalar_key("enc/bfloat16")] == 1.5  # beyond the reference: it needs TensorFlow's dtypes


def test_steps_and_rates_match_the_reference(layouts):
    root, polls, store = layouts
    ours = {p.info.task: p for p in polls}
    for task in EXPECTED_TASKS:
        # the run's own writer (Keras: train/); add_hparams writes step 0 at the wall time of the call
        rows = [
            r
            for tb_run in _tb_runs(root)
            if _owner(tb_run, root) in ((task, ""), (task, "train/"))
            for rs in reference(tb_run).values()
            for r in rs
        ]
        top = max(r[0] for r in rows)
        assert ours[task].values[M.K_GLOBAL_STEP] == top
        low = min(r[0] for r in rows)
        wall = {
            step: max(r[1] for r in rows if r[0] == step) for step in (low, top)
        }  # each step's last event
        want = (top - low) / (wall[top] - wall[low])
        (ts,) = [ts for ts in store.tasks.values() if ts.info.task == task]
        got = ts.rate(M.K_WORKER_STEPS, 1e9)  # between the two polls
        assert got == pytest.approx(want, rel=0.02), task


def test_training_figures_are_recognised(layouts):
    _, polls, _ = layouts
    ours = {p.info.task: p.values for p in polls}
    assert ours["pt20"][M.K_LOSS] == pytest.approx(2.0 / (2 * STEPS), rel=0.01)
    assert ours["pt20"][M.K_LEARNING_RATE] == pytest.approx(0.1 * 0.99 ** (2 * STEPS - 1), rel=0.01)
    assert ours["keras"][M.K_LOSS] == pytest.approx(1.0 / 10, rel=0.01)  # train/, not validation/
    assert ours["keras"][M.K_LEARNING_RATE] == pytest.approx(0.01)


async def test_job_rate_is_the_sum_of_runs_not_of_writer_folders(tmp_path):
    """The issue's 20 + 50 steps/s setup (which showed 110): add_scalars and hparams folders add nothing."""
    clock = ManualClock(T0)
    src = TensorBoardSource(tmp_path, job="two", poll_budget_s=30)
    poller = Poller([src], Store(), clock=clock, interval=2.0)
    for phase in (0, 1):
        _torch_run(tmp_path / "pt20", 20.0, phase)
        _torch_run(tmp_path / "tbx50", 50.0, phase, tensorboardX.SummaryWriter)
        cycle = await poller.poll_once()
        clock.advance(2.0)
    assert len(cycle.polls) == 2 and cycle.answered == 2
    (job,) = build_jobs(poller.store, poller.lifecycle, clock.now())
    assert [n.name for n in job.nodes] == ["pt20", "tbx50"]
    assert job.steps_per_sec == pytest.approx(70.0, rel=0.02)


async def test_a_run_that_stops_writing_is_finished_and_comes_back(tmp_path):
    clock, lifecycle = ManualClock(T0), Lifecycle(silent_after=3)
    src = TensorBoardSource(tmp_path, job="j", idle_after_s=5.0, poll_budget_s=30)
    _torch_run(tmp_path / "run", 20.0, 0)
    states = []
    for _ in range(6):
        polls = await src.poll(None, clock)  # type: ignore[arg-type]
        lifecycle.observe(polls)
        states.append(_state(lifecycle, "run"))
        clock.advance(2.0)
    assert states[:3] == [TaskState.UP] * 3 and states[-1] is TaskState.FINISHED  # at once (issue 31)
    assert "finished: no new event" in polls[0].error and "last event at " in polls[0].error
    _torch_run(tmp_path / "run", 20.0, 1)
    lifecycle.observe(await src.poll(None, clock))  # type: ignore[arg-type]
    assert _state(lifecycle, "run") is TaskState.UP


async def test_silence_follows_the_runs_own_cadence(tmp_path):
    """A run that wrote every 2 s for a while is stopped after twice that, not after the 150 s default."""
    clock, lifecycle = ManualClock(T0), Lifecycle(silent_after=3)
    src = TensorBoardSource(tmp_path, job="j", poll_budget_s=30)
    w = torch_tb.SummaryWriter(log_dir=str(tmp_path / "run"))
    for i in range(5):
        w.add_scalar("loss", 1.0 / (i + 1), i, walltime=T0 + 2 * i)
        w.flush()
        lifecycle.observe(await src.poll(None, clock))  # type: ignore[arg-type]
        clock.advance(2.0)
    w.close()
    oks = []
    for _ in range(6):
        polls = await src.poll(None, clock)  # type: ignore[arg-type]
        lifecycle.observe(polls)
        oks.append(polls[0].ok)
        clock.advance(2.0)
    assert oks == [True, False, False, False, False, False]
    assert _state(lifecycle, "run") is TaskState.FINISHED


def _state(lifecycle: Lifecycle, task: str) -> TaskState:
    (node,) = [n for n in lifecycle.nodes.values() if n.info.task == task]
    return node.state


def big_event_file(path: Path, steps: int) -> int:
    """An event file written with tensorboard's own protos and record writer: 3 scalars a step."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        rw = RecordWriter(fh)
        for i in range(steps):
            for tag in ("loss", "lr", "global_step/sec"):
                v = summary_pb2.Summary.Value(tag=tag, simple_value=1.0 / (i + 1))
                rw.write(
                    event_pb2.Event(
                        wall_time=T0 + i / 100, step=i, summary=summary_pb2.Summary(value=[v])
                    ).SerializeToString()
                )
    return steps - 1


async def test_a_large_backlog_is_read_in_the_background_with_progress(tmp_path):
    from cmdare.tui.options import SessionOptions
    from cmdare.tui.session import MonitorSession

    last = big_event_file(tmp_path / "big" / "events.out.tfevents.1.host", 40_000)  # ~6 MB
    src = TensorBoardSource(tmp_path, job="big")
    src_mod = __import__("cmdare.collectors.tensorboard.source", fromlist=["x"])
    session = MonitorSession(SessionOptions(job="big"), clock=ManualClock(T0), extra_sources=[src])
    session.start()
    catching_up, seen_progress, status_honest = 0, False, True
    old_min, src_mod.PROGRESS_MIN_BYTES = src_mod.PROGRESS_MIN_BYTES, 64 * 1024
    try:
        for _ in range(400):
            cycle = await session.poller.poll_once()
            status = session._source_status(cycle)  # the status line the app and snapshot show (no planner)
            (p,) = cycle.polls
            if p.catching_up:
                catching_up += 1
                seen_progress |= "reading" in (p.error or "") and "% of" in (p.error or "")
                status_honest &= not status[0].ok and "catching up" in status[0].message
            elif p.ok and p.values[M.K_GLOBAL_STEP] == last:
                break
            await asyncio.sleep(0.02)
    finally:
        src_mod.PROGRESS_MIN_BYTES = old_min
        await session.aclose()
    assert p.values[M.K_GLOBAL_STEP] == last and status[0].ok and status[0].message == "1/1 targets answered"
    assert seen_progress and status_honest
    # polls kept answering while the backlog was read beside them (benchmarks/tensorboard_catchup.py times them)
    assert catching_up >= 2
    assert math.isfinite(p.t)
