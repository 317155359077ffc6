"""Recurrent baselines: ``torch.nn.GRU`` (Cho et al. 2014) and ``torch.nn.LSTM`` (Hochreiter & Schmidhuber 1997).

Shape legend: n sequences, T positions, V vocabulary, d embedding width, h hidden width.

    x = embed(tokens)                      (n, T, d)
    states = rnn(x)                        (n, T, h): state t has read tokens[:t+1]
    logits = head(states)                  (n, T, V)

No attention: the whole past is squeezed into the state of width h.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from tokbench.model import ModelOutput, TokenModel
from tokbench.task import Task


class Recurrent(TokenModel):
    """An embedding, a stack of ``layers`` recurrent layers and a linear read-out at every position."""

    cell: type[nn.RNNBase] = nn.GRU
    carried = 1  # vectors of width h a layer carries to the next position: h (GRU); h and the cell c (LSTM)

    def __init__(self, params: dict[str, Any], task: Task) -> None:
        super().__init__(params, task)
        self.embedding = nn.Embedding(self.vocab_size, params["d"])
        self.rnn = self.cell(params["d"], params["hidden"], num_layers=params["layers"], batch_first=True)
        self.head = nn.Linear(params["hidden"], self.vocab_size)

    def forward(self, tokens: torch.Tensor, need_attention: bool = False) -> ModelOutput:
        states, _ = self.rnn(self.embedding(tokens))  # (n, T, h)
        return ModelOutput(self.head(states))

    def state_size(self) -> int:
        return self.carried * self.params["hidden"] * self.params["layers"]


class GRU(Recurrent):
    cell = nn.GRU


class LSTM(Recurrent):
    cell = nn.LSTM
    carried = 2
