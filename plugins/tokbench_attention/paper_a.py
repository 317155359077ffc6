"""The single self-attention layer of [A], computed in structured form.

Shapes: n samples, T = N-1 input tokens, K tokens, M position dimensions.
The query x~_N = [0; p_N] is the same for every sample, so u = W x~_N is one
(K+M,) vector; the score of input i is u[s_i] + <p_i, u[K:]>, a token gather
plus a position gather. Nothing of size n x N x (K+M) is ever built.
"""
from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from tokbench.errors import ParamError
from tokbench.model import ModelOutput, TokenModel
from tokbench.task import Task


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
        self.register_buffer("query", torch.cat([torch.zeros(K, dtype=dtype), self.positions[-1]]))  # x~_N = [0; p_N]
        self.V = nn.Parameter(torch.zeros(K, K, dtype=dtype))
        self.W = nn.Parameter(torch.zeros(K + M, K + M, dtype=dtype))
        if params["init"] == "gaussian":
            nn.init.normal_(self.V, std=params["init_sigma"])
            nn.init.normal_(self.W, std=params["init_sigma"])

    def forward(self, tokens: torch.Tensor, need_attention: bool = False) -> ModelOutput:
        n, T = tokens.shape
        K = self.vocab_size
        # W x~_N as one matrix-vector product: its backward is a single outer product,
        # where slicing W first would add a full-size zero fill and copy per step.
        u = self.W @ self.query
        position_scores = self.positions @ u[K:]  # (N,) <p_i, u_pos>, the query slot last
        scores = torch.cat([u[:K][tokens] + position_scores[:T], position_scores[T:].expand(n, 1)], dim=1)
        attention = torch.softmax(scores, dim=1)  # (n, N); column N is the query slot
        attended = torch.zeros(n, K, dtype=attention.dtype, device=tokens.device)
        attended.scatter_add_(1, tokens, attention[:, :T])  # X a: the slot's column of X is zero
        return ModelOutput(attended @ self.V.T, attention[:, None, None, None])  # (n, L=1, H=1, Q=1, N)

    def loss(self, output: ModelOutput, labels: torch.Tensor) -> torch.Tensor:
        f_y = output.logits.gather(1, labels[:, None]).squeeze(1)
        return -torch.log(f_y + self.eps).mean()

    def value_matrix(self) -> torch.Tensor:
        return self.V


def dense_forward(layer: PaperALayer, tokens: torch.Tensor) -> ModelOutput:
    """The same layer computed literally from [A]'s formula, materialising X~ (n, N, K+M).

    A reference for tests and the benchmark; it is far slower than ``forward``.
    """
    n, T = tokens.shape
    K, dtype = layer.vocab_size, layer.W.dtype
    X = torch.cat([nn.functional.one_hot(tokens, K).to(dtype), torch.zeros(n, 1, K, dtype=dtype)], dim=1)
    X_tilde = torch.cat([X, layer.positions.expand(n, -1, -1)], dim=2)  # (n, N, K+M)
    scores = torch.einsum("nik,kl,nl->ni", X_tilde, layer.W, X_tilde[:, -1, :])
    attention = torch.softmax(scores, dim=1)
    return ModelOutput(torch.einsum("ab,nib,ni->na", layer.V, X, attention), attention[:, None, None, None])
