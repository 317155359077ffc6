"""The layer of [A] and the reproduction of [A]'s results through the harness, at the paper's size.

Setting (docs/science.md, [A]): K = 6, N = 97, 1000 train and 1000 test sequences, zero init,
full-batch GD at lr 1, float64, one-hot positions of norm 20 (the model's defaults).
"""
from __future__ import annotations

import pytest
import torch

from tokbench.errors import ParamError
from tokbench.harness import predict, run_pairing, train_model
from tokbench.plugins import registry
from tokbench_attention.paper_a import dense_forward, position_vectors

# The tolerance on accuracies (issue 3): a test accuracy over the 1000 test sequences has a binomial standard error
# of 0.016 at p = 0.5 and 0.013 at p = 0.8, so 0.04 is 2.5 and 3.2 of them. Measured (seeds 0-2, 2026-12-07):
# 0.492-0.504 at p = 0.5 and 0.796-0.823 at p = 0.8.
TOL = 0.04


def run(task: str, task_params: dict | None = None, model_params: dict | None = None, seed: int = 0, **recipe):
    reg = registry()
    spec = reg.model("attn-paper-a")
    return run_pairing(reg.task(task).create(task_params or {}), spec, spec.resolve(model_params or {}),
                       spec.recipe.override(recipe), seed)


def real_position_spread(result, n_inputs: int) -> float:
    """Largest spread of the attention over the real input positions, across test samples."""
    profile = torch.tensor(result.attention_profile[:n_inputs], dtype=torch.float64)
    return float(profile.max() - profile.min())


# --- the layer itself ------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["onehot", "sinusoidal"])
def test_positions_are_orthogonal_with_equal_norms(kind):
    P = position_vectors(97, 1000, kind, 10.0, torch.float64)
    gram = P @ P.T
    assert torch.allclose(gram, 100.0 * torch.eye(97, dtype=torch.float64), atol=1e-9)


@pytest.mark.parametrize("positions", ["onehot", "sinusoidal"])
def test_structured_forward_equals_the_dense_formula(positions):
    reg = registry()
    task = reg.task("random-walk").create({"K": 5, "context_length": 12, "train_size": 30})
    spec = reg.model("attn-paper-a")
    torch.manual_seed(0)
    layer = spec.build(spec.resolve({"positions": positions, "position_dim": 20, "init": "gaussian",
                                     "init_sigma": 0.3}), task)
    tokens = task.make_split("train", 0).tokens
    structured, dense = layer(tokens), dense_forward(layer, tokens)
    assert torch.allclose(structured.logits, dense.logits, atol=1e-12)
    assert torch.allclose(structured.attention, dense.attention, atol=1e-12)
    assert structured.attention.shape == (30, 1, 1, 1, 13)  # (n, L, H, Q, T + the query slot)
    assert torch.allclose(structured.attention.sum(-1), torch.ones(30, 1, 1, 1, dtype=torch.float64))


def test_too_few_position_dimensions_is_a_parameter_error():
    reg = registry()
    spec = reg.model("attn-paper-a")
    with pytest.raises(ParamError, match="position_dim=50 is too small"):
        spec.build(spec.resolve({"position_dim": 50}), reg.task("random-walk").create({}))


# --- required results (issue 3), at the paper's size ---------------------------------------------

@pytest.mark.parametrize("p", [0.5, 0.8])
def test_random_walk_is_learned_by_attending_to_the_parent(p):
    result = run("random-walk", {"p": p})
    assert abs(result.metrics["test_accuracy"] - p) <= TOL
    assert result.metrics["parent_attention"] >= 0.9
    # V ends close in direction to Pi^T, the transition matrix transposed (docs/science.md). [A] states the direction
    # and gives no number; measured (seeds 0-2, full-batch GD in float64, 2026-12-07): 0.983-0.984 at p = 0.5 and
    # 0.961-0.966 at p = 0.8. The bar, 0.95, sits below every measured value.
    assert result.metrics["value_transition_correlation"] >= 0.95


def test_p05_learns_the_parent_for_every_data_seed():
    """The default position norm learns the parent on every one of 5 data seeds, not only on seed 0."""
    for seed in range(5):
        result = run("random-walk", {"p": 0.5}, seed=seed)
        assert abs(result.metrics["test_accuracy"] - 0.5) <= TOL and result.metrics["parent_attention"] >= 0.9


@pytest.mark.parametrize("steps", [50, 1000])
def test_deterministic_walk_stays_at_one_over_k(steps):
    result = run("deterministic-walk", steps=steps)
    assert abs(result.metrics["test_accuracy"] - 1 / 6) <= TOL
    assert real_position_spread(result, 96) < 1e-6


def test_deterministic_walk_attention_is_exactly_uniform_per_sample():
    reg = registry()
    spec = reg.model("attn-paper-a")
    task = reg.task("deterministic-walk").create({"train_size": 1000})
    train = task.make_split("train", 0)
    model, _, _ = train_model(task, spec, spec.resolve({}), spec.recipe, 0, train, None, "cpu")
    attention = predict(model, task.make_split("test", 0).tokens).attention[:, 0, 0, 0, :96]
    assert float((attention.max(1).values - attention.min(1).values).max()) < 1e-6
    # V = v 1^T: every row constant, so f = V X a depends on no token. [A] states V stays
    # proportional to the all-ones matrix; with a finite sample the label counts differ a
    # little, and so do the rows of v (each row's gradient is weighted by its label's count).
    V = model.V.detach()
    assert float((V.max(1).values - V.min(1).values).max()) < 1e-9


def test_k20_n101_random_walk():
    result = run("random-walk", {"K": 20, "context_length": 100, "p": 0.5})
    assert abs(result.metrics["test_accuracy"] - 0.5) <= TOL


def test_same_seed_gives_bit_identical_metrics():
    first, second = run("random-walk", {"p": 0.8}), run("random-walk", {"p": 0.8})
    assert first.metrics == second.metrics and first.curve == second.curve


# --- recorded honestly: what this implementation does where [A]'s theorem does not hold exactly ---

def test_rounding_noise_breaks_the_deterministic_saddle():
    """Not the paper's claim but a finding: inexact arithmetic escapes the symmetric saddle.

    With sinusoidal positions (orthogonal only up to rounding), rounding noise grows each
    step; GD leaves the saddle and solves the deterministic walk.
    """
    result = run("deterministic-walk", model_params={"positions": "sinusoidal"})
    assert result.metrics["test_accuracy"] >= 0.99
    assert real_position_spread(result, 96) > 0.01


def test_in_float32_the_saddle_is_left_or_kept_as_the_machines_rounding_decides():
    """In float32 with one-hot positions the escape is rounding alone, so it depends on the CPU's kernels:
    this run solved the walk on the AMD EPYC machine the finding was first measured on and stays at 1/K
    on an Intel Xeon (docs/science.md). Either way it ends at one of the two points, never in between."""
    result = run("deterministic-walk", model_params={"dtype": "float32"})
    accuracy = result.metrics["test_accuracy"]
    guess = result.metrics["chance_accuracy"]  # 1/K: the best constant guess on these test sequences
    assert accuracy >= 0.99 or abs(accuracy - guess) <= TOL, (accuracy, guess)


def test_k20_deterministic_walk_breaks_symmetry_in_float64():
    """At K = 20, N = 101 the float64 one-hot setting does not keep the exact saddle either."""
    result = run("deterministic-walk", {"K": 20, "laps": 5})
    assert result.metrics["test_accuracy"] > 1 / 20 + TOL


def test_k20_p08_attends_away_from_the_parent():
    """At K = 20, N = 101, p = 0.8 the layer fits p = 0.5-like behaviour, not the parent."""
    result = run("random-walk", {"K": 20, "context_length": 100, "p": 0.8})
    assert result.metrics["parent_attention"] < 0.5
    assert result.metrics["test_accuracy"] < 0.8 - TOL


def test_norm_10_can_commit_to_a_far_position():
    """Why the default norm is 20, not 10: with norm 10 the first step on W already saturates the
    attention, and for data seed 2 sampling noise makes position 46 (51 steps from the label) win the
    race against the parent. The label is then only known up to parity: accuracy about 1/3."""
    result = run("random-walk", {"p": 0.5}, {"position_norm": 10.0}, seed=2)
    assert result.metrics["parent_attention"] < 0.01
    assert abs(result.metrics["test_accuracy"] - 1 / 3) <= TOL
    assert max(result.attention_profile) > 0.99


def test_gaussian_init_at_the_default_recipe():
    """sigma = 0.01 init with the default recipe (lr 1, 50 steps) leaves the symmetric saddle at once."""
    walk = run("random-walk", model_params={"init": "gaussian"})
    deterministic = run("deterministic-walk", model_params={"init": "gaussian"})
    assert deterministic.metrics["test_accuracy"] >= 0.99
    assert walk.metrics["parent_attention"] < 0.5
