"""Train a cell of replicas with PyTorch Lightning, then evaluate each: one pairing is a cell of one.

A cell is one task setting x one model x a stack of replicas (seeds x the candidates of a learning
rate and weight decay sweep). Each replica has its own initialisation (from its run seed), data
stream, optimiser, schedule, clipping, stop, budget curve and record; the replicas of one seed share
that seed's data stream, which is drawn once. One step trains every live replica, in one vectorised
forward and backward where that pays, else one after another (:mod:`tokbench.replicas`); either way
a replica's numbers are those it gets alone, bit for bit when the replicas go one after another.

The Trainer drives training in a few blocks of optimiser steps (one Lightning
step per block, one epoch in all), so Lightning's per-step machinery, about a
millisecond on a CPU, is paid per block rather than per optimiser step. Inside a
block the steps are plain autograd and optimiser calls: the small models of this
benchmark take well under a millisecond per step, and would otherwise spend most
of their time in the framework. Mini-batch recipes draw a new batch per step, from
the training split or, with ``data = "fresh"``, from the task's generator.

The schedule (:func:`block_ends`) also ends a block at each budget of the budget
curve and at each validation check; the callbacks run there, between blocks, per replica:
:class:`BudgetCurve` records the evaluation split's accuracy (never used for a
choice) and :class:`Convergence`, Lightning's ``EarlyStopping``, stops the replica at
the recipe's target or plateau; the others go on. There is no other loop.

Scoring follows the task (contract v2): a model's logits are first aligned to
the task's labels (:func:`align`), then the loss, the accuracy and every
diagnostic are computed over the labelled positions only. A task or model of an older
contract is run through the wrappers of :mod:`tokbench.compat` (:func:`run_cell`,
:func:`train_replicas` and :func:`evaluate_setting` wrap what they are given or build), and
the plugin's own objects are left as they were created.
"""
from __future__ import annotations

import itertools
import logging
import math
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import EarlyStopping
from pytorch_lightning.callbacks.early_stopping import EarlyStoppingReason
from torch.utils.data import DataLoader, IterableDataset

from tokbench.checkpoints import CheckpointEvery, Checkpoints, Resumed
from tokbench.compat import adapt_task, build_model
from tokbench.errors import NotApplicable, ParamError
from tokbench.metrics import (agreement, argmax_predictions, attention_metric, chance_accuracy, expected_accuracy,
                              prediction_accuracy, sequence_accuracy)
from tokbench.model import ModelOutput, TokenModel
from tokbench.optim import make_optimizer, make_schedule
from tokbench.outputs import RunOutputs
from tokbench.replicas import NonFiniteLossError, Replica, StackStep, choose_stacking
from tokbench.results import canonical_json
from tokbench.seeding import derive_seed
from tokbench.specs import ModelSpec, Recipe, candidate_key
from tokbench.task import IGNORE, Split, Task

CURVE_POINTS = 100  # logged points per training curve
LIGHTNING_STEPS = 10  # Lightning steps (blocks of optimiser steps) per training run
EVAL_CHUNK = 8192  # samples per evaluation forward pass, to bound memory
LAW_BUDGET = 2**24  # Bayes probabilities (sequences x scored positions x vocabulary) computed at once
LOGIT_BUDGET = 2**28  # logits (sequences x positions x vocabulary) of one evaluation pass: 1 GiB of float32
FRESH_DRAW_STEPS = 10  # steps whose fresh batches are drawn at once, from one seed
ATTENTION_BUDGET = 2**24  # attention entries per layer and head kept at once when every position is a query

for _name in ("pytorch_lightning", "lightning.pytorch", "lightning_fabric", "lightning.fabric"):
    logging.getLogger(_name).setLevel(logging.ERROR)
warnings.filterwarnings("ignore", message=r".*does not have many workers.*")
warnings.filterwarnings("ignore", message=r".*LightningModule.*has parameters that were not used.*")
warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)` is deprecated.*")  # Lightning vs newer torch


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
    size: dict[str, int | None] | None = None  # the trained model's TokenModel.size()
    samples: torch.Tensor | None = None  # with RunOutputs.log_samples: the evaluation split's argmax predictions


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
    if 0 < recipe.sweep_steps < cap:  # where a pruning sweep chooses (one candidate's recipe has no grid left)
        ends.add(recipe.sweep_steps)
    return sorted(ends)


class _Blocks(IterableDataset):
    """One item per block of optimiser steps: tokens (r, b, T), labels (r, b) or (r, b, T), and the
    reference strategies' predictions shaped like the labels; ``lengths`` are the blocks' step counts,
    and the items start at block ``start`` (a resumed run), with the batches those blocks have in a full run.

    Full batch: r = 1, the whole training split, reused by every step of the block
    (and moved to the device once). Mini-batches: r = the block's length, seeded random batches.
    """

    def __init__(self, split: Split, batch_size: int, lengths: list[int], seed: int, start: int = 0) -> None:
        self.tokens, self.labels, self.references = split.tokens, split.labels, split.references
        self.batch_size, self.lengths, self.seed, self.start = batch_size, lengths, seed, start

    def __iter__(self) -> Iterator[Batch]:
        n = len(self.labels)
        if self.batch_size == 0 or self.batch_size >= n:
            for _ in self.lengths[self.start:]:
                yield self.tokens[None], self.labels[None], {k: v[None] for k, v in self.references.items()}
            return
        generator = torch.Generator().manual_seed(self.seed)
        batches = iter(())
        for block, length in enumerate(self.lengths):
            picked = []
            while len(picked) < length:
                idx = next(batches, None)
                if idx is None:
                    batches = iter(torch.randperm(n, generator=generator)[: n - n % self.batch_size].split(self.batch_size))
                    continue
                picked.append(idx)
            if block < self.start:  # drawn only to advance the generator as the full run did
                continue
            idx = torch.stack(picked)
            yield self.tokens[idx], self.labels[idx], {k: v[idx] for k, v in self.references.items()}


class _FreshBlocks(IterableDataset):
    """Like :class:`_Blocks` for ``data = "fresh"``: every step trains on ``batch_size`` new sequences.

    The batches of steps ``10k .. 10k + 9`` come from one vectorised draw, ``task.training_batch(10 *
    batch_size, generator)`` seeded with ``derive_seed(seed, f"data:train:draw{k}")`` (one draw per step
    would cost several times more for tasks with per-sequence work, like the in-context Markov chains), so the
    data of a step depends neither on the block schedule nor on the cap, and a run resumed at block ``start``
    draws only from the step it resumes at.
    """

    def __init__(self, task: Task, batch_size: int, lengths: list[int], seed: int, start: int = 0) -> None:
        self.task, self.batch_size, self.lengths, self.seed, self.start = task, batch_size, lengths, seed, start

    def _steps(self, first_draw: int) -> Iterator[Batch]:
        for draw in itertools.count(first_draw):
            generator = torch.Generator().manual_seed(derive_seed(self.seed, f"data:train:draw{draw}"))
            split = self.task.training_batch(FRESH_DRAW_STEPS * self.batch_size, generator)
            for i in range(0, len(split), self.batch_size):
                yield (split.tokens[i:i + self.batch_size], split.labels[i:i + self.batch_size],
                       {k: v[i:i + self.batch_size] for k, v in split.references.items()})

    def __iter__(self) -> Iterator[Batch]:
        first = sum(self.lengths[:self.start])
        steps = itertools.islice(self._steps(first // FRESH_DRAW_STEPS), first % FRESH_DRAW_STEPS, None)
        for length in self.lengths[self.start:]:
            tokens, labels, references = zip(*(next(steps) for _ in range(length)))
            yield (torch.stack(tokens), torch.stack(labels),
                   {k: torch.stack([r[k] for r in references]) for k in references[0]})


class _Streams(IterableDataset):
    """The data of a stack: per block, one item per stream (:class:`_Blocks` or :class:`_FreshBlocks`, one per
    run seed), or None for a stream that no live replica reads any more (``live(k)``), which is then not drawn."""

    def __init__(self, streams: list[_Blocks | _FreshBlocks], live: Callable[[int], bool]) -> None:
        self.streams, self.live = streams, live

    def __iter__(self) -> Iterator[list[Batch | None]]:
        iterators = [iter(stream) for stream in self.streams]
        first = self.streams[0]
        for _ in first.lengths[first.start:]:
            yield [next(it) if self.live(k) else None for k, it in enumerate(iterators)]


def _step_loss(model: TokenModel, tokens: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The model's own training loss on one batch, and its logits aligned to the labels."""
    output = model(tokens)
    logits = align(output.logits, labels)
    return model.loss(output._replace(logits=logits), labels), logits


class StackModule(pl.LightningModule):
    """Lightning wrapper of a stack of replicas: each replica's own loss, optimiser, schedule and sparse curve.

    Each Lightning step trains one block of the schedule (:func:`block_ends`, shared by the replicas);
    what happens between blocks (budget evaluations, convergence checks) is in the callbacks, per
    replica. A replica that stops leaves the stack; the epoch ends once none is left. A stack resumed from
    a checkpoint (:class:`~tokbench.checkpoints.Resumed`) starts at its block, its optimisers and schedules
    restored from it, and torch's random state too, as the first step of the resumed run begins.
    """

    def __init__(self, replicas: list[Replica], stacking: str, resumed: Resumed | None = None) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.replicas, self.stacking, self.resumed = replicas, stacking, resumed
        self.start = 0 if resumed is None else resumed.blocks
        self.models = torch.nn.ModuleList(r.model for r in replicas)  # so that Lightning moves them to the device
        recipe = replicas[0].recipe
        self.ends = block_ends(recipe)
        self.log_every = max(1, recipe.steps // CURVE_POINTS)
        self.step: StackStep | None = None  # chosen at the first step, on its batches

    @property
    def blocks(self) -> int:
        """The blocks this Trainer runs: those after ``start``."""
        return len(self.ends) - self.start

    def training_step(self, batch: list[Batch | None], batch_idx: int) -> None:
        if self.resumed is not None and batch_idx == 0:  # not sooner: the DataLoader drew from it as it started
            torch.set_rng_state(self.resumed.rng)
        block = self.start + batch_idx
        first = self.ends[block - 1] if block else 0
        live = [r for r in self.replicas if r.active]
        for step in range(first, self.ends[block]):
            picked = []
            for r in live:
                tokens, labels, references = batch[r.stream]
                i = (step - first) % len(tokens)
                picked.append((tokens[i], labels[i], {k: v[i] for k, v in references.items()}))
            models, tokens, labels = [r.model for r in live], [p[0] for p in picked], [p[1] for p in picked]
            if self.step is None:
                self.step = choose_stacking(self.stacking, models, _step_loss, tokens, labels)
            for r in live:
                r.optimizer.zero_grad()
            for r, (loss, logits), (_, labels_, references) in zip(live, self.step(models, tokens, labels), picked):
                if step % self.log_every == 0 or step == r.recipe.steps - 1:
                    try:
                        logged = r.log(step, loss, logits, labels_, references)
                    except NonFiniteLossError as exc:
                        r.fail(exc)
                        continue
                    suffix = f"_{r.index}" if len(self.replicas) > 1 else ""
                    for logger in self.loggers:  # at the optimiser step, not Lightning's (a block of steps)
                        logger.log_metrics({k + suffix: v for k, v in logged.items()}, step=step)
                if r.recipe.grad_clip:
                    torch.nn.utils.clip_grad_norm_(r.model.parameters(), r.recipe.grad_clip)
                r.optimizer.step()
                if r.schedule is not None:
                    r.schedule.step()
            live = [r for r in live if r.active]
        for r in live:
            r.steps_taken = self.ends[block]

    def on_train_batch_end(self, *args: Any) -> None:  # after the callbacks, which may have stopped replicas
        if not any(r.active for r in self.replicas):
            self.trainer.should_stop = True

    def configure_optimizers(self) -> list[torch.optim.Optimizer]:
        for r in self.replicas:
            r.optimizer = make_optimizer(r.recipe, r.model.parameters())
            r.schedule = make_schedule(r.recipe, r.optimizer)
        for r, state in zip(self.replicas, self.resumed.replicas if self.resumed else ()):
            r.load_optimizer_state(state)  # here, after Lightning moved the models to the device
        return [r.optimizer for r in self.replicas]


class BudgetCurve(pl.Callback):
    """A replica's accuracy on its evaluation split at each budget step that it reaches: reported, never used
    for a choice (nothing reads it during the run)."""

    def __init__(self, replica: Replica, split: Split, budgets: tuple[int, ...]) -> None:
        self.replica, self.split, self.budgets = replica, split, set(budgets)

    def on_train_batch_end(self, trainer: pl.Trainer, module: pl.LightningModule, *args: Any) -> None:
        r = self.replica
        if r.active and r.steps_taken in self.budgets:
            r.budget_curve.append({"step": r.steps_taken, "accuracy": evaluate_accuracy(r.model, self.split)})
            r.model.train()


class Convergence(EarlyStopping):
    """Lightning's :class:`EarlyStopping` on a replica's validation accuracy, checked every ``eval_every``
    optimiser steps (between blocks) instead of once per epoch; a stop ends that replica only.

    ``target``: stop once the accuracy reaches ``threshold`` (``target`` x the oracle's validation accuracy);
    ``patience``: stop once it has not gained more than ``min_delta`` over ``patience`` steps (rounded
    up to whole checks). No check at the cap itself, where training ends anyway.
    """

    def __init__(self, replica: Replica, val: Split, threshold: float | None,
                 label_law: LabelLaw | None = None) -> None:
        recipe = replica.recipe
        checks = math.ceil(recipe.patience / recipe.eval_every) if recipe.patience else math.inf
        # EarlyStopping stops when accuracy > stopping_threshold; the float just below makes that ">= threshold"
        below = None if threshold is None else math.nextafter(threshold, -math.inf)
        super().__init__(monitor="val_accuracy", mode="max", min_delta=recipe.min_delta, patience=checks,
                         stopping_threshold=below, check_on_train_epoch_end=False)
        self.replica, self.val, self.label_law = replica, val, label_law
        self.eval_every, self.cap = recipe.eval_every, recipe.steps

    @property
    def state_key(self) -> str:  # one per replica: Lightning refuses two stateful callbacks with one key
        return self._generate_state_key(monitor=self.monitor, mode=self.mode, replica=self.replica.index)

    def on_train_batch_end(self, trainer: pl.Trainer, module: pl.LightningModule, *args: Any) -> None:
        r = self.replica
        if not r.active or r.steps_taken % self.eval_every or r.steps_taken >= self.cap:
            return
        accuracy = torch.tensor(evaluate_accuracy(r.model, self.val, self.label_law), dtype=torch.float64)
        r.model.train()
        r.val_curve["step"].append(r.steps_taken)
        r.val_curve["accuracy"].append(accuracy.item())
        should_stop, _ = self._evaluate_stopping_criteria(accuracy)
        if should_stop:
            r.stop(self.stopped_because)

    @property
    def stopped_because(self) -> str | None:
        """``"target"``, ``"plateau"`` or ``None`` (not stopped by validation)."""
        return {EarlyStoppingReason.STOPPING_THRESHOLD: "target",
                EarlyStoppingReason.PATIENCE_EXHAUSTED: "plateau"}.get(self.stopping_reason)


class SweepPruning(pl.Callback):
    """A sweep that keeps some candidates early: once one seed's candidates have trained ``sweep_steps`` steps,
    the one with the best validation accuracy (ties: the earlier candidate) and, with ``sweep_margin``, every other
    within that margin of it train on, to their own stops; the others stop, ``"pruned"``. Or sooner, as soon as a
    candidate reaches its target, that one alone is kept (where several reach it at the same check, the best of
    them) and the others stop there: none of them could beat it by more than ``1 - target`` of the oracle's
    validation accuracy. A candidate whose loss became non-finite is left out here (it fails the pairing at the
    end, as a full sweep would). Successive halving with one rung (Jamieson & Talwalkar 2016): each kept run is
    exactly the run that candidate gets alone, as its schedule is sized to the cap whether or not the others go
    on. The margin is for a flat start or a slow climb, where the best at ``sweep_steps`` may lead by noise.
    """

    def __init__(self, candidates: Sequence[Replica], val: Split, label_law: LabelLaw | None) -> None:
        self.candidates, self.val, self.label_law = candidates, val, label_law
        self.at, self.margin = candidates[0].recipe.sweep_steps, candidates[0].recipe.sweep_margin

    def on_train_batch_end(self, trainer: pl.Trainer, module: pl.LightningModule, *args: Any) -> None:
        if self.candidates[0].selected_at is not None:
            return
        # the target's check runs just before this one (Convergence), so a solved candidate stopped at this step
        solved = [r for r in self.candidates if r.stopped_because == "target"]
        if not solved and not any(r.active and r.steps_taken == self.at for r in self.candidates):
            return
        step = solved[0].steps_taken if solved else self.at
        compared = [r for r in self.candidates if r.error is None]
        accuracies = {r.index: evaluate_accuracy(r.model, self.val, self.label_law) for r in compared}
        best = max(solved or compared, key=lambda r: accuracies[r.index])  # max keeps the first of equals
        near = [] if solved or not self.margin else \
            [r for r in compared if accuracies[r.index] >= accuracies[best.index] - self.margin]
        for r in compared:
            r.model.train()
            r.selected_at, r.selection_accuracy = step, accuracies[r.index]
            if r is not best and r not in near and r.active:
                r.stop("pruned")


def _device(model: TokenModel) -> torch.device:
    return next((p.device for p in model.parameters()), torch.device("cpu"))


def _logit_chunk(model: TokenModel, T: int) -> int:
    """Sequences per forward pass whose logits, (n, T, V) for a model that predicts at every position, hold at most
    :data:`LOGIT_BUDGET` numbers (8192 sequences of T = 512 at V = 8192 would be 128 GB of them)."""
    return max(1, min(EVAL_CHUNK, LOGIT_BUDGET // (T * model.vocab_size)))


def _chunks(model: TokenModel, split: Split) -> int:
    """Samples per evaluation pass: fewer when every position's attention is kept, or the logits are large."""
    T = split.tokens.shape[1]
    size = _logit_chunk(model, T)
    if split.labels.dim() == 1:
        return size
    return max(1, min(size, ATTENTION_BUDGET // (T * T)))


@torch.no_grad()
def predict(model: TokenModel, tokens: torch.Tensor, need_attention: bool = True) -> ModelOutput:
    """Forward ``tokens`` in chunks on the model's device; results come back on the CPU."""
    model.eval()
    device = _device(model)
    parts = [model(chunk.to(device), need_attention=need_attention)
             for chunk in tokens.split(_logit_chunk(model, tokens.shape[1]))]
    merged = []
    for field_parts in zip(*parts):
        merged.append(None if field_parts[0] is None else torch.cat([p.cpu() for p in field_parts]))
    return ModelOutput(*merged)


@torch.no_grad()
def evaluate_accuracy(model: TokenModel, split: Split, label_law: LabelLaw | None = None) -> float:
    """Accuracy on ``split`` (per sequence over its labelled positions, then the mean), without attention; with
    ``label_law`` (:func:`validation_law`), its expectation over the draw of the labels instead."""
    model.eval()
    device = _device(model)
    return _accuracy(split, lambda tokens, labels: argmax_predictions(
        align(model(tokens.to(device)).logits, labels).cpu()), label_law, _logit_chunk(model, split.tokens.shape[1]))


def oracle_accuracy(task: Task, split: Split, label_law: LabelLaw | None = None) -> float:
    """Accuracy of the task's Bayes predictor on ``split``: the paired optimum on exactly these sequences (with
    ``label_law``, its expectation over the draw of the labels, as :func:`evaluate_accuracy`)."""
    return _accuracy(split, lambda tokens, labels: task.bayes_predict(tokens), label_law)


def _accuracy(split: Split, predict: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
              label_law: LabelLaw | None, size: int = EVAL_CHUNK) -> float:
    """The mean over ``split`` of each sequence's accuracy of ``predict(tokens, labels)``, ``size`` sequences at a
    time; with ``label_law``, of its expected accuracy under that law."""
    hits = []
    for start in range(0, len(split), size):
        tokens, labels = split.tokens[start:start + size], split.labels[start:start + size]
        predictions = predict(tokens, labels)
        hits.append(prediction_accuracy(predictions, labels) if label_law is None
                    else label_law.expected(predictions, start))
    return torch.cat(hits).mean().item()


def _law_chunks(task: Task, split: Split) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """``(tokens, labels)`` in chunks whose Bayes log-probabilities hold at most :data:`LAW_BUDGET` numbers
    (a task scored at every position returns (n, T, V) of them: 4 GB for 2000 sequences at T = 512, V = 1024)."""
    per_sequence = task.vocab_size * (split.labels.shape[1] if split.labels.dim() == 2 else 1)
    size = max(1, min(EVAL_CHUNK, LAW_BUDGET // per_sequence))
    for start in range(0, len(split), size):
        yield split.tokens[start:start + size], split.labels[start:start + size]


@dataclass
class LabelLaw:
    """The law of a split's labels where they are scored: what expected accuracy reads.

    ``probs`` is (n, V) for labels (n,); for labels (n, T) it is (n, K, V) at each sequence's K scored positions
    ``positions`` (n, K), padded where a sequence has fewer (``scored`` False), so that a task scored at a few
    positions of a long context keeps K, not T, rows of V probabilities per sequence.
    """

    probs: torch.Tensor
    positions: torch.Tensor | None = None
    scored: torch.Tensor | None = None

    def expected(self, predictions: torch.Tensor, start: int) -> torch.Tensor:
        """(n,) float64 expected accuracy of ``predictions`` for the sequences ``start .. start + n`` of the split."""
        rows = slice(start, start + len(predictions))
        if self.positions is None:
            return expected_accuracy(predictions, self.probs[rows], torch.zeros(len(predictions), dtype=torch.long))
        picked = predictions.gather(1, self.positions[rows])
        return expected_accuracy(picked, self.probs[rows], torch.where(self.scored[rows], 0, IGNORE))


def validation_law(task: Task, val: Split, recipe: Recipe) -> LabelLaw | None:
    """The law of ``val``'s labels when the recipe validates by expected accuracy (``validate_by = "expected"``),
    else None: the task's Bayes probabilities, which are the law its labels are drawn from, kept at the scored
    positions only."""
    if recipe.validate_by != "expected":
        return None
    parts = []
    for tokens, labels in _law_chunks(task, val):
        log_probs = task.bayes_log_probs(tokens)
        if log_probs is None:
            raise ParamError(f"train.validate_by=expected needs the law of the labels, and {task.spec.name} gives no "
                             f"Bayes probabilities (bayes_log_probs); use validate_by=labels")
        if labels.dim() == 1:
            parts.append((log_probs.double().exp(), None, None))
            continue
        scored = labels != IGNORE
        order = torch.sort((~scored).to(torch.int8), dim=1, stable=True).indices  # scored positions first, in order
        K = int(scored.sum(1).max())
        positions = order[:, :K]
        rows = log_probs.gather(1, positions[..., None].expand(-1, -1, log_probs.shape[-1]))
        parts.append((rows.double().exp(), positions, scored.gather(1, positions)))
    if parts[0][1] is None:
        return LabelLaw(torch.cat([p for p, _, _ in parts]))
    K = max(p.shape[1] for p, _, _ in parts)  # chunks may differ in their largest count: pad to the widest

    def pad(t: torch.Tensor, value: float | bool) -> torch.Tensor:  # dim 1 to K
        return torch.nn.functional.pad(t, (0, 0) * (t.dim() - 2) + (0, K - t.shape[1]), value=value)

    return LabelLaw(torch.cat([pad(p, 0.0) for p, _, _ in parts]), torch.cat([pad(i, 0) for _, i, _ in parts]),
                    torch.cat([pad(m, False) for _, _, m in parts]))


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
def evaluate(model: TokenModel, task: Task, split: Split, predictions: list[torch.Tensor] | None = None,
             ) -> tuple[dict[str, float], list[float] | None, dict[str, dict[str, Any]]]:
    """Accuracy with its chance and oracle levels on the same sequences, the attention diagnostics, the loss
    metrics and the mean attention profile on ``split``; with ``predictions``, each chunk's argmax predictions
    (those scored) are appended to it.

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
        if predictions is not None:
            predictions.append(argmax_predictions(logits))
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
                           for tokens, labels in _law_chunks(task, split)])
        excess = model_loss - bayes
        bayes_loss = bayes.mean().item()
    else:
        excess, bayes_loss = model_loss - exact, exact
    se = excess.std().item() / math.sqrt(n) if n > 1 else math.nan
    return {"loss": model_loss.mean().item(), "bayes_loss": bayes_loss, "excess_loss": excess.mean().item(),
            "excess_loss_se": se}


def _trainer(blocks: int, outputs: RunOutputs | None, accelerator: str, callbacks: list[pl.Callback]) -> pl.Trainer:
    """A Trainer of ``blocks`` steps, with the run's own loggers and callbacks (:mod:`tokbench.outputs`)."""
    return pl.Trainer(
        max_epochs=1,
        limit_train_batches=blocks,
        accelerator=accelerator,
        devices=1,
        logger=(outputs and outputs.lightning_loggers()) or False,
        callbacks=[*callbacks, *(outputs.callbacks if outputs else ())],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        limit_val_batches=0,
    )


@dataclass
class SeedData:
    """The splits of one run seed that training reads: ``train``; ``val`` for stops; ``evaluation`` for budgets."""

    train: Split
    val: Split | None = None
    evaluation: Split | None = None


def train_replicas(
    task: Task, model_spec: ModelSpec, model_params: dict[str, Any], plan: Sequence[tuple[Recipe, int]],
    data: Mapping[int, SeedData], outputs: RunOutputs | None, accelerator: str, stacking: str = "auto",
    checkpoints: Checkpoints | None = None,
) -> list[Replica]:
    """Build one model per ``(recipe, seed)`` of ``plan`` from its seed's init seed and train them as one stack.

    The recipes may differ in ``lr`` and ``weight_decay`` only (the block schedule is shared). Each replica
    trains on ``data[seed].train`` (``data = "fixed"``) or on new sequences from the task's generator drawn
    from its seed (``"fresh"``), as it would alone; with ``val``, its recipe's ``target`` and ``patience`` may
    stop it early (:class:`Convergence`); with ``evaluation``, its accuracy is taken at each budget
    (:class:`BudgetCurve`). ``stacking`` (:data:`tokbench.replicas.STACKINGS`) says how a step computes the
    live replicas: ``auto`` vmaps them off the CPU where the model allows it. With ``checkpoints``, a stack that
    trains long writes its state there now and then, and starts from the state written there by an earlier run
    of the same stack (:mod:`tokbench.checkpoints`). Returns the replicas in ``plan`` order; one whose loss
    became non-finite has its ``error`` set, and the others went on. Models without trainable parameters (or
    ``steps = 0``) are built and fitted, not trained.
    """
    task = adapt_task(task)  # an older contract's task and models run through the adapter's wrappers
    replicas = []
    for index, (recipe, seed) in enumerate(plan):
        torch.manual_seed(derive_seed(seed, "init"))
        model = build_model(model_spec, model_params, task)
        model.fit(data[seed].train)
        replicas.append(Replica(model, recipe, seed, index=index))
    trainable = [r for r in replicas
                 if model_spec.trained and r.recipe.steps and any(p.requires_grad for p in r.model.parameters())]
    if not trainable:
        return replicas
    recipe = trainable[0].recipe
    if any(replace(r.recipe, lr=recipe.lr, weight_decay=recipe.weight_decay) != recipe for r in trainable):
        raise ValueError("the replicas of a stack may differ in lr and weight_decay only")
    ends = block_ends(recipe)
    resumed = checkpoints.load(trainable) if checkpoints is not None else None
    start = 0 if resumed is None else resumed.blocks
    if resumed is not None:
        for r, state in zip(trainable, resumed.replicas):
            r.load_state_dict(state)
            r.resumed_at.append(ends[start - 1])
            r.earlier_seconds = resumed.seconds
    seeds = list(dict.fromkeys(r.seed for r in trainable))  # one data stream per seed, shared by its replicas
    lengths = _lengths(ends)
    streams: list[_Blocks | _FreshBlocks] = [
        _FreshBlocks(task, recipe.batch_size, lengths, seed, start) if recipe.data == "fresh"
        else _Blocks(data[seed].train, recipe.batch_size, lengths, derive_seed(seed, "batches"), start)
        for seed in seeds]
    callbacks: list[pl.Callback] = []
    stops: dict[int, Convergence] = {}
    thresholds: dict[int, tuple[torch.Tensor | None, float | None]] = {}  # per seed: the validation law, the target
    for r in trainable:
        r.stream = seeds.index(r.seed)
        seed_data = data[r.seed]
        if seed_data.evaluation is not None:
            callbacks.append(BudgetCurve(r, seed_data.evaluation, r.recipe.budgets))
        if r.recipe.stops_early and seed_data.val is not None:
            if r.seed not in thresholds:
                law = validation_law(task, seed_data.val, recipe)
                target = recipe.target * oracle_accuracy(task, seed_data.val, law) if recipe.target else None
                thresholds[r.seed] = (law, target)
            law, target = thresholds[r.seed]
            stops[r.index] = Convergence(r, seed_data.val, target, law)
            if resumed is not None:
                stops[r.index].load_state_dict(resumed.stops[r.index])
            callbacks.append(stops[r.index])
    if 0 < recipe.sweep_steps < recipe.steps:  # the candidates of each seed (the stack: seeds x the candidates)
        for seed in seeds:
            candidates = [r for r in trainable if r.seed == seed]
            if len(candidates) > 1 and data[seed].val is not None:
                callbacks.append(SweepPruning(candidates, data[seed].val, validation_law(task, data[seed].val, recipe)))
    if checkpoints is not None:  # last: it saves what the callbacks above did after a block
        callbacks.append(CheckpointEvery(checkpoints, trainable, stops, start, 0.0 if resumed is None else resumed.seconds))
    module = StackModule(trainable, stacking, resumed)
    live = _Streams(streams, lambda k: any(r.active and r.stream == k for r in trainable))
    if module.blocks and any(r.active for r in trainable):  # a checkpoint may be of a stack already done
        trainer = _trainer(module.blocks, outputs, accelerator, callbacks)
        trainer.fit(module, train_dataloaders=DataLoader(live, batch_size=None))
    for r in trainable:
        r.replicas, r.stacking = len(trainable), module.step.mode if module.step else "sequential"
        if r.active:
            r.stop("cap")
    return replicas


def train_model(
    task: Task, model_spec: ModelSpec, model_params: dict[str, Any], recipe: Recipe, seed: int,
    train: Split, outputs: RunOutputs | None, accelerator: str, val: Split | None = None,
    evaluation: Split | None = None,
) -> tuple[TokenModel, Replica, int]:
    """Train one model alone (a stack of one, :func:`train_replicas`); raises :class:`NonFiniteLossError` if its
    loss became non-finite.

    Returns the trained model, its :class:`~tokbench.replicas.Replica` (which holds the curve, ``budget_curve``,
    ``stopped_because`` and the optimiser) and the number of optimiser steps taken (0 for models without
    trainable parameters).
    """
    (replica,) = train_replicas(task, model_spec, model_params, [(recipe, seed)], {seed: SeedData(train, val, evaluation)},
                                outputs, accelerator)
    if replica.error is not None:
        raise replica.error
    return replica.model, replica, replica.steps_taken


def _lengths(ends: list[int]) -> list[int]:
    return [end - start for start, end in zip([0, *ends], ends)]


def select_recipe(task: Task, recipe: Recipe, val: Split, candidates: Sequence[Replica]) -> tuple[Replica, dict[str, float]]:
    """The candidate of the recipe's sweep with the best accuracy on ``val``; ties go to the earlier candidate.

    ``candidates`` are the trained replicas of one seed, one per ``recipe.candidates()``, all from the same
    initialisation. Returns the kept one and the validation accuracy each was compared on (empty without a
    sweep): at the end, or, in a sweep that pruned, a pruned candidate's at ``selected_at``, and so the sole kept
    one's; where it kept several (``sweep_margin``), the choice among them is made, and their accuracies taken, at
    the end.
    A candidate whose loss became non-finite fails the pairing, as the sweep would alone.
    """
    for candidate in candidates:
        if candidate.error is not None:
            raise candidate.error
    if len(candidates) == 1 and not (recipe.lr_grid or recipe.wd_grid):
        return candidates[0], {}
    compared = candidates
    selection: dict[str, float] = {}
    if candidates[0].selected_at is not None:  # a pruning sweep chose during training: among those it kept
        compared = [c for c in candidates if c.stopped_because != "pruned"]
        selection = {_candidate_key(recipe, c.recipe): c.selection_accuracy for c in candidates}
        if len(compared) == 1:
            return compared[0], selection
    law = validation_law(task, val, recipe)  # the same for every candidate
    best: tuple[float, Replica] | None = None
    for candidate in compared:
        accuracy = evaluate_accuracy(candidate.model, val, law)
        selection[_candidate_key(recipe, candidate.recipe)] = accuracy
        if best is None or accuracy > best[0]:
            best = (accuracy, candidate)
    assert best is not None
    return best[1], selection


def _candidate_key(recipe: Recipe, candidate: Recipe) -> str:
    return candidate_key(candidate.lr, candidate.weight_decay, bool(recipe.wd_grid))


def run_cell(
    task: Task,
    model_spec: ModelSpec,
    model_params: dict[str, Any],
    recipe: Recipe,
    seeds: Sequence[int],
    outputs: RunOutputs | None = None,
    accelerator: str = "auto",
    evaluate_at: Sequence[Mapping[str, Any]] = (),
    stacking: str = "auto",
) -> list[PairingResult | Exception]:
    """Train and evaluate ``model_spec`` on ``task`` for each of ``seeds`` together: every seed x every candidate
    of the recipe's sweep is one replica of one stack (:func:`train_replicas`).

    Returns, per seed in order, its :class:`PairingResult` (what :func:`run_pairing` returns for that seed) or
    the exception that failed that seed alone (a non-finite loss, an error while evaluating); an error that
    concerns the whole cell (building the model, say) is raised. A result's ``train.wall_seconds`` is its
    share of the cell's splits and training (divided equally among the seeds; with the training of earlier
    runs where it resumed from a checkpoint) plus its own evaluation. With ``outputs`` that name a records
    folder, a long training writes checkpoints there (:meth:`RunOutputs.checkpoints`), removed once the results
    are made.
    """
    started = time.perf_counter()
    task = adapt_task(task)
    names = dict.fromkeys(("train", "val", task.eval_split))
    splits = {seed: {name: task.make_split(name, seed) for name in names} for seed in seeds}
    candidates = recipe.candidates()
    plan = [(candidate, seed) for seed in seeds for candidate in candidates]
    data = {seed: SeedData(s["train"], s["val"], s[task.eval_split]) for seed, s in splits.items()}
    checkpoints = outputs.checkpoints() if outputs is not None else None
    replicas = train_replicas(task, model_spec, model_params, plan, data, outputs, accelerator, stacking, checkpoints)
    share = (time.perf_counter() - started + replicas[0].earlier_seconds) / len(seeds)
    results: list[PairingResult | Exception] = []
    for k, seed in enumerate(seeds):
        own = replicas[k * len(candidates):(k + 1) * len(candidates)]
        try:
            results.append(_evaluated(task, model_spec, model_params, recipe, seed, splits[seed], own, evaluate_at,
                                      share, bool(outputs and outputs.log_samples)))
        except Exception as exc:  # noqa: BLE001 - one seed's failure is its record's, not its cell-mates'
            results.append(exc)
    if checkpoints is not None:
        checkpoints.discard()
    return results


def run_pairing(
    task: Task,
    model_spec: ModelSpec,
    model_params: dict[str, Any],
    recipe: Recipe,
    seed: int,
    outputs: RunOutputs | None = None,
    accelerator: str = "auto",
    evaluate_at: Sequence[Mapping[str, Any]] = (),
) -> PairingResult:
    """Train ``model_spec`` on ``task`` with ``recipe`` and evaluate it, also at each setting of ``evaluate_at``:
    a cell of one seed (:func:`run_cell`).

    Seeds: each split of the task has its own data seed and the model's
    initialisation has another, all derived from ``seed``. On the CPU the same
    arguments give bit-identical metrics.

    With ``recipe.lr_grid`` and/or ``recipe.wd_grid`` the model is trained once per
    candidate from the same initialisation, the candidates as replicas of one stack, and the one with
    the best validation accuracy is kept (see :func:`select_recipe`). The test split is never looked at
    during the selection or for stopping; its accuracy at the recipe's budgets is only reported.
    """
    (result,) = run_cell(task, model_spec, model_params, recipe, [seed], outputs, accelerator, evaluate_at)
    if isinstance(result, Exception):
        raise result
    return result


def _evaluated(task: Task, model_spec: ModelSpec, model_params: dict[str, Any], recipe: Recipe, seed: int,
               splits: Mapping[str, Split], candidates: Sequence[Replica], evaluate_at: Sequence[Mapping[str, Any]],
               shared_seconds: float, log_samples: bool = False) -> PairingResult:
    """One seed's result: the sweep's choice among its trained ``candidates``, evaluated on every split; with
    ``log_samples``, the evaluation split's predictions in ``samples``."""
    started = time.perf_counter()
    kept, selection = select_recipe(task, recipe, splits["val"], candidates)
    # Train, validation, then the evaluation split (which may be one of them), each evaluated once:
    # a stochastic model (the uniform guess) then gives one accuracy per split, drawn in a fixed order.
    metrics: dict[str, float] = {}
    predictions: list[torch.Tensor] | None = [] if log_samples else None
    for name, split in splits.items():
        if name == task.eval_split:
            eval_metrics, attention_profile, diagnostics = evaluate(kept.model, task, split, predictions)
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
    train_info = {**kept.recipe.to_json(), "steps": kept.steps_taken, "max_steps": kept.recipe.steps,
                  "stopped_because": kept.stopped_because, "final_loss": kept.last_loss,
                  "wall_seconds": shared_seconds + time.perf_counter() - started}
    if kept.replicas > 1:  # trained in a stack: how many replicas, and how a step computed them
        train_info.update(replicas=kept.replicas, stacking=kept.stacking)
    if kept.resumed_at:  # trained in several runs, from checkpoints written at these steps
        train_info["resumed_at"] = list(kept.resumed_at)
    if selection:
        train_info.update(lr_grid=list(recipe.lr_grid), wd_grid=list(recipe.wd_grid),
                          lr_selection_val_accuracy=selection)
        keyed = {_candidate_key(recipe, c.recipe): c for c in candidates}
        if kept.selected_at is not None:  # pruned at that step: which candidates trained on (else all, to the end)
            train_info["selected_at"] = kept.selected_at
            train_info["lr_selection_kept"] = [key for key, c in keyed.items() if c.stopped_because != "pruned"]
        curves = {key: c.val_curve for key, c in keyed.items() if c.val_curve["step"]}
        if curves:  # every candidate's validation checks: what a choice at another step would have been
            train_info["lr_selection_val_curve"] = curves
            # and why each ended: a target reached at the last check before the cap reads like a run to the cap
            train_info["lr_selection_stopped_because"] = {key: c.stopped_because for key, c in keyed.items()}
    budget_curve = [p for p in kept.budget_curve if p["step"] != kept.steps_taken]
    budget_curve.append({"step": kept.steps_taken, "accuracy": accuracy, "final": True})
    return PairingResult(metrics=metrics, train=train_info, curve=kept.curve,
                         attention_profile=attention_profile, diagnostics=diagnostics,
                         budget_curve=budget_curve, evaluations=evaluations, size=kept.model.size(),
                         samples=None if predictions is None else torch.cat(predictions))


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
    setting = adapt_task(task.spec.create({**task.params, **overrides}))
    if setting.context_length != task.context_length and model_spec.fixed_length:
        return {**entry, "status": "not_applicable", "reason": model_spec.fixed_length}
    if model_spec.oracle:
        model = build_model(model_spec, model_params, setting)
    generator = torch.Generator().manual_seed(derive_seed(seed, "data:test:" + canonical_json(dict(overrides))))
    split = setting.generate(setting.split_size("test"), generator)
    try:
        metrics, _, _ = evaluate(model, setting, split)
    except NotApplicable as exc:  # a limit set by the model's parameters (a transformer with learned positions)
        return {**entry, "status": "not_applicable", "reason": str(exc)}
    metrics["bayes_accuracy"] = setting.bayes_accuracy()
    return {**entry, "status": "ok", "metrics": metrics}
