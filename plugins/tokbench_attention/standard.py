"""The standard single-layer softmax attention model, one class per positional encoding.

Shapes: n samples, T input tokens, Q queries, V tokens, d the width, H heads of
width e = d / H. Query t has read tokens 0..t; it is token t itself (query
"last", at position t) or a learned slot placed after token t (query "slot", at
position t + 1, attending to itself as well).

    x_l = E s_l (+ or concatenated with) p_l            the slot is a learned row E_V
    q_t = rotate(W_q x_t),  k_l = rotate(W_k x_l)       per head, width e
    a_t = softmax(q_t . k_l / sqrt(e) + bias, l <= t)   (n, H, Q, T (+ 1, the slot itself))
    logits_t = W_o concat_h(sum_l a_tl W_v,h x_l)       (n, Q, V)

On a task scored at the last position there is one query, after the last token:
exactly the single layer of the papers. On a task scored at many positions
there is one query per position (Q = T) under a causal mask.

Every input is a token row plus a position row, so a linear map of x_l is a
projected token row plus a projected position row: the layer gathers from
(V + 1, d) and (T + 1, d) tables and never multiplies an (n, T, d) tensor by a
matrix. The values are averaged the same way, by scattering the attention onto
the tokens (as in paper_a.py). Positions are computed for the input at hand,
so the layer runs on inputs longer than it was built for unless its encoding
has a fixed length (positional.py).
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
    """One softmax attention layer with a query after the last token, or after every token (causal).

    ``forward`` returns logits (n, V) and attention (n, L=1, H, Q=1, T + S) on a task scored
    at the last position, logits (n, T, V) and attention (n, 1, H, Q=T, T + S) on one scored
    at many; S = 1 for the query slot, which attends to itself, else 0.
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

    def _project(self, linear: nn.Linear, count: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``linear`` applied to every token row (V + 1, out; the slot last) and the rows of positions
        0..count-1 (count, out)."""
        d = self.embedding.embedding_dim
        rows = self.embedding.weight if self.slot is None else torch.cat([self.embedding.weight, self.slot])
        token_part = rows @ linear.weight[:, :d].T
        table = self.positional.table(count)
        if table is None:
            return token_part, None
        position_weight = linear.weight[:, d:] if self.positional.concatenated else linear.weight
        return token_part, table @ position_weight.T

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.unflatten(-1, (self.heads, self.head_width))

    def forward(self, tokens: torch.Tensor, need_attention: bool = False) -> ModelOutput:
        n, T = tokens.shape
        if self.uses_slot:  # the slot is token V, at position T; for query t it moves to t + 1 (_move_slot)
            tokens = torch.cat([tokens, tokens.new_full((n, 1), self.vocab_size)], dim=1)
        L = tokens.shape[1]
        # query t has read tokens 0..t; only the last one where only the last position is scored
        ends = torch.arange(T - 1 if self.scoring == "last" else 0, T, device=tokens.device)  # (Q,)
        query_positions = ends + int(self.uses_slot)  # a slot sits right after the last token it has read
        positions = torch.arange(L, device=tokens.device)
        token_queries, position_queries = self._project(self.query, L)
        query_tokens = tokens[:, -1:].expand(n, len(ends)) if self.uses_slot else tokens[:, ends]  # the slot is V
        q = token_queries[query_tokens]  # (n, Q, d)
        if position_queries is not None:
            q = q + position_queries[query_positions]
        q = self.positional.rotate(self._heads(q), query_positions)  # (n, Q, H, e)
        scores = self._scores(q, tokens, query_positions) / math.sqrt(self.head_width)  # (n, H, Q, L)
        bias = self.positional.bias(query_positions, positions)  # (H, Q, L)
        if bias is not None:
            own = query_positions.view(1, -1, 1).expand(self.heads, -1, 1)  # the slot's own offset: 0
            scores = scores + self._move_slot(bias, bias.gather(2, own)[..., 0])
        future = positions > ends[:, None]  # (Q, L): the causal mask; the slot sees itself
        future[:, T:] = False
        attention = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)  # (n, H, Q, L)
        logits = self.output(self._average_values(attention, tokens, query_positions).transpose(1, 2).flatten(2))
        if self.scoring == "last":
            logits = logits[:, 0]  # (n, V)
        return ModelOutput(logits, attention[:, None])  # (n, 1 layer, H, Q, L)

    def _move_slot(self, per_key: torch.Tensor, at_query: torch.Tensor) -> torch.Tensor:
        """``per_key`` (..., Q, L) with the slot's column (L - 1) replaced by ``at_query`` (..., Q), the slot's
        value at each query's own position, where the queries are many. With one query, after the last token,
        the slot is already in its place at position T: the layer is then computed exactly as a single query."""
        if not self.uses_slot or self.scoring == "last":
            return per_key
        return torch.cat([per_key[..., :-1], at_query[..., None]], dim=-1)

    def _scores(self, q: torch.Tensor, tokens: torch.Tensor, query_positions: torch.Tensor) -> torch.Tensor:
        """(n, H, Q, L) raw scores q_t . k_l of the queries (n, Q, H, e) against every position."""
        n, L = tokens.shape
        Q = q.shape[1]
        token_keys, position_keys = self._project(self.key, L)
        if self.positional.rotates:  # a key depends on its position as well: build every key
            keys = token_keys.index_select(0, tokens.flatten()).unflatten(0, (n, L))
            if position_keys is not None:
                keys = keys + position_keys
            keys = self.positional.rotate(self._heads(keys), torch.arange(L, device=tokens.device))  # (n, L, H, e)
            if Q == 1:  # the single query's product, as the published records computed it
                scores = (keys * q).sum(-1).transpose(1, 2)[:, :, None]
            else:
                scores = torch.einsum("nqhe,nlhe->nhql", q, keys)
            if self.uses_slot and self.scoring != "last":
                own = token_keys[-1] + (0 if position_keys is None else position_keys[query_positions])  # (Q, d)
                own = self.positional.rotate(self._heads(own.expand(Q, -1))[None], query_positions)[0]  # (Q, H, e)
                scores = self._move_slot(scores, torch.einsum("nqhe,qhe->nhq", q, own))
            return scores
        # otherwise score each of the V + 1 token rows once and gather: no (n, L, d) tensor
        per_token = torch.einsum("nqhe,vhe->nhqv", q, self._heads(token_keys))
        scores = per_token.gather(3, tokens[:, None, None, :].expand(n, self.heads, Q, L))
        if position_keys is not None:
            by_position = torch.einsum("nqhe,lhe->nhql", q, self._heads(position_keys))
            own = by_position.gather(3, query_positions.view(1, 1, -1, 1).expand(n, self.heads, -1, 1))[..., 0]
            scores = scores + self._move_slot(by_position, own)
        return scores

    def _average_values(self, attention: torch.Tensor, tokens: torch.Tensor,
                        query_positions: torch.Tensor) -> torch.Tensor:
        """(n, H, Q, e): sum_l a_tl W_v,h x_l, via the attention mass on each token and each position."""
        n, H, Q, L = attention.shape
        token_part, position_part = self._project(self.value, L)
        token_values = self._heads(token_part)  # (V + 1, H, e)
        mass = attention.new_zeros(n, H, Q, token_values.shape[0])
        mass.scatter_add_(3, tokens[:, None, None, :].expand(n, H, Q, L), attention)
        values = torch.einsum("nhqv,vhe->nhqe", mass, token_values)
        if position_part is None:
            return values
        position_values = self._heads(position_part)  # (L, H, e)
        if not self.uses_slot or self.scoring == "last":
            return values + torch.einsum("nhql,lhe->nhqe", attention, position_values)
        # the slot of query t sits at t + 1: its position row is that one, not row T
        values = values + torch.einsum("nhql,lhe->nhqe", attention[..., :-1], position_values[:-1])
        return values + attention[..., -1, None] * position_values[query_positions].transpose(0, 1)

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
