"""The model contract that model plugins implement.

A model is a ``torch.nn.Module`` subclass of :class:`TokenModel`, built for one
task instance. Register a :class:`tokbench.ModelSpec` whose ``implementation``
points at the subclass.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

if TYPE_CHECKING:
    from tokbench.task import Split, Task


class ModelOutput(NamedTuple):
    """What a forward pass returns.

    logits:    (n, V) scores over the vocabulary; the prediction is their argmax.
    attention: (n, T + S) the query's attention weights over the T input positions,
               followed by S >= 0 extra slots (a query slot attends to itself).
               Rows sum to 1. ``None`` for models without attention.
    head_attention: (n, H, T + S) per-head weights when asked for, else ``None``.
    """

    logits: torch.Tensor
    attention: torch.Tensor | None = None
    head_attention: torch.Tensor | None = None


class TokenModel(nn.Module):
    """Base class of every model.

    ``__init__(params, task)`` receives the resolved parameters and the task
    instance (for ``vocab_size`` and ``context_length``). ``forward(tokens)``
    maps (n, T) int64 tokens to a :class:`ModelOutput`.
    """

    def __init__(self, params: dict[str, Any], task: Task) -> None:
        super().__init__()
        self.params = params
        self.vocab_size = task.vocab_size
        self.context_length = task.context_length

    def loss(self, output: ModelOutput, labels: torch.Tensor) -> torch.Tensor:
        """Training loss; cross-entropy on the logits unless a model says otherwise."""
        return F.cross_entropy(output.logits, labels)

    def fit(self, train: Split) -> None:
        """Fit non-gradient state on the training split before optimisation (baselines)."""

    def value_matrix(self) -> torch.Tensor | None:
        """The (V, V) map from attended tokens to output scores, if the model has one."""
        return None

    def key_query(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """``(W, E)``: the key-query matrix (d, d) and token embeddings (V, d), if bilinear."""
        return None
