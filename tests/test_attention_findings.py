"""The deterministic-walk finding of the standard attention family, trained for real at a small size.

Full size (K = 6, N = 97, 1000 train / 1000 test) is in the report and the leaderboard; here the
context covers 4 laps instead of 16 so that each run takes about a second.
"""
from __future__ import annotations

import pytest

from tokbench.harness import run_pairing
from tokbench.plugins import registry

WALK = {"K": 6, "laps": 4, "train_size": 256, "val_size": 64, "test_size": 256}


def train(model_name: str, seed: int = 0, recipe: dict | None = None, **params):
    task = registry().task("deterministic-walk").create(WALK)
    spec = registry().model(model_name)
    return run_pairing(task, spec, spec.resolve(params), spec.recipe.override(recipe or {}), seed=seed,
                       accelerator="cpu")


@pytest.mark.slow
def test_zero_init_with_adam_escapes_the_pitfall():
    """[A]'s start (query slot, uniform attention, zero outputs) with concatenated one-hot positions solves it."""
    assert train("attn-onehot-concat-zeroinit").metrics["accuracy"] == 1.0


@pytest.mark.slow
def test_the_same_zero_start_with_gradient_descent_stays_at_chance():
    """Plain GD from the same start keeps the attention uniform: Adam's per-coordinate scaling is what escapes."""
    result = train("attn-onehot-concat-zeroinit", recipe={"optimizer": "gd", "lr": 0.1})
    uniform = 1 / (WALK["K"] * WALK["laps"] + 1)
    assert max(abs(a - uniform) for a in result.attention_profile) < 1e-3
    assert result.metrics["accuracy"] < 0.25


@pytest.mark.slow
def test_nope_with_a_query_slot_stays_at_chance_whatever_it_learns():
    """Every context holds each token equally often, and NoPE sees only the bag of tokens."""
    result = train("attn-nope", query="slot")
    assert result.metrics["train_accuracy"] < 0.25 and result.metrics["accuracy"] < 0.25
