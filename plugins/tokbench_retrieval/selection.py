"""Sparse token selection and in-context majority: selecting named positions, and averaging over all."""
from __future__ import annotations

from functools import cached_property

import numpy as np
import torch
from scipy.stats import binom

from tokbench.errors import ParamError
from tokbench.task import Split, Task


class SparseSelection(Task):
    """``num_tokens`` data tokens, then q position tokens V + i; label = sum of the named data tokens mod V."""

    @property
    def values(self) -> int:
        """V, the data values and labels."""
        return self.params["vocab_size"]

    @property
    def vocab_size(self) -> int:
        return self.values + self.params["num_tokens"]

    @property
    def context_length(self) -> int:
        return self.params["num_tokens"] + self.params["q"]

    def validate(self) -> None:
        if self.params["q"] > self.params["num_tokens"]:
            raise ParamError(f"q={self.params['q']} exceeds num_tokens={self.params['num_tokens']}: the q selected "
                             f"positions are distinct, so q <= num_tokens")

    def generate(self, n: int, generator: torch.Generator) -> Split:
        V, N, q = self.values, self.params["num_tokens"], self.params["q"]
        data = torch.randint(0, V, (n, N), generator=generator)
        # the top q of i.i.d. uniforms: a uniformly random q-subset of the positions, in random order
        selected = torch.rand(n, N, generator=generator).topk(q, dim=1).indices
        labels = data.gather(1, selected).sum(1).remainder(V)
        mask = torch.zeros(n, self.context_length, dtype=torch.bool)
        mask.scatter_(1, selected, True)
        return Split(torch.cat([data, V + selected], dim=1), labels, {"selected_attention": mask})

    def bayes_accuracy(self) -> float:
        return 1.0  # the label is a function of the input

    def bayes_predict(self, tokens: torch.Tensor) -> torch.Tensor:
        V, N = self.values, self.params["num_tokens"]
        named = (tokens[:, N:] - V).clamp(0, N - 1)
        return tokens.gather(1, named).sum(1).remainder(V)

    def describe(self) -> str:
        p = self.params
        return (f"{self.spec.name} v{self.spec.version}: {p['num_tokens']} data tokens over {self.values} values, "
                f"q={p['q']} position tokens; input vocabulary {self.vocab_size}, context length "
                f"{self.context_length}; Bayes-optimal accuracy 1")


def majority_bayes_accuracy(V: int, T: int) -> float:
    """E[1/m] for T tokens i.i.d. uniform over V, m the number of tokens that share the highest count.

    For each candidate highest count c, the counts are drawn one token at a time (token j takes a
    Binomial(remaining, 1/(V - j)) share of the remaining positions), tracking the positions left
    and how many tokens reached c, with every count kept <= c.
    """
    total = 0.0
    remaining = np.arange(T + 1)
    for c in range(-(-T // V), T + 1):
        state = np.zeros((T + 1, V + 1))  # state[r, m]: r positions left, m tokens at count c
        state[T, 0] = 1.0
        for j in range(V):
            share = binom.pmf(np.arange(c + 1)[None, :], remaining[:, None], 1.0 / (V - j))  # (T + 1, c + 1)
            new = np.zeros_like(state)
            for a in range(c + 1):
                moved = state[a:] * share[a:, a : a + 1]
                if a == c:
                    new[: T + 1 - a, 1:] += moved[:, :-1]
                else:
                    new[: T + 1 - a] += moved
            state = new
        total += float((state[0, 1:] / np.arange(1, V + 1)).sum())
    return total


class Majority(Task):
    """T tokens i.i.d. uniform; label = the most frequent token, a tie broken uniformly at random."""

    @property
    def vocab_size(self) -> int:
        return self.params["vocab_size"]

    @property
    def context_length(self) -> int:
        return self.params["context_length"]

    def counts(self, tokens: torch.Tensor) -> torch.Tensor:
        """(n, V) occurrences of each token."""
        counts = torch.zeros(tokens.shape[0], self.vocab_size, dtype=torch.int64)
        return counts.scatter_add_(1, tokens, torch.ones_like(tokens))

    def generate(self, n: int, generator: torch.Generator) -> Split:
        tokens = torch.randint(0, self.vocab_size, (n, self.context_length), generator=generator)
        # counts are integers, so U[0, 1) noise picks uniformly among the tied maxima and nothing else
        noise = torch.rand(n, self.vocab_size, generator=generator, dtype=torch.float64)
        labels = (self.counts(tokens) + noise).argmax(1)
        return Split(tokens, labels)

    def bayes_accuracy(self) -> float:
        return self._bayes

    @cached_property
    def _bayes(self) -> float:
        return majority_bayes_accuracy(self.vocab_size, self.context_length)

    def bayes_predict(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.counts(tokens).argmax(1)  # any tied maximum is optimal; argmax takes the smallest token

    def describe(self) -> str:
        return (f"{self.spec.name} v{self.spec.version}: {self.context_length} tokens i.i.d. over "
                f"{self.vocab_size}; Bayes-optimal accuracy {self.bayes_accuracy():.4f}")
