"""The Bayes predictor's log-probabilities where the label is a function of the input."""
from __future__ import annotations

import math

import torch


def certain_log_probs(prediction: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """(*prediction.shape, V): log-probability 0 on the predicted token, -inf elsewhere."""
    certain = torch.full((*prediction.shape, vocab_size), -math.inf)
    return certain.scatter_(-1, prediction[..., None], 0.0)
