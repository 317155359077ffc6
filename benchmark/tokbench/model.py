"""The model contract that model plugins implement (contract v2).

A model is a ``torch.nn.Module`` subclass of :class:`TokenModel`, built for one
task instance. Register a :class:`tokbench.ModelSpec` whose ``implementation``
points at the subclass; the spec's ``predicts`` says whether the model predicts
only after the last input (``"last"``) or after every input (``"every"``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from torch._C._functorch import is_functorch_wrapped_tensor

from tokbench.task import IGNORE

if TYPE_CHECKING:
    from tokbench.task import Split, Task


class ModelOutput(NamedTuple):
    """What a forward pass returns.

    logits:    scores over the vocabulary, the prediction being their argmax: (n, V)
               for a model that predicts after the last input, (n, T, V) for one that
               predicts after every input (causal: position t sees ``tokens[:, :t + 1]``).
    attention: (n, L, H, Q, T + S): per layer and head, each query's weights over the
               T input positions followed by S >= 0 extra slots (a query slot attends to
               itself). Q = 1 (the last input, or a query slot) where the logits are (n, V),
               Q = T where they are (n, T, V).
               Rows sum to 1. ``None`` for models without attention, or when the
               forward pass was not asked for it.
    """

    logits: torch.Tensor
    attention: torch.Tensor | None = None


class TokenModel(nn.Module):
    """Base class of every model.

    ``__init__(params, task)`` receives the resolved parameters and the task
    instance (for ``vocab_size`` and ``context_length``); it may raise
    :class:`tokbench.errors.NotApplicable` when the model cannot serve the task.
    ``forward(tokens, need_attention=False)`` maps (n, T) int64 tokens to a
    :class:`ModelOutput`; the harness asks for attention only when it evaluates, so
    a model may skip computing it in training (for example to use a fused kernel).
    """

    def __init__(self, params: dict[str, Any], task: Task) -> None:
        super().__init__()
        self.params = params
        self.vocab_size = task.vocab_size
        self.context_length = task.context_length
        self.scoring = task.spec.scoring  # where the task is scored: "last" or "positions"

    def loss(self, output: ModelOutput, labels: torch.Tensor) -> torch.Tensor:
        """Training loss: cross-entropy on the logits unless a model says otherwise.

        ``output.logits`` is (n, V) with ``labels`` (n,), or (n, T, V) with ``labels`` (n, T)
        where :data:`tokbench.task.IGNORE` marks unscored positions (pooled over scored ones).
        """
        logits, labels = output.logits.flatten(0, -2), labels.flatten()
        if _eager_on_cpu(logits):
            # the log-softmax of unscored rows is wasted work (7 in 8 of mqar's rows): take the scored rows first.
            # The gradient is bit-identical; the loss's value may differ in its last bits (the sum's order).
            scored = labels != IGNORE
            if not scored.all():
                logits, labels = logits[scored], labels[scored]
        return F.cross_entropy(logits, labels, ignore_index=IGNORE)

    def log_probs(self, output: ModelOutput) -> torch.Tensor:
        """Log-probabilities of the next token, shaped like the logits: their log-softmax unless the
        model's outputs are something else (for example probabilities)."""
        return F.log_softmax(output.logits, dim=-1)

    def fit(self, train: Split) -> None:
        """Fit non-gradient state on the training split before optimisation (baselines)."""

    def state_size(self) -> int | None:
        """The floats the model carries from one position to the next, per sequence, summed over its layers: the
        state of its recurrent form (docs/models.md, "Sizes"). ``None`` where it has none of fixed size: attention
        reads every earlier position, so what it keeps grows with the context; also the default."""
        return None

    def size(self) -> dict[str, int | None]:
        """What the run record states as ``size``: trainable parameters (a tied weight counted once) and
        :meth:`state_size`."""
        trainable = sum(parameter.numel() for parameter in self.parameters() if parameter.requires_grad)
        return {"parameters": trainable, "state": self.state_size()}

    def value_matrix(self) -> torch.Tensor | None:
        """The (V, V) map from attended tokens to output scores, if the model has one."""
        return None

    def key_query(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """``(W, E)``: the key-query matrix (d, d) and token embeddings (V, d), if bilinear."""
        return None


def _eager_on_cpu(x: torch.Tensor) -> bool:
    """A CPU tensor outside torch.func transforms: a boolean index there costs no device sync, and it has the
    concrete shape that ``vmap`` would refuse."""
    return x.device.type == "cpu" and not is_functorch_wrapped_tensor(x)
