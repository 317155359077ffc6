"""Small causal transformers for the Markov tasks' training tests, as in the sources' released code.

``SmallTransformer``: ``layers`` blocks of causal multi-head softmax attention over token plus learned position
embeddings, attention only (no MLP, no layer norm), read out by a linear map; Edelman et al.'s notebook is this with
two layers, one head, d = 16. ``CatFormer``: Nichani et al.'s model.
"""
from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from tokbench import ModelSpec, Param, Recipe
from tokbench.model import ModelOutput, TokenModel
from tokbench.task import Task


class SmallTransformer(TokenModel):
    def __init__(self, params: dict[str, Any], task: Task) -> None:
        super().__init__(params, task)
        d, self.heads = params["d"], params["heads"]
        self.embed = nn.Embedding(self.vocab_size, d)
        self.position = nn.Embedding(self.context_length, d)
        self.qkv = nn.ModuleList(nn.Linear(d, 3 * d, bias=False) for _ in range(params["layers"]))
        self.mix = nn.ModuleList(nn.Linear(d, d, bias=False) for _ in range(params["layers"]))
        self.out = nn.Linear(d, self.vocab_size, bias=False)

    def forward(self, tokens: torch.Tensor, need_attention: bool = False) -> ModelOutput:
        n, T = tokens.shape
        x = self.embed(tokens) + self.position.weight[:T]
        causal = torch.ones(T, T, dtype=torch.bool, device=tokens.device).tril()
        maps = []
        for qkv, mix in zip(self.qkv, self.mix):
            q, k, v = (z.unflatten(-1, (self.heads, -1)).transpose(1, 2) for z in qkv(x).chunk(3, -1))
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
            attention = scores.masked_fill(~causal, -math.inf).softmax(-1)  # (n, H, T, T)
            x = x + mix((attention @ v).transpose(1, 2).flatten(2))
            maps.append(attention)
        return ModelOutput(self.out(x), torch.stack(maps, 1) if need_attention else None)


def spec(layers: int, heads: int = 1, d: int = 16, **recipe: Any) -> ModelSpec:
    """A ModelSpec for :class:`SmallTransformer` with these defaults and recipe (AdamW unless given)."""
    return ModelSpec(
        name=f"small-transformer-{layers}l", version="1", predicts="every",
        description="A small causal attention-only transformer for the Markov tasks' tests.",
        implementation="markov_models:SmallTransformer",
        params=(Param("layers", "int", layers, "blocks", low=1), Param("heads", "int", heads, "heads", low=1),
                Param("d", "int", d, "width", low=1)),
        recipe=Recipe(**{"optimizer": "adamw", **recipe}),
    )


class CatFormer(TokenModel):
    """Nichani et al.'s model (eshnich/transformers-learn-causal-structure, ``catformer.py``): the input is a one-hot
    token concatenated with a one-hot position, and each of ``layers`` attention-only layers (one head, a bilinear
    score x A x^T, no value or output map, the diagonal included in the causal mask) concatenates its output to the
    stream, which doubles its width; every weight starts at zero, and the read-out is linear at the last position.

    Shapes: n sequences, T positions, S states, d = S + T, doubling per layer.
    """

    def __init__(self, params: dict[str, Any], task: Task) -> None:
        super().__init__(params, task)
        d = self.vocab_size + self.context_length
        self.scores = nn.ParameterList()
        for _ in range(params["layers"]):
            self.scores.append(nn.Parameter(torch.zeros(d, d)))  # A_l: (d, d)
            d *= 2
        self.out = nn.Parameter(torch.zeros(d, self.vocab_size))  # W: (d_L, S)

    def forward(self, tokens: torch.Tensor, need_attention: bool = False) -> ModelOutput:
        n, T = tokens.shape
        positions = torch.eye(T, device=tokens.device).expand(n, T, T)
        x = torch.cat([nn.functional.one_hot(tokens, self.vocab_size).float(), positions], -1)  # (n, T, d)
        causal = torch.ones(T, T, dtype=torch.bool, device=tokens.device).tril()
        maps = []
        for A in self.scores:
            attention = (x @ A @ x.transpose(1, 2)).masked_fill(~causal, -math.inf).softmax(-1)  # (n, T, T)
            x = torch.cat([x, attention @ x], -1)  # (n, T, 2d)
            maps.append(attention[:, -1])
        attention = torch.stack(maps, 1)[:, :, None, None] if need_attention else None  # (n, L, 1, 1, T)
        return ModelOutput(x[:, -1] @ self.out, attention)


def catformer_spec(layers: int = 2, **recipe: Any) -> ModelSpec:
    """A ModelSpec for :class:`CatFormer`, read out at the last position (causal-graph's one query)."""
    return ModelSpec(
        name=f"catformer-{layers}l", version="1", predicts="last",
        description="Nichani et al.'s attention-only CatFormer, for the causal-graph tests.",
        implementation="markov_models:CatFormer",
        params=(Param("layers", "int", layers, "attention-only layers, one head each", low=1),),
        recipe=Recipe(**recipe),
    )
