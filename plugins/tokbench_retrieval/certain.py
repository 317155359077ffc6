"""Tasks whose label is a function of the input: the Bayes predictor is certain and its loss is 0."""
from __future__ import annotations

import math

import torch

from tokbench.task import Task


def certain_log_probs(prediction: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """(*prediction.shape, V): log-probability 0 on the predicted token, -inf elsewhere."""
    certain = torch.full((*prediction.shape, vocab_size), -math.inf)
    return certain.scatter_(-1, prediction[..., None], 0.0)


class DeterministicTask(Task):
    """A task whose ``bayes_predict`` is never wrong: its log-probabilities are certain, its Bayes loss 0."""

    def bayes_log_probs(self, tokens: torch.Tensor) -> torch.Tensor:
        return certain_log_probs(self.bayes_predict(tokens), self.vocab_size)

    def bayes_loss(self) -> float:
        return 0.0
