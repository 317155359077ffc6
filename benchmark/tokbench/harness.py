"""Run one pairing: train a model on a task with PyTorch Lightning, then evaluate it.

The training split is served by an iterable dataset that repeats forever, and
the Trainer is bounded by ``max_steps`` alone, so there is no per-epoch work:
one optimiser step costs one forward and backward pass plus Lightning's hooks.
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


class _Batches(IterableDataset):
    """The training split, forever: the full batch each step, or seeded random mini-batches."""

    def __init__(self, split: Split, batch_size: int, seed: int) -> None:
        self.tokens, self.labels = split.tokens, split.labels
        self.batch_size, self.seed = batch_size, seed

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        n = len(self.labels)
        if self.batch_size == 0 or self.batch_size >= n:
            while True:
                yield self.tokens, self.labels
        generator = torch.Generator().manual_seed(self.seed)
        while True:
            for idx in torch.randperm(n, generator=generator).split(self.batch_size):
                if len(idx) == self.batch_size:
                    yield self.tokens[idx], self.labels[idx]


class PairingModule(pl.LightningModule):
    """Lightning wrapper: the model's own loss, the recipe's optimiser, a sparse curve."""

    def __init__(self, model: TokenModel, recipe: Recipe) -> None:
        super().__init__()
        self.model, self.recipe = model, recipe
        self.log_every = max(1, recipe.steps // CURVE_POINTS)
        self.curve: dict[str, list[float]] = {"step": [], "loss": [], "accuracy": []}
        self.last_loss = math.nan

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        tokens, labels = batch
        output = self.model(tokens)
        loss = self.model.loss(output, labels)
        step = self.global_step
        if step % self.log_every == 0 or step == self.recipe.steps - 1:
            value = loss.item()
            if not math.isfinite(value):
                raise NonFiniteLossError(f"loss became {value} at step {step}")
            accuracy = (output.logits.argmax(-1) == labels).double().mean().item()
            for key, item in (("step", step), ("loss", value), ("accuracy", accuracy)):
                self.curve[key].append(item)
            if self.logger is not None:
                self.logger.log_metrics({"train_loss": value, "train_accuracy": accuracy}, step=step)
            self.last_loss = value
        return loss

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


def _trainer(steps: int, out_dir: Path | None, accelerator: str) -> pl.Trainer:
    logger: Any = False
    if out_dir is not None:
        logger = pl.loggers.CSVLogger(str(out_dir), name="", version="")
    return pl.Trainer(
        max_steps=steps,
        max_epochs=-1,
        accelerator=accelerator,
        devices=1,
        logger=logger,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        limit_val_batches=0,
        log_every_n_steps=max(1, steps // CURVE_POINTS),
    )


def _train(
    task: Task, model_spec: ModelSpec, model_params: dict[str, Any], recipe: Recipe, seed: int,
    train: Split, out_dir: Path | None, accelerator: str,
) -> tuple[TokenModel, PairingModule, int]:
    """Build the model from the run's init seed and train it; returns the steps taken."""
    torch.manual_seed(derive_seed(seed, "init"))
    model = model_spec.build(model_params, task)
    model.fit(train)
    module = PairingModule(model, recipe)
    if recipe.steps == 0 or not any(p.requires_grad for p in model.parameters()):
        return model, module, 0
    loader = DataLoader(_Batches(train, recipe.batch_size, derive_seed(seed, "batches")), batch_size=None)
    _trainer(recipe.steps, out_dir, accelerator).fit(module, train_dataloaders=loader)
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
        model, module, steps = _train(task, model_spec, model_params, candidate, seed, train, out_dir, accelerator)
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
