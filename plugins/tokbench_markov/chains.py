"""Sampling and in-context counting for Markov chains over a graph of positions, vectorised over sequences.

A graph over L positions is a parent array: ``parents[i] < i`` is the position whose token
``tokens[i]`` is drawn from (through a transition matrix), or -1 for a root. A Markov chain is the
graph ``parents[i] = i - 1``.
"""
from __future__ import annotations

import torch

ROOT = -1
COUNT_BUDGET = 2**24  # count entries (sequences x positions x state pairs) held at once by the in-context counts


def chain_parents(length: int) -> torch.Tensor:
    """The parent array of a Markov chain: position 0 is the root, every other position's parent is the one before."""
    return torch.arange(length) - 1


def dirichlet_rows(n: int, states: int, alpha: float, generator: torch.Generator) -> torch.Tensor:
    """(n, states, states) float64: n transition matrices with rows iid Dirichlet(alpha, ..., alpha)."""
    concentration = torch.full((n, states, states), float(alpha), dtype=torch.float64)
    # torch.distributions.Dirichlet takes no generator; its sampler is this normalised standard gamma
    gamma = torch._standard_gamma(concentration, generator=generator)
    return gamma / gamma.sum(-1, keepdim=True)


def sample_on_graph(kernels: torch.Tensor, parents: torch.Tensor, root: torch.Tensor,
                    generator: torch.Generator) -> torch.Tensor:
    """(n, L) int64 tokens: roots iid from ``root`` (S,), every other position from its parent's row of ``kernels``.

    ``kernels`` is (n, S, S), one matrix per sequence (expand a shared one). One uniform per
    position, inverted through the cumulative row of the parent's token: a loop over positions
    (parents come first), vectorised over sequences.
    """
    n, L, S = kernels.shape[0], len(parents), kernels.shape[-1]
    uniforms = torch.rand(L, n, generator=generator, dtype=torch.float64)
    thresholds = kernels.cumsum(-1)[..., :-1].reshape(n * S, S - 1)  # the last threshold is 1: never needed
    root_thresholds = root.cumsum(-1)[:-1]
    offsets = torch.arange(n) * S
    tokens = torch.empty(L, n, dtype=torch.int64)
    for i, parent in enumerate(parents.tolist()):
        rows = root_thresholds if parent == ROOT else thresholds.index_select(0, offsets + tokens[parent])
        torch.sum(uniforms[i, :, None] >= rows, -1, out=tokens[i])
    return tokens.T.contiguous()


def _chunks(n: int, per_sequence: int) -> list[tuple[int, int]]:
    """(start, size) blocks of sequences holding at most :data:`COUNT_BUDGET` entries at once."""
    size = max(1, COUNT_BUDGET // max(1, per_sequence))
    return [(i, size) for i in range(0, n, size)]


def incontext_counts(tokens: torch.Tensor, parents: torch.Tensor, states: int) -> torch.Tensor:
    """(n, T, S) float64 counts behind the in-context predictor of ``tokens[:, t + 1]`` after reading ``tokens[:, :t + 1]``.

    ``parents`` covers the T + 1 positions of the full sequence (the inputs and the token after
    them). At position t the query state is the token of the next position's parent,
    ``s = tokens[parents[t + 1]]``, and entry j counts the observed transitions ``s -> j``: the
    positions ``i <= t`` with a parent whose token is ``s`` and whose own token is ``j``. Positions
    whose next token is a root get zeros. Computed in chunks of sequences.
    """
    n, T = tokens.shape
    if n == 0:
        return torch.zeros(0, T, states, dtype=torch.float64)
    return torch.cat([_counts(tokens[i:i + size], parents, states) for i, size in _chunks(n, T * states * states)])


def _counts(tokens: torch.Tensor, parents: torch.Tensor, S: int) -> torch.Tensor:
    n, T = tokens.shape
    own = parents[:T]
    # each child position's transition (parent token, own token) as one of S*S pairs; roots count nowhere
    pair = torch.where(own != ROOT, tokens[:, own.clamp(min=0)] * S + tokens, S * S)
    running = torch.zeros(n, T, S * S + 1).scatter_(2, pair[..., None], 1.0).cumsum(1)  # float32: exact below 2^24
    nxt = parents[1:T + 1]
    query = torch.where(nxt != ROOT, tokens[:, nxt.clamp(min=0)], 0)  # (n, T): the state the next token leaves
    index = query[..., None] * S + torch.arange(S)
    counts = running.gather(2, index).double()
    return torch.where((nxt != ROOT)[None, :, None], counts, 0.0)


def posterior_mean(counts: torch.Tensor, alpha: float) -> torch.Tensor:
    """The Dirichlet(alpha) posterior mean of a transition row from its counts: (n_j + alpha) / (n + S alpha)."""
    smoothed = counts + alpha
    return smoothed / smoothed.sum(-1, keepdim=True)


def unigram_counts(tokens: torch.Tensor, states: int) -> torch.Tensor:
    """(n, T, S) float64: how often each state occurs in ``tokens[:, :t + 1]``."""
    return torch.nn.functional.one_hot(tokens, states).double().cumsum(1)
