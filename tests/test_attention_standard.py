"""The standard attention family (plugins/tokbench_attention/standard.py) against a dense reference."""
from __future__ import annotations

import math

import pytest
import torch

from tokbench.errors import ParamError
from tokbench.plugins import registry
from tokbench_attention.positional import PositionalEncoding
from tokbench_attention.standard import StandardAttention

FAMILY = ("attn-nope", "attn-sinusoidal", "attn-learned", "attn-rope", "attn-alibi", "attn-t5bias", "attn-onehot-concat")


@pytest.fixture(scope="module")
def walk():
    return registry().task("random-walk").create({"K": 5, "context_length": 12, "train_size": 8})


def build(name: str, task, **params) -> StandardAttention:
    spec = registry().model(name)
    torch.manual_seed(0)
    return spec.build(spec.resolve(params), task)


def dense_forward(model: StandardAttention, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The textbook layer: materialise every input vector, project, rotate, score, average, read out."""
    n = tokens.shape[0]
    H, e = model.heads, model.head_width
    encoding: PositionalEncoding = model.positional
    x = model.embedding(tokens)
    if model.slot is not None:
        x = torch.cat([x, model.slot.expand(n, 1, -1)], dim=1)
    L = x.shape[1]
    table = encoding.table()
    if table is not None:
        x = torch.cat([x, table.expand(n, -1, -1)], -1) if encoding.concatenated else x + table
    positions = torch.arange(L)
    q = encoding.rotate(model.query(x[:, -1:]).unflatten(-1, (H, e)), positions[-1:])
    k = encoding.rotate(model.key(x).unflatten(-1, (H, e)), positions)
    scores = torch.einsum("nqhe,nlhe->nhl", q, k) / math.sqrt(e)
    bias = encoding.bias(positions[-1:], positions)
    if bias is not None:
        scores = scores + bias[:, 0]
    attention = scores.softmax(-1)
    v = model.value(x).unflatten(-1, (H, e))
    logits = model.output(torch.einsum("nhl,nlhe->nhe", attention, v).flatten(1))
    return logits, attention


@pytest.mark.parametrize("name", FAMILY)
@pytest.mark.parametrize("params", [{}, {"heads": 2, "query": "slot"}, {"init": "gaussian", "init_sigma": 0.5}])
def test_structured_forward_equals_dense_layer(walk, name, params):
    model = build(name, walk, **params)
    tokens = walk.make_split("train", 0).tokens
    out = model(tokens, head_attention=True)
    logits, attention = dense_forward(model, tokens)
    torch.testing.assert_close(out.logits, logits, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(out.head_attention, attention, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(out.attention, attention.mean(1))
