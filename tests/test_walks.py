"""The walk tasks: the generator's law, seeds, the Bayes predictor, the N = rK + 1 layout."""
from __future__ import annotations

import math

import pytest
import torch

from small_tasks import create_task
from tokbench_walks.walks import sample_walks, transition_matrix


def test_walk_steps_are_plus_or_minus_one_with_probability_p():
    walks = sample_walks(4000, 50, K=7, p=0.8, generator=torch.Generator().manual_seed(0))
    steps = (walks[:, 1:] - walks[:, :-1]).remainder(7)
    assert set(steps.unique().tolist()) == {1, 6}
    up = (steps == 1).double().mean().item()
    assert abs(up - 0.8) < 4 * math.sqrt(0.8 * 0.2 / steps.numel())
    starts = torch.bincount(walks[:, 0], minlength=7).double() / 4000
    assert (starts - 1 / 7).abs().max() < 0.03


def test_split_shapes_labels_and_parent_annotation():
    task = create_task("random-walk", p=0.3, train_size=50)
    split = task.make_split("train", seed=1)
    assert split.tokens.shape == (50, 96) and split.labels.shape == (50,)
    assert split.tokens.dtype == split.labels.dtype == torch.int64
    assert ((split.labels - split.tokens[:, -1]).remainder(6) != 0).all()
    parent = split.attention_targets["parent_attention"].weights
    assert parent.dtype == torch.bool and parent.sum(1).eq(1).all() and parent[:, -1].all()


def test_splits_have_separate_seeds_and_are_reproducible():
    task = create_task("random-walk")
    train, test = task.make_split("train", 0), task.make_split("test", 0)
    assert not torch.equal(train.tokens, test.tokens)
    assert torch.equal(train.tokens, task.make_split("train", 0).tokens)
    assert not torch.equal(train.tokens, task.make_split("train", 1).tokens)


@pytest.mark.parametrize("p", [0.0, 0.2, 0.5, 0.8, 1.0])
def test_bayes_predictor_reaches_max_p_one_minus_p(p):
    task = create_task("random-walk", p=p, K=5, context_length=8, test_size=20000)
    split = task.make_split("test", 3)
    accuracy = (task.bayes_predict(split.tokens) == split.labels).double().mean().item()
    optimum = task.bayes_accuracy()
    assert optimum == max(p, 1 - p)
    assert abs(accuracy - optimum) <= 4 * math.sqrt(optimum * (1 - optimum) / 20000) + 1e-12


def test_transition_matrix_rows_are_distributions():
    pi = transition_matrix(6, 0.8)
    assert torch.allclose(pi.sum(1), torch.ones(6, dtype=torch.float64))
    assert pi[0, 1] == 0.8 and pi[0, 5] == pytest.approx(0.2)


def test_deterministic_walk_visits_every_node_r_times():
    task = create_task("deterministic-walk", K=6, laps=16)
    assert task.context_length == 96 and task.bayes_accuracy() == 1.0
    split = task.make_split("test", 0)
    counts = torch.nn.functional.one_hot(split.tokens, 6).sum(1)
    assert (counts == 16).all()
    assert (split.labels == (split.tokens[:, 0] + 96) % 6).all()
    assert (task.bayes_predict(split.tokens) == split.labels).all()
