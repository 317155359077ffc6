"""Sparse token selection and in-context majority: averaging the named positions, and averaging over all."""
from __future__ import annotations

import math
from functools import cached_property

import numpy as np
import torch
from scipy.stats import binom

from tokbench.errors import ParamError
from tokbench.task import AttentionTarget, Split, Task


class SparseSelection(Task):
    """``num_tokens`` data tokens, then q position tokens V + i; the label is the data token at one of the q named
    positions, drawn uniformly: a sample of the average of the selected one-hot tokens (q-sparse averaging).

    Trained by cross-entropy on such samples, a model's expected loss is its cross-entropy against that
    average (a soft target) up to a constant, so the hard-label contract carries qSA's target. The Bayes
    predictor names a most frequent selected token and is right with probability (its count) / q.
    """

    @property
    def values(self) -> int:
        """V, the data values and labels."""
        return self.params["vocab_size"]

    @property
    def q(self) -> int:
        return self.params["q"]

    @property
    def vocab_size(self) -> int:
        return self.values + self.params["num_tokens"]

    @property
    def context_length(self) -> int:
        return self.params["num_tokens"] + self.q

    def validate(self) -> None:
        if self.q > self.params["num_tokens"]:
            raise ParamError(f"q={self.q} exceeds num_tokens={self.params['num_tokens']}: the q selected "
                             f"positions are distinct, so q <= num_tokens")

    def generate(self, n: int, generator: torch.Generator) -> Split:
        V, N, q = self.values, self.params["num_tokens"], self.q
        data = torch.randint(0, V, (n, N), generator=generator)
        # the top q of i.i.d. uniforms: a uniformly random q-subset of the positions, in random order
        selected = torch.rand(n, N, generator=generator).topk(q, dim=1).indices
        which = torch.randint(0, q, (n, 1), generator=generator)
        labels = data.gather(1, selected.gather(1, which))[:, 0]
        target = torch.zeros(n, self.context_length).scatter_(1, selected, 1.0 / q)
        tokens = torch.cat([data, V + selected], dim=1)
        return Split(tokens, labels, {"selected_attention": AttentionTarget(target, kind="distribution")},
                     {"pointer": self.pointer_predict(tokens), "average": self.bayes_predict(tokens)})

    def pointer_predict(self, tokens: torch.Tensor) -> torch.Tensor:
        """The data token at the position the last input names: one selection, no averaging. It is right with
        probability (1 + (q - 1) / V) / q, below the optimum from q = 3 on."""
        N = self.params["num_tokens"]
        return tokens.gather(1, (tokens[:, -1:] - self.values).clamp(0, N - 1))[:, 0]

    def pointer_accuracy(self) -> float:
        """The accuracy of :meth:`pointer_predict`: its value is the label w.p. 1/q, and another selected one
        equals it w.p. 1/V."""
        return (1 + (self.q - 1) / self.values) / self.q

    def selected_counts(self, tokens: torch.Tensor) -> torch.Tensor:
        """(n, V + num_tokens) occurrences of each value among the q named data tokens (0 beyond V)."""
        V, N = self.values, self.params["num_tokens"]
        named = tokens.gather(1, (tokens[:, N:] - V).clamp(0, N - 1))
        counts = torch.zeros(tokens.shape[0], self.vocab_size, dtype=torch.int64)
        return counts.scatter_add_(1, named, torch.ones_like(named))

    @cached_property
    def _max_count(self) -> np.ndarray:
        return max_count_distribution(self.values, self.q)

    def bayes_accuracy(self) -> float:
        """E[max count] / q: the most frequent selected value is the label with probability its count over q."""
        return float((self._max_count * np.arange(self.q + 1)).sum() / self.q)

    def bayes_loss(self) -> float:
        """E[entropy of the selected values' frequencies]: each value's count is Binomial(q, 1/V), so this is
        V E[-(c/q) log(c/q)]."""
        share = np.arange(1, self.q + 1) / self.q
        return float(self.values * (binom.pmf(np.arange(1, self.q + 1), self.q, 1.0 / self.values)
                                    * -share * np.log(share)).sum())

    def bayes_predict(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.selected_counts(tokens).argmax(1)  # any most frequent value is optimal; ties to the smallest

    def bayes_log_probs(self, tokens: torch.Tensor) -> torch.Tensor:
        """log(count / q) of each value among the selected tokens (-inf for a value not selected)."""
        return (self.selected_counts(tokens).double() / self.q).log().float()

    def describe(self) -> str:
        p = self.params
        return (f"{self.spec.name} v{self.spec.version}: {p['num_tokens']} data tokens over {self.values} values, "
                f"q={self.q} position tokens; input vocabulary {self.vocab_size}, context length "
                f"{self.context_length}; Bayes-optimal accuracy {self.bayes_accuracy():.4f}, one selection (the "
                f"last-named token) {self.pointer_accuracy():.4f}")


def max_count_distribution(V: int, q: int) -> np.ndarray:
    """P(c = j) for j = 0..q, c the highest count among q i.i.d. uniform draws over V values.

    P(c <= j) draws the counts one value at a time (value i takes a Binomial(remaining, 1/(V - i))
    share of the draws left) with every count kept <= j.
    """
    at_most = np.zeros(q + 1)
    remaining = np.arange(q + 1)
    for j in range(q + 1):
        state = np.zeros(q + 1)  # state[r]: probability that r draws are left
        state[q] = 1.0
        for i in range(V):
            new = np.zeros_like(state)
            for a in range(min(j, q) + 1):
                new[: q + 1 - a] += state[a:] * binom.pmf(a, remaining[a:], 1.0 / (V - i))
            state = new
        at_most[j] = state[0]
    return np.diff(at_most, prepend=0.0)


def tie_distribution(V: int, T: int) -> np.ndarray:
    """P(m = j) for j = 0..V, m the number of tokens that share the highest count among T i.i.d. uniform
    tokens over V (P(m = 0) = 0).

    For each candidate highest count c, the counts are drawn one token at a time (token j takes a
    Binomial(remaining, 1/(V - j)) share of the remaining positions), tracking the positions left
    and how many tokens reached c, with every count kept <= c.
    """
    tied = np.zeros(V + 1)
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
        tied[1:] += state[0, 1:]
    return tied


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
        uniform = torch.full((1, self.context_length), 1.0 / self.context_length).expand(n, -1)
        return Split(tokens, labels, {"uniform_attention": AttentionTarget(uniform, kind="distribution")})

    @cached_property
    def _tied(self) -> np.ndarray:
        return tie_distribution(self.vocab_size, self.context_length)

    def bayes_accuracy(self) -> float:
        """E[1/m]: the Bayes predictor names one of the m tied tokens."""
        return float((self._tied[1:] / np.arange(1, self.vocab_size + 1)).sum())

    def bayes_loss(self) -> float:
        """E[log m]: the Bayes predictor spreads its probability evenly over the m tied tokens."""
        return float((self._tied[1:] * np.log(np.arange(1, self.vocab_size + 1))).sum())

    def bayes_predict(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.counts(tokens).argmax(1)  # any tied maximum is optimal; argmax takes the smallest token

    def bayes_log_probs(self, tokens: torch.Tensor) -> torch.Tensor:
        """log 1/m on each of the m tied most frequent tokens, -inf elsewhere."""
        counts = self.counts(tokens)
        tied = counts == counts.max(1, keepdim=True).values
        return torch.where(tied, -tied.sum(1, keepdim=True).double().log(), -math.inf).float()

    def describe(self) -> str:
        return (f"{self.spec.name} v{self.spec.version}: {self.context_length} tokens i.i.d. over "
                f"{self.vocab_size}; Bayes-optimal accuracy {self.bayes_accuracy():.4f}")
