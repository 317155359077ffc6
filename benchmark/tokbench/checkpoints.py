"""Checkpoints of a stack in training, so that a run stopped mid-training resumes where it was.

A stack of replicas (:func:`tokbench.harness.train_replicas`) that trains for longer than ``every`` seconds
writes its whole training state, between two blocks of optimiser steps, to ``OUT/.checkpoints/NAME.pt``
(NAME: the record's stem; for a cell of seeds trained together, the first record's stem and ``.cell``):
every replica's model, optimiser, schedule, curves, stop and sweep state, the validation stops' state and
torch's random state, with how many blocks were done. A later run of the same stack (the same recipes,
seeds and parameter shapes) starts from it instead of step 0. The data of a step depends only on its run
seed and the step (:class:`tokbench.harness._FreshBlocks`, :class:`tokbench.harness._Blocks`), so the resumed
run ends with the numbers of an uninterrupted one, bit for bit on a CPU; its record says at which steps
training resumed (``train.resumed_at``), and its ``wall_seconds`` include the time before.

A checkpoint goes once its cell's results are made. One that cannot be written is reported (a warning) and
training goes on without it; one that cannot be read, or belongs to another stack, is reported and ignored
(the next write replaces it). Nothing here changes what a run computes.
"""
from __future__ import annotations

import io
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch

from tokbench.errors import StorageError
from tokbench.replicas import Replica
from tokbench.results import canonical_json
from tokbench.storage import atomic_write

FOLDER = ".checkpoints"  # hidden, beside the records: record loading reads *.json only
SUFFIX = ".pt"
FORMAT = 1


class CheckpointWarning(UserWarning):
    """A checkpoint could not be written or read; training goes on as if there were none."""


def identity(replicas: Sequence[Replica]) -> list[str]:
    """What a checkpoint must match to be resumed: per replica, its recipe, run seed and parameter shapes."""
    return [canonical_json({"recipe": r.recipe.to_json(), "seed": r.seed,
                            "shapes": {name: list(t.shape) for name, t in r.model.state_dict().items()}})
            for r in replicas]


@dataclass
class Resumed:
    """A stack's state read from a checkpoint: the blocks done, seconds trained, and what to restore."""

    blocks: int
    seconds: float
    replicas: list[dict[str, Any]]
    stops: dict[int, dict[str, Any]]  # Convergence state by replica index
    rng: torch.Tensor


@dataclass(frozen=True)
class Checkpoints:
    """Where one stack's checkpoint lives and how often it is written (``every`` seconds of training)."""

    path: Path
    every: float

    def load(self, replicas: Sequence[Replica]) -> Resumed | None:
        """The checkpoint of ``replicas``' stack, or None: none written, unreadable, or another stack's."""
        if not self.path.exists():
            return None
        try:
            state = torch.load(self.path, map_location="cpu", weights_only=True)
        except Exception as exc:  # noqa: BLE001 - a damaged checkpoint costs its progress, never the run
            warnings.warn(f"{self.path}: unreadable checkpoint ignored ({type(exc).__name__}: {exc})",
                          CheckpointWarning, stacklevel=2)
            return None
        if state.get("format") != FORMAT or state.get("identity") != identity(replicas):
            warnings.warn(f"{self.path}: checkpoint of another training plan ignored", CheckpointWarning, stacklevel=2)
            return None
        return Resumed(state["blocks"], state["seconds"], state["replicas"], state["stops"], state["rng"])

    def save(self, replicas: Sequence[Replica], stops: dict[int, Any], blocks: int, seconds: float) -> bool:
        """Write the stack's state after ``blocks`` blocks; False (with a warning) if it could not be written."""
        state = {"format": FORMAT, "identity": identity(replicas), "blocks": blocks, "seconds": seconds,
                 "replicas": [r.state_dict() for r in replicas],
                 "stops": {index: stop.state_dict() for index, stop in stops.items()},
                 "rng": torch.get_rng_state()}
        buffer = io.BytesIO()
        torch.save(state, buffer)
        try:
            atomic_write(self.path, buffer.getvalue())
        except StorageError as exc:
            warnings.warn(f"checkpoint not written, training goes on: {exc}", CheckpointWarning, stacklevel=2)
            return False
        return True

    def discard(self) -> None:
        """Remove the checkpoint (the results it led to are made); one that cannot be removed is reported."""
        try:
            self.path.unlink(missing_ok=True)
        except OSError as exc:
            warnings.warn(f"checkpoint not removed: {StorageError.from_os(exc, self.path)}", CheckpointWarning,
                          stacklevel=2)


class CheckpointEvery(pl.Callback):
    """Writes the stack's checkpoint after a block once ``every`` seconds have passed since the last one (or
    since training started), and at the end of training if it trained that long in all, so that a run killed
    while it evaluates keeps its training too. It must run after the callbacks that stop replicas."""

    def __init__(self, checkpoints: Checkpoints, replicas: Sequence[Replica], stops: dict[int, Any],
                 start_block: int, earlier_seconds: float) -> None:
        self.checkpoints, self.replicas, self.stops = checkpoints, replicas, stops
        self.blocks = self.saved = start_block
        self.earlier = earlier_seconds
        self.started = self.last = time.perf_counter()

    def on_train_batch_end(self, trainer: pl.Trainer, module: pl.LightningModule, *args: Any) -> None:
        self.blocks += 1
        if time.perf_counter() - self.last >= self.checkpoints.every:
            self._save()

    def on_train_end(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
        if self.saved != self.blocks and time.perf_counter() - self.started >= self.checkpoints.every:
            self._save()

    def _save(self) -> None:
        seconds = self.earlier + time.perf_counter() - self.started
        if self.checkpoints.save(self.replicas, self.stops, self.blocks, seconds):
            self.saved = self.blocks
        self.last = time.perf_counter()
