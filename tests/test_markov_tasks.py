"""The Markov tasks against brute force on tiny instances: sampler, Bayes predictor, Bayes accuracy and loss."""
from __future__ import annotations

import itertools
import math
import time

import pytest
import torch
from scipy.special import gammaln
from scipy.stats import chisquare

from small_tasks import create_task
from tokbench.metrics import attention_metric
from tokbench.plugins import registry
from tokbench.task import IGNORE, AttentionTarget
from tokbench_markov.chains import ROOT

SAMPLES = 200_000  # sequences drawn to test a sampler against the exact law


def all_sequences(states: int, length: int) -> torch.Tensor:
    return torch.tensor(list(itertools.product(range(states), repeat=length)))


def dirichlet_marginal(sequence: list[int], parents: list[int], states: int, alpha: float) -> float:
    """P(x) with the transition matrix integrated out: uniform roots, and per source state a
    Dirichlet-multinomial of its observed transitions (Polya urn)."""
    counts = [[0] * states for _ in range(states)]
    log_p = 0.0
    for i, parent in enumerate(parents[:len(sequence)]):
        if parent == ROOT:
            log_p -= math.log(states)
        else:
            counts[sequence[parent]][sequence[i]] += 1
    for row in counts:
        log_p += gammaln(states * alpha) - gammaln(states * alpha + sum(row))
        log_p += sum(gammaln(alpha + c) - gammaln(alpha) for c in row)
    return math.exp(log_p)


def expected(law) -> torch.Tensor:
    """Expected counts of :data:`SAMPLES` draws (normalised, as chisquare wants equal totals)."""
    law = torch.as_tensor(law, dtype=torch.float64)
    return (SAMPLES * law / law.sum()).numpy()


IN_CONTEXT = [
    ("icl-markov", {"states": 2, "context_length": 3, "alpha": 1.0}),
    ("icl-markov", {"states": 3, "context_length": 3, "alpha": 0.5}),
    ("icl-markov", {"states": 2, "context_length": 4, "alpha": 0.1}),
]


@pytest.mark.parametrize("name,params", IN_CONTEXT)
def test_in_context_predictor_and_accuracy_match_brute_force(name, params):
    task = create_task(name, **params)
    S, T, alpha = task.states, task.context_length, task.alpha
    parents = task.parents.tolist()
    full = all_sequences(S, T + 1)
    law = torch.tensor([dirichlet_marginal(x, parents, S, alpha) for x in full.tolist()], dtype=torch.float64)
    assert law.sum().item() == pytest.approx(1.0, abs=1e-12)
    predictive = task.predictive(full[:, :T])
    # the predictive of x_{t+1} is the ratio of prefix marginals, P(x_0..x_t, j) / P(x_0..x_t)
    for x, row in zip(full.tolist()[:: S], predictive[:: S]):
        for t in range(T):
            if not task.scored[t]:
                continue
            prefix = dirichlet_marginal(x[:t + 1], parents, S, alpha)
            exact = [dirichlet_marginal(x[:t + 1] + [j], parents, S, alpha) / prefix for j in range(S)]
            assert row[t].tolist() == pytest.approx(exact, abs=1e-12)
    # exact Bayes accuracy: per sequence the fraction of scored positions predicted right, averaged under the law
    hits = (task.bayes_predict(full[:, :T]) == full[:, 1:])[:, task.scored].double().mean(1)
    exact = float((law * hits).sum())
    estimate, se = task._bayes_estimate
    assert abs(estimate - exact) <= 4 * se, f"Monte Carlo {estimate:.5f} +- {se:.1e}, exact {exact:.5f}"


@pytest.mark.parametrize("name,params", IN_CONTEXT[:1] + IN_CONTEXT[2:3])
def test_in_context_sampler_follows_the_exact_law(name, params):
    task = create_task(name, **params)
    S, T = task.states, task.context_length
    full = task.sample(SAMPLES, torch.Generator().manual_seed(0))
    index = (full * S ** torch.arange(T, -1, -1)).sum(1)
    observed = torch.bincount(index, minlength=S ** (T + 1)).double()
    law = [dirichlet_marginal(x, task.parents.tolist(), S, task.alpha) for x in all_sequences(S, T + 1).tolist()]
    assert chisquare(observed.numpy(), expected(law)).pvalue > 1e-4


CAUSAL = [
    {"states": 2, "context_length": 5, "graph": "icl", "alpha": 0.1},
    {"states": 3, "context_length": 4, "graph": "random", "graph_seed": 3, "alpha": 2.0},
    {"states": 2, "context_length": 5, "graph": "chain", "alpha": 1.0},
]


def causal_law(task) -> tuple[torch.Tensor, torch.Tensor]:
    """Every (context, query, label) of Nichani et al.'s process and its probability: the query is a uniform
    root at position T - 1 and the label its child (a draw from pi[query]), pi integrated out."""
    S, T = task.states, task.context_length
    parents = task.parents.tolist() + [ROOT, T - 1]
    full = all_sequences(S, T + 1)
    law = torch.tensor([dirichlet_marginal(x, parents, S, task.alpha) for x in full.tolist()], dtype=torch.float64)
    return full, law


@pytest.mark.parametrize("params", CAUSAL)
def test_causal_graph_predictor_accuracy_and_sampler_match_brute_force(params):
    task = create_task("causal-graph", **params)
    S, T = task.states, task.context_length
    full, law = causal_law(task)
    assert law.sum().item() == pytest.approx(1.0, abs=1e-12)
    tokens, labels = full[:, :T], full[:, T]
    # the predictive of the label is the ratio of marginals P(context, query, j) / P(context, query)
    joint = law.view(-1, S)
    assert torch.allclose(task.predictive(tokens[::S]), joint / joint.sum(1, keepdim=True), rtol=0, atol=1e-12)
    exact = float((law * (task.bayes_predict(tokens) == labels).double()).sum())
    estimate, se = task._bayes_estimate
    assert abs(estimate - exact) <= 4 * se, f"Monte Carlo {estimate:.5f} +- {se:.1e}, exact {exact:.5f}"
    split = task.generate(SAMPLES, torch.Generator().manual_seed(0))
    index = (torch.cat([split.tokens, split.labels[:, None]], 1) * S ** torch.arange(T, -1, -1)).sum(1)
    observed = torch.bincount(index, minlength=S ** (T + 1)).double()
    assert chisquare(observed.numpy(), expected(law)).pvalue > 1e-4


def test_causal_graph_is_nichani_et_al_s_setting():
    """One query at the last position (scored there only), alpha 0.1, the paper's S = 10 and T = 20."""
    spec = registry().task("causal-graph")
    task = spec.create({})
    assert spec.scoring == "last" and (task.states, task.context_length, task.alpha) == (10, 20, 0.1)
    split = task.make_split("test", 0)
    assert split.labels.shape == (len(split),)
    # the query's transitions: the positions whose parent holds the query token, never the query itself
    target = split.attention_targets["transition_attention"].weights
    parents = task.parents.clamp(min=0)
    expected_mask = (task.parents != ROOT) & (split.tokens[:, parents] == split.tokens[:, -1:])
    seen = expected_mask.any(1)  # else no position is better than another, and every one is marked
    assert torch.equal(target[seen, :-1], expected_mask[seen]) and bool(target[~seen, :-1].all())
    assert 0 < int(seen.sum()) < len(split) and not bool(target[:, -1].any())


def test_markov_switch_matches_brute_force():
    task = create_task("markov-switch", p=0.3, q=0.9, context_length=4)
    # The law written out from the task's definition, not read from the task
    P = torch.tensor([[0.7, 0.3], [0.9, 0.1]], dtype=torch.float64)
    pi = torch.tensor([0.9, 0.3], dtype=torch.float64) / 1.2
    assert torch.allclose(task.kernel.double(), P) and torch.allclose(task.stationary.double(), pi)
    full = all_sequences(2, 5)
    law = pi[full[:, 0]] * P[full[:, :-1], full[:, 1:]].prod(1)
    tokens, labels = full[:, :4], full[:, 1:]
    hits = (task.bayes_predict(tokens) == labels).double().mean(1)
    assert float((law * hits).sum()) == pytest.approx(task.bayes_accuracy(), abs=1e-12)
    loss = -task.bayes_log_probs(tokens).gather(-1, labels[..., None])[..., 0].mean(1)
    assert float((law * loss).sum()) == pytest.approx(task.bayes_loss(), abs=1e-12)
    unigram = -pi.log()[labels].mean(1)
    assert float((law * unigram).sum()) == pytest.approx(task.unigram_loss(), abs=1e-12)
    sample = task.generate(SAMPLES, torch.Generator().manual_seed(1))
    index = (torch.cat([sample.tokens, sample.labels[:, -1:]], 1) * 2 ** torch.arange(4, -1, -1)).sum(1)
    observed = torch.bincount(index, minlength=32).double()
    assert chisquare(observed.numpy(), expected(law)).pvalue > 1e-4


def test_markov_switch_references():
    task = create_task("markov-switch", p=0.6, q=0.8)
    split = task.make_split("test", 0)
    references = task.references(split.tokens)
    assert bool((references["unigram"] == 0).all()), "pi = (4/7, 3/7): the stationary predictor always says 0"
    assert torch.equal(references["bigram"], 1 - split.tokens), "p, q > 1/2: the kernel predicts a switch"


def test_unigram_reference_is_the_in_context_majority():
    task = create_task("icl-markov", states=3, context_length=5)
    tokens = torch.tensor([[2, 1, 1, 2, 2]])
    assert task.references(tokens)["unigram"].tolist() == [[2, 1, 1, 1, 2]]  # ties to the smaller token


@pytest.mark.parametrize("name", ["icl-markov", "markov-switch"])
def test_generation_is_vectorised(name):
    """100,000 sequences of length 64 (tokens and next tokens) in under a second of this process's CPU time, on
    one thread. A split's annotations (the reference strategies' and Bayes predictions) come on top."""
    task = create_task(name, context_length=64)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        task.sample(1000, torch.Generator().manual_seed(0))  # warm-up
        started = time.process_time()
        full = task.sample(100_000, torch.Generator().manual_seed(0))
        spent = time.process_time() - started
    finally:
        torch.set_num_threads(threads)
    assert full.shape == (100_000, 65)
    assert spent < 1.0, f"{name}: {spent:.2f} s of CPU time for 100,000 sequences of length 64"


def test_graphs():
    icl = create_task("causal-graph", graph="icl", context_length=8)
    assert icl.parents.tolist() == [ROOT, 0, ROOT, 2, ROOT, 4, ROOT]  # the 7 positions before the query
    chain = create_task("causal-graph", graph="chain", context_length=5)
    assert chain.parents.tolist() == [ROOT, 0, 1, 2]
    random = create_task("causal-graph", graph="random", context_length=41, graph_seed=5)
    assert bool((random.parents < torch.arange(40)).all()) and bool((random.parents >= ROOT).all())
    assert torch.equal(random.parents, create_task("causal-graph", graph="random", context_length=41, graph_seed=5).parents)
    assert not torch.equal(random.parents, create_task("causal-graph", graph="random", context_length=41).parents)
    # a longer graph from the same seed extends the shorter one (evaluation at a longer context)
    longer = create_task("causal-graph", graph="random", context_length=161, graph_seed=5).parents
    assert torch.equal(longer[:40], random.parents)


def test_random_graph_roots_are_as_in_nichani_et_al():
    """single_parent.py: position i's parent is uniform over {root, 0, .., i - 1}, so later positions are roots
    too (with probability 1/(i + 1)), not only position 0."""
    parents = torch.stack([create_task("causal-graph", graph="random", context_length=21, graph_seed=seed).parents
                           for seed in range(4000)])
    assert bool((parents[:, 0] == ROOT).all())
    for i in (1, 4, 9):
        counts = torch.bincount(parents[:, i] + 1, minlength=i + 1)
        assert len(counts) == i + 1 and chisquare(counts.numpy()).pvalue > 1e-4


def test_attention_metric_averages_over_the_targets_queries():
    """AttentionTarget.queries: the metric counts those rows, whatever the labels."""
    n, T = 2, 3
    attention = torch.zeros(n, 1, 1, T, T)
    attention[:, 0, 0, torch.arange(T), torch.tensor([0, 0, 2])] = 1.0  # rows 0 and 1 on position 0, row 2 on itself
    weights = torch.zeros(n, T, T, dtype=torch.bool)
    weights[:, 1, 0] = weights[:, 2, 1] = True
    labels = torch.tensor([[1, IGNORE, IGNORE]] * n)
    queries = torch.tensor([[False, True, True]] * n)
    by_queries = attention_metric(attention, AttentionTarget(weights, queries=queries), 0, labels)
    assert by_queries[:, -1].tolist() == [0.5, 0.5]  # row 1 hits its parent, row 2 misses
    by_labels = attention_metric(attention, AttentionTarget(weights), 0, labels)
    assert by_labels[:, -1].tolist() == [0.0, 0.0]  # only row 0, which marks nothing here


def test_impossible_switch_is_a_usage_error(cli):
    result = cli("show", "task", "markov-switch", "--set", "p=0", "--set", "q=0")
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "p + q" in result.stderr
