"""Swappable positional encodings for the standard attention layer (standard.py).

An encoding sees the positions 0, 1, ... of one layer's input and acts in exactly
one of three places, so that each variant has one job:

- ``table``:  give a position table that is added to, or concatenated with, the inputs;
- ``rotate``: rotate queries and keys by their positions (RoPE);
- ``bias``:   add a per-head score bias that depends on the two positions.

The base class does nothing in all three: it is NoPE.

An encoding is built for ``length`` positions, the training context, but computes
what it gives from the positions it is asked about, so a model runs unchanged on
longer inputs. Two cannot: a learned table has no row past ``length``, and
``length`` orthogonal vectors span only ``length`` dimensions. They say why in
``fixed_length`` and raise :class:`tokbench.errors.NotApplicable` when asked for
more positions, never wrapping around or truncating.
"""
from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from tokbench.errors import NotApplicable, ParamError
from tokbench_attention import FIXED_CONCAT, FIXED_LEARNED
from tokbench_attention.paper_a import position_vectors


class PositionalEncoding(nn.Module):
    """No positional information (NoPE); subclasses override one hook.

    Built with the model's resolved ``params``, the number of positions
    ``length``, the token width ``width`` and the number of ``heads``.
    """

    #: scores are a content bilinear form plus a bias of positions only
    separable = True

    def __init__(self, params: dict[str, Any], length: int, width: int, heads: int) -> None:
        super().__init__()
        self.length, self.width, self.heads = length, width, heads

    #: ``rotate`` is not the identity
    rotates = False
    #: the table is concatenated to the inputs rather than added
    concatenated = False
    #: empty when the encoding extends to any number of positions; otherwise why it cannot
    fixed_length = ""

    def table(self, count: int | None = None) -> torch.Tensor | None:
        """(count, width) added to the inputs at positions 0..count-1, or (count, p) concatenated to them.

        ``count`` defaults to the ``length`` the encoding was built for.
        """
        return None

    def _within(self, count: int | None) -> int:
        """``count`` (default ``length``), or NotApplicable past ``length`` for an encoding of fixed length."""
        count = self.length if count is None else count
        if count > self.length:
            raise NotApplicable(f"{self.fixed_length}: built for {self.length} positions, asked for {count}")
        return count

    def rotate(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """(n, P, H, head_width) queries or keys at ``positions`` (P,) -> same shape."""
        return x

    def bias(self, query_positions: torch.Tensor, key_positions: torch.Tensor) -> torch.Tensor | None:
        """(H, Q, L) score bias for queries at ``query_positions`` and keys at ``key_positions``."""
        return None


class NoPE(PositionalEncoding):
    """No positional encoding: attention sees only the tokens."""


def sinusoid_table(length: int, width: int, base: float) -> torch.Tensor:
    """(length, width) table of Vaswani et al.: sin and cos of pos * base^(-2i/width), interleaved.

    Row p depends on p alone, so the first rows of a longer table are the shorter table.
    """
    position = torch.arange(length, dtype=torch.float64)[:, None]
    frequency = base ** (-torch.arange(0, width, 2, dtype=torch.float64) / width)
    angles = position * frequency  # (length, ceil(width / 2))
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1)[:, :width].float()


class SinusoidalAdded(PositionalEncoding):
    """Fixed sinusoids added to the token embeddings (Vaswani et al., 2017)."""

    separable = False

    def __init__(self, params: dict[str, Any], length: int, width: int, heads: int) -> None:
        super().__init__(params, length, width, heads)
        self.base = params["base"]
        self.register_buffer("sinusoids", sinusoid_table(length, width, self.base))

    def table(self, count: int | None = None) -> torch.Tensor:
        if count is None or count <= self.length:
            return self.sinusoids[:count]
        return sinusoid_table(count, self.width, self.base).to(self.sinusoids.device)  # the same rows, and more


class LearnedAdded(PositionalEncoding):
    """A learned absolute position table added to the token embeddings (N(0, 1) like an embedding)."""

    separable = False
    fixed_length = FIXED_LEARNED

    def __init__(self, params: dict[str, Any], length: int, width: int, heads: int) -> None:
        super().__init__(params, length, width, heads)
        self.learned = nn.Parameter(torch.randn(length, width))

    def table(self, count: int | None = None) -> torch.Tensor:
        return self.learned[:self._within(count)]


class OrthogonalConcat(PositionalEncoding):
    """Mutually orthogonal positions of equal norm concatenated to the tokens, x~_i = [x_i; p_i], as in [A].

    ``positions`` chooses scaled one-hot vectors (exactly orthogonal) or [A]'s
    sinusoidal DST-I basis; the position dimension is L, the least that holds
    L orthogonal vectors.
    """

    separable = False
    concatenated = True
    fixed_length = FIXED_CONCAT

    def __init__(self, params: dict[str, Any], length: int, width: int, heads: int) -> None:
        super().__init__(params, length, width, heads)
        vectors = position_vectors(length, length, params["positions"], params["position_norm"], torch.float32)
        self.register_buffer("vectors", vectors)

    def table(self, count: int | None = None) -> torch.Tensor:
        return self.vectors[:self._within(count)]


class RoPE(PositionalEncoding):
    """Rotary embeddings (Su et al., 2021): pair j of a head turns by angle pos * base^(-2j/head_width).

    A query at m and a key at l then score q^T R(l - m) k: only the offset counts.
    """

    separable = False
    rotates = True

    def __init__(self, params: dict[str, Any], length: int, width: int, heads: int) -> None:
        super().__init__(params, length, width, heads)
        head_width = width // heads
        if head_width % 2:
            raise ParamError(f"RoPE rotates pairs of dimensions: d/heads = {head_width} must be even")
        frequency = params["base"] ** (-torch.arange(0, head_width, 2, dtype=torch.float64) / head_width)
        self.register_buffer("frequency", frequency, persistent=False)  # (head_width / 2,)

    def rotate(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        # pairs of dimensions as complex numbers, turned by e^(i * position * frequency): any position
        angles = positions.to(torch.float64)[:, None] * self.frequency  # (P, head_width / 2)
        turns = torch.polar(torch.ones_like(angles), angles).to(torch.complex64)
        pairs = torch.view_as_complex(x.unflatten(-1, (-1, 2)).contiguous())  # (n, P, H, head_width / 2)
        return torch.view_as_real(pairs * turns[:, None, :]).flatten(-2)


def alibi_slopes(heads: int) -> torch.Tensor:
    """The per-head slopes of ALiBi (Press et al., 2022).

    For a power of two H: the geometric sequence 2^(-8/H), 2^(-16/H), ..., 2^(-8).
    Otherwise the paper's rule: the slopes of the nearest smaller power of two,
    then every other slope of the next power of two, until H are taken.
    """
    def geometric(count: int) -> list[float]:
        ratio = 2.0 ** (-8.0 / count)
        return [ratio ** (i + 1) for i in range(count)]

    closest = 2 ** int(math.floor(math.log2(heads)))
    slopes = geometric(closest) + geometric(2 * closest)[0::2][: heads - closest]
    return torch.tensor(slopes, dtype=torch.float32)


class ALiBi(PositionalEncoding):
    """A fixed linear distance penalty per head: bias -slope_h * |query - key|."""

    def __init__(self, params: dict[str, Any], length: int, width: int, heads: int) -> None:
        super().__init__(params, length, width, heads)
        self.register_buffer("slopes", alibi_slopes(heads))

    def bias(self, query_positions: torch.Tensor, key_positions: torch.Tensor) -> torch.Tensor:
        distance = (query_positions[:, None] - key_positions[None, :]).abs().to(self.slopes)  # any distance
        return -self.slopes[:, None, None] * distance


def t5_bucket(offset: torch.Tensor, buckets: int, max_distance: int) -> torch.Tensor:
    """T5's unidirectional buckets of ``offset`` = query - key: exact below buckets/2, then log-spaced.

    Keys after the query (negative offsets) share bucket 0 with the query itself.
    """
    offset = offset.clamp(min=0)
    exact = buckets // 2
    logarithmic = exact + (
        torch.log(offset.float().clamp(min=1) / exact) / math.log(max_distance / exact) * (buckets - exact)
    ).long()
    return torch.where(offset < exact, offset, logarithmic.clamp(max=buckets - 1))


class T5Bias(PositionalEncoding):
    """A learned scalar per head and relative-offset bucket, added to the scores (Raffel et al., 2020)."""

    def __init__(self, params: dict[str, Any], length: int, width: int, heads: int) -> None:
        super().__init__(params, length, width, heads)
        self.buckets, self.max_distance = params["t5_buckets"], params["t5_max_distance"]
        if self.max_distance <= self.buckets // 2:
            raise ParamError(f"t5_max_distance={self.max_distance} must exceed t5_buckets/2 = {self.buckets // 2}")
        self.learned = nn.Parameter(torch.randn(self.buckets, heads))

    def bias(self, query_positions: torch.Tensor, key_positions: torch.Tensor) -> torch.Tensor:
        offset = query_positions[:, None] - key_positions[None, :]
        return self.learned[t5_bucket(offset, self.buckets, self.max_distance)].permute(2, 0, 1)

