"""Metrics shared by the harness and task plugins."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch

if TYPE_CHECKING:
    from tokbench.task import AttentionTarget


def matrix_correlation(a: Any, b: Any) -> float:
    """<A, B> / (||A||_F ||B||_F) for two equally shaped arrays or CPU tensors; 0 when either is zero."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    denominator = np.linalg.norm(a) * np.linalg.norm(b)
    return 0.0 if denominator == 0 else float((a * b).sum() / denominator)


def sequence_accuracy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """(n,) float64: per sequence, the fraction of its labelled positions whose argmax is right.

    ``logits`` (n, V) with ``labels`` (n,), or (n, T, V) with ``labels`` (n, T) where
    :data:`tokbench.task.IGNORE` marks positions that are not scored. The accuracy of a
    split is the mean of this over its sequences. A NaN logit has no argmax (``argmax`` would pick
    an arbitrary token and score it), so it raises ``ValueError``: the pairing fails instead of
    reporting a made-up accuracy. Infinite logits are kept: ``-inf`` is a log-probability of 0.
    """
    return prediction_accuracy(argmax_predictions(logits), labels)


def argmax_predictions(logits: torch.Tensor) -> torch.Tensor:
    """The argmax token of each position; ``ValueError`` for a NaN logit (see :func:`sequence_accuracy`)."""
    if torch.isnan(logits).any():
        raise ValueError(f"the model output NaN for {int(torch.isnan(logits).any(-1).sum())} position(s)")
    return logits.argmax(-1)


def prediction_accuracy(predictions: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """(n,) float64: per sequence, the fraction of its labelled positions where ``predictions`` (shaped like
    ``labels``; values at unscored positions are ignored) is right."""
    from tokbench.task import IGNORE

    hits = predictions == labels
    if labels.dim() == 1:
        return hits.double()
    scored = labels != IGNORE
    return (hits & scored).sum(1).double() / scored.sum(1).double()


def expected_accuracy(predictions: torch.Tensor, label_law: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """(n,) float64: per sequence, the mean over its labelled positions of the probability that the label equals
    the prediction, under ``label_law`` ((n, V) or (n, T, V) probabilities: the law the labels are drawn from).

    This is the expectation of :func:`prediction_accuracy` over the draw of the labels: the same quantity
    without the noise of one drawn label per position. ``labels`` only says which positions are scored.
    """
    from tokbench.task import IGNORE

    if labels.dim() == 1:
        return label_law.gather(-1, predictions.unsqueeze(-1)).squeeze(-1).double()
    scored = labels != IGNORE
    picked = label_law.gather(-1, torch.where(scored, predictions, 0).unsqueeze(-1)).squeeze(-1).double()
    return (picked * scored).sum(1) / scored.sum(1).double()


def chance_accuracy(labels: torch.Tensor) -> float:
    """The accuracy of the best input-independent guess on these labels, in the unit of :func:`sequence_accuracy`:
    the most frequent token's share of each sequence's labelled positions, averaged over sequences."""
    from tokbench.task import IGNORE

    if labels.dim() == 1:
        return torch.bincount(labels).max().item() / len(labels)
    scored = labels != IGNORE
    share = (1.0 / scored.sum(1, keepdim=True).double()).expand(labels.shape)  # each position's weight in its sequence
    return torch.bincount(labels[scored], weights=share[scored]).max().item() / len(labels)


def agreement(logits: torch.Tensor, reference: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """(n,) float64: per sequence, the fraction of its labelled positions where the argmax equals ``reference``."""
    from tokbench.task import IGNORE

    if labels.dim() == 2:
        reference = torch.where(labels != IGNORE, reference, IGNORE)
    return sequence_accuracy(logits, reference)


def _layer_index(layer: str | int, layers: int) -> int:
    index = {"first": 0, "last": layers - 1}.get(layer, layer)  # type: ignore[arg-type]
    if not -layers <= int(index) < layers:
        raise ValueError(f"attention target names layer {layer!r}, the model has {layers}")
    return int(index) % layers


def attention_metric(attention: torch.Tensor, target: AttentionTarget, start: int,
                     labels: torch.Tensor) -> torch.Tensor:
    """Per sequence, the target's metric for each head and for the head average: (n, H + 1) float64.

    ``attention`` (n, L, H, Q, T + S) for a chunk of sequences that begins at ``start`` in the
    split whose ``target`` this is; ``labels`` are that chunk's labels. For last-position labels
    the final query is scored; for labels at many positions, every labelled query (or the
    target's own ``queries``), averaged per sequence.
    """
    n = attention.shape[0]
    T = target.weights.shape[1]
    layer = attention[:, _layer_index(target.layer, attention.shape[1])]  # (n, H, Q, T + S)
    # heads, then their mean (taken in the model's dtype, as the model would report it)
    layer = torch.cat([layer, layer.mean(1, keepdim=True)], dim=1)[..., :T].double()
    weights = target.weights[start:start + n].double()
    if labels.dim() == 1:
        a, w = layer[:, :, -1], weights[:, None]  # (n, H + 1, T), (n, 1, T)
        return _score(a, w, target.kind)
    scored = target.rows(labels, start).double()[:, None]  # (n, 1, Q)
    per_query = _score(layer, weights[:, None], target.kind)  # (n, H + 1, Q)
    return (per_query * scored).sum(-1) / scored.sum(-1)


def _score(a: torch.Tensor, w: torch.Tensor, kind: str) -> torch.Tensor:
    if kind == "mass":
        return (a * w).sum(-1)
    return 1.0 - 0.5 * (a - w).abs().sum(-1)
