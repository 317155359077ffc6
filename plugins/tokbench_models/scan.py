"""Mamba's selective scan for the CPU: one pass over time in the forward, one back in the backward.

Shape legend: n sequences, T positions, E inner width (expand x d), N state size.

    h_t = exp(delta_t A) * h_{t-1} + (delta_t x_t) B_t      h: (n, E, N), h_{-1} = 0
    y_t = h_t C_t + D x_t                                   y: (n, T, E)

This is the recurrence of Gu & Dao (2023), Algorithm 2, the same function as mambapy's parallel scan and the
authors' reference ``selective_scan_ref``. mambapy's scan first builds exp(delta A) and (delta x) B for every
position, (n, T, E, N) tensors of tens of megabytes at the suite's sizes, and runs a log-depth scan over them;
on a CPU those passes over memory dominate a training step. Here each position's state, (n, E, N), stays in
cache: the forward keeps only the states (for the backward), and the backward walks time in reverse with the
gradients written out by hand (:class:`SelectiveScan`). It is an autograd Function without a vmap rule, so
under ``torch.vmap`` the model defers to mambapy's scan (:func:`usable`), which has none either: a stack of
Mamba replicas trains one after another. tests/test_models_scan.py checks that both scans agree.
"""
from __future__ import annotations

from typing import Any

import torch
from torch._C._functorch import is_functorch_wrapped_tensor


def usable(x: torch.Tensor) -> bool:
    """On a CPU tensor outside torch.func transforms (a vmapped stack keeps mambapy's scan)."""
    return not x.is_cuda and not is_functorch_wrapped_tensor(x)


class SelectiveScan(torch.autograd.Function):
    """``y = scan(x, delta, A, B, C, D)``: x, delta (n, T, E); A (E, N); B, C (n, T, N); D (E,)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, delta: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor,
                D: torch.Tensor) -> torch.Tensor:
        n, T, E = x.shape
        u = delta * x  # (n, T, E): the input's weight in the state
        states = x.new_empty(T, n, E, A.shape[1])
        y = torch.empty_like(x)
        h = x.new_zeros(n, E, A.shape[1])
        for t in range(T):
            h = torch.exp(delta[:, t, :, None] * A) * h + u[:, t, :, None] * B[:, t, None, :]
            states[t] = h
            y[:, t] = torch.bmm(h, C[:, t, :, None]).squeeze(-1)
        ctx.save_for_backward(x, delta, A, B, C, D, states)
        return y + D * x

    @staticmethod
    def backward(ctx: Any, grad_y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        x, delta, A, B, C, D, states = ctx.saved_tensors
        T = x.shape[1]
        u = delta * x
        grad_u = torch.empty_like(x)
        grad_delta = torch.zeros_like(x)
        grad_B, grad_C = torch.empty_like(B), torch.empty_like(C)
        grad_A = torch.zeros_like(A)
        grad_h = torch.zeros_like(states[0])  # d loss / d h_t, carried back through time
        for t in reversed(range(T)):
            g = grad_y[:, t]  # (n, E)
            grad_C[:, t] = torch.bmm(g[:, None, :], states[t]).squeeze(1)
            grad_h = grad_h + g[:, :, None] * C[:, t, None, :]
            grad_u[:, t] = torch.bmm(grad_h, B[:, t, :, None]).squeeze(-1)
            grad_B[:, t] = torch.bmm(u[:, t, None, :], grad_h).squeeze(1)
            decay = torch.exp(delta[:, t, :, None] * A)  # (n, E, N)
            if t > 0:  # h_{-1} = 0: the first decay multiplies nothing
                grad_log = grad_h * states[t - 1] * decay  # d loss / d (delta_t A)
                grad_delta[:, t] += (grad_log * A).sum(-1)
                grad_A += (grad_log * delta[:, t, :, None]).sum(0)
            grad_h = grad_h * decay
        grad_delta += grad_u * x
        grad_x = grad_u * delta + grad_y * D
        grad_D = (grad_y * x).sum((0, 1))
        return grad_x, grad_delta, grad_A, grad_B, grad_C, grad_D


def selective_scan(x: torch.Tensor, delta: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor,
                   D: torch.Tensor) -> torch.Tensor:
    return SelectiveScan.apply(x, delta, A, B, C, D)
