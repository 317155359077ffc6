"""Gated linear attention (GLA; Yang, Wang, Shen, Panda & Kim, ICML 2024, arXiv:2312.06635) in the decoder of
transformer.py.

Shape legend: n sequences, T positions, d width, H heads, k = d / (2 H) key width and v = d / H value width
per head (the paper's d_k = d / 2, d_v = d; Sec. 4.4), C positions per chunk.

One head, recurrent form (Sec. 4.1):

    alpha_t = sigmoid(x_t W_a1 W_a2 + b_a) ^ (1 / 16)      (k,) forget gate; W_a1 W_a2 of rank 16
    S_t     = diag(alpha_t) S_{t-1} + k_t^T v_t            (k, v): the state
    o_t     = q_t S_t / sqrt(k)                            (v,), scaled as the authors' kernels (fla) scale it

Layer (Sec. 4.4): y_t = W_O (swish(x_t W_r + b_r) * concat_h norm(o_t^h)), norm an RMSNorm per head as in the
authors' layer (the paper writes LayerNorm). Before the recurrence, q, k and v each pass through a short causal
depthwise convolution of ``conv`` taps and a SiLU, the authors' layer's option ``use_short_conv`` (flash-linear-
attention): without it no position can tell its own token from the one before, which associative recall needs
(docs/models.md); ``conv = 0`` leaves it out, the layer as the paper writes it. With b_t = sum_{s <= t} log alpha_s, the chunkwise form (Sec. 4.2)
computes a chunk of C positions from the state S at its start:

    o_i = (q_i * e^(b_i - b_0)) S + sum_{j <= i in the chunk} (q_i . (k_j * e^(b_i - b_j))) v_j
    S'  = e^(b_C - b_0) * S + sum_j (k_j * e^(b_C - b_j))^T v_j

The decays are formed as e^(b_i - b_j) with i >= j, never as e^(b_i) e^(-b_j), so nothing overflows however
small the gates (the paper's secondary chunking has the same purpose). Training runs the chunkwise form, a
loop over T / C chunks; ``gla_recurrent`` is the reference, position by position. On a GPU with the package
``flash-linear-attention`` installed, its fused kernel ``chunk_gla`` computes the same (tests/test_models_kernels.py).
"""
from __future__ import annotations

import inspect

import torch
import torch.nn.functional as F
from mambapy.mamba import RMSNorm
from torch import nn

from tokbench.errors import ParamError
from tokbench_models.kernels import fused_allowed, optional
from tokbench_models.transformer import Transformer

CHUNK = 8  # positions per chunk: the intra-chunk part costs n T C d / 2, the loop T / C steps (8: fastest on a CPU)
GATE_RANK, GATE_TEMPERATURE = 16, 16.0  # the paper's low rank of the gate projection and its tau


def gla_recurrent(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, log_alpha: torch.Tensor) -> torch.Tensor:
    """The recurrent form, one position at a time: q, k, log_alpha (n, T, H, k), v (n, T, H, v) -> o (n, T, H, v)."""
    state = q.new_zeros(q.shape[0], q.shape[2], q.shape[3], v.shape[3])  # S: (n, H, k, v)
    outputs = []
    for t in range(q.shape[1]):
        state = log_alpha[:, t, :, :, None].exp() * state + k[:, t, :, :, None] * v[:, t, :, None, :]
        outputs.append((q[:, t, :, :, None] * state).sum(-2))
    return torch.stack(outputs, dim=1) * q.shape[3] ** -0.5


def gla_chunked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, log_alpha: torch.Tensor,
                chunk: int = CHUNK) -> torch.Tensor:
    """The chunkwise form (module docstring), the same shapes as :func:`gla_recurrent`."""
    n, T, H, width = q.shape
    pad = -T % chunk  # zero keys and values, gates of 1: padding after the end changes no earlier output
    q, k, v, log_alpha = (F.pad(x, (0, 0, 0, 0, 0, pad)) for x in (q, k, v, log_alpha))
    q, k, v, log_alpha = (x.unflatten(1, (-1, chunk)).transpose(2, 3) for x in (q, k, v, log_alpha))  # (n, N, H, C, .)
    b = log_alpha.cumsum(3)  # b_i - b_0 within each chunk: (n, N, H, C, k)
    causal = torch.ones(chunk, chunk, dtype=torch.bool, device=q.device).tril()
    decay = (b[..., :, None, :] - b[..., None, :, :]).masked_fill(~causal[..., None], float("-inf")).exp()
    scores = torch.einsum("...ik,...jk,...ijk->...ij", q, k, decay)  # (n, N, H, C, C)
    inner = scores @ v  # within the chunk: (n, N, H, C, v)
    to_end = (b[..., -1:, :] - b).exp()  # e^(b_C - b_j): (n, N, H, C, k)
    state = q.new_zeros(n, H, width, v.shape[-1])
    outer = []
    for c in range(q.shape[1]):  # the state carried from chunk to chunk
        outer.append((q[:, c] * b[:, c].exp()) @ state)
        state = b[:, c, :, -1, :, None].exp() * state + (k[:, c] * to_end[:, c]).transpose(-1, -2) @ v[:, c]
    o = inner + torch.stack(outer, dim=1)
    return (o.transpose(2, 3).flatten(1, 2)[:, :T] * width ** -0.5)  # (n, T, H, v)


def gla_fused(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, log_alpha: torch.Tensor) -> torch.Tensor:
    """flash-linear-attention's ``chunk_gla`` (CUDA, Triton) on the layout (n, T, H, .) of the other forms."""
    chunk_gla = optional("fla.ops.gla", "chunk_gla")
    # fla before 0.2 took (n, H, T, .) unless told head_first=False; later versions take (n, T, H, .) only
    layout = {"head_first": False} if "head_first" in inspect.signature(chunk_gla).parameters else {}
    o, _ = chunk_gla(q, k, v, log_alpha, scale=q.shape[3] ** -0.5, **layout)
    return o


class GatedLinearAttention(nn.Module):
    """The GLA layer of Sec. 4.4: H heads of gated linear attention, an RMSNorm per head and a swish output gate."""

    reference = False  # True: the recurrent form, position by position (the tests' reference)

    def __init__(self, d: int, heads: int, conv: int) -> None:
        super().__init__()
        if d % (2 * heads):
            raise ParamError(f"gla: d={d} must be a multiple of 2 * heads = {2 * heads} (keys have width d / 2)")
        self.heads, self.key_width, self.value_width = heads, d // (2 * heads), d // heads
        self.q = nn.Linear(d, d // 2, bias=False)
        self.k = nn.Linear(d, d // 2, bias=False)
        self.v = nn.Linear(d, d, bias=False)
        self.taps = conv  # flash-linear-attention's short convolution: causal, depthwise, no bias, then SiLU
        self.convs = nn.ModuleList(nn.Conv1d(w, w, conv, groups=w, padding=conv - 1, bias=False)
                                   for w in (d // 2, d // 2, d)) if conv else None
        self.gate = nn.Sequential(nn.Linear(d, GATE_RANK, bias=False), nn.Linear(GATE_RANK, d // 2))  # W_a1 W_a2 + b_a
        self.output_gate = nn.Linear(d, d)  # W_r, b_r
        self.norm = RMSNorm(self.value_width, eps=1e-5)  # torch's own is 2.4 or later
        self.proj = nn.Linear(d, d, bias=False)  # W_O

    def forward(self, x: torch.Tensor, encoding: object, need_attention: bool) -> tuple[torch.Tensor, None]:
        n, T, d = x.shape
        q, k, v = self.q(x), self.k(x), self.v(x)
        if self.convs is not None:  # padded on both sides: the first T outputs are the causal ones
            q, k, v = (F.silu(c(z.transpose(1, 2))[..., :T].transpose(1, 2)) for c, z in zip(self.convs, (q, k, v)))
        q, k = (z.view(n, T, self.heads, self.key_width) for z in (q, k))
        v = v.view(n, T, self.heads, self.value_width)
        log_alpha = F.logsigmoid(self.gate(x)).view(n, T, self.heads, self.key_width) / GATE_TEMPERATURE
        if self.reference:
            mix = gla_recurrent
        elif fused_allowed(x) and optional("fla.ops.gla", "chunk_gla") is not None:
            mix = gla_fused
        else:
            mix = gla_chunked
        o = self.norm(mix(q, k, v, log_alpha)).flatten(2)  # (n, T, d)
        return self.proj(F.silu(self.output_gate(x)) * o), None

    def state_size(self) -> int:
        """S of every head (k x v), and the short convolution's last conv - 1 inputs of q, k and v (d/2 + d/2 + d)."""
        inputs = self.heads * (2 * self.key_width + self.value_width)
        return self.heads * self.key_width * self.value_width + max(self.taps - 1, 0) * inputs


class GLATransformer(Transformer):
    """The pre-LN decoder of transformer.py with GLA layers as its mixers (no positional encoding: the gates
    order the past)."""

    def build_mixer(self, params: dict) -> nn.Module:
        return GatedLinearAttention(params["d"], params["heads"], params["conv"])
