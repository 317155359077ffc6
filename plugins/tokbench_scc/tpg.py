"""Token-priority graphs (TPGs) of [B] and their strongly connected components.

For a query token k, G^(k) has an edge y -> j for every sample whose last token
is k, whose label is y, and whose context holds a token j != y: the label
outranks every token it was chosen over. The SCCs of G^(k) are the priority
classes; the condensation (a DAG) orders them. Everything here works on plain
integer arrays, without torch or the harness.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import networkx as nx
import numpy as np

from tokbench.errors import UsageError


@dataclass(frozen=True)
class TokenPriority:
    """The TPG of one query token and its priority classes.

    graph:  G^(k) over the tokens seen in the contexts of query k.
    order:  its SCCs in a topological order of the condensation, highest
            priority first (ties between incomparable SCCs broken by smallest token).
    """

    query: int
    graph: nx.DiGraph
    order: tuple[frozenset[int], ...]

    def component(self, token: int) -> frozenset[int]:
        """The SCC holding ``token``."""
        return next(scc for scc in self.order if token in scc)

    @property
    def acyclic(self) -> bool:
        return all(len(scc) == 1 for scc in self.order)


def _check(tokens: np.ndarray, labels: np.ndarray) -> None:
    if tokens.ndim != 2 or labels.shape != (tokens.shape[0],):
        raise UsageError(f"tokens must be (n, T) and labels (n,), got {tokens.shape} and {labels.shape}")
    missing = ~(tokens == labels[:, None]).any(axis=1)
    if missing.any():
        raise UsageError(
            f"{int(missing.sum())} label(s) do not occur in their context (first: sample {int(np.argmax(missing))}); "
            "a token-priority graph needs every label in its context"
        )


def _priority(query: int, graph: nx.DiGraph) -> TokenPriority:
    condensed = nx.condensation(graph)
    members = nx.get_node_attributes(condensed, "members")
    ranked = nx.lexicographical_topological_sort(condensed, key=lambda c: min(members[c]))
    return TokenPriority(query, graph, tuple(frozenset(members[c]) for c in ranked))


def token_priority_graphs(tokens: np.ndarray, labels: np.ndarray) -> dict[int, TokenPriority]:
    """G^(k) for every query token k that ends a sample, keyed by k.

    ``tokens`` (n, T) ends in the query token; ``labels`` (n,) must occur in
    their own context. Repeated tokens add nothing: edges are between tokens.
    """
    tokens, labels = np.asarray(tokens), np.asarray(labels)
    _check(tokens, labels)
    graphs: dict[int, nx.DiGraph] = {}
    for context, label in zip(tokens.tolist(), labels.tolist()):
        graph = graphs.setdefault(context[-1], nx.DiGraph())
        graph.add_nodes_from(context)
        graph.add_edges_from((label, j) for j in context if j != label)
    return {k: _priority(k, graphs[k]) for k in sorted(graphs)}


def all_acyclic(priorities: dict[int, TokenPriority]) -> bool:
    """Whether every G^(k) is acyclic (every SCC a single token)."""
    return all(p.acyclic for p in priorities.values())


def top_scc_mask(tokens: np.ndarray, labels: np.ndarray, priorities: dict[int, TokenPriority]) -> np.ndarray:
    """(n, T) bool: the context positions whose token shares the label's SCC in G^(query).

    The label outranks or ties every token of its context, so its SCC is the
    highest-priority class present: the one attention should retrieve.
    """
    rows: Iterator[list[bool]] = (
        [t in priorities[context[-1]].component(label) for t in context]
        for context, label in zip(np.asarray(tokens).tolist(), np.asarray(labels).tolist())
    )
    return np.array(list(rows), dtype=bool).reshape(np.shape(tokens))
