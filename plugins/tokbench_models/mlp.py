"""A fully connected net on the flattened one-hot sequence: the FCN of Sanford et al. 2023 and Wang et al. 2024.

Shape legend: n sequences, T positions, V vocabulary, w width.

The FCN reads the whole sequence as one vector, x = [onehot(s_0); ...; onehot(s_{T-1})] of
length T V, and maps it through ``depth`` hidden ReLU layers of width w to the V logits.
To predict at every position without seeing the future, the prediction at t is the same
net applied to x with the inputs after t set to zero, plus a one-hot of t among the
inputs (so the net knows how much it has read). At the last position this is exactly
the FCN on the whole sequence. The first layer of a one-hot input is a lookup, so the
T masked inputs cost one running sum:

    h_t = relu(sum_{s <= t} W1[s, s_s] + b_t)          (n, T, w)   W1: (T V, w), b: (T, w)
    h_t = relu(W_i h_t + c_i)                         (depth - 1 more hidden layers)
    logits_t = W_out h_t                              (n, T, V)

On a task scored at the last position only h_{T-1} is computed: the FCN itself.
It has no attention and no weight shared across positions: the first layer grows as T V w.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from tokbench.errors import NotApplicable
from tokbench.model import ModelOutput, TokenModel
from tokbench.task import Task
from tokbench_models import FIXED_LENGTH

MAX_FIRST_LAYER = 2**24  # weights of W1 (T V w) beyond which the FCN is not built (64 MiB in float32)
# The longest context the FCN is built for. It shares no weight across positions, so a longer context makes it
# learn position by position what a sequence model learns once; the sparse-selection lower bounds (Sanford et al.
# 2023, Wang et al. 2024) need its size to grow with T. The suites' short rungs and Zoology's T = 64 and 128 fit.
MAX_CONTEXT = 128


class FlattenedMLP(TokenModel):
    """The FCN of the module docstring, evaluated causally at every position."""

    def __init__(self, params: dict[str, Any], task: Task) -> None:
        super().__init__(params, task)
        T, V, width = self.context_length, self.vocab_size, params["width"]
        if T * V * width > MAX_FIRST_LAYER:
            raise NotApplicable(f"mlp: the flattened one-hot input has T*V = {T * V} entries; a first layer of "
                                f"width {width} would hold {T * V * width} > {MAX_FIRST_LAYER} weights")
        if T > MAX_CONTEXT:
            raise NotApplicable(f"mlp: context {T} > {MAX_CONTEXT}, its declared maximum: with no weight shared "
                                f"across positions it would learn each of the {T} positions on its own")
        self.register_buffer("offsets", torch.arange(T) * V, persistent=False)  # row of (s, token) in W1: s V + token
        self.first = nn.Embedding(T * V, width)  # W1, one row per (position, token)
        self.position_bias = nn.Parameter(torch.zeros(T, width))  # b_t: the one-hot of t among the inputs
        hidden = [layer for _ in range(params["depth"] - 1) for layer in (nn.Linear(width, width), nn.ReLU())]
        self.hidden = nn.Sequential(*hidden)
        self.head = nn.Linear(width, V)
        # W1 like an nn.Linear on the T V inputs: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
        nn.init.uniform_(self.first.weight, -(T * V) ** -0.5, (T * V) ** -0.5)

    def forward(self, tokens: torch.Tensor, need_attention: bool = False) -> ModelOutput:
        if tokens.shape[1] != len(self.offsets):
            raise NotApplicable(f"{FIXED_LENGTH}: built for {len(self.offsets)} positions, given {tokens.shape[1]}")
        rows = self.first(tokens + self.offsets)  # W1[s, s_s]: (n, T, w)
        if self.scoring == "last":  # only the last position is scored: the FCN alone, T times cheaper
            h = rows.sum(1) + self.position_bias[-1]  # (n, w)
        else:
            h = rows.cumsum(1) + self.position_bias  # (n, T, w)
        return ModelOutput(self.head(self.hidden(torch.relu(h))))  # (n, V) or (n, T, V)

    def state_size(self) -> int:
        """The running sum of first-layer rows, sum_{s <= t} W1[s, s_s]: all that h_{t+1} needs of the past."""
        return self.params["width"]
