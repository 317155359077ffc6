"""The graph-SVM of [B]: the direction that gradient descent gives the key-query matrix.

    minimise ||W||_F  subject to, for every sample (query k, label y) and every
    other context token j:
        (x_y - x_j)^T W x_k  = 0   if j is in y's SCC of G^(k),
        (x_y - x_j)^T W x_k >= 1   otherwise,

where x are the rows of the embedding E (the identity gives token space).

Solved exactly: the equalities are eliminated by a null-space basis
(scipy.linalg.null_space), which leaves a least-distance programme
min ||z|| s.t. G z >= 1; that is solved as a non-negative least-squares
problem (Lawson & Hanson, *Solving Least Squares Problems*, 1974, ch. 23) with
scipy.optimize.nnls, an active-set method that also detects infeasibility.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import null_space
from scipy.optimize import nnls

from tokbench.errors import UsageError
from tokbench_scc.tpg import TokenPriority, token_priority_graphs

TOLERANCE = 1e-6  # every constraint of a returned solution holds to this


class InfeasibleSVMError(UsageError):
    """No W satisfies the graph-SVM constraints for these data and embeddings."""


@dataclass(frozen=True)
class Constraints:
    """Distinct constraint triples (k, y, j), each row meaning (x_y - x_j)^T W x_k."""

    equal: np.ndarray  # (m_eq, 3): = 0
    above: np.ndarray  # (m_in, 3): >= 1


def graph_svm_constraints(tokens: np.ndarray, labels: np.ndarray,
                          priorities: dict[int, TokenPriority] | None = None) -> Constraints:
    """The constraints of every sample, each distinct one once.

    Every context position counts, the query token's included (it is in the
    context that attention ranges over); positions holding the label itself
    give no constraint.
    """
    tokens, labels = np.asarray(tokens), np.asarray(labels)
    priorities = priorities or token_priority_graphs(tokens, labels)
    equal, above = set(), set()
    for context, y in zip(tokens.tolist(), labels.tolist()):
        k = context[-1]
        top = priorities[k].component(y)
        for j in set(context) - {y}:
            if j in top:
                equal.add((k, *sorted((y, j))))  # (y, j) and (j, y) state the same equality
            else:
                above.add((k, y, j))
    return Constraints(_triples(equal), _triples(above))


def _triples(triples: set[tuple[int, int, int]]) -> np.ndarray:
    return np.array(sorted(triples), dtype=np.int64).reshape(-1, 3)


def constraint_rows(triples: np.ndarray, embeddings: np.ndarray) -> np.ndarray:
    """(m, d*d): row r is vec((x_y - x_j) x_k^T), so that row . W.ravel() = (x_y - x_j)^T W x_k."""
    E = np.asarray(embeddings, dtype=np.float64)
    k, y, j = triples.T
    return np.einsum("ma,mb->mab", E[y] - E[j], E[k]).reshape(len(triples), E.shape[1] ** 2)


def margins(W: np.ndarray, triples: np.ndarray, embeddings: np.ndarray) -> np.ndarray:
    """(x_y - x_j)^T W x_k for every triple."""
    return constraint_rows(triples, embeddings) @ np.asarray(W, dtype=np.float64).ravel()


def _least_distance(G: np.ndarray) -> np.ndarray:
    """argmin ||z|| subject to G z >= 1, by the LDP-to-NNLS reduction; raises if infeasible."""
    m, p = G.shape
    if m == 0:
        return np.zeros(p)
    E = np.vstack([G.T, np.ones((1, m))])  # (p + 1, m)
    f = np.zeros(p + 1)
    f[-1] = 1.0
    u, _ = nnls(E, f, maxiter=50 * (m + p + 1))
    r = E @ u - f
    # At the optimum r = -(z, -1) / (1 + ||z||^2); r[-1] -> 0 means no finite z exists.
    if -r[-1] <= 1e-14:
        raise InfeasibleSVMError("the graph-SVM constraints are infeasible")
    return -r[:-1] / r[-1]


def solve_graph_svm(tokens: np.ndarray, labels: np.ndarray, embeddings: np.ndarray | None = None,
                    priorities: dict[int, TokenPriority] | None = None) -> np.ndarray:
    """W_svm (d, d) for ``(tokens, labels)`` under ``embeddings`` (K, d); token space by default.

    The returned W satisfies every constraint to ``TOLERANCE``; data for which
    no W exists (for example more tokens than dimensions, in an unlucky
    configuration) raise :class:`InfeasibleSVMError`.
    """
    tokens, labels = np.asarray(tokens), np.asarray(labels)
    if embeddings is None:
        embeddings = np.eye(int(max(tokens.max(), labels.max())) + 1)
    E = np.asarray(embeddings, dtype=np.float64)
    if tokens.max() >= len(E):
        raise UsageError(f"tokens go up to {int(tokens.max())} but the embedding has only {len(E)} rows")
    constraints = graph_svm_constraints(tokens, labels, priorities)
    d = E.shape[1]
    A_eq = constraint_rows(constraints.equal, E)
    basis = null_space(A_eq) if len(A_eq) else np.eye(d * d)  # W.ravel() = basis @ z
    W = (basis @ _least_distance(constraint_rows(constraints.above, E) @ basis)).reshape(d, d)
    violation = max(
        np.abs(margins(W, constraints.equal, E)).max(initial=0.0),
        (1.0 - margins(W, constraints.above, E)).max(initial=0.0),
    )
    if violation > TOLERANCE:
        raise InfeasibleSVMError(
            f"the graph-SVM constraints are infeasible for these embeddings (best violation {violation:.2e})"
        )
    return W
