"""Walks on a circle of K nodes, generated in one vectorised pass."""
from __future__ import annotations

import torch

from tokbench.metrics import matrix_correlation
from tokbench.model import TokenModel
from tokbench.task import AttentionTarget, Split, Task


def sample_walks(n: int, length: int, K: int, p: float, generator: torch.Generator, lag: int = 1) -> torch.Tensor:
    """(n, length) int64 walks: uniform start, then +1 mod K w.p. p, else -1 mod K.

    With ``lag`` k > 1, k independent walks are interleaved, so token t continues token t - k.
    """
    steps_per_walk = -(-length // lag)
    start = torch.randint(0, K, (n * lag, 1), generator=generator)
    up = torch.rand(n * lag, steps_per_walk - 1, generator=generator) < p
    steps = torch.where(up, 1, -1)
    walks = torch.cat([start, start + steps.cumsum(1)], dim=1).remainder(K)
    return walks.view(n, lag, steps_per_walk).transpose(1, 2).reshape(n, -1)[:, :length]


def transition_matrix(K: int, p: float) -> torch.Tensor:
    """Pi with Pi[i, j] = P(next = j | current = i), float64."""
    pi = torch.zeros(K, K, dtype=torch.float64)
    nodes = torch.arange(K)
    pi[nodes, (nodes + 1) % K] += p
    pi[nodes, (nodes - 1) % K] += 1 - p
    return pi


class RandomWalk(Task):
    """Inputs s_1..s_{N-1}, label s_N; the parent position is the ``lag``-th last input (the last one here)."""

    @property
    def lag(self) -> int:
        """k: the label continues the walk of the k-th last input."""
        return 1

    @property
    def p(self) -> float:
        return self.params["p"]

    @property
    def vocab_size(self) -> int:
        return self.params["K"]

    @property
    def context_length(self) -> int:
        return self.params["context_length"]

    def generate(self, n: int, generator: torch.Generator) -> Split:
        walks = sample_walks(n, self.context_length + 1, self.vocab_size, self.p, generator, self.lag)
        parent = torch.zeros(n, self.context_length, dtype=torch.bool)
        parent[:, -self.lag] = True
        return Split(walks[:, :-1].contiguous(), walks[:, -1].contiguous(), {"parent_attention": AttentionTarget(parent)})

    def bayes_accuracy(self) -> float:
        return max(self.p, 1 - self.p)

    def bayes_predict(self, tokens: torch.Tensor) -> torch.Tensor:
        # argmax of Pi^T x_{N-1}, ties to the smaller node index.
        parent, K = tokens[:, -self.lag], self.vocab_size
        up, down = (parent + 1) % K, (parent - 1) % K
        if self.p > 0.5:
            return up
        if self.p < 0.5:
            return down
        return torch.minimum(up, down)

    def model_metrics(self, model: TokenModel, split: Split) -> dict[str, float]:
        value = model.value_matrix()
        if value is None or value.shape != (self.vocab_size, self.vocab_size):
            return {}
        pi = transition_matrix(self.vocab_size, self.p)
        return {"value_transition_correlation": matrix_correlation(value.detach().cpu(), pi.T)}

    def describe(self) -> str:
        K, T = self.vocab_size, self.context_length
        return (
            f"{self.spec.name} v{self.spec.version}: K={K} nodes, {T} inputs (N={T + 1}), p={self.p}; "
            f"Bayes-optimal accuracy {self.bayes_accuracy():.4f}"
        )


class DeterministicWalk(RandomWalk):
    """The p = 1 walk over ``laps`` full laps of the circle."""

    @property
    def p(self) -> float:
        return 1.0

    @property
    def context_length(self) -> int:
        return self.params["laps"] * self.params["K"]
