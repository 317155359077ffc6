"""In-context transitions: every sequence draws its own transition matrix, which must be learnt from the context.

``icl-markov`` is the chain over positions, scored at every position: the sequence x_0 .. x_T is
drawn over the chain (x_0 uniform, every other token from the previous token's row of the
sequence's matrix), the inputs are x_0 .. x_{T-1}, and the label at position t is x_{t+1}.
``causal-graph`` draws its context over a latent graph of positions fixed for the task and asks one
query at the last position (Nichani et al.).
"""
from __future__ import annotations

import math
from functools import cached_property, lru_cache

import torch

from tokbench.seeding import derive_seed
from tokbench.errors import ParamError
from tokbench.task import IGNORE, AttentionTarget, Split, Task
from tokbench_markov.chains import (ROOT, chain_parents, dirichlet_rows, incontext_counts, posterior_mean,
                                    sample_on_graph, unigram_prediction)

BAYES_TOKENS = 2**22  # tokens drawn to estimate the Bayes accuracy (about 40,000 sequences at T = 100) ...
BAYES_SEQUENCES = (20_000, 200_000)  # ... within these numbers of sequences
BAYES_SEED = derive_seed(0, "markov:bayes-accuracy")  # its own stream, never a run's data seed


class _DirichletChains(Task):
    """Tasks over S states whose sequences each draw their own transition rows, iid Dirichlet(alpha)."""

    @property
    def states(self) -> int:
        return self.params["states"]

    @property
    def vocab_size(self) -> int:
        return self.states

    @property
    def context_length(self) -> int:
        return self.params["context_length"]

    @property
    def alpha(self) -> float:
        return self.params["alpha"]


class InContextMarkov(_DirichletChains):
    """Tokens over a graph of positions (here the chain: Edelman et al.'s in-context Markov chains) with a
    Dirichlet(alpha) transition matrix drawn per sequence.

    The Bayes predictor of x_{t+1} is the Dirichlet posterior mean of the in-context
    transitions out of the state s = x_{parent(t+1)}: ``(n(s -> j) + alpha) / (n(s -> .) + S alpha)``,
    counting the pairs (x_{parent(i)}, x_i) for i <= t. It is exact because roots are uniform, so
    they carry no information about the matrix.
    """

    @cached_property
    def parents(self) -> torch.Tensor:
        """(T + 1,) int64: the parent of each position of x_0 .. x_T, :data:`ROOT` for a root."""
        return chain_parents(self.context_length + 1)

    @cached_property
    def scored(self) -> torch.Tensor:
        """(T,) bool: the positions t whose next token x_{t+1} has a parent."""
        return self.parents[1:] != ROOT

    def sample(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """(n, T + 1) tokens x_0 .. x_T, each sequence with its own transition matrix."""
        return sample_sequences(n, generator, self.states, self.alpha, self.parents)

    def generate(self, n: int, generator: torch.Generator) -> Split:
        full = self.sample(n, generator)
        T = self.context_length
        tokens = full[:, :T].contiguous()
        labels = torch.where(self.scored, full[:, 1:], IGNORE)
        own = self.parents[:T]
        children = own != ROOT
        parent = torch.zeros(T, T, dtype=torch.bool)
        parent[children.nonzero()[:, 0], own[children]] = True
        target = AttentionTarget(parent.expand(n, T, T), layer="first", head="best",
                                 queries=children.expand(n, T))
        return Split(tokens, labels, {"parent_attention": target}, self.references(tokens))

    def predictive(self, tokens: torch.Tensor) -> torch.Tensor:
        """(n, T, S) float64: the Bayes predictive of the next token at every position."""
        return predictive(tokens, self.parents, self.states, self.alpha)

    def bayes_predict(self, tokens: torch.Tensor) -> torch.Tensor:
        # the argmax of the posterior mean is that of the counts; ties to the smallest state
        return incontext_counts(tokens, self.parents, self.states).argmax(-1)

    def bayes_log_probs(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.predictive(tokens).log()

    def references(self, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
        """The predictions of the reference strategies: the in-context unigram and bigram (Bayes) argmaxes."""
        return {"unigram": unigram_prediction(tokens, self.states), "bigram": self.bayes_predict(tokens)}

    @property
    def _bayes_estimate(self) -> tuple[float, float]:
        """The Bayes accuracy and its standard error (see :func:`bayes_estimate`), shared by equal instances."""
        return bayes_estimate(self.states, self.alpha, tuple(self.parents.tolist()))

    def bayes_accuracy(self) -> float:
        return self._bayes_estimate[0]

    def describe(self) -> str:
        accuracy, se = self._bayes_estimate
        return (f"{self.spec.name} v{self.spec.version}: {self.states} states, {self.context_length} inputs, "
                f"alpha={self.alpha:g}, {int(self.scored.sum())} scored positions; Bayes accuracy {accuracy:.4f} "
                f"(Monte Carlo, standard error {se:.1e})")


class CausalGraph(_DirichletChains):
    """Nichani et al.'s in-context causal structure: x_0 .. x_{T-2} over a latent graph of positions (fixed by
    ``graph`` and ``graph_seed``) with a Dirichlet(alpha) transition matrix pi drawn per sequence, then a query
    token s at the last position; the label is a draw from pi[s].

    The paper's target is the row pi[s] itself (soft-label cross-entropy); a draw from it has the same expected
    cross-entropy up to the row's entropy, which no model changes. The Bayes predictive is the posterior mean of
    pi[s] given the context: count x_i over the positions i whose parent holds s, add alpha, normalise. It is
    exact because roots are uniform (the paper draws them from pi's stationary law, which tells a little about
    pi that the counts ignore).
    """

    @cached_property
    def parents(self) -> torch.Tensor:
        """(T - 1,) int64: the parent of each position before the query, :data:`ROOT` for a root."""
        return graph_parents(self.params["graph"], self.context_length - 1, self.params["graph_seed"])

    def validate(self) -> None:
        if self.context_length < 2:
            raise ParamError("context_length must be at least 2: one graph position and the query")

    def generate(self, n: int, generator: torch.Generator) -> Split:
        kernels = dirichlet_rows(n, self.states, self.alpha, generator)
        root = torch.full((self.states,), 1.0 / self.states, dtype=torch.float64)
        context = sample_on_graph(kernels, self.parents, root, generator)
        query = torch.randint(0, self.states, (n,), generator=generator)
        row = kernels[torch.arange(n), query]  # pi[s], (n, S)
        labels = torch.multinomial(row, 1, generator=generator)[:, 0]
        tokens = torch.cat([context, query[:, None]], dim=1)
        transitions = transitions_out_of_query(tokens, self.parents)
        # with no transition out of s in the context no position is better than another: all of them are marked
        transitions |= ~transitions.any(1, keepdim=True)
        target = torch.cat([transitions, torch.zeros(n, 1, dtype=torch.bool)], dim=1)
        return Split(tokens, labels, {"transition_attention": AttentionTarget(target, layer="last", head="best")},
                     self.references(tokens))

    def counts(self, tokens: torch.Tensor) -> torch.Tensor:
        """(n, S) float64: the in-context transitions out of the query token."""
        return query_counts(tokens, self.parents, self.states)

    def predictive(self, tokens: torch.Tensor) -> torch.Tensor:
        """(n, S) float64: the posterior mean of pi[s]."""
        return posterior_mean(self.counts(tokens), self.alpha)

    def bayes_predict(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.counts(tokens).argmax(-1)  # the argmax of the posterior mean; ties to the smallest state

    def bayes_log_probs(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.predictive(tokens).log()

    def references(self, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
        """The in-context unigram (most frequent context token) and the Bayes argmax."""
        return {"unigram": unigram_prediction(tokens[:, :-1], self.states)[:, -1].contiguous(),
                "bigram": self.bayes_predict(tokens)}

    @property
    def _bayes_estimate(self) -> tuple[float, float]:
        return query_bayes_estimate(self.states, self.alpha, tuple(self.parents.tolist()))

    def bayes_accuracy(self) -> float:
        return self._bayes_estimate[0]

    def describe(self) -> str:
        accuracy, se = self._bayes_estimate
        parents = ", ".join(f"{i}<-{p}" for i, p in enumerate(self.parents.tolist()) if p != ROOT)
        return (f"{self.spec.name} v{self.spec.version}: {self.states} states, {self.context_length - 1} graph "
                f"positions and the query, alpha={self.alpha:g}; Bayes accuracy {accuracy:.4f} (Monte Carlo, "
                f"standard error {se:.1e}); graph {self.params['graph']} (child<-parent): {parents}")


def sample_sequences(n: int, generator: torch.Generator, states: int, alpha: float,
                     parents: torch.Tensor) -> torch.Tensor:
    """(n, L) tokens over the graph ``parents``: a Dirichlet(alpha) matrix per sequence, uniform roots."""
    kernels = dirichlet_rows(n, states, alpha, generator)
    root = torch.full((states,), 1.0 / states, dtype=torch.float64)
    return sample_on_graph(kernels, parents, root, generator)


def predictive(tokens: torch.Tensor, parents: torch.Tensor, states: int, alpha: float) -> torch.Tensor:
    """(n, T, S) float64: the posterior mean of the next token's transition row at every position."""
    return posterior_mean(incontext_counts(tokens, parents, states), alpha)


@lru_cache(maxsize=32)  # a run's workers build the same task once per pairing: estimate it once per process
def bayes_estimate(states: int, alpha: float, parents: tuple[int, ...]) -> tuple[float, float]:
    """Monte Carlo estimate of the Bayes accuracy over the graph ``parents`` (T + 1 positions), and its standard error.

    Per sequence, the mean over scored positions of the predictive's largest probability (the
    probability that the Bayes prediction is right, given the context), over a fixed-seed sample.
    """
    graph = torch.tensor(parents)
    low, high = BAYES_SEQUENCES
    n = min(high, max(low, BAYES_TOKENS // len(parents)))
    full = sample_sequences(n, torch.Generator().manual_seed(BAYES_SEED), states, alpha, graph)
    scored = graph[1:] != ROOT
    best = predictive(full[:, :-1], graph, states, alpha).amax(-1)[:, scored].mean(1)
    return best.mean().item(), best.std().item() / math.sqrt(n)


@lru_cache(maxsize=32)
def query_bayes_estimate(states: int, alpha: float, parents: tuple[int, ...]) -> tuple[float, float]:
    """Monte Carlo estimate of :class:`CausalGraph`'s Bayes accuracy and its standard error: per sequence, the
    largest posterior-mean probability of the query's row (the probability that the Bayes prediction is right),
    over a fixed-seed sample."""
    graph = torch.tensor(parents)
    n = min(BAYES_SEQUENCES[1], max(BAYES_SEQUENCES[0], BAYES_TOKENS // (len(parents) + 1)))
    generator = torch.Generator().manual_seed(BAYES_SEED)
    context = sample_sequences(n, generator, states, alpha, graph)
    query = torch.randint(0, states, (n, 1), generator=generator)
    best = posterior_mean(query_counts(torch.cat([context, query], dim=1), graph, states), alpha).amax(-1)
    return best.mean().item(), best.std().item() / math.sqrt(n)


def transitions_out_of_query(tokens: torch.Tensor, parents: torch.Tensor) -> torch.Tensor:
    """(n, T - 1) bool: the positions i of ``tokens[:, :-1]`` (over the graph ``parents``) whose parent holds the
    query token ``tokens[:, -1]``: the transitions out of the query's state."""
    return (parents != ROOT) & (tokens[:, parents.clamp(min=0)] == tokens[:, -1:])


def query_counts(tokens: torch.Tensor, parents: torch.Tensor, states: int) -> torch.Tensor:
    """(n, S) float64: the in-context transitions out of the query token, counted by destination."""
    counts = torch.zeros(tokens.shape[0], states, dtype=torch.float64)
    return counts.scatter_add_(1, tokens[:, :-1], transitions_out_of_query(tokens, parents).double())


def graph_parents(kind: str, length: int, seed: int) -> torch.Tensor:
    """The parent array of a graph over ``length`` positions.

    ``chain``: every position's parent is the one before. ``icl``: pairs (x, y), the y at each odd
    position a child of the x before it, every x a root (Nichani et al.'s in-context learning
    graph). ``random``: as Nichani et al.'s ``single_parent.py``, position i's parent is uniform
    over {root, 0, .., i - 1} (position 0 is a root, a later one with probability 1/(i + 1)), drawn
    from ``seed``; a longer graph from the same seed extends a shorter one.
    """
    positions = torch.arange(length)
    if kind == "chain":
        return chain_parents(length)
    if kind == "icl":
        return torch.where(positions % 2 == 1, positions - 1, ROOT)
    if kind == "random":
        generator = torch.Generator().manual_seed(seed)
        draws = torch.rand(length, generator=generator, dtype=torch.float64)
        return (draws * (positions + 1)).long() + ROOT  # ROOT is -1: draws of 0 name the root
    raise ValueError(f"graph must be chain, icl or random, got {kind!r}")
