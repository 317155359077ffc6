"""The model families of plugins/tokbench_models/: their maths, causality and attention, without training."""
from __future__ import annotations

import math
from models_support import build_model
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from tokbench.errors import NotApplicable
from tokbench.plugins import registry
from tokbench_models import ENCODING_CHOICES
from tokbench_models.linear_attention import feature_map

FAMILY = ("transformer", "transformer-2l", "transformer-4l", "linear-attention", "gru", "lstm", "mlp", "mamba", "gla",
          "h3")
WITH_ATTENTION = ("transformer", "transformer-2l", "transformer-4l", "linear-attention")


@pytest.fixture(scope="module")
def walk():
    return registry().task("random-walk").create({"K": 5, "context_length": 12, "train_size": 16})


@pytest.fixture(scope="module")
def walk_everywhere():
    """The walk's sizes, declared as scored at every position: what the models see is the spec's scoring."""
    spec = replace(registry().task("random-walk"), scoring="positions")
    return spec.create({"K": 5, "context_length": 12, "train_size": 16})


@pytest.fixture(scope="module")
def tokens(walk):
    return walk.make_split("train", 0).tokens


def test_every_family_is_registered_with_a_citation_and_predicts_every_position():
    for name in FAMILY:
        spec = registry().model(name)
        assert spec.citation and spec.predicts == "every" and spec.trained, name


@pytest.mark.parametrize("name", FAMILY)
def test_a_prediction_never_depends_on_later_tokens(walk_everywhere, tokens, name):
    """Causality: changing the token at position t leaves every logit before t unchanged and changes one after it."""
    walk = walk_everywhere
    model = build_model(name, walk)
    t = 7
    changed = tokens.clone()
    changed[:, t] = (changed[:, t] + 1) % walk.vocab_size
    with torch.no_grad():
        before, after = model(tokens).logits, model(changed).logits
    assert before.shape == (len(tokens), walk.context_length, walk.vocab_size)
    torch.testing.assert_close(before[:, :t], after[:, :t], atol=1e-6, rtol=0)
    assert not torch.allclose(before[:, t:], after[:, t:])


@pytest.mark.parametrize("name", WITH_ATTENTION)
def test_attention_is_causal_per_layer_and_head_and_rows_sum_to_one(walk, tokens, name):
    model = build_model(name, walk)
    spec = registry().model(name)
    with torch.no_grad():
        attention = model(tokens, need_attention=True).attention
    layers, heads = spec.resolve()["layers"], spec.resolve()["heads"]
    T = walk.context_length
    assert attention.shape == (len(tokens), layers, heads, T, T)
    torch.testing.assert_close(attention.sum(-1), torch.ones(len(tokens), layers, heads, T))
    assert bool((attention.triu(1) == 0).all()), "a query attends to a later position"
    assert bool((attention >= 0).all())


@pytest.mark.parametrize("positional", ENCODING_CHOICES)
def test_transformer_fused_attention_equals_the_explicit_softmax(walk, tokens, positional):
    """Training uses scaled_dot_product_attention; evaluation an explicit softmax: the same logits."""
    model = build_model("transformer-2l", walk, positional=positional)
    with torch.no_grad():
        fused, explicit = model(tokens), model(tokens, need_attention=True)
    assert fused.attention is None
    torch.testing.assert_close(fused.logits, explicit.logits, atol=1e-5, rtol=1e-5)


def test_transformer_attention_is_the_textbook_softmax(walk, tokens):
    """Layer 1's weights from its own projections: softmax(q k^T / sqrt(e) + causal mask), RoPE on q and k."""
    model = build_model("transformer", walk, heads=2, positional="rope")
    with torch.no_grad():
        attention = model(tokens, need_attention=True).attention[:, 0]  # (n, H, T, T)
        block = model.blocks[0]
        x = block.ln_mixer(model.embedding(tokens))
        n, T, d = x.shape
        q, k, _ = (z.view(n, T, 2, d // 2) for z in block.mixer.qkv(x).split(d, dim=2))
        positions = torch.arange(T)
        q, k = (model.encoding.rotate(z, positions).transpose(1, 2) for z in (q, k))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d // 2)
        expected = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), -math.inf).softmax(-1)
    torch.testing.assert_close(attention, expected)


def test_linear_attention_running_sums_equal_its_normalised_weights(walk, tokens):
    """The linear-time form (running sums S_t, z_t) gives the output of the explicit weights, and the weights
    are phi(q_t).phi(k_s) / sum_{s' <= t} phi(q_t).phi(k_s') with phi = elu + 1 (Katharopoulos et al. 2020)."""
    long_walk = registry().task("random-walk").create({"K": 5, "context_length": 40, "train_size": 16})
    long_tokens = long_walk.make_split("train", 0).tokens
    narrow = build_model("linear-attention", long_walk, d=4, heads=4)  # T = 40 > 16 e = 16: it trains on the running sums
    with torch.no_grad():
        torch.testing.assert_close(narrow(long_tokens).logits, narrow(long_tokens, need_attention=True).logits,
                                   atol=1e-5, rtol=1e-5)
    model = build_model("linear-attention", walk)
    with torch.no_grad():
        explicit = model(tokens, need_attention=True)
        block = model.blocks[0]
        x = block.ln_mixer(model.embedding(tokens) + model.encoding.table())
        n, T, d = x.shape
        q, k, _ = (feature_map(z.view(n, T, 2, d // 2).transpose(1, 2)) for z in block.mixer.qkv(x).split(d, dim=2))
        similarity = (q @ k.transpose(-1, -2)).tril()
        expected = similarity / similarity.sum(-1, keepdim=True)
    torch.testing.assert_close(explicit.attention[:, 0], expected, atol=1e-5, rtol=1e-4)


def test_mlp_is_the_fcn_on_the_flattened_one_hot_sequence(walk, walk_everywhere, tokens):
    """At position t the causal MLP is a plain ReLU net on concat(one-hot(s_0), ..., one-hot(s_t), 0, ..., 0)
    plus a one-hot of t; on a task scored at the last position it computes that position alone."""
    V = walk.vocab_size
    x = F.one_hot(tokens, V).float().flatten(1)  # (n, T V)
    every, last = build_model("mlp", walk_everywhere), build_model("mlp", walk)
    with torch.no_grad():
        for t in (4, walk.context_length - 1):
            inputs = x[:, : (t + 1) * V]  # the inputs after t are zero
            hidden = torch.relu(inputs @ every.first.weight[: (t + 1) * V] + every.position_bias[t])
            torch.testing.assert_close(every(tokens).logits[:, t], every.head(every.hidden(hidden)),
                                       atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(last(tokens).logits, every(tokens).logits[:, -1], atol=1e-5, rtol=1e-5)


def test_mlp_is_not_applicable_where_its_first_layer_would_be_too_large():
    task = registry().task("random-walk").create({"K": 500, "context_length": 200})
    spec = registry().model("mlp")
    with pytest.raises(NotApplicable, match="first layer"):
        spec.build(spec.resolve(), task)


def test_recurrent_models_are_torch_rnns(walk, tokens):
    gru, lstm = build_model("gru", walk), build_model("lstm", walk)
    assert isinstance(gru.rnn, torch.nn.GRU) and isinstance(lstm.rnn, torch.nn.LSTM)
    with torch.no_grad():
        for model in (gru, lstm):
            states, _ = model.rnn(model.embedding(tokens))
            torch.testing.assert_close(model(tokens).logits, model.head(states))


def test_mamba_is_mambapys_selective_scan(walk, tokens):
    """The parallel scan mambapy trains with equals its sequential recurrence h_t = A_t h_{t-1} + B_t x_t."""
    model = build_model("mamba", walk)
    with torch.no_grad():
        parallel = model(tokens).logits
        for layer in model.backbone.layers:
            layer.mixer.config.pscan = False
        sequential = model(tokens).logits
    torch.testing.assert_close(parallel, sequential, atol=1e-5, rtol=1e-4)
