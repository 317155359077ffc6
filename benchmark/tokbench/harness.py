"""Run one pairing: train a model on a task with PyTorch Lightning, then evaluate it.

The Trainer drives training in a few blocks of optimiser steps (one Lightning
step per block, one epoch in all), so Lightning's per-step machinery, about a
millisecond on a CPU, is paid per block rather than per optimiser step. Inside a
block the steps are plain autograd and optimiser calls: the small models of this
benchmark take well under a millisecond per step, and would otherwise spend most
of their time in the framework. Mini-batch recipes draw a new batch per step, from
the training split or, with ``data = "fresh"``, from the task's generator.

The schedule (:func:`block_ends`) also ends a block at each budget of the budget
curve and at each validation check; the callbacks run there, between blocks:
:class:`BudgetCurve` records the evaluation split's accuracy (never used for a
choice) and :class:`Convergence`, Lightning's ``EarlyStopping``, stops training at
the recipe's target or plateau. There is no other loop.

Scoring follows the task (contract v2): a model's logits are first aligned to
the task's labels (:func:`align`), then the loss, the accuracy and every
diagnostic are computed over the labelled positions only.
"""
from __future__ import annotations

import itertools
import logging
import math
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import EarlyStopping
from pytorch_lightning.callbacks.early_stopping import EarlyStoppingReason
from torch.utils.data import DataLoader, IterableDataset

from tokbench.errors import NotApplicable, ParamError, TokbenchError
from tokbench.metrics import (agreement, argmax_predictions, attention_metric, chance_accuracy, expected_accuracy,
                              prediction_accuracy, sequence_accuracy)
from tokbench.model import ModelOutput, TokenModel
from tokbench.optim import make_optimizer, make_schedule
from tokbench.results import canonical_json
from tokbench.seeding import derive_seed
from tokbench.specs import ModelSpec, Recipe
from tokbench.task import IGNORE, Split, Task

CURVE_POINTS = 100  # logged points per training curve
LIGHTNING_STEPS = 10  # Lightning steps (blocks of optimiser steps) per training run
EVAL_CHUNK = 8192  # samples per evaluation forward pass, to bound memory
FRESH_DRAW_STEPS = 10  # steps whose fresh batches are drawn at once, from one seed
ATTENTION_BUDGET = 2**24  # attention entries per layer and head kept at once when every position is a query

for _name in ("pytorch_lightning", "lightning.pytorch", "lightning_fabric", "lightning.fabric"):
    logging.getLogger(_name).setLevel(logging.ERROR)
warnings.filterwarnings("ignore", message=r".*does not have many workers.*")
warnings.filterwarnings("ignore", message=r".*LightningModule.*has parameters that were not used.*")
warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)` is deprecated.*")  # Lightning vs newer torch


class NonFiniteLossError(TokbenchError):
    """The training loss became NaN or infinite."""


@dataclass
class PairingResult:
    """What one trained and evaluated pairing produced.

    ``diagnostics`` names, per attention metric, the layer and head it was read from;
    ``budget_curve`` is the evaluation accuracy at each budget reached, then at the final step
    (``"final": True``); ``evaluations`` has one entry per extra evaluation setting (:func:`evaluate_setting`).
    """

    metrics: dict[str, float]
    train: dict[str, Any]
    curve: dict[str, list[float]] = field(default_factory=dict)
    attention_profile: list[float] | None = None
    diagnostics: dict[str, dict[str, Any]] = field(default_factory=dict)
    budget_curve: list[dict[str, Any]] = field(default_factory=list)
    evaluations: list[dict[str, Any]] = field(default_factory=list)


def align(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The logits at the positions the labels refer to: the last position's (n, V) for (n,) labels."""
    if labels.dim() == 1 and logits.dim() == 3:
        return logits[:, -1]
    return logits


Batch = tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]


def block_ends(recipe: Recipe) -> list[int]:
    """The schedule of a run: the optimiser step counts at which a Lightning step (a block of steps) ends.

    Blocks are at most ``ceil(steps / LIGHTNING_STEPS)`` steps long, and also end at every budget of
    the budget curve and, when validation may stop training, every ``eval_every`` steps: the
    callbacks that evaluate (:class:`BudgetCurve`, :class:`Convergence`) run between blocks. The last
    entry is the cap, ``recipe.steps``.
    """
    cap = recipe.steps
    block = max(1, math.ceil(cap / LIGHTNING_STEPS))
    ends = {*range(block, cap, block), *(b for b in recipe.budgets if b < cap), cap}
    if recipe.stops_early:
        ends.update(range(recipe.eval_every, cap, recipe.eval_every))
    return sorted(ends)


class _Blocks(IterableDataset):
    """One item per block of optimiser steps: tokens (r, b, T), labels (r, b) or (r, b, T), and the
    reference strategies' predictions shaped like the labels; ``lengths`` are the blocks' step counts.

    Full batch: r = 1, the whole training split, reused by every step of the block
    (and moved to the device once). Mini-batches: r = the block's length, seeded random batches.
    """

    def __init__(self, split: Split, batch_size: int, lengths: list[int], seed: int) -> None:
        self.tokens, self.labels, self.references = split.tokens, split.labels, split.references
        self.batch_size, self.lengths, self.seed = batch_size, lengths, seed

    def __iter__(self) -> Iterator[Batch]:
        n = len(self.labels)
        if self.batch_size == 0 or self.batch_size >= n:
            for _ in self.lengths:
                yield self.tokens[None], self.labels[None], {k: v[None] for k, v in self.references.items()}
            return
        generator = torch.Generator().manual_seed(self.seed)
        batches = iter(())
        for length in self.lengths:
            picked = []
            while len(picked) < length:
                idx = next(batches, None)
                if idx is None:
                    batches = iter(torch.randperm(n, generator=generator)[: n - n % self.batch_size].split(self.batch_size))
                    continue
                picked.append(idx)
            idx = torch.stack(picked)
            yield self.tokens[idx], self.labels[idx], {k: v[idx] for k, v in self.references.items()}


class _FreshBlocks(IterableDataset):
    """Like :class:`_Blocks` for ``data = "fresh"``: every step trains on ``batch_size`` new sequences.

    The batches of steps ``10k .. 10k + 9`` come from one vectorised draw, ``task.training_batch(10 *
    batch_size, generator)`` seeded with ``derive_seed(seed, f"data:train:draw{k}")`` (one draw per step
    would cost several times more for tasks with per-sequence work, like the in-context Markov chains), so the
    data of a step depends neither on the block schedule nor on the cap.
    """

    def __init__(self, task: Task, batch_size: int, lengths: list[int], seed: int) -> None:
        self.task, self.batch_size, self.lengths, self.seed = task, batch_size, lengths, seed

    def _steps(self) -> Iterator[Batch]:
        for draw in itertools.count():
            generator = torch.Generator().manual_seed(derive_seed(self.seed, f"data:train:draw{draw}"))
            split = self.task.training_batch(FRESH_DRAW_STEPS * self.batch_size, generator)
            for i in range(0, len(split), self.batch_size):
                yield (split.tokens[i:i + self.batch_size], split.labels[i:i + self.batch_size],
                       {k: v[i:i + self.batch_size] for k, v in split.references.items()})

    def __iter__(self) -> Iterator[Batch]:
        steps = self._steps()
        for length in self.lengths:
            tokens, labels, references = zip(*(next(steps) for _ in range(length)))
            yield (torch.stack(tokens), torch.stack(labels),
                   {k: torch.stack([r[k] for r in references]) for k in references[0]})


class PairingModule(pl.LightningModule):
    """Lightning wrapper: the model's own loss, the recipe's optimiser and schedule, a sparse curve.

    Each Lightning step trains one block of the schedule (:func:`block_ends`); what happens
    between blocks (budget evaluations, convergence checks) is in the callbacks. A stop that a
    callback signals ends the epoch before the next block.
    """

    def __init__(self, model: TokenModel, recipe: Recipe) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.model, self.recipe = model, recipe
        self.ends = block_ends(recipe)
        self.log_every = max(1, recipe.steps // CURVE_POINTS)
        self.curve: dict[str, list[float]] = {"step": [], "loss": [], "accuracy": []}
        self.last_loss = math.nan
        self.steps_taken = 0
        self.schedule: torch.optim.lr_scheduler.LRScheduler | None = None
        self.budget_curve: list[dict[str, Any]] = []  # filled by train_model from BudgetCurve
        self.stopped_because = "untrained"  # or "target", "plateau", "cap" once trained

    @property
    def blocks(self) -> int:
        return len(self.ends)

    def training_step(self, batch: Batch, batch_idx: int) -> None:
        tokens, labels, references = batch
        optimizer = self.optimizers(use_pl_optimizer=False)
        clip = self.recipe.grad_clip
        first = self.ends[batch_idx - 1] if batch_idx else 0
        for step in range(first, self.ends[batch_idx]):
            i = (step - first) % len(tokens)
            output = self.model(tokens[i])
            logits = align(output.logits, labels[i])
            loss = self.model.loss(output._replace(logits=logits), labels[i])
            if step % self.log_every == 0 or step == self.recipe.steps - 1:
                self._log(step, loss, logits, labels[i], {k: v[i] for k, v in references.items()})
            optimizer.zero_grad()
            # Plain backward, not manual_backward: the Trainer runs in 32-bit (no loss scaling to apply),
            # and Lightning's per-call hooks cost a measurable share of these sub-millisecond steps.
            loss.backward()
            if clip:
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), clip)
            optimizer.step()
            if self.schedule is not None:
                self.schedule.step()
        self.steps_taken = self.ends[batch_idx]

    def _log(self, step: int, loss: torch.Tensor, logits: torch.Tensor, labels: torch.Tensor,
             references: dict[str, torch.Tensor]) -> None:
        value = loss.item()
        if not math.isfinite(value):
            raise NonFiniteLossError(f"loss became {value} at step {step}")
        logits = logits.detach()
        accuracy = sequence_accuracy(logits, labels).mean().item()
        points = {"step": step, "loss": value, "accuracy": accuracy}
        for name, reference in references.items():
            points[f"agree_{name}"] = agreement(logits, reference, labels).mean().item()
        for key, item in points.items():
            self.curve.setdefault(key, []).append(item)
        if self.logger is not None:
            self.logger.log_metrics({"train_loss": value, "train_accuracy": accuracy}, step=step)
        self.last_loss = value

    def configure_optimizers(self) -> torch.optim.Optimizer:
        optimizer = make_optimizer(self.recipe, self.model.parameters())
        self.schedule = make_schedule(self.recipe, optimizer)
        return optimizer


class BudgetCurve(pl.Callback):
    """Accuracy on the evaluation split at each budget step that training reaches: reported, never used for a
    choice (nothing reads it during the run)."""

    def __init__(self, split: Split, budgets: tuple[int, ...]) -> None:
        self.split, self.budgets = split, set(budgets)
        self.points: list[dict[str, Any]] = []

    def on_train_batch_end(self, trainer: pl.Trainer, module: pl.LightningModule, *args: Any) -> None:
        if module.steps_taken in self.budgets:
            self.points.append({"step": module.steps_taken, "accuracy": evaluate_accuracy(module.model, self.split)})
            module.model.train()


class Convergence(EarlyStopping):
    """Lightning's :class:`EarlyStopping` on validation accuracy, checked every ``eval_every`` optimiser steps
    (between blocks) instead of once per epoch.

    ``target``: stop once the accuracy reaches ``threshold`` (``target`` x the oracle's validation accuracy);
    ``patience``: stop once it has not gained more than ``min_delta`` over ``patience`` steps (rounded
    up to whole checks). No check at the cap itself, where training ends anyway.
    """

    def __init__(self, recipe: Recipe, val: Split, threshold: float | None,
                 label_law: torch.Tensor | None = None) -> None:
        checks = math.ceil(recipe.patience / recipe.eval_every) if recipe.patience else math.inf
        # EarlyStopping stops when accuracy > stopping_threshold; the float just below makes that ">= threshold"
        below = None if threshold is None else math.nextafter(threshold, -math.inf)
        super().__init__(monitor="val_accuracy", mode="max", min_delta=recipe.min_delta, patience=checks,
                         stopping_threshold=below, check_on_train_epoch_end=False)
        self.val, self.label_law, self.eval_every, self.cap = val, label_law, recipe.eval_every, recipe.steps

    def on_train_batch_end(self, trainer: pl.Trainer, module: pl.LightningModule, *args: Any) -> None:
        steps = module.steps_taken
        if steps % self.eval_every or steps >= self.cap:
            return
        accuracy = torch.tensor(evaluate_accuracy(module.model, self.val, self.label_law), dtype=torch.float64)
        module.model.train()
        should_stop, _ = self._evaluate_stopping_criteria(accuracy)
        trainer.should_stop = trainer.should_stop or should_stop

    @property
    def stopped_because(self) -> str | None:
        """``"target"``, ``"plateau"`` or ``None`` (not stopped by validation)."""
        return {EarlyStoppingReason.STOPPING_THRESHOLD: "target",
                EarlyStoppingReason.PATIENCE_EXHAUSTED: "plateau"}.get(self.stopping_reason)


def _device(model: TokenModel) -> torch.device:
    return next((p.device for p in model.parameters()), torch.device("cpu"))


def _chunks(model: TokenModel, split: Split) -> int:
    """Samples per evaluation pass: fewer when every position's attention is kept."""
    T = split.tokens.shape[1]
    if split.labels.dim() == 1:
        return EVAL_CHUNK
    return max(1, min(EVAL_CHUNK, ATTENTION_BUDGET // (T * T)))


@torch.no_grad()
def predict(model: TokenModel, tokens: torch.Tensor, need_attention: bool = True) -> ModelOutput:
    """Forward ``tokens`` in chunks on the model's device; results come back on the CPU."""
    model.eval()
    device = _device(model)
    parts = [model(chunk.to(device), need_attention=need_attention) for chunk in tokens.split(EVAL_CHUNK)]
    merged = []
    for field_parts in zip(*parts):
        merged.append(None if field_parts[0] is None else torch.cat([p.cpu() for p in field_parts]))
    return ModelOutput(*merged)


@torch.no_grad()
def evaluate_accuracy(model: TokenModel, split: Split, label_law: torch.Tensor | None = None) -> float:
    """Accuracy on ``split`` (per sequence over its labelled positions, then the mean), without attention; with
    ``label_law`` (:func:`validation_law`), its expectation over the draw of the labels instead."""
    model.eval()
    device = _device(model)
    return _accuracy(split, lambda tokens, labels: argmax_predictions(
        align(model(tokens.to(device)).logits, labels).cpu()), label_law)


def oracle_accuracy(task: Task, split: Split, label_law: torch.Tensor | None = None) -> float:
    """Accuracy of the task's Bayes predictor on ``split``: the paired optimum on exactly these sequences (with
    ``label_law``, its expectation over the draw of the labels, as :func:`evaluate_accuracy`)."""
    return _accuracy(split, lambda tokens, labels: task.bayes_predict(tokens), label_law)


def _accuracy(split: Split, predict: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
              label_law: torch.Tensor | None) -> float:
    """The mean over ``split`` of each sequence's accuracy of ``predict(tokens, labels)``, chunk by chunk; with
    ``label_law``, of its expected accuracy under that law."""
    hits = []
    for start in range(0, len(split), EVAL_CHUNK):
        tokens, labels = split.tokens[start:start + EVAL_CHUNK], split.labels[start:start + EVAL_CHUNK]
        predictions = predict(tokens, labels)
        hits.append(prediction_accuracy(predictions, labels) if label_law is None
                    else expected_accuracy(predictions, label_law[start:start + EVAL_CHUNK], labels))
    return torch.cat(hits).mean().item()


def validation_law(task: Task, val: Split, recipe: Recipe) -> torch.Tensor | None:
    """The law of ``val``'s labels when the recipe validates by expected accuracy (``validate_by = "expected"``),
    else None: the task's Bayes probabilities, which are the law its labels are drawn from."""
    if recipe.validate_by != "expected":
        return None
    log_probs = task.bayes_log_probs(val.tokens)
    if log_probs is None:
        raise ParamError(f"train.validate_by=expected needs the law of the labels, and {task.spec.name} gives no "
                         f"Bayes probabilities (bayes_log_probs); use validate_by=labels")
    return log_probs.double().exp()


@dataclass
class _Totals:
    """Per-sequence values gathered chunk by chunk over an evaluation split."""

    accuracy: list[torch.Tensor] = field(default_factory=list)
    agreement: dict[str, list[torch.Tensor]] = field(default_factory=dict)
    log_loss: list[torch.Tensor] = field(default_factory=list)
    profile: torch.Tensor | None = None
    targets: dict[str, list[torch.Tensor]] = field(default_factory=dict)

    def add_profile(self, attention: torch.Tensor, T: int) -> None:
        last = attention[:, -1].mean(1)[:, -1, :T].double().sum(0)  # last layer, head mean, final query
        self.profile = last if self.profile is None else self.profile + last


def _sequence_log_loss(log_probs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """(n,) cross-entropy in nats per sequence, averaged over its labelled positions."""
    if labels.dim() == 1:
        return -log_probs.gather(-1, labels[:, None])[:, 0].double()
    scored = labels != IGNORE
    picked = log_probs.gather(-1, labels.clamp(min=0)[..., None])[..., 0].double()
    return -torch.where(scored, picked, 0.0).sum(1) / scored.sum(1)


@torch.no_grad()
def evaluate(model: TokenModel, task: Task, split: Split) -> tuple[dict[str, float], list[float] | None,
                                                                   dict[str, dict[str, Any]]]:
    """Accuracy with its chance and oracle levels on the same sequences, the attention diagnostics, the loss
    metrics and the mean attention profile on ``split``.

    Returns the metrics, the profile (the final query's mean attention over the inputs,
    last layer, heads averaged) and, per attention metric, the layer and head used.
    """
    model.eval()
    device = _device(model)
    T = task.context_length
    totals = _Totals(targets={name: [] for name in split.attention_targets},
                     agreement={name: [] for name in split.references})
    size = _chunks(model, split)
    bayes_log_probs = task.bayes_log_probs(split.tokens[:1]) is not None
    for start in range(0, len(split), size):
        tokens, labels = split.tokens[start:start + size], split.labels[start:start + size]
        output = model(tokens.to(device), need_attention=True)
        logits = align(output.logits, labels).cpu()
        totals.accuracy.append(sequence_accuracy(logits, labels))
        for name, reference in split.references.items():
            totals.agreement[name].append(agreement(logits, reference[start:start + size], labels))
        if bayes_log_probs:
            totals.log_loss.append(_sequence_log_loss(model.log_probs(output._replace(logits=logits)).cpu(), labels))
        if output.attention is not None:
            attention = output.attention.cpu()
            totals.add_profile(attention, T)
            for name, target in split.attention_targets.items():
                totals.targets[name].append(attention_metric(attention, target, start, labels))
    metrics = {"accuracy": torch.cat(totals.accuracy).mean().item(), "chance_accuracy": chance_accuracy(split.labels),
               "oracle_accuracy": oracle_accuracy(task, split)}
    metrics.update({f"agree_{name}": torch.cat(parts).mean().item() for name, parts in totals.agreement.items()})
    diagnostics: dict[str, dict[str, Any]] = {}
    if totals.profile is not None:
        for name, target in split.attention_targets.items():
            metrics[name], diagnostics[name] = _reduce_heads(torch.cat(totals.targets[name]), target)
    if bayes_log_probs:
        metrics.update(_loss_metrics(task, split, torch.cat(totals.log_loss)))
    metrics.update(task.model_metrics(model, split))
    profile = None if totals.profile is None else (totals.profile / len(split)).tolist()
    return metrics, profile, diagnostics


def _reduce_heads(per_head: torch.Tensor, target: Any) -> tuple[float, dict[str, Any]]:
    """Reduce (n, H + 1) per-sequence values (each head, then the head average) by the target's ``head`` rule."""
    means = per_head.T.contiguous().mean(1)  # each column reduced as one contiguous run: the same sum as a 1-D mean
    heads = per_head.shape[1] - 1
    if target.head == "mean":
        value, head = means[-1].item(), "mean"
    elif target.head == "best":
        head = int(means[:heads].argmax())
        value = means[head].item()
    else:
        head = int(target.head) % heads
        value = means[head].item()
    return value, {"kind": target.kind, "layer": target.layer, "head": head}


def _loss_metrics(task: Task, split: Split, model_loss: torch.Tensor) -> dict[str, float]:
    """Cross-entropy of the model and of the Bayes predictor, and the excess with its standard error."""
    n = len(model_loss)
    exact = task.bayes_loss()
    if exact is None:
        bayes = torch.cat([_sequence_log_loss(task.bayes_log_probs(tokens).double(), labels)
                           for tokens, labels in zip(split.tokens.split(EVAL_CHUNK), split.labels.split(EVAL_CHUNK))])
        excess = model_loss - bayes
        bayes_loss = bayes.mean().item()
    else:
        excess, bayes_loss = model_loss - exact, exact
    se = excess.std().item() / math.sqrt(n) if n > 1 else math.nan
    return {"loss": model_loss.mean().item(), "bayes_loss": bayes_loss, "excess_loss": excess.mean().item(),
            "excess_loss_se": se}


def _trainer(blocks: int, out_dir: Path | None, accelerator: str, callbacks: list[pl.Callback]) -> pl.Trainer:
    logger: Any = False
    if out_dir is not None:
        logger = pl.loggers.CSVLogger(str(out_dir), name="", version="")
    return pl.Trainer(
        max_epochs=1,
        limit_train_batches=blocks,
        accelerator=accelerator,
        devices=1,
        logger=logger,
        callbacks=callbacks,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        limit_val_batches=0,
    )


def train_model(
    task: Task, model_spec: ModelSpec, model_params: dict[str, Any], recipe: Recipe, seed: int,
    train: Split, out_dir: Path | None, accelerator: str, val: Split | None = None, evaluation: Split | None = None,
) -> tuple[TokenModel, PairingModule, int]:
    """Build the model from the run's init seed and train it with ``recipe``: on ``train`` (``data = "fixed"``),
    or on new sequences from the task's generator at every step (``"fresh"``).

    With ``val``, a recipe's ``target`` and ``patience`` may stop training early (:class:`Convergence`); with
    ``evaluation``, its accuracy is taken at each of the recipe's budgets (:class:`BudgetCurve`). Returns the
    trained model, its Lightning module (which holds the curve, ``budget_curve`` and ``stopped_because``) and
    the number of optimiser steps taken (0 for models without trainable parameters).
    """
    torch.manual_seed(derive_seed(seed, "init"))
    model = model_spec.build(model_params, task)
    model.fit(train)
    module = PairingModule(model, recipe)
    if not model_spec.trained or recipe.steps == 0 or not any(p.requires_grad for p in model.parameters()):
        return model, module, 0
    if recipe.data == "fresh":
        blocks: IterableDataset = _FreshBlocks(task, recipe.batch_size, _lengths(module.ends), seed)
    else:
        blocks = _Blocks(train, recipe.batch_size, _lengths(module.ends), derive_seed(seed, "batches"))
    budgets = BudgetCurve(evaluation, recipe.budgets) if evaluation is not None else None
    convergence = None
    if recipe.stops_early and val is not None:
        law = validation_law(task, val, recipe)
        threshold = recipe.target * oracle_accuracy(task, val, law) if recipe.target else None
        convergence = Convergence(recipe, val, threshold, law)
    callbacks = [c for c in (budgets, convergence) if c is not None]
    _trainer(module.blocks, out_dir, accelerator, callbacks).fit(
        module, train_dataloaders=DataLoader(blocks, batch_size=None))
    module.budget_curve = budgets.points if budgets is not None else []
    module.stopped_because = (convergence and convergence.stopped_because) or "cap"
    return model, module, module.steps_taken


def _lengths(ends: list[int]) -> list[int]:
    return [end - start for start, end in zip([0, *ends], ends)]


@dataclass
class _Trained:
    model: TokenModel
    module: PairingModule
    steps: int
    recipe: Recipe


def select_recipe(task: Task, model_spec: ModelSpec, model_params: dict[str, Any], recipe: Recipe, seed: int,
                  train: Split, val: Split, out_dir: Path | None, accelerator: str, evaluation: Split | None = None,
                  ) -> tuple[_Trained, dict[str, float]]:
    """Train once per candidate of the recipe's sweep and keep the best on ``val``.

    Every candidate starts from the same initialisation; ties go to the earlier candidate.
    Returns the kept training and the validation accuracy of each candidate (empty without a sweep).
    """
    candidates = recipe.candidates()
    best: tuple[float, _Trained] | None = None
    selection: dict[str, float] = {}
    sweeping = len(candidates) > 1 or bool(recipe.lr_grid or recipe.wd_grid)
    law = validation_law(task, val, recipe) if sweeping else None  # the same for every candidate
    for candidate in candidates:
        model, module, steps = train_model(task, model_spec, model_params, candidate, seed, train, out_dir,
                                           accelerator, val, evaluation)
        trained = _Trained(model, module, steps, candidate)
        if not sweeping:
            return trained, selection
        accuracy = evaluate_accuracy(model, val, law)
        selection[_candidate_key(recipe, candidate)] = accuracy
        if best is None or accuracy > best[0]:
            best = (accuracy, trained)
    assert best is not None
    return best[1], selection


def _candidate_key(recipe: Recipe, candidate: Recipe) -> str:
    if not recipe.wd_grid:
        return f"{candidate.lr:g}"
    return f"lr={candidate.lr:g},wd={candidate.weight_decay:g}"


def run_pairing(
    task: Task,
    model_spec: ModelSpec,
    model_params: dict[str, Any],
    recipe: Recipe,
    seed: int,
    out_dir: Path | None = None,
    accelerator: str = "auto",
    evaluate_at: Sequence[Mapping[str, Any]] = (),
) -> PairingResult:
    """Train ``model_spec`` on ``task`` with ``recipe`` and evaluate it, also at each setting of ``evaluate_at``.

    Seeds: each split of the task has its own data seed and the model's
    initialisation has another, all derived from ``seed``. On the CPU the same
    arguments give bit-identical metrics.

    With ``recipe.lr_grid`` and/or ``recipe.wd_grid`` the model is trained once per
    candidate from the same initialisation, and the one with the best validation
    accuracy is kept (see :func:`select_recipe`). The test split is never looked at
    during the selection or for stopping; its accuracy at the recipe's budgets is only reported.
    """
    started = time.perf_counter()
    splits = {name: task.make_split(name, seed) for name in dict.fromkeys(("train", "val", task.eval_split))}
    kept, selection = select_recipe(task, model_spec, model_params, recipe, seed, splits["train"], splits["val"],
                                    out_dir, accelerator, splits[task.eval_split])
    # Train, validation, then the evaluation split (which may be one of them), each evaluated once:
    # a stochastic model (the uniform guess) then gives one accuracy per split, drawn in a fixed order.
    metrics: dict[str, float] = {}
    for name, split in splits.items():
        if name == task.eval_split:
            eval_metrics, attention_profile, diagnostics = evaluate(kept.model, task, split)
            metrics[f"{name}_accuracy"] = eval_metrics["accuracy"]
        else:
            metrics[f"{name}_accuracy"] = evaluate_accuracy(kept.model, split)
    bayes = task.bayes_accuracy()
    accuracy = eval_metrics.pop("accuracy")
    metrics.update(accuracy=accuracy, bayes_accuracy=bayes, normalized_accuracy=accuracy / bayes)
    metrics.update(eval_metrics)
    evaluations = [evaluate_setting(kept.model, task, model_spec, overrides, seed, model_params)
                   for overrides in evaluate_at]
    # the recipe, then what training did: "steps" is the number taken (0 without training, fewer on an early stop)
    train_info = {**kept.recipe.to_json(), "steps": kept.steps, "max_steps": kept.recipe.steps,
                  "stopped_because": kept.module.stopped_because, "final_loss": kept.module.last_loss,
                  "wall_seconds": time.perf_counter() - started}
    if selection:
        train_info.update(lr_grid=list(recipe.lr_grid), wd_grid=list(recipe.wd_grid),
                          lr_selection_val_accuracy=selection)
    budget_curve = [p for p in kept.module.budget_curve if p["step"] != kept.steps]
    budget_curve.append({"step": kept.steps, "accuracy": accuracy, "final": True})
    return PairingResult(metrics=metrics, train=train_info, curve=kept.module.curve,
                         attention_profile=attention_profile, diagnostics=diagnostics,
                         budget_curve=budget_curve, evaluations=evaluations)


def evaluate_setting(model: TokenModel, task: Task, model_spec: ModelSpec, overrides: Mapping[str, Any],
                     seed: int, model_params: Mapping[str, Any]) -> dict[str, Any]:
    """The trained ``model`` evaluated on a test split of ``task`` at ``overrides`` (say a longer context length).

    The task is rebuilt with ``spec.create({**params, **overrides})``, with its own Bayes optimum, and its
    test split has its own seed stream. The setting is ``not_applicable``, with the reason, when the task
    does not declare an overridden parameter in ``evaluation_axes``, or when it changes the context length
    and the model declares ``fixed_length``. The model, built at the training length, is fed the longer
    sequences as they are; an oracle (``ModelSpec.oracle``: it reads the task's answer, and trains nothing) is
    built again from ``model_params`` for the setting's task, whose answer it then reads (the task at the
    training length may not even apply: causal-graph's graph has one parent per training position).
    """
    entry: dict[str, Any] = {"overrides": dict(overrides)}
    undeclared = [key for key in overrides if key not in task.spec.evaluation_axes]
    if undeclared:
        reason = task.spec.evaluation_note or (f"{task.spec.name} is not evaluated at other values of "
                                               f"{', '.join(undeclared)} (not among its evaluation axes)")
        return {**entry, "status": "not_applicable", "reason": reason}
    setting = task.spec.create({**task.params, **overrides})
    if setting.context_length != task.context_length and model_spec.fixed_length:
        return {**entry, "status": "not_applicable", "reason": model_spec.fixed_length}
    if model_spec.oracle:
        model = model_spec.build(model_params, setting)
    generator = torch.Generator().manual_seed(derive_seed(seed, "data:test:" + canonical_json(dict(overrides))))
    split = setting.generate(setting.split_size("test"), generator)
    try:
        metrics, _, _ = evaluate(model, setting, split)
    except NotApplicable as exc:  # a limit set by the model's parameters (a transformer with learned positions)
        return {**entry, "status": "not_applicable", "reason": str(exc)}
    metrics["bayes_accuracy"] = setting.bayes_accuracy()
    return {**entry, "status": "ok", "metrics": metrics}
