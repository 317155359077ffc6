"""Optimisers named by training recipes."""
from __future__ import annotations

from collections.abc import Iterable

import torch


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


def make_optimizer(name: str, params: Iterable[torch.nn.Parameter], lr: float) -> torch.optim.Optimizer:
    """The optimiser a recipe names: ``gd``, ``ngd`` or ``adam``."""
    params = list(params)
    if name == "gd":
        return torch.optim.SGD(params, lr=lr)
    if name == "ngd":
        return NormalizedGD(params, lr=lr)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr)
    raise ValueError(f"unknown optimizer {name!r}")
