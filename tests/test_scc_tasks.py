"""The SCC tasks: the generative automaton (exact Bayes optimum, retrieval masks, speed, describe)
and [B]'s implicit-bias datasets (acyclic / cyclic redraws)."""
from __future__ import annotations

import itertools
import time

import numpy as np
import pytest
import torch

from tokbench.errors import ParamError, UsageError
from tokbench.plugins import registry
from tokbench_scc.automaton import SCCAutomaton
from tokbench_scc.tpg import all_acyclic, token_priority_graphs

REGISTRY = registry()


def automaton_task(**given):
    return REGISTRY.task("scc-automaton").create(given)


def implicit_bias_task(**given):
    return REGISTRY.task("scc-implicit-bias").create(given)


def brute_force_bayes(automaton: SCCAutomaton, T: int) -> float:
    """Average over every (query, context set) of max/sum weight in the retrieved SCC."""
    K, total, count = automaton.vocab_size, 0.0, 0
    for k in range(K):
        for others in itertools.combinations([t for t in range(K) if t != k], T - 1):
            context = [*others, k]
            rank = [int(automaton.rank[k, t]) for t in context]
            weights = [float(automaton.weight[k, t]) for t, r in zip(context, rank) if r == min(rank)]
            total, count = total + max(weights) / sum(weights), count + 1
    return total / count


@pytest.mark.parametrize("K, T, num_sccs, weights", [
    (6, 4, 3, "random"), (8, 6, 3, "uniform"), (8, 6, 3, "random"), (7, 3, 2, "random"), (6, 6, 1, "random"),
])
def test_bayes_accuracy_is_exact(K, T, num_sccs, weights):
    task = automaton_task(K=K, context_length=T, num_sccs=num_sccs, weights=weights)
    assert task.bayes_accuracy() == pytest.approx(brute_force_bayes(task.automaton, T), abs=1e-12)


def test_every_token_alone_is_certain():
    assert automaton_task(K=6, context_length=4, num_sccs=6).bayes_accuracy() == pytest.approx(1.0)


def test_samples_follow_the_automaton():
    task = automaton_task()
    split = task.make_split("train", 0)
    tokens, labels, mask = split.tokens, split.labels, split.attention_targets["top_scc_attention"].weights
    assert all(len(set(row)) == task.context_length for row in tokens.tolist())  # distinct tokens
    rank = task.automaton.rank[tokens[:, -1:], tokens]
    assert torch.equal(mask, rank == rank.min(dim=1, keepdim=True).values)
    label_position = tokens == labels[:, None]
    assert bool((label_position & mask).any(dim=1).all()), "every label lies in the retrieved SCC"


def test_generation_is_fast():
    task = automaton_task()
    start = time.process_time()  # this process's CPU time, not the machine's load
    split = task.generate(100_000, torch.Generator().manual_seed(0))
    assert time.process_time() - start < 5.0
    assert split.tokens.shape == (100_000, task.context_length)


def test_automaton_seed_is_separate_from_the_data_seeds():
    a, b = automaton_task(), automaton_task()
    assert torch.equal(a.automaton.rank, b.automaton.rank)
    assert torch.equal(a.make_split("train", 0).tokens, b.make_split("train", 0).tokens)
    assert not torch.equal(a.make_split("train", 0).tokens, a.make_split("train", 1).tokens)
    assert not torch.equal(a.automaton.rank, automaton_task(automaton_seed=1).automaton.rank)


def test_describe_prints_the_priority_order_per_query():
    task = automaton_task(weights="uniform")
    text = task.describe()
    for k in range(task.vocab_size):
        classes = " > ".join("{" + ", ".join(map(str, scc)) + "}" for scc in task.automaton.classes(k))
        assert f"query {k}: {classes}" in text
    assert f"{task.bayes_accuracy():.4f}" in text


@pytest.mark.parametrize("given", [{"K": 4, "context_length": 5}, {"K": 4, "num_sccs": 5}])
def test_automaton_parameter_conflicts(given):
    with pytest.raises(ParamError):
        automaton_task(**given)


def test_drawn_weights_too_large_for_the_exact_optimum_are_refused():
    with pytest.raises(ParamError, match="too large"):
        automaton_task(K=40, context_length=12, num_sccs=1)


@pytest.mark.parametrize("variant", ["acyclic", "cyclic"])
def test_implicit_bias_variants(variant):
    task = implicit_bias_task(variant=variant)
    assert task.eval_split == "train"
    for seed in range(3):
        split = task.make_split("train", seed)
        assert len(split) == 6
        tokens, labels = split.tokens.numpy(), split.labels.numpy()
        assert all_acyclic(token_priority_graphs(tokens, labels)) == (variant == "acyclic")
        label_mask = split.tokens == split.labels[:, None]
        top = split.attention_targets["top_scc_attention"].weights
        assert bool((label_mask <= top).all())  # the label is in its own top SCC
        if variant == "acyclic":
            assert torch.equal(top, label_mask)


def test_implicit_bias_labels_are_uniform_over_the_context():
    """P(y = j | X) = 1/K + (K - T)/K * 1/T = 1/T for each context token: check position frequencies."""
    task = implicit_bias_task()
    split = task.generate(40_000, torch.Generator().manual_seed(0))
    positions = (split.tokens == split.labels[:, None]).double().mean(0).numpy()
    np.testing.assert_allclose(positions, 1 / task.context_length, atol=0.01)
    assert task.bayes_accuracy() == 1 / task.context_length


def test_impossible_variant_is_a_usage_error():
    # One sequence has no cycle: refused when the task is created (so at planning time), not after draws.
    with pytest.raises(UsageError, match="variant=cyclic needs n >= 2"):
        implicit_bias_task(n=1, max_tries=50)
    with pytest.raises(UsageError, match="no cyclic dataset"):  # possible in principle, not found in one draw
        implicit_bias_task(n=2, max_tries=1).make_split("train", 0)
