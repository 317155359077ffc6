"""The retrieval plugin's tasks: law of the generator and exact Bayes accuracy against brute-force
enumeration on tiny instances, the Bayes predictor at the default size, generation speed, annotations."""
from __future__ import annotations

import itertools
import math
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from fractions import Fraction

import pytest
import torch
from scipy.stats import binomtest, chisquare

from tokbench.errors import ParamError
from tokbench.plugins import registry

Outcome = tuple[tuple[int, ...], int]  # (tokens, label) of a task scored at the last position


def make(name: str, **params):
    return registry().task(name).create(params)


# --- brute-force enumeration of each generative process, written independently of the generators ---

def lag_walk_outcomes(K: int, k: int, T: int, p: Fraction) -> Iterator[tuple[Outcome, Fraction]]:
    for starts in itertools.product(range(K), repeat=k):
        for steps in itertools.product((1, -1), repeat=T + 1 - k):
            walk = list(starts)
            for t, step in enumerate(steps, start=k):
                walk.append((walk[t - k] + step) % K)
            weight = Fraction(1, K**k) * math.prod(p if s == 1 else 1 - p for s in steps)
            yield (tuple(walk[:T]), walk[T]), weight


def majority_outcomes(V: int, T: int) -> Iterator[tuple[Outcome, Fraction]]:
    for tokens in itertools.product(range(V), repeat=T):
        counts = Counter(tokens)
        top = max(counts.values())
        tied = [y for y in range(V) if counts[y] == top]
        for y in tied:
            yield (tokens, y), Fraction(1, V**T * len(tied))


def sparse_outcomes(V: int, N: int, q: int) -> Iterator[tuple[Outcome, Fraction]]:
    orders = list(itertools.permutations(range(N), q))
    for data in itertools.product(range(V), repeat=N):
        for named in orders:
            yield (data + tuple(V + i for i in named), sum(data[i] for i in named) % V), Fraction(1, V**N * len(orders))


def exact_bayes_last(outcomes: dict[Outcome, Fraction]) -> Fraction:
    """sum over inputs x of max_y P(x, y): the best any predictor of the label from x can do."""
    by_input: dict[tuple[int, ...], dict[int, Fraction]] = defaultdict(lambda: defaultdict(Fraction))
    for (tokens, label), weight in outcomes.items():
        by_input[tokens][label] += weight
    return sum(max(labels.values()) for labels in by_input.values())


def check_law(task, outcomes: dict, n: int = 20_000) -> None:
    """The generator's empirical (tokens, label) frequencies match the enumerated law (chi-square)."""
    assert sum(outcomes.values()) == 1
    split = task.generate(n, torch.Generator().manual_seed(7))
    seen = Counter((tuple(t.tolist()), int(y)) for t, y in zip(split.tokens, split.labels))
    assert set(seen) <= set(outcomes), f"generated outcomes outside the law: {list(set(seen) - set(outcomes))[:3]}"
    keys = list(outcomes)
    result = chisquare([seen[k] for k in keys], [float(outcomes[k]) * n for k in keys])
    assert result.pvalue > 1e-4, f"chi-square p = {result.pvalue:.2g} over {len(keys)} outcomes"


TINY = [
    ("lag-walk", dict(K=3, k=2, context_length=3, p=0.3), lambda: lag_walk_outcomes(3, 2, 3, Fraction(3, 10))),
    ("lag-walk", dict(K=4, k=1, context_length=2, p=0.5), lambda: lag_walk_outcomes(4, 1, 2, Fraction(1, 2))),
    ("lag-walk", dict(K=3, k=3, context_length=4, p=1.0), lambda: lag_walk_outcomes(3, 3, 4, Fraction(1))),
    ("majority", dict(vocab_size=3, context_length=4), lambda: majority_outcomes(3, 4)),
    ("majority", dict(vocab_size=2, context_length=4), lambda: majority_outcomes(2, 4)),
    ("majority", dict(vocab_size=4, context_length=3), lambda: majority_outcomes(4, 3)),
    ("sparse-selection", dict(vocab_size=3, num_tokens=3, q=2), lambda: sparse_outcomes(3, 3, 2)),
    ("sparse-selection", dict(vocab_size=2, num_tokens=3, q=1), lambda: sparse_outcomes(2, 3, 1)),
]


@pytest.mark.parametrize("name, params, enumerate_law", TINY, ids=[f"{n}-{i}" for i, (n, *_) in enumerate(TINY)])
def test_tiny_instances_match_brute_force(name, params, enumerate_law):
    task = make(name, **params)
    outcomes: dict[Outcome, Fraction] = defaultdict(Fraction)
    for outcome, weight in enumerate_law():
        if weight:
            outcomes[outcome] += weight
    assert task.bayes_accuracy() == pytest.approx(float(exact_bayes_last(outcomes)), abs=1e-12)
    check_law(task, outcomes)


@pytest.mark.parametrize("name", ["lag-walk", "majority", "sparse-selection"])
def test_bayes_predictor_reaches_the_optimum_at_the_default_size(name):
    task = make(name)
    n = 50_000
    split = task.generate(n, torch.Generator().manual_seed(11))
    hits = int((task.bayes_predict(split.tokens) == split.labels).sum())
    bayes = task.bayes_accuracy()
    if bayes == 1.0:
        assert hits == n
    else:
        assert binomtest(hits, n, bayes).pvalue > 1e-4, f"{hits / n:.4f} against {bayes:.4f}"


@pytest.mark.parametrize("name", ["lag-walk", "majority", "sparse-selection"])
def test_100k_sequences_in_under_a_second_at_the_default_size(name):
    task = make(name)
    best = math.inf
    for attempt in range(3):  # the best of three: the machine is shared
        started = time.perf_counter()
        task.generate(100_000, torch.Generator().manual_seed(attempt))
        best = min(best, time.perf_counter() - started)
    assert best < 1.0, f"{name}: 100k sequences took {best:.2f} s"


def test_majority_optimum_by_hand():
    """V = 2, T = 2: half the sequences are a tie of two tokens, so E[1/m] = 1/2 + 1/2 * 1/2."""
    assert make("majority", vocab_size=2, context_length=2).bayes_accuracy() == pytest.approx(0.75)
    assert make("majority", vocab_size=2, context_length=7).bayes_accuracy() == pytest.approx(1.0)


def test_lag_walk_parent_is_k_back_and_the_last_token_is_independent():
    task = make("lag-walk", k=3, K=7, p=0.8, test_size=4000)
    split = task.make_split("test", 0)
    steps = (split.labels - split.tokens[:, -3]).remainder(7)
    assert set(steps.unique().tolist()) <= {1, 6}
    parent = split.attention_targets["parent_attention"]
    assert parent.sum(1).eq(1).all() and parent[:, -3].all()
    # the last input belongs to another walk: the label given it is close to uniform
    same = (split.labels == split.tokens[:, -1]).double().mean().item()
    assert abs(same - 1 / 7) < 0.03


def test_lag_walk_with_k_1_is_the_random_walk():
    lag = make("lag-walk", k=1, context_length=96, p=0.3, train_size=500)
    walk = make("random-walk", context_length=96, p=0.3, train_size=500)
    a, b = lag.make_split("train", 5), walk.make_split("train", 5)
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.labels, b.labels)


def test_sparse_selection_annotation_marks_the_named_positions():
    task = make("sparse-selection", vocab_size=5, num_tokens=10, q=3)
    split = task.make_split("test", 0)
    named = split.tokens[:, 10:] - 5
    mask = split.attention_targets["selected_attention"]
    assert mask.sum(1).eq(3).all() and mask.gather(1, named).all()


@pytest.mark.parametrize("name, params", [
    ("lag-walk", {"k": 5, "context_length": 4}),
    ("sparse-selection", {"num_tokens": 3, "q": 4}),
])
def test_inconsistent_parameters_are_refused(name, params):
    with pytest.raises(ParamError):
        make(name, **params)
