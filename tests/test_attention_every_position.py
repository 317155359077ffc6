"""The single attention layers predict at every position (causally) and stay the papers' layers at the last.

On a task scored at many positions, the prediction after token t of every attn-* model is
its single-query layer on the prefix tokens[:, :t + 1]: the same weights, the query after
the last token, as on a task scored at the last position (whose equality with the literal
formula tests/test_attention_standard.py and tests/test_paper_a.py check).
"""
from __future__ import annotations

import math

import pytest
import torch

from models_support import build_model
from tokbench.harness import run_pairing
from tokbench.plugins import registry
from tokbench_attention.paper_a import dense_forward

ATTENTION = sorted(name for name, spec in registry().models.items() if name.startswith("attn-"))
STANDARD = [name for name in ATTENTION if name not in ("attn-paper-a", "attn-paper-b")]


@pytest.fixture(scope="module")
def chain():
    """A task scored at every position: one binary Markov chain (markov-switch), short sequences."""
    return registry().task("markov-switch").create({"context_length": 10, "train_size": 12})


def prefix_predictions(model, tokens: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The single-query layer (as on a task scored at the last position) on every prefix: (n, T, V) and
    the attention of each prefix's query, (n, H, t + 1 + S)."""
    scoring, model.scoring = model.scoring, "last"
    try:
        outputs = [model(tokens[:, :t + 1], need_attention=True) for t in range(tokens.shape[1])]
    finally:
        model.scoring = scoring
    return torch.stack([o.logits for o in outputs], 1), [o.attention[:, 0, :, 0] for o in outputs]


def test_every_attention_layer_predicts_every_position():
    positions_task = registry().task("mqar")
    for name in ATTENTION:
        spec = registry().model(name)
        assert spec.predicts == "every" and spec.applicability(positions_task) is None, name


@pytest.mark.parametrize("name", STANDARD)
@pytest.mark.parametrize("params", [{}, {"heads": 2, "query": "slot"}, {"init": "gaussian", "init_sigma": 0.5}])
def test_each_position_is_the_single_query_layer_on_its_prefix(chain, name, params):
    model = build_model(name, chain, **params)
    tokens = chain.make_split("train", 0).tokens
    n, T = tokens.shape
    out = model(tokens, need_attention=True)
    slot = int(model.uses_slot)
    assert out.logits.shape == (n, T, chain.vocab_size)
    assert out.attention.shape == (n, 1, model.heads, T, T + slot)  # (n, L, H, Q, T + S)
    logits, attention = prefix_predictions(model, tokens)
    torch.testing.assert_close(out.logits, logits, rtol=1e-4, atol=1e-5)
    for t, weights in enumerate(attention):  # the inputs up to t, then the slot; nothing after t
        torch.testing.assert_close(out.attention[:, 0, :, t, :t + 1], weights[..., :t + 1], rtol=1e-4, atol=1e-6)
        torch.testing.assert_close(out.attention[:, 0, :, t, T:], weights[..., t + 1:], rtol=1e-4, atol=1e-6)
        assert torch.equal(out.attention[:, 0, :, t, t + 1:T], torch.zeros(n, model.heads, T - 1 - t))


def test_paper_a_at_every_position_is_the_literal_formula_on_every_prefix(chain):
    model = build_model("attn-paper-a", chain, position_dim=16, init="gaussian", init_sigma=0.3)
    tokens = chain.make_split("train", 0).tokens
    out, dense = model(tokens), dense_forward(model, tokens)
    assert out.logits.shape == (len(tokens), 10, 2) and out.attention.shape == (len(tokens), 1, 1, 10, 11)
    assert torch.allclose(out.logits, dense.logits, atol=1e-12)
    assert torch.allclose(out.attention, dense.attention, atol=1e-12)
    logits, _ = prefix_predictions(model, tokens)
    assert torch.allclose(out.logits, logits, atol=1e-12)


def test_paper_b_at_every_position_is_its_layer_on_every_prefix(chain):
    model = build_model("attn-paper-b", chain)
    tokens = chain.make_split("train", 0).tokens
    out = model(tokens)
    assert out.attention.shape == (len(tokens), 1, 1, 10, 10)
    logits, _ = prefix_predictions(model, tokens)
    torch.testing.assert_close(out.logits, logits, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", ATTENTION)
def test_every_attention_layer_trains_on_a_task_scored_at_every_position(name):
    """A short run through the harness trains and scores every position (the pairing was n/a before)."""
    reg = registry()
    task = reg.task("markov-switch").create({"p": 0.2, "q": 0.3, "context_length": 16, "train_size": 200,
                                            "val_size": 50, "test_size": 200})
    spec = reg.model(name)
    result = run_pairing(task, spec, spec.resolve(), spec.recipe.override({"steps": 5}), 0)
    assert result.train["steps"] == 5 and result.curve["step"] == list(range(5))
    assert all(math.isfinite(loss) for loss in result.curve["loss"])
    assert 0.0 <= result.metrics["test_accuracy"] <= 1.0
