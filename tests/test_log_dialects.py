"""What real training stacks write, read right (issue 31, item 1): MMEngine's ``scalars.json`` and
detectron2's ``metrics.json`` (``time`` is seconds per iteration), plain dicts with nested metrics and
ISO-8601 timestamps, Lightning's ``CSVLogger`` and Hugging Face's ``trainer_state.json``.

MMEngine and detectron2 are too heavy to install here (mmcv / CUDA builds): their writers are
reproduced byte for byte from their source, and so is transformers' ``TrainerState.save_to_json`` (see
its test for why) (``mmengine.visualization.LocalVisBackend.add_scalars`` →
``mmengine.fileio.dump``: ``json.dump(d, f)`` then ``"\\n"``, file opened ``a+``; ``detectron2.utils.events
.JSONWriter.write``: ``json.dumps(d, sort_keys=True) + "\\n"``), with the keys their loggers put in a
record. Lightning's ``CSVLogger`` is the real library.
Every case is read through the app's own path (poller → store → lifecycle → ``build_jobs``) and its
steps/s compared with the writer's own truth."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from cmdare.collectors import metrics as M
from cmdare.collectors.clock import ManualClock
from cmdare.collectors.logs.keys import read_record
from cmdare.collectors.logs.source import JsonlSource
from cmdare.collectors.observed import build_jobs
from cmdare.collectors.poller import Poller
from cmdare.collectors.store import Store
from cmdare.collectors.tensorboard.source import scalar_key

T0 = 1_790_000_000.0


def _mmengine_add_scalars(path: Path, scalar_dict: dict, step: int) -> None:
    """``LocalVisBackend.add_scalars`` as MMEngine 0.10 writes it (``setdefault('step', step)``, then
    ``mmengine.fileio.dump(d, f, file_format='json')`` = ``json.dump`` with default separators)."""
    d = copy.deepcopy(scalar_dict)
    d.setdefault("step", step)
    with open(path, "a+") as f:
        json.dump(d, f)
        f.write("\n")


def _detectron2_write(path: Path, iteration: int, scalars: dict) -> None:
    """``JSONWriter.write``: the scalars of one iteration plus ``iteration``, keys sorted."""
    with open(path, "a") as f:
        f.write(json.dumps({**scalars, "iteration": iteration}, sort_keys=True) + "\n")


async def _play(src: JsonlSource, writes, polls: int, every: float = 1.0):
    """Poll ``src`` through a poller on a manual clock; ``writes(i)`` appends what the job logged
    during second ``i``. Returns the job views and the last cycle."""
    clock = ManualClock(T0)
    poller = Poller([src], Store(), clock=clock, interval=every)
    for i in range(polls):
        writes(i)
        cycle = await poller.poll_once()
        clock.advance(every)
    return build_jobs(poller.store, poller.lifecycle, clock.now()), cycle, clock


async def test_mmengine_time_is_seconds_per_iteration_and_val_records_keep_the_step(tmp_path):
    log = tmp_path / "scalars.json"

    def writes(i: int) -> None:  # a true 10 iterations/s, logged every 10 iterations (every second)
        step = 10 * (i + 1)
        train = {"base_lr": 0.02, "lr": 0.02, "data_time": 0.011, "loss": 1.5 - 0.01 * i, "loss_cls": 0.9,
                 "loss_bbox": 0.6 - 0.01 * i, "time": 0.1, "epoch": 1, "iter": step, "memory": 3341}  # fmt: skip
        _mmengine_add_scalars(log, train, step)
        if i == 5:  # validation after epoch 1: stamped with the epoch (step=1)
            _mmengine_add_scalars(log, {"coco/bbox_mAP": 0.31, "data_time": 0.002, "time": 0.05}, 1)

    (job,), cycle, clock = await _play(JsonlSource(log, job="det"), writes, 12)
    assert job.steps_per_sec == pytest.approx(10.0, rel=0.01)  # was 800 -> 14,777 (time read as epoch)
    assert job.global_step == 120
    (node,) = job.nodes
    assert 0 <= node.uptime_s(clock.now()) < 60  # was 56.9 years
    assert job.training.loss == pytest.approx(1.5 - 0.11)  # ``loss``, not a component
    (p,) = cycle.polls
    assert p.values[scalar_key("time")] == 0.1 and p.values[scalar_key("coco/bbox_mAP")] == 0.31


async def test_mmengine_status_line_says_how_time_was_read(tmp_path):
    log = tmp_path / "scalars.json"
    _mmengine_add_scalars(log, {"lr": 0.01, "loss": 1.0, "time": 0.1, "iter": 10, "mode": "train"}, 10)
    (p,) = await JsonlSource(log).poll(None, ManualClock(T0))  # type: ignore[arg-type]
    assert p.ok and p.t == T0 and p.values[M.K_GLOBAL_STEP] == 10
    assert "time read as seconds per iteration" in p.error
    assert "not understood: mode (text)" in p.error


async def test_detectron2_iteration_is_the_step_and_total_loss_the_loss(tmp_path):
    log = tmp_path / "metrics.json"

    def writes(i: int) -> None:  # a true 10 iterations/s, written every 20 iterations (every 2 s)
        if i % 2 == 1:
            it = 10 * (i + 1) - 1  # detectron2 logs iteration 19, 39, … (0-based)
            _detectron2_write(log, it, {"data_time": 0.003, "eta_seconds": 900.0, "fast_rcnn/cls_accuracy": 0.9,
                                        "loss_box_reg": 0.3, "loss_cls": 0.4, "lr": 0.00025, "rank_data_time": 0.003,
                                        "time": 0.1, "total_loss": 1.25})  # fmt: skip

    (job,), _, _ = await _play(JsonlSource(log, job="d2"), writes, 14)
    assert job.steps_per_sec == pytest.approx(10.0, rel=0.01)  # was no rate at all
    assert job.global_step == 139
    assert job.training.loss == 1.25  # was loss_cls (0.4)


async def test_plain_dicts_nested_iso_timestamps_and_update_steps(tmp_path):
    log = tmp_path / "train.jsonl"
    with log.open("w") as f:
        for i in range(30):  # 4 updates/s by the writer's own clock
            stamp = f"2026-12-03T10:00:{i // 4:02d}.{(i % 4) * 25:02d}0000+00:00"
            row = {"timestamp": stamp, "update": 100 + i, "train": {"loss": 2.0 - i / 100, "acc": 0.5},
                   "opt": {"lr": 1e-3}, "phase": "train", "hist": [1, 2]}  # fmt: skip
            f.write(json.dumps(row) + "\n")
    src, clock = JsonlSource(log), ManualClock(T0)
    (p,) = await src.poll(None, clock)  # type: ignore[arg-type]
    assert p.ok and p.values[M.K_GLOBAL_STEP] == 129
    assert p.t == pytest.approx(1_796_292_000.0 + 7.25)  # 2026-12-03T10:00:07.25Z, not the poll time
    assert p.values[scalar_key("train.loss")] == pytest.approx(1.71) and p.values[M.K_LOSS] == pytest.approx(
        1.71
    )
    assert p.values[M.K_LEARNING_RATE] == 1e-3
    assert "not understood: hist (a list), phase (text)" in p.error and "step from update" in p.error


@pytest.mark.parametrize(
    ("record", "step", "key"),
    [
        ({"epoch": 2, "iter": 5, "step": 105}, 105, "step"),  # MMEngine: step is global, iter per epoch
        ({"epoch": 2, "iteration": 7, "global_step": 9}, 9, "global_step"),
        ({"epoch": 2, "iteration": 7, "iter": 3}, 7, "iteration"),
        ({"epoch": 2, "update": 11}, 11, "update"),
        ({"epoch": 3, "loss": 0.5}, 3, "epoch"),
    ],
)
def test_step_keys_in_priority_order(record, step, key):
    rec = read_record(record, 64)
    assert (rec.step, rec.step_key) == (step, key) and rec.values[M.K_GLOBAL_STEP] == step


@pytest.mark.parametrize(
    ("tags", "loss"),
    [
        ({"loss_cls": 1.0, "total_loss": 2.0, "loss_box_reg": 0.5}, 2.0),  # detectron2
        ({"loss_cls": 1.0, "loss": 3.0}, 3.0),  # MMEngine
        ({"train/loss_cls": 1.0, "train/loss": 4.0}, 4.0),
        ({"train_loss_step": 5.0, "val_loss": 1.0}, 5.0),  # Lightning
    ],
)
def test_total_loss_by_name_before_components(tags, loss):
    assert M.training_keys(tags)[M.K_LOSS] == loss


async def test_time_told_from_duration_by_value(tmp_path):
    log = tmp_path / "t.jsonl"
    log.write_text(json.dumps({"time": T0 - 5, "step": 1}) + "\n")
    (p,) = await JsonlSource(log).poll(None, ManualClock(T0))  # type: ignore[arg-type]
    assert p.t == T0 - 5 and scalar_key("time") not in p.values


async def test_lightning_csv_logger_rewrites_with_new_columns(tmp_path):
    csv_logs = pytest.importorskip("lightning.fabric.loggers.csv_logs")
    logger = csv_logs.CSVLogger(str(tmp_path), name="lit")
    clock = ManualClock(T0)
    src = None
    seen = []
    for i in range(12):  # 20 steps/s, logged every 10 steps and saved every 0.5 s (flush_logs_every_n_steps)
        logger.log_metrics({"train_loss": 1.0 / (i + 1), "epoch": 0}, step=10 * (i + 1))
        if i == 6:  # a new column: Lightning rewrites the whole file with the new header
            logger.log_metrics({"val_loss": 0.7, "epoch": 0}, step=10 * (i + 1))
        logger.save()
        path = Path(logger.experiment.metrics_file_path)
        if src is None:
            src = JsonlSource(path, job="lit")
            poller = Poller([src], Store(), clock=clock, interval=0.5)
        cycle = await poller.poll_once()
        (p,) = cycle.polls
        seen.append(p.values.get(M.K_GLOBAL_STEP))
        clock.advance(0.5)
    (job,) = build_jobs(poller.store, poller.lifecycle, clock.now())
    assert seen == [10 * (i + 1) for i in range(12)]
    assert job.steps_per_sec == pytest.approx(20.0, rel=0.01)
    assert p.values[M.K_LOSS] == pytest.approx(1 / 12) and p.values[scalar_key("val_loss")] == 0.7
    assert job.nodes[0].restarts == 0 and M.K_LOG_RESTARTS not in p.values  # the rewrite is no restart


def _hf_save_to_json(path: Path, log_history: list[dict], global_step: int) -> None:
    """``transformers.TrainerState.save_to_json``: ``json.dumps(dataclasses.asdict(self), indent=2,
    sort_keys=True) + "\\n"`` written with mode ``w`` (transformers 4.40-5.x), here with the state's fields
    a Trainer run has (installing transformers here pulls in click, whose presence makes httpx import
    rich at start-up: the architecture test forbids that)."""
    state = {"best_global_step": None, "best_metric": None, "best_model_checkpoint": None, "epoch": global_step / 100,
             "eval_steps": 500, "global_step": global_step, "is_hyper_param_search": False, "is_local_process_zero": True,
             "is_world_process_zero": True, "log_history": log_history, "logging_steps": 5, "max_steps": 100,
             "num_input_tokens_seen": 0, "num_train_epochs": 1, "save_steps": 500, "stateful_callbacks": {},
             "total_flos": 0, "train_batch_size": 8, "trial_name": None, "trial_params": None}  # fmt: skip
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(state, indent=2, sort_keys=True) + "\n")


async def test_hugging_face_trainer_state_log_history(tmp_path):
    path = tmp_path / "trainer_state.json"
    src = JsonlSource(path, job="hf")
    clock = ManualClock(T0)
    poller = Poller([src], Store(), clock=clock, interval=1.0)
    history: list[dict] = []
    for i in range(10):  # 5 steps/s, logging_steps=5, the state saved each second
        step = 5 * (i + 1)
        # Trainer.log: {**logs, "epoch": …, "step": global_step}
        history.append({"loss": 2.0 - i / 10, "grad_norm": 1.5, "learning_rate": 5e-5, "epoch": step / 100, "step": step})  # fmt: skip
        _hf_save_to_json(path, history, step)
        cycle = await poller.poll_once()
        clock.advance(1.0)
    (job,) = build_jobs(poller.store, poller.lifecycle, clock.now())
    (p,) = cycle.polls
    assert p.values[M.K_GLOBAL_STEP] == 50 and p.values[M.K_LOSS] == pytest.approx(1.1)
    assert p.values[M.K_LEARNING_RATE] == 5e-5
    assert job.steps_per_sec == pytest.approx(5.0, rel=0.01)


async def test_an_empty_log_at_start_leaves_no_phantom_row(tmp_path):
    """Issue 31, item 7: a JSON-lines file empty when polling starts, then naming its own task."""
    log = tmp_path / "train.jsonl"
    log.write_text("")
    clock = ManualClock(T0)
    poller = Poller([JsonlSource(log)], Store(), clock=clock, interval=1.0)
    for _ in range(5):  # silent_after polls of "no metric lines yet"
        cycle = await poller.poll_once()
        clock.advance(1.0)
    assert "no metric lines yet" in cycle.polls[0].error
    for i in range(3):
        with log.open("a") as f:
            f.write(
                json.dumps({"time": clock.now(), "job": "resnet", "task": "worker-0", "step": 10 * i}) + "\n"
            )
        await poller.poll_once()
        clock.advance(1.0)
    (job,) = build_jobs(poller.store, poller.lifecycle, clock.now())
    assert job.name == "resnet" and [n.name for n in job.nodes] == ["worker-0"]
    assert list(poller.lifecycle.nodes) == ["resnet/worker-0"]
