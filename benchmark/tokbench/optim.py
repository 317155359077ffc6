"""Optimisers and learning-rate schedules named by training recipes."""
from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from tokbench.specs import Recipe


class NormalizedGD(torch.optim.Optimizer):
    """Normalised gradient descent, as in [B]: ``theta <- theta - lr * g / ||g||_F``.

    The norm is taken over the gradients of all parameters together, so for a
    model with a single trained matrix it is exactly the paper's update.
    """

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float) -> None:
        super().__init__(params, {"lr": lr})

    @torch.no_grad()
    def step(self, closure=None):  # noqa: ANN001 - torch's signature
        loss = closure() if closure is not None else None
        grads = [p.grad for group in self.param_groups for p in group["params"] if p.grad is not None]
        if not grads:
            return loss
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
        if norm == 0:
            return loss
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-group["lr"] / norm.item())
        return loss


def make_optimizer(recipe: Recipe, params: Iterable[torch.nn.Parameter]) -> torch.optim.Optimizer:
    """The optimiser ``recipe`` names, with its learning rate, weight decay, momentum and betas.

    ``gd`` and ``sgd`` are both ``torch.optim.SGD`` (``gd`` without momentum); ``ngd`` is
    :class:`NormalizedGD`; ``adam`` and ``adamw`` are torch's.
    """
    params = list(params)
    if recipe.optimizer in ("gd", "sgd"):
        return torch.optim.SGD(params, lr=recipe.lr, momentum=recipe.momentum, weight_decay=recipe.weight_decay)
    if recipe.optimizer == "ngd":
        return NormalizedGD(params, lr=recipe.lr)
    if recipe.optimizer in ("adam", "adamw"):
        kind = torch.optim.Adam if recipe.optimizer == "adam" else torch.optim.AdamW
        return kind(params, lr=recipe.lr, betas=tuple(recipe.betas), weight_decay=recipe.weight_decay)
    raise ValueError(f"unknown optimizer {recipe.optimizer!r}")


def make_schedule(recipe: Recipe, optimizer: torch.optim.Optimizer) -> torch.optim.lr_scheduler.LRScheduler | None:
    """The recipe's learning-rate schedule, stepped once per optimiser step; ``None`` for a constant rate.

    Linear warm-up from ``lr / warmup_steps``, reaching ``lr`` after ``warmup_steps`` steps
    (torch's ``LinearLR``), then constant, or a cosine or linear decay towards 0 at ``steps``.
    """
    from torch.optim import lr_scheduler

    decay_steps = max(1, recipe.steps - recipe.warmup_steps)
    if recipe.schedule == "cosine":
        after: lr_scheduler.LRScheduler | None = lr_scheduler.CosineAnnealingLR(optimizer, T_max=decay_steps)
    elif recipe.schedule == "linear":
        after = lr_scheduler.LinearLR(optimizer, start_factor=1.0, end_factor=0.0, total_iters=decay_steps)
    else:
        after = None
    if not recipe.warmup_steps:
        return after
    warmup = lr_scheduler.LinearLR(optimizer, start_factor=1.0 / recipe.warmup_steps, end_factor=1.0,
                                   total_iters=recipe.warmup_steps)
    if after is None:
        return warmup
    return lr_scheduler.SequentialLR(optimizer, [warmup, after], milestones=[recipe.warmup_steps])
