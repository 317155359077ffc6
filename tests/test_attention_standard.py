"""The standard attention family (plugins/tokbench_attention/standard.py) against a dense reference."""
from __future__ import annotations

import math

import pytest
import torch

from models_support import build_model
from tokbench.errors import ParamError
from tokbench.plugins import registry
from tokbench_attention.positional import PositionalEncoding
from tokbench_attention.standard import StandardAttention

FAMILY = ("attn-nope", "attn-sinusoidal", "attn-learned", "attn-rope", "attn-alibi", "attn-t5bias",
          "attn-onehot-concat")


@pytest.fixture(scope="module")
def walk():
    return registry().task("random-walk").create({"K": 5, "context_length": 12, "train_size": 8})


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
    model = build_model(name, walk, **params)
    tokens = walk.make_split("train", 0).tokens
    out = model(tokens, need_attention=True)
    logits, attention = dense_forward(model, tokens)
    torch.testing.assert_close(out.logits, logits, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(out.attention[:, 0, :, 0], attention, rtol=1e-4, atol=1e-6)


def test_attention_per_head(walk):
    model = build_model("attn-alibi", walk, heads=4, d=8)
    tokens = walk.make_split("train", 0).tokens
    out = model(tokens, need_attention=True)
    assert out.attention.shape == (len(tokens), 1, 4, 1, walk.context_length)  # (n, L, H, Q, T)
    assert not torch.allclose(out.attention[:, 0, 0], out.attention[:, 0, 3])  # ALiBi slopes differ per head


@pytest.mark.parametrize("name", ["attn-nope", "attn-rope", "attn-learned", "attn-t5bias", "attn-onehot-concat"])
def test_zero_init_starts_uniform_with_zero_logits_and_then_moves(walk, name):
    model = build_model(name, walk, init="zero", query="slot")
    split = walk.make_split("train", 0)
    out = model(split.tokens)
    torch.testing.assert_close(out.attention, torch.full_like(out.attention, 1 / (walk.context_length + 1)))
    assert out.logits.abs().max() == 0
    model.loss(out, split.labels).backward()
    assert model.output.weight.grad.abs().max() > 0  # the value path starts learning at once
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    optimizer.step()
    optimizer.zero_grad()
    model.loss(model(split.tokens), split.labels).backward()
    assert model.key.weight.grad.abs().max() > 0  # and then the attention


def test_the_zero_init_presets_start_like_paper_a(walk):
    for name in ("attn-rope-zeroinit", "attn-onehot-concat-zeroinit"):
        spec = registry().model(name)
        assert spec.resolve()["init"] == "zero" and spec.resolve()["query"] == "slot"


def test_gaussian_init_draws_every_parameter_at_sigma(walk):
    model = build_model("attn-learned", walk, init="gaussian", init_sigma=0.02, d=32)
    values = torch.cat([p.detach().flatten() for p in model.parameters()])
    assert values.std().item() == pytest.approx(0.02, rel=0.1)


def test_nope_with_a_query_slot_sees_a_bag_of_tokens(walk):
    model = build_model("attn-nope", walk, query="slot")
    tokens = walk.make_split("train", 0).tokens
    shuffled = tokens[:, torch.randperm(tokens.shape[1], generator=torch.Generator().manual_seed(1))]
    torch.testing.assert_close(model(shuffled).logits, model(tokens).logits)


def test_key_query_reproduces_the_scores_where_the_layer_is_bilinear(walk):
    model = build_model("attn-t5bias", walk)
    W, E = model.key_query()
    tokens = walk.make_split("train", 0).tokens
    L = tokens.shape[1]
    scores = torch.einsum("nld,de,ne->nl", E[tokens], W, E[tokens[:, -1]])
    scores = scores + model.positional.bias(torch.tensor([L - 1]), torch.arange(L))[0]
    torch.testing.assert_close(model(tokens).attention[:, 0, 0, 0], scores.softmax(-1))
    assert build_model("attn-rope", walk).key_query() is None
    assert build_model("attn-nope", walk, heads=2).key_query() is None
    assert build_model("attn-nope", walk, query="slot").key_query() is None


def test_value_matrix_maps_an_attended_token_to_its_logits(walk):
    model = build_model("attn-nope", walk, heads=2)
    V = model.value_matrix()
    assert V.shape == (walk.vocab_size, walk.vocab_size)
    token = 3
    tokens = torch.full((1, walk.context_length), token)  # attention can only land on `token`
    torch.testing.assert_close(model(tokens).logits[0], V[:, token])


@pytest.mark.parametrize("name, params, message", [
    ("attn-nope", {"d": 10, "heads": 3}, "multiple of heads"),
    ("attn-rope", {"d": 6, "heads": 2}, "even"),
    ("attn-t5bias", {"t5_buckets": 32, "t5_max_distance": 8}, "t5_max_distance"),
])
def test_bad_shapes_are_usage_errors(walk, name, params, message):
    with pytest.raises(ParamError, match=message):
        build_model(name, walk, **params)
