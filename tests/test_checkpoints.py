"""A training stopped mid-run resumes from its checkpoint and ends with the numbers of an uninterrupted run.

Each case trains a cell through :func:`tokbench.harness.run_cell` three ways: straight through; stopped by an
exception after some blocks of optimiser steps, with a checkpoint written after every block; then again on the
same folder, which resumes from that checkpoint. The resumed results equal the straight ones bit for bit (the
replicas step one after another on a CPU), but for ``wall_seconds`` and ``resumed_at``.
"""
from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch

from run_support import record_files, run_command, start_run, wait_until, write_suite
from tokbench.checkpoints import FOLDER, CheckpointWarning
from tokbench.cli import main
from tokbench.harness import block_ends, run_cell
from tokbench.outputs import RunOutputs
from small_tasks import small_mqar, small_walk
from tokbench.plugins import registry
from tokbench.results import load_records

EVERY_BLOCK = 1e-9  # seconds between checkpoints: one after every block


class Interrupted(Exception):
    pass


class StopAfter(pl.Callback):
    """Raises after ``blocks`` blocks, as a killed process would stop (after the checkpoint callback's turn)."""

    def __init__(self, blocks: int) -> None:
        self.blocks, self.seen = blocks, 0

    def on_train_batch_end(self, *args: object) -> None:
        self.seen += 1
        if self.seen == self.blocks:
            raise Interrupted


# (task, model, recipe, seeds)
CASES = {
    # fixed mini-batches (the batch generator is replayed), a target stop, budgets, a cosine schedule
    "fixed": (small_walk, "attn-nope", {"steps": 60, "batch_size": 16, "target": 0.9, "eval_every": 10,
                                        "budgets": "10,20,40", "schedule": "cosine"}, [0]),
    # fresh sequences, resumed in the middle of a draw of 10 steps' batches (blocks of 5 steps)
    "fresh": (small_mqar, "linear-attention", {"steps": 40, "data": "fresh", "batch_size": 16, "target": 0.6,
                                               "eval_every": 5, "budgets": "15", "schedule": "cosine"}, [0]),
    # a pruning sweep of two seeds x three rates (AdamW), which chooses at step 20
    "sweep": (small_mqar, "transformer-2l", {"steps": 40, "data": "fresh", "batch_size": 16, "eval_every": 10,
                                             "target": 0.99, "budgets": "20", "lr_grid": "0.00025,0.001,0.004",
                                             "sweep_steps": 20}, [0, 1]),
    # the same with a margin wide enough to keep every candidate past step 20, the choice made at the end
    "sweep-margin": (small_mqar, "transformer-2l", {"steps": 40, "data": "fresh", "batch_size": 16, "eval_every": 10,
                                                    "target": 0.99, "budgets": "20", "lr_grid": "0.00025,0.001,0.004",
                                                    "sweep_steps": 20, "sweep_margin": 1.0}, [0, 1]),
}
# (case, blocks trained before the stop): the sweep before and after its choice
STOPS = [("fixed", 3), ("fresh", 3), ("sweep", 1), ("sweep", 7), ("sweep-margin", 3)]


def cell(case: str, out: Path | None, every: float, callbacks: tuple = ()):
    make_task, name, overrides, seeds = CASES[case]
    spec = registry().model(name)
    outputs = RunOutputs(out, callbacks=callbacks, name="cell", checkpoint_every=every)
    return run_cell(make_task(), spec, spec.resolve({}), spec.recipe.override(overrides), seeds, outputs, "cpu")


def comparable(result) -> dict:
    train = {k: v for k, v in result.train.items() if k not in ("wall_seconds", "resumed_at")}
    return {"metrics": result.metrics, "train": train, "curve": result.curve, "budget_curve": result.budget_curve,
            "diagnostics": result.diagnostics, "size": result.size}


@pytest.mark.parametrize(("case", "stop"), STOPS)
def test_a_stopped_training_resumes_from_its_checkpoint_and_ends_as_an_uninterrupted_one(case, stop, tmp_path):
    straight = cell(case, None, 0)
    with pytest.raises(Interrupted):
        cell(case, tmp_path, EVERY_BLOCK, (StopAfter(stop),))
    written = tmp_path / FOLDER / "cell.pt"
    assert written.exists()
    resumed = cell(case, tmp_path, EVERY_BLOCK)
    assert not written.exists()  # gone once the results are made
    recipe = registry().model(CASES[case][1]).recipe.override(CASES[case][2])
    for alone, again in zip(straight, resumed, strict=True):
        assert comparable(again) == comparable(alone)
        assert again.train["resumed_at"] == [block_ends(recipe)[stop - 1]]
        assert "resumed_at" not in alone.train


def test_a_checkpoint_of_another_plan_is_ignored_with_a_warning(tmp_path):
    with pytest.raises(Interrupted):
        cell("fresh", tmp_path, EVERY_BLOCK, (StopAfter(2),))
    make_task, name, overrides, seeds = CASES["fresh"]
    spec = registry().model(name)
    other = spec.recipe.override({**overrides, "lr": 0.002})  # another rate: another training
    with pytest.warns(CheckpointWarning, match="another training plan"):
        (result,) = run_cell(make_task(), spec, spec.resolve({}), other, seeds,
                             RunOutputs(tmp_path, name="cell", checkpoint_every=EVERY_BLOCK), "cpu")
    assert "resumed_at" not in result.train
    (alone,) = run_cell(make_task(), spec, spec.resolve({}), other, seeds, None, "cpu")
    assert comparable(result) == comparable(alone)


def test_an_unreadable_checkpoint_is_ignored_with_a_warning(tmp_path):
    damaged = tmp_path / FOLDER / "cell.pt"
    damaged.parent.mkdir()
    damaged.write_bytes(b"not a checkpoint")
    with pytest.warns(CheckpointWarning, match="unreadable"):
        (result,) = cell("fresh", tmp_path, EVERY_BLOCK)
    assert comparable(result) == comparable(cell("fresh", None, 0)[0])
    assert not damaged.exists()


def test_a_checkpoint_that_cannot_be_written_is_reported_and_training_goes_on(tmp_path):
    (tmp_path / FOLDER).write_text("a file where the checkpoints folder should be")
    with pytest.warns(CheckpointWarning) as caught:
        (result,) = cell("fresh", tmp_path, EVERY_BLOCK)
    messages = {str(w.message).split(":")[0] for w in caught if w.category is CheckpointWarning}
    assert messages == {"checkpoint not written, training goes on", "checkpoint not removed"}
    assert comparable(result) == comparable(cell("fresh", None, 0)[0])


def test_a_checkpoint_written_when_every_replica_had_stopped_resumes_without_training(tmp_path):
    """The last block's checkpoint holds a finished stack: a rerun only evaluates."""
    _, name, overrides, _ = CASES["fixed"]
    last = len(block_ends(registry().model(name).recipe.override(overrides)))
    with pytest.raises(Interrupted):
        cell("fixed", tmp_path, EVERY_BLOCK, (StopAfter(last),))
    (result,) = cell("fixed", tmp_path, EVERY_BLOCK)
    assert comparable(result) == comparable(cell("fixed", None, 0)[0])


def test_a_training_that_draws_from_torchs_generator_continues_its_stream(tmp_path, monkeypatch):
    """Torch's global random state is part of the checkpoint: a loss that draws from it (dropout, say) resumes
    with the draws an uninterrupted run makes."""
    import tokbench.harness as harness

    plain = harness._step_loss

    def noisy(model, tokens, labels):
        loss, logits = plain(model, tokens, labels)
        return loss * (1 + torch.rand(())), logits

    monkeypatch.setattr(harness, "_step_loss", noisy)
    torch.manual_seed(1)
    straight = cell("fresh", None, 0)[0]
    torch.manual_seed(1)
    with pytest.raises(Interrupted):
        cell("fresh", tmp_path, EVERY_BLOCK, (StopAfter(2),))
    torch.manual_seed(2)  # what happened in between does not matter
    assert comparable(cell("fresh", tmp_path, EVERY_BLOCK)[0]) == comparable(straight)


# One pairing of some thousands of short steps: seconds of training, checkpointed every tenth of a second.
KILLED_SUITE = """
seeds = 1
[[grid]]
tasks = ["random-walk"]
models = ["attn-nope"]
[grid.task.random-walk]
context_length = 16
train_size = 256
val_size = 64
test_size = 64
[grid.train]
steps = 4000
batch_size = 32
budgets = [1000, 4000]
"""
RUN_LIMIT_SECONDS = 300


def test_tokbench_run_killed_mid_training_resumes_from_its_checkpoint(tmp_path):
    """The whole run SIGKILLed (what a session's end or the OOM killer does) after a checkpoint: a plain rerun
    finishes the pairing from there, with the record of an uninterrupted run."""
    suite = str(write_suite(tmp_path, KILLED_SUITE, "killed.toml"))
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert main(["run", "--suite", suite, "--out", str(straight), "--checkpoint-every", "0", "-q"]) == 0
    run = start_run("--suite", suite, "--out", str(resumed), "--checkpoint-every", "0.1", "-q",
                    log=tmp_path / "run.log", start_new_session=True)
    try:
        assert wait_until(lambda: list(resumed.glob(f"{FOLDER}/*.pt")) or run.poll() is not None, RUN_LIMIT_SECONDS)
        os.killpg(run.pid, signal.SIGKILL)  # the run and its workers, all at once
        run.wait(timeout=60)
    finally:
        run.kill()
    assert not record_files(resumed), "the pairing finished before the kill: lengthen KILLED_SUITE's training"
    again = subprocess.run(run_command("--suite", suite, "--out", str(resumed), "-q"), capture_output=True, text=True,
                           timeout=RUN_LIMIT_SECONDS)
    assert again.returncode == 0, again.stderr
    (alone,), (record,) = load_records(straight).records.values(), load_records(resumed).records.values()
    assert record["train"]["resumed_at"] and 0 < record["train"]["resumed_at"][0] < 4000
    assert [record[k] for k in ("metrics", "curve", "budget_curve")] == [alone[k] for k in ("metrics", "curve", "budget_curve")]
    assert not list(resumed.glob(f"{FOLDER}/*.pt"))
