"""Run one pairing: train a model on a task with PyTorch Lightning, then evaluate it.

The Trainer drives training in a few blocks of optimiser steps (one Lightning
step per block, one epoch in all), so Lightning's per-step machinery, about a
millisecond on a CPU, is paid per block rather than per optimiser step. Inside a
block the steps are plain autograd and optimiser calls: the small models of this
benchmark take well under a millisecond per step, and would otherwise spend most
of their time in the framework. Mini-batch recipes draw a new batch per step.
"""
from __future__ import annotations

import logging
import math
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, IterableDataset

from tokbench.errors import TokbenchError
from tokbench.model import ModelOutput, TokenModel
from tokbench.optim import make_optimizer
from tokbench.seeding import derive_seed
from tokbench.specs import ModelSpec, Recipe
from tokbench.task import Split, Task

CURVE_POINTS = 100  # logged points per training curve
LIGHTNING_STEPS = 10  # Lightning steps (blocks of optimiser steps) per training run
EVAL_CHUNK = 8192  # samples per evaluation forward pass, to bound memory

for _name in ("pytorch_lightning", "lightning.pytorch", "lightning_fabric", "lightning.fabric"):
    logging.getLogger(_name).setLevel(logging.ERROR)
warnings.filterwarnings("ignore", message=r".*does not have many workers.*")
warnings.filterwarnings("ignore", message=r".*LightningModule.*has parameters that were not used.*")
warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)` is deprecated.*")  # Lightning vs newer torch


class NonFiniteLossError(TokbenchError):
    """The training loss became NaN or infinite."""


@dataclass
class PairingResult:
    """What one trained and evaluated pairing produced."""

    metrics: dict[str, float]
    train: dict[str, Any]
    curve: dict[str, list[float]] = field(default_factory=dict)
    attention_profile: list[float] | None = None


class _Blocks(IterableDataset):
    """One item per block of optimiser steps: tokens (r, b, T) and labels (r, b).

    Full batch: r = 1, the whole training split, reused by every step of the block
    (and moved to the device once). Mini-batches: r = block, seeded random batches.
    """

    def __init__(self, split: Split, batch_size: int, block: int, seed: int) -> None:
        self.tokens, self.labels = split.tokens, split.labels
        self.batch_size, self.block, self.seed = batch_size, block, seed

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        n = len(self.labels)
        if self.batch_size == 0 or self.batch_size >= n:
            while True:
                yield self.tokens[None], self.labels[None]
        generator = torch.Generator().manual_seed(self.seed)
        batches = iter(())
        while True:
            picked = []
            while len(picked) < self.block:
                idx = next(batches, None)
                if idx is None:
                    batches = iter(torch.randperm(n, generator=generator)[: n - n % self.batch_size].split(self.batch_size))
                    continue
                picked.append(idx)
            idx = torch.stack(picked)
            yield self.tokens[idx], self.labels[idx]


class PairingModule(pl.LightningModule):
    """Lightning wrapper: the model's own loss, the recipe's optimiser, a sparse curve."""

    def __init__(self, model: TokenModel, recipe: Recipe) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.model, self.recipe = model, recipe
        self.block = max(1, math.ceil(recipe.steps / LIGHTNING_STEPS))
        self.log_every = max(1, recipe.steps // CURVE_POINTS)
        self.curve: dict[str, list[float]] = {"step": [], "loss": [], "accuracy": []}
        self.last_loss = math.nan

    @property
    def blocks(self) -> int:
        return math.ceil(self.recipe.steps / self.block)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        tokens, labels = batch
        optimizer = self.optimizers(use_pl_optimizer=False)
        first = batch_idx * self.block
        for step in range(first, min(first + self.block, self.recipe.steps)):
            i = (step - first) % len(tokens)
            output = self.model(tokens[i])
            loss = self.model.loss(output, labels[i])
            if step % self.log_every == 0 or step == self.recipe.steps - 1:
                self._log(step, loss, output, labels[i])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    def _log(self, step: int, loss: torch.Tensor, output: ModelOutput, labels: torch.Tensor) -> None:
        value = loss.item()
        if not math.isfinite(value):
            raise NonFiniteLossError(f"loss became {value} at step {step}")
        accuracy = (output.logits.argmax(-1) == labels).double().mean().item()
        for key, item in (("step", step), ("loss", value), ("accuracy", accuracy)):
            self.curve[key].append(item)
        if self.logger is not None:
            self.logger.log_metrics({"train_loss": value, "train_accuracy": accuracy}, step=step)
        self.last_loss = value

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return make_optimizer(self.recipe.optimizer, self.model.parameters(), self.recipe.lr)


@torch.no_grad()
def predict(model: TokenModel, tokens: torch.Tensor) -> ModelOutput:
    """Forward ``tokens`` in chunks on the model's device; results come back on the CPU."""
    model.eval()
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    parts = [model(chunk.to(device)) for chunk in tokens.split(EVAL_CHUNK)]
    merged = []
    for field_parts in zip(*parts):
        merged.append(None if field_parts[0] is None else torch.cat([p.cpu() for p in field_parts]))
    return ModelOutput(*merged)


def evaluate(model: TokenModel, task: Task, split: Split) -> tuple[dict[str, float], list[float] | None]:
    """Accuracy, the attention diagnostics and the mean attention profile on ``split``."""
    output = predict(model, split.tokens)
    accuracy = (output.logits.argmax(-1) == split.labels).double().mean().item()
    metrics = {"accuracy": accuracy}
    profile = None
    if output.attention is not None:
        attention = output.attention.double()[:, : task.context_length]
        for name, mask in split.attention_targets.items():
            metrics[name] = (attention * mask).sum(-1).mean().item()
        profile = attention.mean(0).tolist()
    metrics.update(task.model_metrics(model, split))
    return metrics, profile


def _trainer(blocks: int, out_dir: Path | None, accelerator: str) -> pl.Trainer:
    logger: Any = False
    if out_dir is not None:
        logger = pl.loggers.CSVLogger(str(out_dir), name="", version="")
    return pl.Trainer(
        max_epochs=1,
        limit_train_batches=blocks,
        accelerator=accelerator,
        devices=1,
        logger=logger,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        limit_val_batches=0,
    )


def train_model(
    task: Task, model_spec: ModelSpec, model_params: dict[str, Any], recipe: Recipe, seed: int,
    train: Split, out_dir: Path | None, accelerator: str,
) -> tuple[TokenModel, PairingModule, int]:
    """Build the model from the run's init seed and train it on ``train`` with ``recipe``.

    Returns the trained model, its Lightning module (which holds the curve) and the
    number of optimiser steps taken (0 for models without trainable parameters).
    """
    torch.manual_seed(derive_seed(seed, "init"))
    model = model_spec.build(model_params, task)
    model.fit(train)
    module = PairingModule(model, recipe)
    if recipe.steps == 0 or not any(p.requires_grad for p in model.parameters()):
        return model, module, 0
    blocks = _Blocks(train, recipe.batch_size, module.block, derive_seed(seed, "batches"))
    _trainer(module.blocks, out_dir, accelerator).fit(module, train_dataloaders=DataLoader(blocks, batch_size=None))
    return model, module, recipe.steps


def run_pairing(
    task: Task,
    model_spec: ModelSpec,
    model_params: dict[str, Any],
    recipe: Recipe,
    seed: int,
    out_dir: Path | None = None,
    accelerator: str = "auto",
) -> PairingResult:
    """Train ``model_spec`` on ``task`` with ``recipe`` and evaluate it.

    Seeds: each split of the task has its own data seed and the model's
    initialisation has another, all derived from ``seed``. On the CPU the same
    arguments give bit-identical metrics.

    With a non-empty ``recipe.lr_grid`` the model is trained once per learning
    rate from the same initialisation, and the rate with the best validation
    accuracy is kept (ties go to the earlier rate in the grid). The test split
    is never looked at during the selection.
    """
    started = time.perf_counter()
    train = task.make_split("train", seed)
    val = task.make_split("val", seed)
    selection: dict[str, float] = {}
    best: tuple[float, TokenModel, PairingModule, int, Recipe] | None = None
    for lr in recipe.lr_grid or (recipe.lr,):
        candidate = recipe.with_lr(lr)
        model, module, steps = train_model(task, model_spec, model_params, candidate, seed, train, out_dir, accelerator)
        if recipe.lr_grid:
            val_accuracy, _ = evaluate(model, task, val)
            selection[f"{lr:g}"] = val_accuracy["accuracy"]
            if best is not None and val_accuracy["accuracy"] <= best[0]:
                continue
            best = (val_accuracy["accuracy"], model, module, steps, candidate)
        else:
            best = (math.nan, model, module, steps, candidate)
    assert best is not None
    _, model, module, steps, chosen = best

    metrics: dict[str, float] = {}
    for name, split in {"train": train, "val": val, task.eval_split: None}.items():
        split_metrics, profile = evaluate(model, task, split or task.make_split(name, seed))
        metrics[f"{name}_accuracy"] = split_metrics.pop("accuracy")
        if name == task.eval_split:
            eval_metrics, attention_profile = split_metrics, profile
    bayes = task.bayes_accuracy()
    accuracy = metrics[f"{task.eval_split}_accuracy"]
    metrics.update(accuracy=accuracy, bayes_accuracy=bayes, normalized_accuracy=accuracy / bayes)
    metrics.update(eval_metrics)
    train_info = {"steps": steps, "final_loss": module.last_loss, "wall_seconds": time.perf_counter() - started,
                  **chosen.to_json()}
    if selection:
        train_info.update(lr_grid=list(recipe.lr_grid), lr_selection_val_accuracy=selection)
    return PairingResult(metrics=metrics, train=train_info, curve=module.curve, attention_profile=attention_profile)
