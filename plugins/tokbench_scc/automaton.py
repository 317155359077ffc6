"""A generative SCC automaton: the benchmark form of [B]'s token-priority structure.

For every query token k the K tokens are split into SCCs put in a strict
priority order, and every token has a positive composition weight. A sequence
is T distinct tokens in random order, the last being the query k; its label is
drawn among the context tokens of the highest-priority SCC present, in
proportion to their weights.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from math import comb

import torch

from tokbench.errors import ParamError

MAX_ENUMERATED_SUBSETS = 2_000_000  # bound on the exact Bayes computation for drawn weights


def distinct_tokens(n: int, K: int, T: int, generator: torch.Generator) -> torch.Tensor:
    """(n, T) sequences of T distinct tokens of K, uniform in set and order."""
    return torch.rand(n, K, generator=generator).argsort(dim=1)[:, :T]


@dataclass(frozen=True)
class SCCAutomaton:
    """rank[k, t]: priority class of token t under query k (0 is the highest).
    weight[k, t]: composition weight of token t inside its class under query k.
    """

    rank: torch.Tensor  # (K, K) int64
    weight: torch.Tensor  # (K, K) float64, positive

    @property
    def vocab_size(self) -> int:
        return self.rank.shape[0]

    def classes(self, query: int) -> list[list[int]]:
        """The SCCs under ``query``, highest priority first, tokens ascending."""
        rank = self.rank[query].tolist()
        return [[t for t, r in enumerate(rank) if r == level] for level in range(max(rank) + 1)]

    @classmethod
    def random(cls, K: int, num_sccs: int, weights: str, generator: torch.Generator) -> SCCAutomaton:
        """Per query: a random order of the K tokens cut at ``num_sccs - 1`` distinct random
        points into non-empty classes; weights all 1, or drawn once from Exp(1)."""
        if not 1 <= num_sccs <= K:
            raise ParamError(f"num_sccs={num_sccs} must lie in [1, K={K}]")
        order = torch.rand(K, K, generator=generator).argsort(dim=1)  # order[k]: tokens by priority
        cuts = torch.rand(K, K - 1, generator=generator).argsort(dim=1)[:, : num_sccs - 1] + 1
        starts = torch.zeros(K, K, dtype=torch.int64)
        starts.scatter_(1, cuts, 1)  # starts[k, i] = 1 where a new class begins at place i
        rank = torch.empty(K, K, dtype=torch.int64)
        rank.scatter_(1, order, starts.cumsum(1))
        if weights == "uniform":
            weight = torch.ones(K, K, dtype=torch.float64)
        else:
            weight = -torch.log1p(-torch.rand(K, K, generator=generator, dtype=torch.float64))
        return cls(rank, weight)

    def sample(self, n: int, T: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``n`` sequences: tokens (n, T), labels (n,), and the (n, T) mask of the retrieved SCC."""
        tokens = distinct_tokens(n, self.vocab_size, T, generator)
        rank = self.rank[tokens[:, -1:], tokens]  # (n, T) ranks under each sample's query
        retrieved = rank == rank.min(dim=1, keepdim=True).values
        weight = self.weight[tokens[:, -1:], tokens] * retrieved
        position = torch.multinomial(weight, 1, generator=generator)
        return tokens, tokens.gather(1, position).squeeze(1), retrieved

    def bayes_predict(self, tokens: torch.Tensor) -> torch.Tensor:
        """The heaviest token of the retrieved SCC; ties go to the smallest token."""
        rank = self.rank[tokens[:, -1:], tokens]
        weight = self.weight[tokens[:, -1:], tokens]
        weight = torch.where(rank == rank.min(dim=1, keepdim=True).values, weight, -1.0)
        best = weight == weight.max(dim=1, keepdim=True).values
        return torch.where(best, tokens, self.vocab_size).min(dim=1).values

    def bayes_accuracy(self, T: int) -> float:
        """Exactly E[max weight / total weight] over the retrieved SCC's context tokens.

        Under query k the other T-1 tokens are a uniform subset of the K-1 others.
        Class C_r is retrieved holding exactly A = B + ({k} & C_r) when the subset
        misses the classes above, meets C_r - {k} in B, and takes its other
        T-1-|B| tokens from the classes below: C(below, T-1-|B|) of C(K-1, T-1) ways.
        The query's own class is always present, so retrieval stops there.
        """
        K = self.vocab_size
        self._check_enumeration(T)
        total = 0.0
        for k in range(K):
            above = 0
            for members in self.classes(k):
                free = [t for t in members if t != k]
                forced = [k] if k in members else []
                below = K - 1 - above - len(free)
                total += sum(
                    comb(below, T - 1 - b) * self._mean_top_share(k, free, forced, b)
                    for b in range(min(len(free), T - 1) + 1)
                )
                if forced:
                    break
                above += len(free)
        return total / (K * comb(K - 1, T - 1))

    def _equal_weights(self, k: int, members: list[int]) -> bool:
        return len(set(self.weight[k, members].tolist())) == 1

    def _check_enumeration(self, T: int) -> None:
        """Refuse, before any work, an exact computation that would enumerate too many subsets."""
        subsets = sum(
            comb(len(members), b)
            for k in range(self.vocab_size) for members in self.classes(k) if not self._equal_weights(k, members)
            for b in range(min(len(members), T) + 1)
        )
        if subsets > MAX_ENUMERATED_SUBSETS:
            raise ParamError(
                f"the exact Bayes accuracy would enumerate {subsets:.3g} subsets of SCCs with drawn weights "
                f"(limit {MAX_ENUMERATED_SUBSETS:.0e}), too large; use more SCCs, a shorter context or weights=uniform"
            )

    def _mean_top_share(self, k: int, free: list[int], forced: list[int], b: int) -> float:
        """Sum over the b-subsets B of ``free`` of max/sum of the weights of B + forced (0 if empty)."""
        if b == 0 and not forced:
            return 0.0
        if self._equal_weights(k, free + forced):  # every subset scores 1/|A|
            return comb(len(free), b) / (b + len(forced))
        w = self.weight[k].tolist()
        return sum(
            max(w[t] for t in subset) / sum(w[t] for t in subset)
            for subset in (list(c) + forced for c in itertools.combinations(free, b))
        )
