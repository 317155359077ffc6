"""In-context transitions: every sequence draws its own transition matrix, which must be learnt from the context.

``icl-markov`` is the chain over positions; ``causal-graph`` a latent graph over positions fixed
for the task. Both share this class: the sequence x_0 .. x_T is drawn over the graph (roots
uniform, every other token from its parent's row of the sequence's matrix), the inputs are
x_0 .. x_{T-1}, and the label at position t is x_{t+1} wherever x_{t+1} has a parent.
"""
from __future__ import annotations

import math
from functools import cached_property, lru_cache

import torch

from tokbench.seeding import derive_seed
from tokbench.task import IGNORE, AttentionTarget, Split, Task
from tokbench_markov.chains import (ROOT, chain_parents, dirichlet_rows, incontext_counts, posterior_mean,
                                    sample_on_graph, unigram_prediction)

BAYES_TOKENS = 2**22  # tokens drawn to estimate the Bayes accuracy (about 40,000 sequences at T = 100) ...
BAYES_SEQUENCES = (20_000, 200_000)  # ... within these numbers of sequences
BAYES_SEED = derive_seed(0, "markov:bayes-accuracy")  # its own stream, never a run's data seed


class InContextMarkov(Task):
    """Tokens over a graph of positions (here the chain: Edelman et al.'s in-context Markov chains) with a
    Dirichlet(alpha) transition matrix drawn per sequence.

    The Bayes predictor of x_{t+1} is the Dirichlet posterior mean of the in-context
    transitions out of the state s = x_{parent(t+1)}: ``(n(s -> j) + alpha) / (n(s -> .) + S alpha)``,
    counting the pairs (x_{parent(i)}, x_i) for i <= t. It is exact because roots are uniform, so
    they carry no information about the matrix.
    """

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


class CausalGraph(InContextMarkov):
    """Nichani et al.'s in-context causal structure: one latent graph over positions, fixed by ``graph`` and ``graph_seed``."""

    @cached_property
    def parents(self) -> torch.Tensor:
        return graph_parents(self.params["graph"], self.context_length + 1, self.params["graph_seed"])

    def describe(self) -> str:
        parents = ", ".join(f"{i}<-{p}" for i, p in enumerate(self.parents.tolist()) if p != ROOT)
        return f"{super().describe()}; graph {self.params['graph']} (child<-parent): {parents}"


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


def graph_parents(kind: str, length: int, seed: int) -> torch.Tensor:
    """The parent array of a graph over ``length`` positions.

    ``chain``: every position's parent is the one before. ``icl``: pairs (x, y), the y at each odd
    position a child of the x before it, every x a root (Nichani et al.'s in-context learning
    graph). ``random``: position 0 is the root and every other position's parent is uniform over
    the positions before it, drawn from ``seed``.
    """
    positions = torch.arange(length)
    if kind == "chain":
        return chain_parents(length)
    if kind == "icl":
        return torch.where(positions % 2 == 1, positions - 1, ROOT)
    if kind == "random":
        generator = torch.Generator().manual_seed(seed)
        draws = torch.rand(length, generator=generator, dtype=torch.float64)
        return torch.where(positions > 0, (draws * positions).long(), ROOT)
    raise ValueError(f"graph must be chain, icl or random, got {kind!r}")
