"""The implementation of the contract-v2 test plugin (its hook module, contract_v2.py, stays light)."""
from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from tokbench.model import ModelOutput, TokenModel
from tokbench.task import IGNORE, AttentionTarget, Split, Task


class PreviousToken(Task):
    @property
    def vocab_size(self) -> int:
        return self.params["V"]

    @property
    def context_length(self) -> int:
        return self.params["T"]

    def generate(self, n: int, generator: torch.Generator) -> Split:
        T = self.context_length
        tokens = torch.randint(0, self.vocab_size, (n, T), generator=generator)
        labels = torch.full((n, T), IGNORE)
        labels[:, 1:] = tokens[:, :-1]
        previous = torch.zeros(n, T, T, dtype=torch.bool)
        previous[:, torch.arange(1, T), torch.arange(0, T - 1)] = True
        prefix = torch.tril(torch.ones(T, T)) / torch.arange(1, T + 1)[:, None]
        targets = {
            "previous_attention": AttentionTarget(previous, layer="first", head="best"),
            "prefix_uniformity": AttentionTarget(prefix.expand(n, T, T).clone(), kind="distribution"),
        }
        references = {"copy_current": tokens.clone()}  # a wrong strategy: repeat the token just read
        return Split(tokens, labels, targets, references)

    def bayes_accuracy(self) -> float:
        return 1.0

    def bayes_predict(self, tokens: torch.Tensor) -> torch.Tensor:
        return torch.cat([tokens[:, :1], tokens[:, :-1]], dim=1)

    def bayes_log_probs(self, tokens: torch.Tensor) -> torch.Tensor:
        certain = torch.full((*tokens.shape, self.vocab_size), -math.inf)
        return certain.scatter(-1, self.bayes_predict(tokens)[..., None], 0.0)


class TwoLayerAttention(TokenModel):
    """x = E s + P; two residual causal attention layers (H heads); logits = x W_out."""

    def __init__(self, params: dict[str, Any], task: Task) -> None:
        super().__init__(params, task)
        d, self.heads = params["d"], params["heads"]
        self.embed = nn.Embedding(self.vocab_size, d)
        self.position = nn.Parameter(torch.randn(self.context_length, d) * 0.5)
        self.layers = nn.ModuleList(nn.Linear(d, 3 * d, bias=False) for _ in range(2))
        self.out = nn.Linear(d, self.vocab_size, bias=False)

    def forward(self, tokens: torch.Tensor, need_attention: bool = False) -> ModelOutput:
        n, T = tokens.shape
        x = self.embed(tokens) + self.position[:T]  # (n, T, d)
        causal = torch.ones(T, T, dtype=torch.bool, device=tokens.device).tril()
        maps = []
        for layer in self.layers:
            q, k, v = (z.unflatten(-1, (self.heads, -1)).transpose(1, 2) for z in layer(x).chunk(3, -1))  # (n, H, T, e)
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
            attention = scores.masked_fill(~causal, -math.inf).softmax(-1)  # (n, H, T, T)
            x = x + (attention @ v).transpose(1, 2).flatten(2)
            maps.append(attention)
        return ModelOutput(self.out(x), torch.stack(maps, 1) if need_attention else None)  # (n, L, H, T, T)
