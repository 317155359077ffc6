"""A source reproduced at CPU size: positional encodings trained at one length, evaluated at 4x that length.

Press, Smith & Lewis 2022 (ALiBi, arXiv:2108.12409) and Kazemnejad et al. 2023 (arXiv:2305.19466):
a model trained on inputs of length T and run on longer ones keeps its accuracy with ALiBi or with
no positional encoding at all (NoPE), while sinusoidal absolute positions degrade past T.

Setting, fixed before the first run (docs/models.md, "Length generalisation"): the single layers
`attn-nope`, `attn-alibi`, `attn-t5bias`, `attn-rope` and `attn-sinusoidal` with their default
recipe (Adam, lr 0.01, 100 full-batch steps) on `random-walk` (K = 6, p = 0.8, 1000 training
sequences of T = 16), seeds 0, 1 and 2; each test split (1000 sequences) drawn by the task's own
generator at T and at 4T. The rule (continue the walk from the last token) does not depend on T.

Tolerances: "keeps its accuracy" is a mean drop from T to 4T of at most 0.03 (three seeds of 1000
test sequences: a standard error of about 0.01); "degrades" is a mean drop of at least 0.1.
Measured (mean of the three seeds, T -> 4T): NoPE 0.739 -> 0.752, ALiBi 0.739 -> 0.752, T5 bias
0.775 -> 0.783, RoPE 0.783 -> 0.772 (seed 1 drops 0.07), sinusoidal 0.786 -> 0.595.
"""
from __future__ import annotations

import pytest
import torch

from tokbench.harness import evaluate_accuracy, train_model
from tokbench.plugins import registry

T, SEEDS = 16, (0, 1, 2)
HOLDS, DEGRADES = 0.03, 0.1


def walk(context_length: int):
    return registry().task("random-walk").create({"K": 6, "p": 0.8, "context_length": context_length,
                                                  "train_size": 1000, "test_size": 1000})


@pytest.fixture(scope="module")
def accuracy() -> dict[str, tuple[float, float]]:
    """Per model, the mean test accuracy over the seeds at T and at 4T."""
    reg, task, long = registry(), walk(T), walk(4 * T)
    means = {}
    for name in ("attn-nope", "attn-alibi", "attn-t5bias", "attn-rope", "attn-sinusoidal"):
        spec, at_t, at_4t = reg.model(name), [], []
        for seed in SEEDS:
            model, _, _ = train_model(task, spec, spec.resolve(), spec.recipe, seed, task.make_split("train", seed),
                                      None, "cpu")
            at_t.append(evaluate_accuracy(model, task.make_split("test", seed)))
            at_4t.append(evaluate_accuracy(model, long.make_split("test", seed)))
        means[name] = (float(torch.tensor(at_t).mean()), float(torch.tensor(at_4t).mean()))
    return means


def drop(accuracy, name: str) -> float:
    at_t, at_4t = accuracy[name]
    return at_t - at_4t


@pytest.mark.parametrize("name", ["attn-nope", "attn-alibi", "attn-t5bias"])
def test_nope_alibi_and_the_t5_bias_keep_their_accuracy_at_four_times_the_length(accuracy, name):
    assert drop(accuracy, name) <= HOLDS, accuracy[name]


def test_sinusoidal_positions_degrade_past_the_training_length(accuracy):
    assert drop(accuracy, "attn-sinusoidal") >= DEGRADES, accuracy["attn-sinusoidal"]
    assert accuracy["attn-nope"][1] >= accuracy["attn-sinusoidal"][1] + DEGRADES  # NoPE generalises better


def test_not_reproduced_nope_is_not_the_best_encoding_here(accuracy):
    """Recorded honestly: Kazemnejad et al. find NoPE ahead of every explicit encoding. In this single layer it
    generalises (no drop) but is not ahead: at 4T the T5 bias leads it, NoPE's seed 0 having stalled at
    0.64 at T already; and ALiBi's one head has slope 2^-8, so ALiBi ranks with NoPE, not above it."""
    assert accuracy["attn-t5bias"][1] > accuracy["attn-nope"][1]
    assert abs(accuracy["attn-alibi"][1] - accuracy["attn-nope"][1]) <= HOLDS
