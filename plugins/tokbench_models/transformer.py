"""A causal pre-LN transformer decoder (Vaswani et al. 2017), laid out like nanoGPT.

Shape legend: n sequences, T positions, V vocabulary, d width, L layers, H heads of width e = d / H.

    x = embed(tokens) (+ position table)                  (n, T, d)
    for each of the L blocks:
        x = x + attention(layer_norm(x))                  causal; RoPE / ALiBi / T5 act inside
        x = x + mlp(layer_norm(x))                        if the model has MLPs
    logits = head(layer_norm(x))                          (n, T, V): position t has read tokens[:t+1]

Positional encodings are the single-layer family's (``tokbench_attention.positional``):
a table is added to (or concatenated with, then projected back to d) the embeddings
once; a rotation or a score bias acts in every layer, shared by all of them, as in T5.
The mixer of a block is built by ``build_mixer``, so linear attention (linear_attention.py),
gated linear attention (gla.py) and H3 (h3.py) reuse everything here with another mixer;
a mixer without positional parameters gets NoPE. Positions are computed for the input at
hand: the decoder runs on inputs longer than the context it was built for, except
with a learned or concatenated table, which raises NotApplicable (positional.py).
"""
from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from tokbench.errors import ParamError
from tokbench.model import ModelOutput, TokenModel
from tokbench.task import Task
from tokbench_attention import positional

ENCODINGS: dict[str, type[positional.PositionalEncoding]] = {
    "nope": positional.NoPE,
    "sinusoidal": positional.SinusoidalAdded,
    "learned": positional.LearnedAdded,
    "rope": positional.RoPE,
    "alibi": positional.ALiBi,
    "t5bias": positional.T5Bias,
    "onehot-concat": positional.OrthogonalConcat,
}


class CausalSelfAttention(nn.Module):
    """Multi-head causal softmax attention.

    With ``need_attention`` the weights come from an explicit softmax and are returned,
    (n, H, T, T); otherwise torch's fused ``scaled_dot_product_attention`` computes the
    same output and no weights.
    """

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads, self.head_width = heads, d // heads
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d, bias=False)

    def forward(self, x: torch.Tensor, encoding: positional.PositionalEncoding,
                need_attention: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        n, T, d = x.shape
        positions = torch.arange(T, device=x.device)
        q, k, v = (part.view(n, T, self.heads, self.head_width) for part in self.qkv(x).split(d, dim=2))
        q, k = encoding.rotate(q, positions), encoding.rotate(k, positions)  # (n, T, H, e)
        q, k, v = (part.transpose(1, 2) for part in (q, k, v))  # (n, H, T, e)
        bias = encoding.bias(positions, positions)  # (H, T, T) or None
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if need_attention:
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_width)  # (n, H, T, T)
            if bias is not None:
                scores = scores + bias
            attention = scores.masked_fill(~causal, float("-inf")).softmax(-1)
            y = attention @ v
        else:
            mask = None if bias is None else bias.masked_fill(~causal, float("-inf"))
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=bias is None)
            attention = None
        return self.proj(y.transpose(1, 2).reshape(n, T, d)), attention

    def state_size(self) -> int | None:
        """None: what attention reads of the past grows with the context (docs/models.md, "Sizes")."""
        return None


class MLP(nn.Module):
    """The position-wise feed-forward net: d -> 4d -> d with a GELU."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.up = nn.Linear(d, 4 * d)
        self.down = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x)))


class Block(nn.Module):
    """One pre-LN block: a mixer (attention) and an optional MLP, each on a residual branch."""

    def __init__(self, mixer: nn.Module, d: int, mlp: bool) -> None:
        super().__init__()
        self.ln_mixer = nn.LayerNorm(d)
        self.mixer = mixer
        self.ln_mlp = nn.LayerNorm(d) if mlp else None
        self.mlp = MLP(d) if mlp else None

    def forward(self, x: torch.Tensor, encoding: positional.PositionalEncoding,
                need_attention: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        mixed, attention = self.mixer(self.ln_mixer(x), encoding, need_attention)
        x = x + mixed
        if self.mlp is not None:
            x = x + self.mlp(self.ln_mlp(x))
        return x, attention


class Transformer(TokenModel):
    """A causal decoder predicting at every position; ``mixer`` builds each block's attention."""

    mixer: type[nn.Module] = CausalSelfAttention

    def __init__(self, params: dict[str, Any], task: Task) -> None:
        super().__init__(params, task)
        d, heads = params["d"], params.get("heads", 1)
        if d % heads:
            raise ParamError(f"d={d} must be a multiple of heads={heads}")
        T = self.context_length
        self.encoding = ENCODINGS[params.get("positional", "nope")](params, T, d, heads)
        self.embedding = nn.Embedding(self.vocab_size, d)
        table = self.encoding.table()
        # a concatenated table widens the input: project [token; position] back to the width d
        self.inlet = nn.Linear(d + table.shape[1], d, bias=False) if self.encoding.concatenated else None
        self.blocks = nn.ModuleList(Block(self.build_mixer(params), d, params["mlp"]) for _ in range(params["layers"]))
        self.ln_final = nn.LayerNorm(d)
        self.head = nn.Linear(d, self.vocab_size, bias=False)
        self.apply(self._init_weights)
        with torch.no_grad():  # learned position tables and biases on the embeddings' scale (GPT-2)
            for parameter in self.encoding.parameters():
                parameter.normal_(0.0, 0.02)

    def build_mixer(self, params: dict[str, Any]) -> nn.Module:
        """One block's sequence mixer: ``forward(x, encoding, need_attention)`` returns ``(y, attention or None)``,
        and ``state_size()`` the floats it carries from one position to the next (None: no fixed-size state)."""
        return self.mixer(params["d"], params["heads"])

    def state_size(self) -> int | None:
        """The blocks' mixers' states summed; None if a mixer has none of fixed size (attention)."""
        sizes = [block.mixer.state_size() for block in self.blocks]
        return None if None in sizes else sum(sizes)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        """GPT-2's initialisation: N(0, 0.02) weights, zero biases."""
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, 0.0, 0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, tokens: torch.Tensor, need_attention: bool = False) -> ModelOutput:
        x = self.embedding(tokens)  # (n, T, d)
        table = self.encoding.table(tokens.shape[1])  # (T, d) added, or (T, p) concatenated, or None
        if self.inlet is not None:
            x = self.inlet(torch.cat([x, table.expand(len(x), -1, -1)], dim=-1))
        elif table is not None:
            x = x + table
        maps = []
        for block in self.blocks:
            x, attention = block(x, self.encoding, need_attention)
            maps.append(attention)
        logits = self.head(self.ln_final(x))  # (n, T, V)
        reported = need_attention and all(m is not None for m in maps)  # a mixer without attention weights reports none
        return ModelOutput(logits, torch.stack(maps, dim=1) if reported else None)  # (n, L, H, T, T)


class TiedTransformer(Transformer):
    """The decoder with its read-out tied to the token embedding (head = E), as in GPT-2 and Makkuva et al. 2024."""

    def __init__(self, params: dict[str, Any], task: Task) -> None:
        super().__init__(params, task)
        self.head.weight = self.embedding.weight  # one (V, d) matrix embeds the tokens and scores them
