"""The implementation of ``kit_faults``."""
from __future__ import annotations

import math

import torch
from torch import nn

from tokbench.model import ModelOutput, TokenModel
from tokbench.task import Split, Task


class NoisyCopy(Task):
    @property
    def vocab_size(self) -> int:
        return self.params["V"]

    @property
    def context_length(self) -> int:
        return self.params["T"]

    def generate(self, n: int, generator: torch.Generator) -> Split:
        tokens = torch.randint(0, self.vocab_size, (n, self.context_length), generator=generator)
        noisy = torch.rand(n, generator=generator) < self.params["noise"]
        labels = torch.where(noisy, torch.randint(0, self.vocab_size, (n,), generator=generator), tokens[:, -1])
        return Split(tokens, labels, {})

    def bayes_accuracy(self) -> float:
        return 1 - self.params["noise"] + self.params["noise"] / self.vocab_size

    def bayes_predict(self, tokens: torch.Tensor) -> torch.Tensor:
        return tokens[:, -1].clone()

    def bayes_log_probs(self, tokens: torch.Tensor) -> torch.Tensor:
        noise, V = self.params["noise"], self.vocab_size
        if noise == 1.0:  # the fault: every token "certain"
            return torch.zeros(len(tokens), V)
        probs = torch.full((len(tokens), V), noise / V)
        probs.scatter_(-1, tokens[:, -1:], 1 - noise + noise / V)
        return probs.log()

    def bayes_loss(self) -> float:
        noise, V = self.params["noise"], self.vocab_size
        right = 1 - noise + noise / V
        return -(right * math.log(right) + (1 - right) * math.log(noise / V)) if noise else 0.0


class Peeking(TokenModel):
    def __init__(self, params, task) -> None:
        super().__init__(params, task)
        self.scale = nn.Parameter(torch.tensor(5.0))

    def forward(self, tokens: torch.Tensor, need_attention: bool = False) -> ModelOutput:
        following = torch.cat([tokens[:, 1:], tokens[:, -1:]], dim=1)  # the token after each position: the future
        return ModelOutput(self.scale * nn.functional.one_hot(following, self.vocab_size).float(), None)
