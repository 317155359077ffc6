"""Causal linear attention (Katharopoulos et al. 2020, "Transformers are RNNs"), in the decoder of transformer.py.

Shape legend: n sequences, T positions, H heads of width e, phi(x) = elu(x) + 1 > 0.

    a_ts = phi(q_t) . phi(k_s) / sum_{s' <= t} phi(q_t) . phi(k_s')     for s <= t (no 1/sqrt(e), as in the paper)
    y_t  = sum_{s <= t} a_ts v_s = phi(q_t)^T S_t / phi(q_t)^T z_t,     S_t = sum_{s <= t} phi(k_s) v_s^T,
                                                                        z_t = sum_{s <= t} phi(k_s)

The running sums (the right-hand form) cost T e^2 per head, linear in T, the paper's point;
the weights a_ts (the left-hand form) cost T^2 e but run as batched matrix products, which
on a CPU stay faster up to T of about 16 e (measured at e = 16: 15 vs 60 ms per forward and
backward at T = 96, 119 vs 50 ms at T = 512, 6144 tokens a batch). Training takes the weights
up to T = 16 e and the running sums beyond; with ``need_attention`` the normalised weights are
built and returned: they are the model's attention (rows sum to 1 because phi is positive). Positions enter only
through a table on the embeddings: a rotation or a score bias has no place here.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tokbench_attention import positional
from tokbench_models.transformer import Transformer

EPS = 1e-6  # the paper's guard on the normaliser
RUNNING_SUMS_BEYOND = 16  # context lengths T > 16 e train on the running sums (see above)


def feature_map(x: torch.Tensor) -> torch.Tensor:
    return F.elu(x) + 1.0


class CausalLinearAttention(nn.Module):
    """Multi-head causal linear attention with the elu + 1 feature map."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads, self.head_width = heads, d // heads
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d, bias=False)

    def forward(self, x: torch.Tensor, encoding: positional.PositionalEncoding,
                need_attention: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        n, T, d = x.shape
        q, k, v = (part.view(n, T, self.heads, self.head_width).transpose(1, 2)
                   for part in self.qkv(x).split(d, dim=2))  # (n, H, T, e)
        q, k = feature_map(q), feature_map(k)
        if need_attention or T <= RUNNING_SUMS_BEYOND * self.head_width:
            causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            similarity = (q @ k.transpose(-2, -1)).masked_fill(~causal, 0.0)  # (n, H, T, T)
            attention = similarity / (similarity.sum(-1, keepdim=True) + EPS)
            y = attention @ v
        else:
            state = torch.einsum("nhte,nhtf->nhtef", k, v).cumsum(2)  # S_t: (n, H, T, e, e)
            normaliser = k.cumsum(2)  # z_t: (n, H, T, e)
            y = torch.einsum("nhte,nhtef->nhtf", q, state) / ((q * normaliser).sum(-1, keepdim=True) + EPS)
            attention = None
        return self.proj(y.transpose(1, 2).reshape(n, T, d)), attention

    def state_size(self) -> int:
        """The running sums of every head: S_t (e, e) and z_t (e)."""
        return self.heads * (self.head_width ** 2 + self.head_width)


class LinearTransformer(Transformer):
    """The pre-LN decoder of transformer.py with causal linear attention as its mixer."""

    mixer = CausalLinearAttention
