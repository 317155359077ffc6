"""The task contract that task plugins implement.

A task generates sequences of integer tokens and a next-token label for each.
Subclass :class:`Task`, implement the abstract members, and register a
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


@dataclass
class Split:
    """One split of a task.

    tokens:  (n, T) int64, every entry in ``[0, vocab_size)``.
    labels:  (n,) int64, the next token to predict.
    attention_targets: per-sample annotations for the diagnostics. Each entry maps
        a metric name (for example ``"parent_attention"``) to an (n, T) bool mask;
        the metric is the query's mean attention mass on the masked positions.
    """

    tokens: torch.Tensor
    labels: torch.Tensor
    attention_targets: dict[str, torch.Tensor] = field(default_factory=dict)

    def __len__(self) -> int:
        return self.labels.shape[0]


class Task(ABC):
    """Base class of every task.

    ``params`` holds the resolved parameters declared by the spec. A subclass must
    give ``vocab_size`` and ``context_length`` and implement :meth:`generate`,
    :meth:`bayes_accuracy` and :meth:`bayes_predict`. Sizes of the splits come
    from the parameters ``train_size``, ``val_size`` and ``test_size`` unless
    :meth:`split_size` is overridden.
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

    @abstractmethod
    def bayes_accuracy(self) -> float:
        """The exact Bayes-optimal accuracy of the data distribution."""

    @abstractmethod
    def bayes_predict(self, tokens: torch.Tensor) -> torch.Tensor:
        """A Bayes-optimal prediction (n,) for each sequence in ``tokens`` (n, T)."""

    def split_size(self, split: str) -> int:
        return int(self.params[f"{split}_size"])

    def make_split(self, split: str, seed: int) -> Split:
        """The split ``split`` for run seed ``seed``; each split has its own data seed."""
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        generator = torch.Generator().manual_seed(derive_seed(seed, f"data:{split}"))
        return self.generate(self.split_size(split), generator)

    def model_metrics(self, model: TokenModel, split: Split) -> dict[str, float]:
        """Diagnostics that need the trained model's internals (absent when they do not apply)."""
        return {}

    def describe(self) -> str:
        """A human-readable account of this instance, for ``tokbench show task``."""
        return f"{self.spec.name} v{self.spec.version}: vocabulary {self.vocab_size}, context length {self.context_length}"
