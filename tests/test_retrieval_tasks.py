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

from small_tasks import create_task
from tokbench.errors import ParamError
from tokbench.task import IGNORE

# (tokens, label) of a task scored at the last position, or (tokens, labels) of one scored at many
Outcome = tuple[tuple[int, ...], "int | tuple[int, ...]"]
TASKS = ["mqar", "selective-copy", "sparse-selection", "majority", "lag-walk"]


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
    """The label is the data token at one of the q named positions, each with probability 1/q."""
    orders = list(itertools.permutations(range(N), q))
    for data in itertools.product(range(V), repeat=N):
        for named in orders:
            for i in named:
                yield (data + tuple(V + j for j in named), data[i]), Fraction(1, V**N * len(orders) * q)


def mqar_outcomes(V: int, T: int, N: int, Q: int, a: float) -> Iterator[tuple[Outcome, float]]:
    """Zoology's law: distinct keys and values, query slots drawn one by one in proportion to (g+1)^(a-1)."""
    slots = (T - 2 * N) // 2
    w = [(g + 1) ** (a - 1) for g in range(slots)]
    key_orders = list(itertools.permutations(range(1, V // 2), N))
    value_orders = list(itertools.permutations(range(V // 2, V), N))
    for keys, values, chosen in itertools.product(key_orders, value_orders, itertools.permutations(range(slots), Q)):
        p_slots, left = 1.0, sum(w)
        for g in chosen:
            p_slots, left = p_slots * w[g] / left, left - w[g]
        tokens, labels = [0] * T, [IGNORE] * T
        for i in range(N):
            tokens[2 * i], tokens[2 * i + 1] = keys[i], values[i]
        for i, g in enumerate(chosen):
            tokens[2 * N + 2 * g], labels[2 * N + 2 * g] = keys[i], values[i]
        yield (tuple(tokens), tuple(labels)), p_slots / (len(key_orders) * len(value_orders))


def selective_copy_outcomes(V: int, T: int, K: int) -> Iterator[tuple[Outcome, Fraction]]:
    region = T - K - 1
    placements = list(itertools.combinations(range(region), K))
    for where in placements:
        for data in itertools.product(range(V - 2), repeat=K):
            tokens, labels = [V - 2] * T, [IGNORE] * (T - K) + list(data)
            for position, token in zip(where, data):
                tokens[position] = token
            tokens[region] = V - 1
            yield (tuple(tokens), tuple(labels)), Fraction(1, len(placements) * (V - 2) ** K)


def exact_bayes(outcomes: dict[Outcome, Fraction]) -> float:
    """The best accuracy any predictor can reach, by enumeration.

    Last position: sum over inputs x of max_y P(x, y). Many positions: the accuracy of a sequence is the
    fraction of its scored positions predicted right, and the prediction at t sees tokens[:t+1] only, so
    each (t, prefix) is one decision: sum over them of max_y sum P(sequence) / (its scored positions).
    """
    decisions: dict[tuple, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    for (tokens, labels), weight in outcomes.items():
        if isinstance(labels, int):
            decisions[tokens][labels] += weight
            continue
        scored = [t for t, y in enumerate(labels) if y != IGNORE]
        for t in scored:
            decisions[(t, tokens[: t + 1])][labels[t]] += weight / len(scored)
    return float(sum(max(labels.values()) for labels in decisions.values()))


def check_law(task, outcomes: dict, n: int = 20_000) -> None:
    """The generator's empirical (tokens, label) frequencies match the enumerated law (chi-square)."""
    assert float(sum(outcomes.values())) == pytest.approx(1.0, abs=1e-12)
    split = task.generate(n, torch.Generator().manual_seed(7))
    label = (lambda y: tuple(y.tolist())) if split.labels.dim() == 2 else int
    seen = Counter((tuple(t.tolist()), label(y)) for t, y in zip(split.tokens, split.labels))
    assert set(seen) <= set(outcomes), f"generated outcomes outside the law: {list(set(seen) - set(outcomes))[:3]}"
    keys = list(outcomes)
    result = chisquare([seen[k] for k in keys], [float(outcomes[k]) * n for k in keys])
    assert result.pvalue > 1e-4, f"chi-square p = {result.pvalue:.2g} over {len(keys)} outcomes"


TINY = [
    ("mqar", dict(vocab_size=8, context_length=10, num_kv_pairs=2, num_queries=2, power_a=0.01),
     lambda: mqar_outcomes(8, 10, 2, 2, 0.01)),
    ("mqar", dict(vocab_size=8, context_length=9, num_kv_pairs=2, num_queries=1, power_a=0.5),
     lambda: mqar_outcomes(8, 9, 2, 1, 0.5)),
    ("selective-copy", dict(vocab_size=4, context_length=7, num_tokens_to_copy=2), lambda: selective_copy_outcomes(4, 7, 2)),
    ("selective-copy", dict(vocab_size=5, context_length=5, num_tokens_to_copy=1), lambda: selective_copy_outcomes(5, 5, 1)),
    ("lag-walk", dict(K=3, k=2, context_length=3, p=0.3), lambda: lag_walk_outcomes(3, 2, 3, Fraction(3, 10))),
    ("lag-walk", dict(K=4, k=1, context_length=2, p=0.5), lambda: lag_walk_outcomes(4, 1, 2, Fraction(1, 2))),
    ("lag-walk", dict(K=3, k=3, context_length=4, p=1.0), lambda: lag_walk_outcomes(3, 3, 4, Fraction(1))),
    ("majority", dict(vocab_size=3, context_length=4), lambda: majority_outcomes(3, 4)),
    ("majority", dict(vocab_size=2, context_length=4), lambda: majority_outcomes(2, 4)),
    ("majority", dict(vocab_size=4, context_length=3), lambda: majority_outcomes(4, 3)),
    ("sparse-selection", dict(vocab_size=3, num_tokens=3, q=2), lambda: sparse_outcomes(3, 3, 2)),
    ("sparse-selection", dict(vocab_size=2, num_tokens=3, q=1), lambda: sparse_outcomes(2, 3, 1)),
    ("sparse-selection", dict(vocab_size=2, num_tokens=3, q=3), lambda: sparse_outcomes(2, 3, 3)),
]


@pytest.mark.parametrize("name, params, enumerate_law", TINY, ids=[f"{n}-{i}" for i, (n, *_) in enumerate(TINY)])
def test_tiny_instances_match_brute_force(name, params, enumerate_law):
    task = create_task(name, **params)
    outcomes: dict[Outcome, Fraction] = defaultdict(Fraction)
    for outcome, weight in enumerate_law():
        if weight:
            outcomes[outcome] += weight
    assert task.bayes_accuracy() == pytest.approx(exact_bayes(outcomes), abs=1e-12)
    if task.bayes_loss() is not None:  # E[-log P(label | input)] by enumeration
        by_input: dict[tuple, Fraction] = defaultdict(Fraction)
        for (tokens, _), weight in outcomes.items():
            by_input[tokens] += weight
        loss = sum(float(w) * -math.log(float(w / by_input[tokens])) for (tokens, _), w in outcomes.items())
        assert task.bayes_loss() == pytest.approx(loss, abs=1e-12)
    check_law(task, outcomes)


@pytest.mark.parametrize("name", TASKS)
def test_bayes_predictor_reaches_the_optimum_at_the_default_size(name):
    task = create_task(name)
    n = 50_000
    split = task.generate(n, torch.Generator().manual_seed(11))
    prediction = task.bayes_predict(split.tokens)
    bayes = task.bayes_accuracy()
    if bayes == 1.0:
        assert bool(((prediction == split.labels) | (split.labels == IGNORE)).all())
    else:
        hits = int((prediction == split.labels).sum())
        assert binomtest(hits, n, bayes).pvalue > 1e-4, f"{hits / n:.4f} against {bayes:.4f}"


@pytest.mark.parametrize("name", ["mqar", "selective-copy", "sparse-selection", "majority"])
def test_bayes_log_probs_are_the_bayes_predictor_and_its_loss(name):
    task = create_task(name)
    split = task.generate(20_000, torch.Generator().manual_seed(3))
    log_probs = task.bayes_log_probs(split.tokens)
    assert torch.allclose(log_probs.exp().sum(-1), torch.ones(()))
    # the Bayes predictor names a most probable token wherever a label is scored
    prediction = task.bayes_predict(split.tokens).clamp(min=0)
    scored = split.labels != IGNORE
    assert bool((log_probs.gather(-1, prediction[..., None])[..., 0] == log_probs.max(-1).values)[scored].all())
    picked = log_probs.gather(-1, split.labels.clamp(min=0)[..., None])[..., 0]
    losses = -torch.where(scored, picked, 0.0).double()
    per_sequence = losses if losses.dim() == 1 else losses.sum(1) / scored.sum(1)
    assert bool(torch.isfinite(per_sequence).all())
    se = per_sequence.std().item() / math.sqrt(len(per_sequence))
    assert abs(per_sequence.mean().item() - task.bayes_loss()) <= 4 * se + 1e-12


@pytest.mark.parametrize("name", TASKS)
def test_100k_sequences_in_under_a_second_at_the_default_size(name):
    """Of this process's CPU time on one thread (the machine is shared, so not wall-clock time), the best of three."""
    task = create_task(name)
    best = math.inf
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for attempt in range(3):
            started = time.process_time()
            task.generate(100_000, torch.Generator().manual_seed(attempt))
            best = min(best, time.process_time() - started)
    finally:
        torch.set_num_threads(threads)
    assert best < 1.0, f"{name}: 100k sequences took {best:.2f} s of CPU time"


def test_majority_optimum_by_hand():
    """V = 2, T = 2: half the sequences are a tie of two tokens, so E[1/m] = 1/2 + 1/2 * 1/2."""
    assert create_task("majority", vocab_size=2, context_length=2).bayes_accuracy() == pytest.approx(0.75)
    assert create_task("majority", vocab_size=2, context_length=7).bayes_accuracy() == pytest.approx(1.0)


def test_lag_walk_parent_is_k_back_and_the_last_token_is_independent():
    task = create_task("lag-walk", k=3, K=7, p=0.8, test_size=4000)
    split = task.make_split("test", 0)
    steps = (split.labels - split.tokens[:, -3]).remainder(7)
    assert set(steps.unique().tolist()) <= {1, 6}
    parent = split.attention_targets["parent_attention"].weights
    assert parent.sum(1).eq(1).all() and parent[:, -3].all()
    # the last input belongs to another walk: the label given it is close to uniform
    same = (split.labels == split.tokens[:, -1]).double().mean().item()
    assert abs(same - 1 / 7) < 0.03


def test_lag_walk_with_k_1_is_the_random_walk():
    lag = create_task("lag-walk", k=1, context_length=96, p=0.3, train_size=500)
    walk = create_task("random-walk", context_length=96, p=0.3, train_size=500)
    a, b = lag.make_split("train", 5), walk.make_split("train", 5)
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.labels, b.labels)


def test_sparse_selection_target_is_one_over_q_on_the_named_positions():
    task = create_task("sparse-selection", vocab_size=5, num_tokens=10, q=3)
    split = task.make_split("test", 0)
    target = split.attention_targets["selected_attention"]
    assert target.kind == "distribution"
    named = split.tokens[:, 10:] - 5
    assert torch.allclose(target.weights.gather(1, named), torch.full((len(split), 3), 1 / 3))
    assert torch.allclose(target.weights.sum(1), torch.ones(len(split)))


def test_sparse_selection_labels_a_selected_token_each_equally_often():
    """qSA's target is the average of the selected tokens: the label is one of them (never their sum mod V),
    each of the q named positions with probability 1/q."""
    task = create_task("sparse-selection", vocab_size=16, num_tokens=12, q=4)
    split = task.generate(40_000, torch.Generator().manual_seed(2))
    named = split.tokens.gather(1, split.tokens[:, 12:] - 16)  # the q selected data tokens
    hits = named == split.labels[:, None]
    assert bool(hits.any(1).all())
    distinct = (named[:, :, None] != named[:, None, :]).sum((1, 2)) == 4 * 3  # then exactly one hit
    counts = hits[distinct].float().argmax(1).bincount(minlength=4)
    assert chisquare(counts.numpy()).pvalue > 1e-4


@pytest.mark.parametrize("V, q", [(8, 1), (8, 3), (4, 8), (2, 5)])
def test_sparse_selection_one_selection_falls_short_of_averaging(V, q):
    """The pointer reference (the token the last input names) reaches (1 + (q - 1)/V)/q, the averaging Bayes
    predictor E[max count]/q: equal for q <= 2, apart from q = 3 on."""
    task = create_task("sparse-selection", vocab_size=V, num_tokens=12, q=q)
    n = 40_000
    split = task.generate(n, torch.Generator().manual_seed(4))
    hits = int((split.references["pointer"] == split.labels).sum())
    assert binomtest(hits, n, task.pointer_accuracy()).pvalue > 1e-4
    assert torch.equal(split.references["average"], task.bayes_predict(split.tokens))
    assert (task.pointer_accuracy() < task.bayes_accuracy() - 0.03) == (q >= 3)


def test_mqar_default_has_filler_and_a_varied_query_gap():
    """Zoology's smallest setting, T = 16N: most slots are filler, so the power law places the queries and the
    gap between a key and its query varies (with T = 4N every slot holds a query and the gap is fixed)."""
    task = create_task("mqar")
    N, Q = task.params["num_kv_pairs"], task.params["num_queries"]
    assert task.context_length >= 16 * N and task.vocab_size >= 256 and task.query_slots >= 4 * Q
    split = task.generate(5000, torch.Generator().manual_seed(0))
    rows, positions = (split.labels != IGNORE).nonzero(as_tuple=True)
    keys = split.tokens[rows, positions]
    key_positions = (split.tokens[rows, : 2 * N : 2] == keys[:, None]).float().argmax(1) * 2
    assert len(torch.unique(positions - key_positions)) > 4 * N


def test_mqar_queries_ask_for_values_written_in_the_prefix():
    task = create_task("mqar", vocab_size=64, context_length=40, num_kv_pairs=6, num_queries=4)
    split = task.make_split("test", 0)
    scored = split.labels != IGNORE
    assert bool(scored[:, :12].any() == False) and bool((scored.sum(1) == 4).all())  # noqa: E712
    assert bool((split.tokens[:, 12:][~scored[:, 12:]] == 0).all())  # filler between the queries
    keys, values = split.tokens[:, 0:12:2], split.tokens[:, 1:12:2]
    assert bool((keys < 32).all() and (keys >= 1).all() and (values >= 32).all())
    assert bool((keys.sort(1).values.diff(dim=1) > 0).all())  # distinct keys
    target = split.attention_targets["value_attention"]
    rows = target.weights[scored]  # one source per query: the position of the queried key's value
    assert bool((rows.sum(1) == 1).all())
    sources = rows.float().argmax(1)
    queried = split.tokens[scored]
    assert bool((split.tokens[scored.nonzero()[:, 0], sources - 1] == queried).all())


def test_mqar_power_law_favours_early_query_slots():
    early = create_task("mqar", num_queries=1, power_a=0.01).make_split("test", 0)
    uniform = create_task("mqar", num_queries=1, power_a=1.0).make_split("test", 0)
    first = lambda split: (split.labels != IGNORE).float().argmax(1).double().mean().item()  # noqa: E731
    assert first(early) < first(uniform) - 2


def test_selective_copy_outputs_the_data_tokens_in_order():
    task = create_task("selective-copy", vocab_size=10, context_length=30, num_tokens_to_copy=5)
    split = task.make_split("test", 0)
    head = split.tokens[:, :24]
    data = head[head < 8].view(len(split), 5)
    assert torch.equal(split.labels[:, -5:], data) and bool((split.labels[:, :-5] == IGNORE).all())
    assert bool((split.tokens[:, 24] == 9).all() and (split.tokens[:, 25:] == 8).all())
    rows = split.attention_targets["source_attention"].weights[:, -5:]  # (n, 5, T)
    assert torch.equal(split.tokens.gather(1, rows.float().argmax(2)), data)


@pytest.mark.parametrize("name, params", [
    ("lag-walk", {"k": 5, "context_length": 4}),
    ("sparse-selection", {"num_tokens": 3, "q": 4}),
    ("mqar", {"vocab_size": 8, "num_kv_pairs": 4}),
    ("mqar", {"num_kv_pairs": 2, "num_queries": 3}),
    ("mqar", {"context_length": 12, "num_kv_pairs": 4, "num_queries": 4}),
    ("selective-copy", {"context_length": 9, "num_tokens_to_copy": 4}),
])
def test_inconsistent_parameters_are_refused(name, params):
    with pytest.raises(ParamError):
        create_task(name, **params)
