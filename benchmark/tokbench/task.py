"""The task contract that task plugins implement (contract v2).

A task generates sequences of integer tokens and next-token labels: one per
sequence, predicted after the last input (``TaskSpec.scoring = "last"``), or
one at each of many positions (``scoring = "positions"``). Subclass
:class:`Task`, implement the abstract members, and register a
:class:`tokbench.TaskSpec` whose ``implementation`` points at the subclass.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from tokbench.seeding import derive_seed

if TYPE_CHECKING:
    from tokbench.model import TokenModel
    from tokbench.specs import TaskSpec

SPLITS = ("train", "val", "test")
IGNORE = -100  #: the label of a position that is not scored (as ``ignore_index`` in torch's losses)
TARGET_KINDS = ("mass", "distribution")


@dataclass
class AttentionTarget:
    """Where a model should attend, for one diagnostic.

    weights: ``(n, T)`` for a task scored at the last position (the query is the
        last input), or ``(n, T, T)`` for a task scored at many positions (row t
        is the target of the query at position t; only labelled rows count).
    kind: ``"mass"``: ``weights`` is a 0/1 mask and the metric is the attention
        mass on it. ``"distribution"``: each row sums to 1 and the metric is one
        minus the total-variation distance between the attention and the target,
        ``1 - sum|a - w| / 2``, in [0, 1].
    layer: which layer's attention is scored: ``"first"``, ``"last"`` or an index.
    head: how heads are reduced: ``"mean"`` (their average), ``"best"`` (the head
        with the highest metric on the split) or a head index.
    queries: for a task scored at many positions, an optional ``(n, T)`` bool mask of
        the query rows the metric averages over, when they are not the labelled ones
        (for example a child position's attention on its parent, where only the
        predictions of other positions are scored). ``None``: the labelled positions.

    The metric is averaged over the scored (or chosen) queries of each sequence, then
    over sequences; the record keeps the layer and head that were used.
    """

    weights: torch.Tensor
    kind: str = "mass"
    layer: str | int = "last"
    head: str | int = "mean"
    queries: torch.Tensor | None = None

    def __post_init__(self) -> None:
        if self.kind not in TARGET_KINDS:
            raise ValueError(f"AttentionTarget.kind must be one of {TARGET_KINDS}, got {self.kind!r}")
        if not (self.layer in ("first", "last") or isinstance(self.layer, int)):
            raise ValueError(f"AttentionTarget.layer must be 'first', 'last' or an index, got {self.layer!r}")
        if not (self.head in ("mean", "best") or isinstance(self.head, int)):
            raise ValueError(f"AttentionTarget.head must be 'mean', 'best' or an index, got {self.head!r}")

    def equals(self, other: AttentionTarget) -> bool:
        if (self.queries is None) != (other.queries is None):
            return False
        same_queries = self.queries is None or torch.equal(self.queries, other.queries)
        return (self.kind, self.layer, self.head) == (other.kind, other.layer, other.head) and torch.equal(
            self.weights, other.weights) and same_queries

    def rows(self, labels: torch.Tensor, start: int = 0) -> torch.Tensor:
        """(n, T) bool: the query rows the metric counts, for the labels (n, T) of the sequences from ``start``."""
        return (labels != IGNORE) if self.queries is None else self.queries[start:start + len(labels)]


@dataclass
class Split:
    """One split of a task.

    tokens:  (n, T) int64, every entry in ``[0, vocab_size)``.
    labels:  (n,) int64 for a task scored at the last position: the token that
        follows the sequence. (n, T) int64 for a task scored at many positions:
        ``labels[i, t]`` is the token to predict after reading ``tokens[i, :t + 1]``,
        and :data:`IGNORE` marks the positions that are not scored. Every
        sequence has at least one scored position.
    attention_targets: per-sample annotations for the diagnostics, by metric name
        (for example ``"parent_attention"``); see :class:`AttentionTarget`.
    references: predictions of reference strategies, by name, shaped like ``labels``
        (for example ``{"unigram": ..., "bigram": ...}`` for in-context Markov chains).
        The harness reports ``agree_<name>``, the fraction of the model's scored
        predictions that equal the reference's (per sequence, then the mean), on the
        evaluation split and along the training curve, so a plateau at a simpler
        strategy is visible.
    """

    tokens: torch.Tensor
    labels: torch.Tensor
    attention_targets: dict[str, AttentionTarget] = field(default_factory=dict)
    references: dict[str, torch.Tensor] = field(default_factory=dict)

    def __len__(self) -> int:
        return self.labels.shape[0]

    @property
    def scored(self) -> torch.Tensor:
        """(n, T) bool: the positions with a label (for last-position labels, the last column)."""
        if self.labels.dim() == 2:
            return self.labels != IGNORE
        mask = torch.zeros(self.tokens.shape, dtype=torch.bool)
        mask[:, -1] = True
        return mask


class Task(ABC):
    """Base class of every task.

    ``params`` holds the resolved parameters declared by the spec. A subclass must
    give ``vocab_size`` and ``context_length`` and implement :meth:`generate`,
    :meth:`bayes_accuracy` and :meth:`bayes_predict`. Sizes of the splits come
    from the parameters ``train_size``, ``val_size`` and ``test_size`` unless
    :meth:`split_size` is overridden. A task may also give its Bayes predictor's
    log-probabilities (:meth:`bayes_log_probs`), which adds loss-based metrics.

    Accuracy of a task scored at many positions is measured per sequence (the
    fraction of its scored positions predicted right), then averaged over
    sequences; :meth:`bayes_accuracy` is the expectation of that same quantity.
    """

    #: the split that the reported accuracy is measured on; a task that studies
    #: optimisation rather than generalisation sets this to ``"train"``.
    eval_split: str = "test"

    def __init__(self, spec: TaskSpec, params: dict[str, Any]) -> None:
        self.spec = spec
        self.params = params
        self.validate()

    def validate(self) -> None:
        """Check constraints between parameters; raise :class:`tokbench.errors.ParamError`."""

    @property
    @abstractmethod
    def vocab_size(self) -> int:
        """Number of distinct tokens; labels lie in the same range."""

    @property
    @abstractmethod
    def context_length(self) -> int:
        """T, the number of tokens in every sequence."""

    @abstractmethod
    def generate(self, n: int, generator: torch.Generator) -> Split:
        """Draw ``n`` samples using only ``generator`` for randomness (vectorised)."""

    def training_batch(self, n: int, generator: torch.Generator) -> Split:
        """``n`` new training sequences for a ``data = "fresh"`` recipe (the batches of 10 steps at once); ``generator``
        is seeded per draw.

        Only ``tokens``, ``labels`` and ``references`` are used. The default is :meth:`generate`; a task
        whose attention targets are costly may override it to skip them (the draw must match ``generate``'s
        distribution).
        """
        return self.generate(n, generator)

    @abstractmethod
    def bayes_accuracy(self) -> float:
        """The exact Bayes-optimal accuracy of the data distribution."""

    @abstractmethod
    def bayes_predict(self, tokens: torch.Tensor) -> torch.Tensor:
        """A Bayes-optimal prediction for ``tokens`` (n, T): (n,), or (n, T) for a task scored at many positions
        (values at unscored positions are ignored)."""

    def bayes_log_probs(self, tokens: torch.Tensor) -> torch.Tensor | None:
        """The Bayes predictor's log-probabilities, (n, V) or (n, T, V) like the labels, or ``None``.

        A task that gives them is also scored by cross-entropy: the record gets ``loss``,
        ``bayes_loss``, ``excess_loss`` (their difference) and ``excess_loss_se``.
        """
        return None

    def bayes_loss(self) -> float | None:
        """The exact expected cross-entropy of the Bayes predictor, where known in closed form.

        ``None`` (the default) means it is estimated on the evaluation split from
        :meth:`bayes_log_probs`."""
        return None

    def split_size(self, split: str) -> int:
        return int(self.params[f"{split}_size"])

    def make_split(self, split: str, seed: int) -> Split:
        """The split ``split`` for run seed ``seed``; each split has its own data seed."""
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        generator = torch.Generator().manual_seed(derive_seed(seed, f"data:{split}"))
        return self.generate(self.split_size(split), generator)

    def model_metrics(self, model: TokenModel, split: Split) -> dict[str, float]:
        """Diagnostics that need the trained model's internals (absent when they do not apply).

        Called once after training, on the evaluation split, with the trained model in eval
        mode on its training device (move tensors with ``split.tokens.to(device)``); torch's
        autograd is disabled. Return finite floats keyed by metric name. A name ending in
        ``_accuracy`` or ``_attention`` must lie in [0, 1] and one ending in ``correlation`` in
        [-1, 1] (the record schema checks this). Adding a diagnostic changes what a record holds
        but not what it means: no version bump is needed unless existing metrics change.
        """
        return {}

    def describe(self) -> str:
        """A human-readable account of this instance, for ``tokbench show task``."""
        return f"{self.spec.name} v{self.spec.version}: vocabulary {self.vocab_size}, context length {self.context_length}"
