"""Sampling and in-context counting for Markov chains over a graph of positions, vectorised over sequences.

A graph over L positions is a parent array: ``parents[i] < i`` is the position whose token
``tokens[i]`` is drawn from (through a transition matrix), or -1 for a root. A Markov chain is the
graph ``parents[i] = i - 1``.
"""
from __future__ import annotations

import torch

ROOT = -1
COUNT_BUDGET = 2**24  # entries of the running transition table (sequences x state pairs) held at once


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
    """(n, T, S) float32 counts (exact: below 2^24) behind the in-context predictor of ``tokens[:, t + 1]`` after reading ``tokens[:, :t + 1]``.

    ``parents`` covers the T + 1 positions of the full sequence (the inputs and the token after
    them). At position t the query state is the token of the next position's parent,
    ``s = tokens[parents[t + 1]]``, and entry j counts the observed transitions ``s -> j``: the
    positions ``i <= t`` with a parent whose token is ``s`` and whose own token is ``j``. Positions
    whose next token is a root get zeros. A loop over positions, vectorised over sequences (in
    chunks that bound the running table).
    """
    n, T = tokens.shape
    if n == 0:
        return torch.zeros(0, T, states)
    return torch.cat([_counts(tokens[i:i + size], parents, states) for i, size in _chunks(n, states * states)])


def _counts(tokens: torch.Tensor, parents: torch.Tensor, S: int) -> torch.Tensor:
    """A running (n, S * S) table of the transitions seen so far, read at each position's query state."""
    n, T = tokens.shape
    columns = tokens.T.contiguous()  # (T, n): one position's tokens at a time
    table = torch.zeros(n, S * S)
    offsets = torch.arange(n) * (S * S)
    ones = torch.ones(n)
    states = torch.arange(S)
    counts = torch.zeros(T, n, S)
    for t, (own, nxt) in enumerate(zip(parents[:T].tolist(), parents[1:T + 1].tolist())):
        if own != ROOT:  # position t is the destination of the transition from its parent
            table.view(-1).index_add_(0, offsets + columns[own] * S + columns[t], ones)
        if nxt != ROOT:  # the next token leaves the state its parent holds
            counts[t] = table.gather(1, columns[nxt, :, None] * S + states)
    return counts.transpose(0, 1)


def posterior_mean(counts: torch.Tensor, alpha: float) -> torch.Tensor:
    """The Dirichlet(alpha) posterior mean of a transition row from its counts: (n_j + alpha) / (n + S alpha), float64."""
    smoothed = counts.double() + alpha
    return smoothed / smoothed.sum(-1, keepdim=True)


def unigram_prediction(tokens: torch.Tensor, states: int) -> torch.Tensor:
    """(n, T) int64: the most frequent state in ``tokens[:, :t + 1]`` (ties to the smallest), the in-context
    unigram predictor's argmax. A running (n, S) table, a loop over positions."""
    n, T = tokens.shape
    table = torch.zeros(n, states)
    offsets = torch.arange(n) * states
    ones = torch.ones(n)
    prediction = torch.empty(T, n, dtype=torch.int64)
    for t, column in enumerate(tokens.T.contiguous()):
        table.view(-1).index_add_(0, offsets + column, ones)
        torch.argmax(table, 1, out=prediction[t])
    return prediction.T
