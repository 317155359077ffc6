"""Length generalisation, the task side: every built-in family whose rule does not depend on its context length
declares ``evaluation_axes`` and generates valid splits at 2x and 4x that length, with its Bayes predictor reaching
its Bayes accuracy there; every other family says why in ``evaluation_note``."""
from __future__ import annotations

import math

import pytest
import torch
from scipy.stats import binomtest

from tokbench.harness import align
from tokbench.metrics import sequence_accuracy
from tokbench.plugins import registry
from tokbench.testing import check_split

SAMPLES = 4000  # sequences per setting for the Bayes check
SIZES = {"train_size": 8, "val_size": 8, "test_size": 8}


def builtin_tasks() -> list[str]:
    """The tasks of the tokbench distribution itself (installed third-party plugins do not count)."""
    return sorted(name for name, spec in registry().tasks.items() if spec.plugin == "tokbench")


def longer_settings() -> list[tuple[str, str, int]]:
    return [(spec.name, axis, factor) for name in builtin_tasks() for spec in [registry().task(name)]
            for axis in spec.evaluation_axes for factor in (2, 4)]


def test_every_builtin_family_declares_an_axis_or_says_why_not():
    for name in builtin_tasks():
        spec = registry().task(name)
        declared = {p.name for p in spec.params}
        assert set(spec.evaluation_axes) <= declared, f"{name}: evaluation_axes names undeclared parameters"
        assert spec.evaluation_axes or spec.evaluation_note, f"{name}: neither evaluation_axes nor evaluation_note"


def test_the_length_free_families_are_evaluated_at_longer_contexts():
    """The families issue 23 names: their rule does not depend on T, so each declares its context axis."""
    axes = {name: registry().task(name).evaluation_axes for name in builtin_tasks()}
    for name in ("random-walk", "lag-walk", "mqar", "selective-copy", "majority", "icl-markov", "markov-switch",
                 "causal-graph"):
        assert axes[name] == ("context_length",), name
    assert axes["deterministic-walk"] == ("laps",)  # its context is laps x K


@pytest.mark.parametrize("name, axis, factor", longer_settings(), ids=lambda v: str(v))
def test_longer_setting_generates_valid_splits_and_its_own_optimum(name, axis, factor):
    spec = registry().task(name)
    base = spec.create(SIZES)
    task = spec.create({**SIZES, axis: factor * base.params[axis]})
    assert task.context_length == factor * base.context_length
    for split_name in ("train", "val", "test"):
        check_split(task, task.make_split(split_name, 0), 8, f"{name} {axis} x{factor} {split_name}")
    sample = task.generate(SAMPLES, torch.Generator().manual_seed(99))
    prediction = task.bayes_predict(sample.tokens)
    bayes = task.bayes_accuracy()
    assert 0.0 < bayes <= 1.0
    if sample.labels.dim() == 2:
        one_hot = torch.nn.functional.one_hot(prediction.clamp(min=0), task.vocab_size)
        per_sequence = sequence_accuracy(align(one_hot, sample.labels), sample.labels)
        se = per_sequence.std().item() / math.sqrt(SAMPLES)
        assert abs(per_sequence.mean().item() - bayes) <= 4 * se + 1e-12, (name, axis, factor, bayes)
    else:
        hits = int((prediction == sample.labels).sum())
        assert binomtest(hits, SAMPLES, bayes).pvalue > 1e-4, (name, axis, factor, hits / SAMPLES, bayes)
