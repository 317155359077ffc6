"""The reference baselines (plugins/tokbench_baselines): uniform, last-token, context-guess, bayes-optimal."""
from __future__ import annotations

import math
import subprocess
import sys

import pytest
import torch

from tokbench.errors import NotApplicable
from tokbench.harness import run_pairing
from tokbench.plugins import registry

REGISTRY = registry()
Z = 3.0  # sampling-error tolerance in standard errors; the splits are seeded, so a pass is reproducible


def pairing(model_name: str, task_name: str, seed: int = 0, **task_params):
    task = REGISTRY.task(task_name).create(task_params)
    spec = REGISTRY.model(model_name)
    return task, run_pairing(task, spec, spec.resolve(), spec.recipe, seed=seed, accelerator="cpu")


def within_sampling_error(accuracy: float, expected: float, n: int) -> bool:
    return abs(accuracy - expected) <= Z * math.sqrt(expected * (1 - expected) / n) + 1e-12


@pytest.mark.parametrize("task_name", sorted(REGISTRY.tasks))
def test_bayes_optimal_row_matches_the_analytic_optimum(task_name):
    """Scored like any model on the evaluation split; a mismatch means the task's predictor or its optimum is wrong."""
    spec = REGISTRY.task(task_name)
    declared = {p.name for p in spec.params}
    sizes = {"train_size": 16, "val_size": 16, "test_size": 4000}
    task, result = pairing("bayes-optimal", task_name, **{k: v for k, v in sizes.items() if k in declared})
    n = len(task.make_split(task.eval_split, 0))
    assert result.train["steps"] == 0
    assert within_sampling_error(result.metrics["accuracy"], task.bayes_accuracy(), n), (
        f"{task_name}: bayes-optimal scored {result.metrics['accuracy']:.4f} on {n} samples, "
        f"the task's optimum is {task.bayes_accuracy():.4f}"
    )


@pytest.mark.parametrize("K", [3, 6, 10])
def test_uniform_guess_scores_one_over_k(K):
    task, result = pairing("uniform", "random-walk", K=K, p=0.8, context_length=4, train_size=8, val_size=8,
                           test_size=6000)
    assert within_sampling_error(result.metrics["accuracy"], 1 / K, 6000)
    assert result.train["steps"] == 0 and result.attention_profile is None


def test_uniform_guess_is_random_per_sample_and_reproducible():
    task = REGISTRY.task("deterministic-walk").create({"train_size": 8})
    spec = REGISTRY.model("uniform")
    tokens = task.make_split("train", 0).tokens.repeat(100, 1)

    def guesses(seed: int) -> torch.Tensor:
        torch.manual_seed(seed)
        return spec.build({}, task)(tokens).logits.argmax(-1)

    first = guesses(0)
    assert first.unique().numel() == task.vocab_size  # not the constant argmax of equal logits
    assert torch.equal(first, guesses(0)) and not torch.equal(first, guesses(1))


def test_last_token_learns_the_transition_counts():
    task, result = pairing("last-token", "random-walk", K=5, p=0.8, context_length=6, train_size=2000, val_size=8,
                           test_size=4000)
    assert within_sampling_error(result.metrics["accuracy"], 0.8, 4000)
    spec = REGISTRY.model("last-token")
    model = spec.build({}, task)
    model.fit(task.make_split("train", 0))
    assert model.counts.argmax(1).tolist() == [1, 2, 3, 4, 0]  # the +1 neighbour, the likelier step
    assert model.counts.sum().item() == 2000


def test_last_token_solves_the_deterministic_walk_and_breaks_ties_low():
    _, result = pairing("last-token", "deterministic-walk", train_size=200, val_size=8, test_size=200)
    assert result.metrics["accuracy"] == 1.0
    task = REGISTRY.task("random-walk").create({"K": 4})
    model = REGISTRY.model("last-token").build({}, task)  # unfitted: every row ties
    assert model(torch.tensor([[0, 1, 2, 3]])).logits.argmax(-1).item() == 0


def test_baseline_specs_train_nothing_and_plugins_stay_light():
    for name in ("uniform", "last-token", "context-guess", "bayes-optimal"):
        spec = REGISTRY.model(name)
        assert spec.recipe.steps == 0 and spec.params == () and "Recipe" in spec.description
    code = "import sys, tokbench_baselines, tokbench_attention; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("N, Q", [(4, 4), (5, 2), (16, 16)])
def test_context_guess_names_a_value_of_the_prefix_one_in_n(N, Q):
    """mqar's no-recall level: one of the N distinct values, whatever the key, is right with probability 1/N, and
    its loss is log N. With every key queried (Q = N) the smallest value answers exactly one query per sequence."""
    n = 4000
    task, result = pairing("context-guess", "mqar", vocab_size=256, context_length=16 * N, num_kv_pairs=N,
                           num_queries=Q, train_size=8, val_size=8, test_size=n)
    accuracy = result.metrics["accuracy"]
    if Q == N:
        assert accuracy == pytest.approx(1 / N, abs=1e-12)
    else:
        assert within_sampling_error(accuracy, 1 / N, n * Q), f"{accuracy:.4f} against 1/N = {1 / N:.4f}"
    assert result.metrics["loss"] == pytest.approx(math.log(N), abs=1e-6)
    assert result.train["steps"] == 0 and result.attention_profile is None


def test_context_guess_is_not_applicable_to_a_task_without_a_guess():
    task = REGISTRY.task("majority").create({})
    with pytest.raises(NotApplicable, match="no in-context guess"):
        REGISTRY.model("context-guess").build({}, task)
