"""The single attention layer of [B]: f(X) = X^T softmax(X W x_T), only W trained.

Shapes: n samples, T tokens (the last is the query x_T), K tokens, d dimensions, Q queries.
The embedding E (K, d) is fixed, so every score x_t^T W x_T is an entry of the
(K, K) matrix S = E W E^T: a forward pass is one (K, K) product and a gather.
The value map is the identity, so the probability of token k is the attention
mass on the positions holding k; the logits are log(P + eps). On a task scored at
the last position the one query is x_T, [B]'s layer; on a task scored at many
positions every x_t queries x_1..x_t (Q = T, a causal mask). No positions: the layer
runs at any length.
"""
from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from tokbench.errors import ParamError
from tokbench.model import ModelOutput, TokenModel
from tokbench.task import IGNORE, Task


def embeddings(K: int, d: int, kind: str) -> torch.Tensor:
    """(K, d) float64 rows: Gaussian rows scaled to unit norm, or orthonormal rows (K <= d)."""
    if kind == "orthonormal":
        if K > d:
            raise ParamError(f"embeddings=orthonormal needs K <= d, got K={K}, d={d}; raise d or use embeddings=random")
        q, _ = torch.linalg.qr(torch.randn(d, d, dtype=torch.float64))
        return q[:K].contiguous()
    return F.normalize(torch.randn(K, d, dtype=torch.float64), dim=1)


class PaperBLayer(TokenModel):
    """Attention of the query over its own sequence, identity values, loss -log(P(y) + eps)."""

    def __init__(self, params: dict[str, Any], task: Task) -> None:
        super().__init__(params, task)
        d = params["d"]
        self.eps = params["eps"]
        self.register_buffer("E", embeddings(self.vocab_size, d, params["embeddings"]))
        self.W = nn.Parameter(torch.zeros(d, d, dtype=torch.float64))
        if params["init"] == "uniform":  # nn.Linear's default, as in [B]'s code
            bound = 1.0 / math.sqrt(d)
            nn.init.uniform_(self.W, -bound, bound)

    def forward(self, tokens: torch.Tensor, need_attention: bool = False) -> ModelOutput:
        n, T = tokens.shape
        ends = torch.arange(T - 1 if self.scoring == "last" else 0, T, device=tokens.device)  # (Q,)
        scores = self.E @ self.W @ self.E.T  # (K, K): S[i, k] = x_i^T W x_k
        scores = scores[tokens[:, None, :], tokens[:, ends, None]]  # (n, Q, T): x_l^T W x_t
        future = torch.arange(T, device=tokens.device) > ends[:, None]
        attention = torch.softmax(scores.masked_fill(future, float("-inf")), dim=2)  # (n, Q, T)
        probability = torch.zeros(n, len(ends), self.vocab_size, dtype=attention.dtype, device=tokens.device)
        probability.scatter_add_(2, tokens[:, None, :].expand_as(attention), attention)  # P(k): mass on k
        logits = torch.log(probability + self.eps)
        if self.scoring == "last":
            logits = logits[:, 0]
        return ModelOutput(logits, attention[:, None, None])  # (n, 1, 1, Q, T)

    def loss(self, output: ModelOutput, labels: torch.Tensor) -> torch.Tensor:
        """The mean of -log(P(y) + eps) over the scored positions."""
        return F.nll_loss(output.logits.flatten(0, -2), labels.flatten(), ignore_index=IGNORE)

    def log_probs(self, output: ModelOutput) -> torch.Tensor:
        """log((P + eps) / (1 + K eps)): the smoothed retrieval probabilities, normalised."""
        return output.logits - math.log1p(self.vocab_size * self.eps)

    def key_query(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.W, self.E
