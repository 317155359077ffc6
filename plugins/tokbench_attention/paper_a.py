"""The single self-attention layer of [A], computed in structured form.

Shapes: n samples, T = N-1 input tokens, K tokens, M position dimensions, Q queries.
The query after token t is the zero slot x~_{t+2} = [0; p_{t+2}] (1-based, as in [A]),
the same for every sample, so u_t = W x~_{t+2} is one (K+M,) vector per query; the
score of input i <= t is u_t[s_i] + <p_i, u_t[K:]>, a token gather plus a position
gather, and the slot scores itself <p_{t+2}, u_t[K:]>. Nothing of size n x N x (K+M)
is ever built. On a task scored at the last position the one query is x~_N: [A]'s
layer. On a task scored at many positions every prefix has its slot (Q = T), under a
causal mask.
"""
from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from tokbench.errors import NotApplicable, ParamError
from tokbench.model import ModelOutput, TokenModel
from tokbench.task import IGNORE, Task
from tokbench_attention import FIXED_CONCAT


def position_vectors(count: int, dim: int, kind: str, norm: float, dtype: torch.dtype) -> torch.Tensor:
    """(count, dim) mutually orthogonal rows of equal norm ``norm``.

    ``onehot``: norm * e_i, exactly orthogonal and exactly representable.
    ``sinusoidal``: sin(pi*i*j/(dim+1)), i, j >= 1, the DST-I basis; orthogonal
    in exact arithmetic, up to rounding in floating point.
    """
    if count > dim:
        raise ParamError(f"position_dim={dim} is too small: {count} orthogonal positions need position_dim >= {count}")
    if kind == "onehot":
        return torch.eye(count, dim, dtype=dtype) * norm
    i = torch.arange(1, count + 1, dtype=torch.float64)[:, None]
    j = torch.arange(1, dim + 1, dtype=torch.float64)[None, :]
    raw = torch.sin(math.pi * i * j / (dim + 1))  # each row has norm sqrt((dim+1)/2)
    return (raw * (norm / math.sqrt((dim + 1) / 2))).to(dtype)


class PaperALayer(TokenModel):
    """f(X) = V X softmax(X~^T W x~_N) with V (K, K) and W (K+M, K+M) trained."""

    def __init__(self, params: dict[str, Any], task: Task) -> None:
        super().__init__(params, task)
        dtype = getattr(torch, params["dtype"])
        K, N, M = self.vocab_size, self.context_length + 1, params["position_dim"]
        self.eps = params["eps"]
        self.register_buffer("positions", position_vectors(N, M, params["positions"], params["position_norm"], dtype))
        self.V = nn.Parameter(torch.zeros(K, K, dtype=dtype))
        self.W = nn.Parameter(torch.zeros(K + M, K + M, dtype=dtype))
        if params["init"] == "gaussian":
            nn.init.normal_(self.V, std=params["init_sigma"])
            nn.init.normal_(self.W, std=params["init_sigma"])

    def forward(self, tokens: torch.Tensor, need_attention: bool = False) -> ModelOutput:
        n, T = tokens.shape
        K = self.vocab_size
        if T + 1 > len(self.positions):
            raise NotApplicable(f"{FIXED_CONCAT}: built for {len(self.positions) - 1} inputs, given {T}")
        if self.scoring == "last":
            # W x~_N as one matrix-vector product: its backward is a single outer product,
            # where slicing W first would add a full-size zero fill and copy per step.
            u = (self.W @ torch.cat([self.positions.new_zeros(K), self.positions[T]]))[:, None]  # (K+M, Q=1)
            ends = torch.tensor([T - 1], device=tokens.device)
        else:
            ends = torch.arange(T, device=tokens.device)  # query t has read tokens 0..t
            slots = torch.cat([self.positions.new_zeros(T, K), self.positions[1:T + 1]], dim=1)  # (Q, K+M)
            u = self.W @ slots.T  # (K+M, Q)
        position_scores = self.positions @ u[K:]  # (N, Q): <p_i, u_t,pos>
        token_scores = u[:K][tokens].transpose(1, 2)  # (n, Q, T): u_t[s_i]
        own = position_scores[ends + 1, torch.arange(len(ends))]  # (Q,): the slot of query t, at t + 1
        scores = torch.cat([token_scores + position_scores[:T].T, own[:, None].expand(n, -1, 1)], dim=2)
        future = torch.arange(T + 1, device=tokens.device) > ends[:, None]
        future[:, T] = False  # the slot sees itself
        attention = torch.softmax(scores.masked_fill(future, float("-inf")), dim=2)  # (n, Q, T+1), slot last
        attended = torch.zeros(n, len(ends), K, dtype=attention.dtype, device=tokens.device)
        attended.scatter_add_(2, tokens[:, None, :].expand_as(token_scores), attention[..., :T])  # X a_t
        logits = attended @ self.V.T  # (n, Q, K)
        if self.scoring == "last":
            logits = logits[:, 0]
        return ModelOutput(logits, attention[:, None, None])  # (n, L=1, H=1, Q, T+1)

    def loss(self, output: ModelOutput, labels: torch.Tensor) -> torch.Tensor:
        """-log(f_y + eps), the mean over the scored positions."""
        f_y = output.logits.gather(-1, labels.clamp(min=0)[..., None])[..., 0]
        nll = -torch.log(f_y + self.eps)
        return nll.mean() if labels.dim() == 1 else nll[labels != IGNORE].mean()

    def value_matrix(self) -> torch.Tensor:
        return self.V


def dense_forward(layer: PaperALayer, tokens: torch.Tensor) -> ModelOutput:
    """The same layer computed literally from [A]'s formula, materialising X~ (n, t+2, K+M) per prefix.

    f_t(X) = V X_{:t+1} softmax(X~_{:t+2}^T W x~_{t+2}), the slot x~_{t+2} = [0; p_{t+2}] after
    token t: every prefix on a task scored at many positions, the whole input on one scored at
    the last. A reference for tests and the benchmark; it is far slower than ``forward``.
    """
    n, T = tokens.shape
    K, dtype = layer.vocab_size, layer.W.dtype
    ends = range(T) if layer.scoring == "positions" else [T - 1]
    logits, attention = [], []
    for t in ends:
        X = torch.cat([nn.functional.one_hot(tokens[:, :t + 1], K).to(dtype), torch.zeros(n, 1, K, dtype=dtype)], 1)
        X_tilde = torch.cat([X, layer.positions[:t + 2].expand(n, -1, -1)], dim=2)  # (n, t+2, K+M)
        scores = torch.einsum("nik,kl,nl->ni", X_tilde, layer.W, X_tilde[:, -1, :])
        a = torch.softmax(scores, dim=1)
        logits.append(torch.einsum("ab,nib,ni->na", layer.V, X, a))
        # on the (T+1)-wide grid of forward: the inputs 0..t, zeros for those not yet read, the slot last
        attention.append(torch.cat([a[:, :-1], a.new_zeros(n, T - 1 - t), a[:, -1:]], dim=1))
    if layer.scoring == "last":
        return ModelOutput(logits[0], attention[0][:, None, None, None])
    return ModelOutput(torch.stack(logits, 1), torch.stack(attention, 1)[:, None, None])
