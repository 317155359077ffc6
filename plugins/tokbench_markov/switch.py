"""Makkuva et al.'s binary Markov chain: one switching kernel for all data, x_0 from its stationary law."""
from __future__ import annotations

import torch
from scipy.special import entr

from tokbench.errors import ParamError
from tokbench.task import Split, Task
from tokbench_markov.chains import chain_parents, sample_on_graph


def binary_entropy(p: float) -> float:
    """h(p) in nats (0 at p = 0 and p = 1)."""
    return float(entr(p) + entr(1.0 - p))


class MarkovSwitch(Task):
    """P = [[1 - p, p], [q, 1 - q]]; stationary law pi = (q, p) / (p + q); the label at every position is the next token.

    The Bayes predictor is the kernel row of the current token; the unigram (stationary) predictor
    always predicts pi, the local minimum of single-layer transformers for p + q > 1.
    """

    @property
    def vocab_size(self) -> int:
        return 2

    @property
    def context_length(self) -> int:
        return self.params["context_length"]

    @property
    def p(self) -> float:
        return self.params["p"]

    @property
    def q(self) -> float:
        return self.params["q"]

    def validate(self) -> None:
        if self.p + self.q == 0:
            raise ParamError("p + q must be positive (p = q = 0 is a chain that never moves, with no stationary law)")

    @property
    def kernel(self) -> torch.Tensor:
        return torch.tensor([[1 - self.p, self.p], [self.q, 1 - self.q]], dtype=torch.float64)

    @property
    def stationary(self) -> torch.Tensor:
        return torch.tensor([self.q, self.p], dtype=torch.float64) / (self.p + self.q)

    def sample(self, n: int, generator: torch.Generator) -> torch.Tensor:
        """(n, T + 1) tokens x_0 .. x_T of the chain."""
        T = self.context_length
        return sample_on_graph(self.kernel.expand(n, 2, 2), chain_parents(T + 1), self.stationary, generator)

    def generate(self, n: int, generator: torch.Generator) -> Split:
        full = self.sample(n, generator)
        tokens = full[:, :self.context_length].contiguous()
        return Split(tokens, full[:, 1:].contiguous(), references=self.references(tokens))

    def bayes_predict(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.kernel.argmax(-1)[tokens]  # ties to token 0

    def bayes_log_probs(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.kernel.log()[tokens]

    def bayes_accuracy(self) -> float:
        """Every position is distributed as pi, so the accuracy is sum_s pi_s max_j P[s, j]."""
        return float((self.stationary * self.kernel.amax(-1)).sum())

    def bayes_loss(self) -> float:
        """The entropy rate (q h(p) + p h(q)) / (p + q), in nats."""
        return (self.q * binary_entropy(self.p) + self.p * binary_entropy(self.q)) / (self.p + self.q)

    def unigram_loss(self) -> float:
        """The loss of the stationary predictor, h(p / (p + q))."""
        return binary_entropy(self.p / (self.p + self.q))

    def references(self, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
        """The stationary predictor ("unigram": argmax pi everywhere) and the kernel ("bigram", the Bayes predictor)."""
        constant = torch.full_like(tokens, int(self.stationary.argmax()))
        return {"unigram": constant, "bigram": self.bayes_predict(tokens)}

    def describe(self) -> str:
        pi0 = float(self.stationary[0])
        return (f"{self.spec.name} v{self.spec.version}: p={self.p:g}, q={self.q:g} (p + q = {self.p + self.q:g}), "
                f"{self.context_length} inputs, pi = ({pi0:.4f}, {1 - pi0:.4f}); Bayes accuracy "
                f"{self.bayes_accuracy():.4f}, entropy rate {self.bayes_loss():.4f} nats, unigram loss "
                f"{self.unigram_loss():.4f} nats")
