"""Models declare whether they run past their training length, and those that do run there unchanged.

A model is built once at the training context length T and fed longer sequences as they
are (the length-generalisation protocol). Every model whose spec leaves ``fixed_length``
empty must run at 2T and 4T, and, being causal, predict at the first T positions exactly
what it predicts on those T tokens alone. A model that cannot extend says why, in its spec
and by raising NotApplicable when fed more: never a silent truncation or wrap-around.
"""
from __future__ import annotations

import pytest
import torch

from models_support import build_model
from tokbench.errors import NotApplicable
from tokbench.plugins import registry

T = 8
# context-guess is n/a on the Markov chain these tests use (it has no in-context guess to name)
EXTENDING = sorted(name for name, spec in registry().models.items()
                   if not spec.fixed_length and name != "context-guess")
FIXED = sorted(name for name, spec in registry().models.items() if spec.fixed_length)
# the decoders take a positional encoding: every one that extends, and every one that does not
DECODER_SETTINGS = [("transformer", {"positional": p}) for p in ("nope", "sinusoidal", "rope", "alibi", "t5bias")]
DECODER_SETTINGS += [("linear-attention", {"positional": "nope"})]  # sinusoidal: its default, among EXTENDING
DECODER_FIXED = [("transformer", {"positional": "learned"}), ("transformer", {"positional": "onehot-concat"}),
                 ("linear-attention", {"positional": "learned"})]


def chain(context_length: int, scoring_last: bool = False):
    """A binary Markov chain scored at every position (or a walk scored at the last) of length ``context_length``."""
    if scoring_last:
        return registry().task("random-walk").create({"K": 4, "context_length": context_length, "train_size": 8})
    return registry().task("markov-switch").create({"context_length": context_length, "train_size": 8})


def test_the_models_that_cannot_extend_are_the_expected_ones():
    assert FIXED == ["attn-learned", "attn-onehot-concat", "attn-onehot-concat-zeroinit", "attn-paper-a",
                     "mlp", "transformer-1l-tied"]
    for name in FIXED:
        reason = registry().model(name).fixed_length
        assert reason.count(".") == 0 and len(reason) > 20, f"{name}: one sentence, got {reason!r}"


@pytest.mark.parametrize("name, params", [(name, {}) for name in EXTENDING] + DECODER_SETTINGS)
@torch.no_grad()
def test_a_model_built_at_t_runs_at_2t_and_4t_and_stays_causal(name, params):
    model = build_model(name, chain(T), **params)
    long = chain(4 * T).make_split("train", 0).tokens  # (n, 4T)
    short = model(long[:, :T]).logits  # (n, T, V)
    for length in (2 * T, 4 * T):
        logits = model(long[:, :length]).logits
        assert logits.shape == (len(long), length, 2) and torch.isfinite(logits).all()
        if name != "uniform":  # a fresh random guess at every call: causal, but not repeatable
            torch.testing.assert_close(logits[:, :T], short, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", [name for name in EXTENDING if name.startswith("attn-")])
@torch.no_grad()
def test_a_single_layer_built_at_t_reads_a_longer_input_on_a_task_scored_at_the_last_position(name):
    model = build_model(name, chain(T, scoring_last=True))
    tokens = chain(4 * T, scoring_last=True).make_split("train", 0).tokens
    output = model(tokens, need_attention=True)
    slot = int(model.params.get("query") == "slot")
    assert output.logits.shape == (len(tokens), 4) and output.attention.shape[-2:] == (1, 4 * T + slot)


@pytest.mark.parametrize("name, params", [(name, {}) for name in FIXED] + DECODER_FIXED)
@torch.no_grad()
def test_a_model_of_fixed_length_refuses_a_longer_input_with_its_reason(name, params):
    model = build_model(name, chain(T), **params)
    tokens = chain(2 * T).make_split("train", 0).tokens
    assert model(tokens[:, :T]).logits.shape[:2] == (len(tokens), T)
    with pytest.raises(NotApplicable, match="training position"):
        model(tokens)
