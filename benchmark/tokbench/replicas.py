"""Replicas trained together: the per-replica training state, and one step's forward and backward for a stack.

A stack holds models of one architecture built for one task (seeds x swept learning rates and weight
decays). Each replica keeps its own model, optimiser, schedule, curve and stop; what the replicas
share is the step: :class:`StackStep` computes every live replica's loss and gradients either

- ``"vmap"``: in one vectorised forward and backward (PyTorch's model-ensembling recipe:
  ``torch.func.functional_call`` over the replicas' stacked parameters under ``torch.vmap``), or
- ``"sequential"``: one replica after another, each through its own module, exactly as it would train alone.

:func:`choose_stacking` decides once per stack, at its first step. ``"auto"`` takes ``vmap`` only off
the CPU: on this project's CPUs a vmapped step of 9 replicas cost 1.5 to 2 times the same replicas one
after another (transformer-2l and the flattened MLP at batch 64; only a single attention layer at
batch 64 gained, 0.82), because these models are compute-bound there, while on a GPU a step of such
small models is launch overhead, which the stack shares. ``vmap`` is taken only when a probe on the
first batch (forward and backward of two replicas) runs without error or warning (a warning means
torch fell back to a per-replica loop) and equals the replicas' own forward and gradients within
:data:`PROBE_TOLERANCE`; otherwise the replicas go one after another.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from tokbench.errors import TokbenchError
from tokbench.metrics import agreement, sequence_accuracy
from tokbench.model import TokenModel
from tokbench.specs import Recipe

STACKINGS = ("auto", "vmap", "sequential")
PROBE_SEQUENCES = 4  # sequences per replica in the probe that decides whether a stack vmaps
PROBE_TOLERANCE = 1e-4  # relative and absolute, on the probe's losses, logits and gradients

#: the fields of a :class:`Replica` that training changes, kept in its checkpoints
TRAINING_STATE = ("curve", "last_loss", "budget_curve", "val_curve", "steps_taken", "stopped_because", "selected_at",
                  "selection_accuracy", "active", "resumed_at")

LossFn = Callable[[TokenModel, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


class NonFiniteLossError(TokbenchError):
    """The training loss became NaN or infinite."""


@dataclass(eq=False)
class Replica:
    """One model of a stack with its recipe, run seed and training state.

    ``stream`` indexes the stack's data streams (replicas of one seed share one); ``curve``,
    ``last_loss``, ``budget_curve``, ``val_curve`` (validation accuracy at each check), ``steps_taken`` and
    ``stopped_because`` are what training did; ``error`` is set when its loss became non-finite, which ends
    this replica only. A sweep that prunes (``Recipe.sweep_steps``) sets ``selected_at``, the step of its choice,
    and ``selection_accuracy``, its validation accuracy there, on each candidate of the seed, and stops all but
    the kept ones (the best, and those within ``Recipe.sweep_margin`` of it) with ``stopped_because = "pruned"``.
    """

    model: TokenModel
    recipe: Recipe
    seed: int
    stream: int = 0
    index: int = 0
    curve: dict[str, list[float]] = field(default_factory=lambda: {"step": [], "loss": [], "accuracy": []})
    last_loss: float = math.nan
    budget_curve: list[dict[str, Any]] = field(default_factory=list)
    val_curve: dict[str, list[float]] = field(default_factory=lambda: {"step": [], "accuracy": []})
    steps_taken: int = 0
    stopped_because: str = "untrained"  # or "target", "plateau", "cap" once trained; "pruned" by a sweep
    selected_at: int | None = None
    selection_accuracy: float | None = None
    error: BaseException | None = None
    replicas: int = 1  # how many replicas its stack trained, and how (StackStep.mode)
    stacking: str = "sequential"
    optimizer: torch.optim.Optimizer | None = None
    schedule: torch.optim.lr_scheduler.LRScheduler | None = None
    active: bool = True
    resumed_at: list[int] = field(default_factory=list)  # steps at which training resumed from a checkpoint
    earlier_seconds: float = 0.0  # seconds its stack trained before the last resume

    def stop(self, reason: str) -> None:
        self.active, self.stopped_because = False, reason

    def state_dict(self) -> dict[str, Any]:
        """What training has changed so far (:mod:`tokbench.checkpoints`): the model's, optimiser's and schedule's
        states, the fields of :data:`TRAINING_STATE`, and the error as its message."""
        return {"model": self.model.state_dict(),
                "optimizer": None if self.optimizer is None else self.optimizer.state_dict(),
                "schedule": None if self.schedule is None else self.schedule.state_dict(),
                "error": None if self.error is None else str(self.error),
                **{name: getattr(self, name) for name in TRAINING_STATE}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` gave, but the optimiser's and schedule's states, which
        :meth:`load_optimizer_state` restores once they are built."""
        self.model.load_state_dict(state["model"])
        for name in TRAINING_STATE:
            setattr(self, name, state[name])
        self.error = None if state["error"] is None else NonFiniteLossError(state["error"])

    def load_optimizer_state(self, state: dict[str, Any]) -> None:
        if self.optimizer is not None and state["optimizer"] is not None:
            self.optimizer.load_state_dict(state["optimizer"])
        if self.schedule is not None and state["schedule"] is not None:
            self.schedule.load_state_dict(state["schedule"])

    def fail(self, error: BaseException) -> None:
        self.active, self.error = False, error

    def log(self, step: int, loss: torch.Tensor, logits: torch.Tensor, labels: torch.Tensor,
            references: dict[str, torch.Tensor]) -> dict[str, float]:
        """Add a point to the training curve; returns the loss and accuracy logged. A non-finite loss raises
        :class:`NonFiniteLossError`."""
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
        self.last_loss = value
        return {"train_loss": value, "train_accuracy": accuracy}


class _Objective(nn.Module):
    """``loss_fn`` of a model as a module's forward, so that ``functional_call`` can swap in one replica's tensors."""

    def __init__(self, model: TokenModel, loss_fn: LossFn) -> None:
        super().__init__()
        self.model, self.loss_fn = model, loss_fn

    def forward(self, tokens: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.loss_fn(self.model, tokens, labels)


class StackStep:
    """Forward and backward of the live replicas for one step; ``vmapped`` chooses how (module docstring)."""

    def __init__(self, loss_fn: LossFn, vmapped: bool) -> None:
        self.loss_fn, self.vmapped = loss_fn, vmapped
        self.out_of_memory = False  # a vmapped step ran out of device memory: the rest go one after another

    @property
    def mode(self) -> str:
        if self.out_of_memory:
            return "vmap, then sequential (out of device memory)"
        return "vmap" if self.vmapped else "sequential"

    def __call__(self, models: Sequence[TokenModel], tokens: Sequence[torch.Tensor],
                 labels: Sequence[torch.Tensor]) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Each model's (loss, aligned logits) on its batch, its gradients accumulated by the backward pass.

        One after another, a replica's forward and backward run only when the caller asks for its result, so
        the caller finishes one replica's step (and frees its logits) before the next starts, as alone.
        """
        if not self.vmapped or len(models) == 1:
            yield from (self._one(model, t, y) for model, t, y in zip(models, tokens, labels))
            return
        try:
            losses, logits = _vmapped(models, self.loss_fn, torch.stack(list(tokens)), torch.stack(list(labels)))
            losses.sum().backward()  # replica r's gradient is that of its own loss: the others do not depend on it
        except torch.cuda.OutOfMemoryError:
            # Every replica's attention at once (the math form, T x T per head) can exceed a device on which the
            # fused kernels one replica at a time fit: this step and the rest go one after another (below, once
            # the exception and the tensors it holds are released).
            self.vmapped, self.out_of_memory = False, True
        if self.out_of_memory:
            losses = logits = None  # noqa: F841 - frees what a backward that ran out of memory held
            _take_grads(models)  # and what it accumulated
            yield from (self._one(model, t, y) for model, t, y in zip(models, tokens, labels))
            return
        yield from zip(losses, logits)

    def _one(self, model: TokenModel, tokens: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        loss, logits = self.loss_fn(model, tokens, labels)
        # Plain backward, not Lightning's manual_backward: the Trainer runs in 32-bit (no loss scaling to apply),
        # and Lightning's per-call hooks cost a measurable share of these sub-millisecond steps.
        loss.backward()
        return loss, logits


def _vmapped(models: Sequence[TokenModel], loss_fn: LossFn, tokens: torch.Tensor,
             labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(R,) losses and (R, ...) logits of R models of one architecture in one vectorised pass.

    The stacked parameters are built from each model's own (leaf) parameters, so the backward pass
    leaves each replica's gradient in its own ``.grad``, where its own optimiser reads it.
    """
    names = [name for name, _ in models[0].named_parameters()]
    buffer_names = [name for name, _ in models[0].named_buffers()]
    per_model = [(dict(m.named_parameters()), dict(m.named_buffers())) for m in models]
    tensors = {f"model.{n}": torch.stack([p[n] for p, _ in per_model]) for n in names}
    tensors.update({f"model.{n}": torch.stack([b[n] for _, b in per_model]) for n in buffer_names})
    objective = _Objective(models[0], loss_fn)

    def one(state: dict[str, torch.Tensor], t: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.func.functional_call(objective, state, (t, y))

    # The fused attention kernels of F.scaled_dot_product_attention have no batching rule (on a CPU for the forward,
    # on a GPU for the flash and memory-efficient backward): vmap would loop over the replicas, which the probe
    # rejects. Their composite math form batches; a model trained alone keeps the fused kernels.
    with sdpa_kernel(SDPBackend.MATH):
        return torch.vmap(one)(tensors, tokens, labels)


def choose_stacking(stacking: str, models: Sequence[TokenModel], loss_fn: LossFn, tokens: Sequence[torch.Tensor],
                    labels: Sequence[torch.Tensor]) -> StackStep:
    """How a stack of ``models`` computes its steps (module docstring), probed on the first batches."""
    if stacking not in STACKINGS:
        raise ValueError(f"stacking must be one of {', '.join(STACKINGS)}, got {stacking!r}")
    device = next(models[0].parameters()).device
    wanted = stacking == "vmap" or (stacking == "auto" and device.type != "cpu")
    return StackStep(loss_fn, len(models) > 1 and wanted and _probe(models[:2], loss_fn, tokens[:2], labels[:2]))


def _probe(models: Sequence[TokenModel], loss_fn: LossFn, tokens: Sequence[torch.Tensor],
           labels: Sequence[torch.Tensor]) -> bool:
    """Whether a vmapped forward and backward of ``models`` runs cleanly and equals their own (gradients cleared)."""
    tokens = [t[:PROBE_SEQUENCES] for t in tokens]
    labels = [y[:PROBE_SEQUENCES] for y in labels]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # e.g. "There is a performance drop ... batching rule": a per-replica loop
            together = list(StackStep(loss_fn, vmapped=True)(models, tokens, labels))
            stacked = [(loss.detach(), logits.detach()) for loss, logits in together]
            stacked_grads = _take_grads(models)
            alone = [(loss.detach(), logits.detach()) for loss, logits in StackStep(loss_fn, False)(models, tokens, labels)]
            alone_grads = _take_grads(models)
    except Exception:  # noqa: BLE001 - any failure under vmap means: train this model's replicas one by one
        _take_grads(models)
        return False
    pairs = [*zip(stacked, alone), *zip(stacked_grads, alone_grads)]
    return all(torch.allclose(a, b, rtol=PROBE_TOLERANCE, atol=PROBE_TOLERANCE)
               for first, second in pairs for a, b in zip(first, second))


def _take_grads(models: Sequence[TokenModel]) -> list[tuple[torch.Tensor, ...]]:
    """Every model's gradients (zeros where none), then cleared."""
    grads = []
    for model in models:
        params = list(model.parameters())
        grads.append(tuple(torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in params))
        for p in params:
            p.grad = None
    return grads
