"""The standard single-layer softmax attention model, one class per positional encoding.

Shapes: n samples, T input tokens, L = T (query "last") or T + 1 (query "slot")
positions, V tokens, d the width, H heads of width e = d / H.

    x_l = E s_l (+ or concatenated with) p_l           the slot is a learned row E_V
    q = rotate(W_q x_{L-1}),  k_l = rotate(W_k x_l)     per head, width e
    a = softmax(q . k / sqrt(e) + bias)                 (n, H, L)
    logits = W_o concat_h(sum_l a_hl W_v,h x_l)         (n, V)

Every input is a token row plus a position row, so a linear map of x_l is a
projected token row plus a projected position row: the layer gathers from
(V + 1, d) and (L, d) tables and never multiplies an (n, L, d) tensor by a
matrix. The values are averaged the same way, by scattering the attention onto
the tokens (as in paper_a.py).
"""
from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from tokbench.errors import ParamError
from tokbench.model import ModelOutput, TokenModel
from tokbench.task import Task
from tokbench_attention import positional


class StandardAttention(TokenModel):
    """One softmax attention layer read out at a single query; subclasses choose ``encoding``.

    ``forward`` returns the per-head weights of the single query as
    :attr:`ModelOutput.attention`, shaped (n, L=1, H, Q=1, L).
    """

    encoding: type[positional.PositionalEncoding] = positional.NoPE

    def __init__(self, params: dict[str, Any], task: Task) -> None:
        super().__init__(params, task)
        d, heads = params["d"], params["heads"]
        if d % heads:
            raise ParamError(f"d={d} must be a multiple of heads={heads}")
        self.heads, self.head_width = heads, d // heads
        self.uses_slot = params["query"] == "slot"
        length = self.context_length + int(self.uses_slot)
        self.register_buffer("positions", torch.arange(length), persistent=False)
        self.embedding = nn.Embedding(self.vocab_size, d)
        self.slot = nn.Parameter(torch.randn(1, d)) if self.uses_slot else None
        self.positional = self.encoding(params, length, d, heads)
        table = self.positional.table()
        width = d + (table.shape[1] if self.positional.concatenated else 0)
        self.query = nn.Linear(width, d, bias=False)
        self.key = nn.Linear(width, d, bias=False)
        self.value = nn.Linear(width, d, bias=False)
        self.output = nn.Linear(d, self.vocab_size, bias=False)
        self._initialise(params["init"], params["init_sigma"])

    @torch.no_grad()
    def _initialise(self, init: str, sigma: float) -> None:
        if init == "gaussian":
            for parameter in self.parameters():
                parameter.normal_(0.0, sigma)
        elif init == "zero":
            # Zero one factor of each product: W_q^T W_k and W_o W_v start at 0, so the
            # attention starts uniform (ALiBi's fixed bias aside) and the logits at 0, as
            # [A]'s W = 0, V = 0. Zeroing both factors of a product would make both of its
            # gradients vanish identically, for ever; so would a zero slot where no position
            # table feeds the query (the query would be 0 as well as the keys).
            self.key.weight.zero_()
            self.output.weight.zero_()
            for parameter in self.positional.parameters():
                parameter.zero_()

    def _project(self, linear: nn.Linear) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``linear`` applied to every token row (V + 1, out; the slot last) and every position row (L, out)."""
        d = self.embedding.embedding_dim
        rows = self.embedding.weight if self.slot is None else torch.cat([self.embedding.weight, self.slot])
        token_part = rows @ linear.weight[:, :d].T
        table = self.positional.table()
        if table is None:
            return token_part, None
        position_weight = linear.weight[:, d:] if self.positional.concatenated else linear.weight
        return token_part, table @ position_weight.T

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.unflatten(-1, (self.heads, self.head_width))

    def forward(self, tokens: torch.Tensor, need_attention: bool = False) -> ModelOutput:
        n = tokens.shape[0]
        if self.uses_slot:  # the slot is token V, at position T
            tokens = torch.cat([tokens, tokens.new_full((n, 1), self.vocab_size)], dim=1)
        query_position = self.positions[-1:]
        token_queries, position_queries = self._project(self.query)
        q = token_queries[tokens[:, -1]]
        if position_queries is not None:
            q = q + position_queries[-1]
        q = self.positional.rotate(self._heads(q)[:, None], query_position)[:, 0]  # (n, H, e)
        scores = self._scores(q, tokens) / math.sqrt(self.head_width)
        bias = self.positional.bias(query_position, self.positions)
        if bias is not None:
            scores = scores + bias[:, 0]
        attention = torch.softmax(scores, dim=-1)  # (n, H, L)
        logits = self.output(self._average_values(attention, tokens).flatten(1))
        return ModelOutput(logits, attention[:, None, :, None])  # (n, 1 layer, H, 1 query, L)

    def _scores(self, q: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """(n, H, L) raw scores q . k_l of the queries (n, H, e) against every position."""
        n, L = tokens.shape
        token_keys, position_keys = self._project(self.key)
        if self.positional.rotates:  # a key depends on its position as well: build every key
            keys = token_keys.index_select(0, tokens.flatten()).unflatten(0, (n, L))
            if position_keys is not None:
                keys = keys + position_keys
            keys = self.positional.rotate(self._heads(keys), self.positions)  # (n, L, H, e)
            return (keys * q[:, None]).sum(-1).transpose(1, 2)
        # otherwise score each of the V + 1 token rows once and gather: no (n, L, d) tensor
        per_token = torch.einsum("nhe,vhe->nhv", q, self._heads(token_keys))
        scores = per_token.gather(2, tokens[:, None, :].expand(n, self.heads, L))
        if position_keys is not None:
            scores = scores + torch.einsum("nhe,lhe->nhl", q, self._heads(position_keys))
        return scores

    def _average_values(self, attention: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """(n, H, e): sum_l a_hl W_v,h x_l, via the attention mass on each token and each position."""
        n, H, L = attention.shape
        token_part, position_part = self._project(self.value)
        token_values = self._heads(token_part)  # (V + 1, H, e)
        mass = attention.new_zeros(n, H, token_values.shape[0])
        mass.scatter_add_(2, tokens[:, None, :].expand(n, H, L), attention)
        values = torch.einsum("nhv,vhe->nhe", mass, token_values)
        if position_part is not None:
            values = values + torch.einsum("nhl,lhe->nhe", attention, self._heads(position_part))
        return values

    def value_matrix(self) -> torch.Tensor:
        """(V, V): column j holds the logits when every head attends to token j alone (positions left out)."""
        d = self.embedding.embedding_dim
        return self.output.weight @ self.value.weight[:, :d] @ self.embedding.weight.T

    def key_query(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """``(W, E)`` with score(key l, query) = E[s_l] W E[s_query] + position bias, as in [B].

        Only where that holds: one head, the last token as query, and an encoding
        that leaves the content scores alone (NoPE, ALiBi, T5 bias).
        """
        if self.heads != 1 or self.uses_slot or not self.positional.separable:
            return None
        W = self.key.weight.T @ self.query.weight / math.sqrt(self.head_width)
        return W, self.embedding.weight


class NoPEAttention(StandardAttention):
    encoding = positional.NoPE


class SinusoidalAttention(StandardAttention):
    encoding = positional.SinusoidalAdded


class LearnedPositionAttention(StandardAttention):
    encoding = positional.LearnedAdded


class RoPEAttention(StandardAttention):
    encoding = positional.RoPE


class ALiBiAttention(StandardAttention):
    encoding = positional.ALiBi


class T5BiasAttention(StandardAttention):
    encoding = positional.T5Bias


class ConcatPositionAttention(StandardAttention):
    encoding = positional.OrthogonalConcat
