"""Lag-k walks: k interleaved random walks, so the label continues the k-th last input."""
from __future__ import annotations

from tokbench.errors import ParamError
from tokbench_walks.walks import RandomWalk


class LagWalk(RandomWalk):
    """[A]'s random walk with the parent k positions back; every walk mechanism is inherited."""

    @property
    def lag(self) -> int:
        return self.params["k"]

    def validate(self) -> None:
        if self.context_length < self.lag:
            raise ParamError(f"context_length={self.context_length} is shorter than k={self.lag}: the label's "
                             f"parent must be in the context, so context_length >= k")

    def describe(self) -> str:
        return f"{super().describe()}; the parent is the k = {self.lag}-th last input"
