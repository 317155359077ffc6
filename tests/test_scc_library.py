"""The SCC library on its own: token-priority graphs, the graph-SVM, the correlation metric."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import lsq_linear

from tokbench.errors import UsageError
from tokbench.metrics import matrix_correlation as correlation
from tokbench_scc.svm import (
    TOLERANCE,
    InfeasibleSVMError,
    constraint_rows,
    graph_svm_constraints,
    margins,
    solve_graph_svm,
)
from tokbench_scc.tpg import all_acyclic, token_priority_graphs, top_scc_mask

# Query 0 throughout. Sample 1: 1 beats 2, 3. Sample 2: 2 beats 1, 4 -> {1, 2} form a cycle, above 3 and 4.
CYCLIC_TOKENS = np.array([[1, 2, 3, 0], [2, 1, 4, 0], [3, 4, 5, 0]])
CYCLIC_LABELS = np.array([1, 2, 3])


def paper_dataset(n: int, T: int, K: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """[B]'s draw: T distinct tokens, label uniform over K, replaced by a context token when absent."""
    rng = np.random.default_rng(seed)
    tokens = np.array([rng.permutation(K)[:T] for _ in range(n)])
    labels = rng.integers(0, K, n)
    absent = ~(tokens == labels[:, None]).any(axis=1)
    labels[absent] = tokens[absent, rng.integers(0, T, absent.sum())]
    return tokens, labels


def unit_rows(K: int, d: int, seed: int) -> np.ndarray:
    E = np.random.default_rng(seed).normal(size=(K, d))
    return E / np.linalg.norm(E, axis=1, keepdims=True)


def test_tpg_finds_the_cycle_and_orders_the_components():
    priority = token_priority_graphs(CYCLIC_TOKENS, CYCLIC_LABELS)[0]
    assert set(priority.graph.edges) >= {(1, 2), (2, 1), (1, 0), (3, 5)}
    assert not priority.acyclic
    assert priority.component(1) == priority.component(2) == frozenset({1, 2})
    order = list(priority.order)
    # {1, 2} outranks 3 and 4 (edges into them); 3 outranks 4 and 5; 0 is below its beaters
    assert order.index(frozenset({1, 2})) < order.index(frozenset({3})) < order.index(frozenset({4}))
    assert order.index(frozenset({3})) < order.index(frozenset({5}))
    assert sum(len(c) for c in order) == 6


def test_tpg_keeps_query_tokens_apart_and_detects_acyclic_data():
    tokens = np.array([[1, 2, 0], [2, 1, 3]])  # the same pair, ranked both ways, under different queries
    priorities = token_priority_graphs(tokens, np.array([1, 2]))
    assert sorted(priorities) == [0, 3]
    assert all_acyclic(priorities)
    assert not all_acyclic(token_priority_graphs(CYCLIC_TOKENS, CYCLIC_LABELS))


def test_top_scc_mask_marks_the_labels_component():
    mask = top_scc_mask(CYCLIC_TOKENS, CYCLIC_LABELS, token_priority_graphs(CYCLIC_TOKENS, CYCLIC_LABELS))
    np.testing.assert_array_equal(mask, [[1, 1, 0, 0], [1, 1, 0, 0], [1, 0, 0, 0]])


def test_label_outside_its_context_is_a_usage_error():
    with pytest.raises(UsageError, match="do not occur in their context"):
        token_priority_graphs(np.array([[1, 2, 0]]), np.array([5]))


def test_constraints_follow_the_components():
    constraints = graph_svm_constraints(CYCLIC_TOKENS, CYCLIC_LABELS)
    assert constraints.equal.tolist() == [[0, 1, 2]]  # (1, 2) and (2, 1) state one equality
    above = {tuple(row) for row in constraints.above.tolist()}
    assert {(0, 1, 3), (0, 1, 0), (0, 2, 4), (0, 3, 5), (0, 3, 0)} <= above
    assert not any(y == j for _, y, j in above)


@pytest.mark.parametrize("n, T, K", [(4, 6, 8), (6, 4, 6), (12, 4, 6)])
def test_svm_solution_is_feasible_and_optimal(n, T, K):
    """Exact constraints to 1e-6, and a KKT certificate of optimality: W = sum over the tight
    inequalities of lambda_i a_i (lambda >= 0) plus any combination of the equality rows."""
    for seed in range(3):
        tokens, labels = paper_dataset(n, T, K, seed)
        E = unit_rows(K, 8, seed)
        W = solve_graph_svm(tokens, labels, E)
        constraints = graph_svm_constraints(tokens, labels)
        slack = margins(W, constraints.above, E) - 1
        assert np.abs(margins(W, constraints.equal, E)).max(initial=0.0) <= TOLERANCE
        assert slack.min() >= -TOLERANCE

        tight = constraint_rows(constraints.above[slack < 1e-6], E)
        equal = constraint_rows(constraints.equal, E)
        lower = np.r_[np.zeros(len(tight)), np.full(len(equal), -np.inf)]
        multipliers = lsq_linear(np.vstack([tight, equal]).T, W.ravel(), bounds=(lower, np.inf), tol=1e-12)
        assert np.linalg.norm(multipliers.fun) <= 1e-8 * np.linalg.norm(W)


def test_svm_in_token_space_by_default():
    W = solve_graph_svm(CYCLIC_TOKENS, CYCLIC_LABELS)
    assert W.shape == (6, 6)
    assert W[1, 0] == pytest.approx(W[2, 0])  # one SCC: equal scores under query 0
    assert W[1, 0] - W[3, 0] >= 1 - TOLERANCE and W[3, 0] - W[5, 0] >= 1 - TOLERANCE


def test_infeasible_data_raise_a_clear_error():
    # Tokens 0 and 1 share one embedding, so no W can rank 0 above 1.
    E = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    with pytest.raises(InfeasibleSVMError, match="infeasible"):
        solve_graph_svm(np.array([[0, 1, 2]]), np.array([0]), E)
    assert issubclass(InfeasibleSVMError, UsageError)


def test_correlation():
    a = np.arange(9.0).reshape(3, 3)
    assert correlation(a, 3 * a) == pytest.approx(1.0)
    assert correlation(a, -a) == pytest.approx(-1.0)
    assert correlation(np.eye(2), np.array([[0.0, 1.0], [1.0, 0.0]])) == 0.0
    assert correlation(a, np.zeros((3, 3))) == 0.0
