"""The layer of [B] (``attn-paper-b``) and the cross pairings: [A] on the SCC tasks, [B] on the walks."""
from __future__ import annotations

import math

import pytest
import torch

from tokbench.errors import ParamError
from tokbench.harness import run_pairing
from tokbench.plugins import registry
from scc_support import one_thread  # noqa: F401 - the fixture

REGISTRY = registry()
SPEC = REGISTRY.model("attn-paper-b")


def build(task, **given):
    torch.manual_seed(0)
    return SPEC.build(SPEC.resolve(given), task)


def test_output_is_the_papers_formula():
    """exp(logits) - eps is E X^T softmax(X W x_T): with orthonormal rows, E maps the output back to P."""
    task = REGISTRY.task("random-walk").create({"context_length": 7, "train_size": 5})
    model = build(task, embeddings="orthonormal")
    tokens = task.make_split("train", 0).tokens  # walks repeat tokens
    output = model(tokens)
    X = model.E[tokens]  # (n, T, d)
    attention = torch.softmax(X @ model.W @ X[:, -1, :, None], dim=1)  # (n, T, 1)
    f = (X.transpose(1, 2) @ attention).squeeze(-1)  # (n, d)
    torch.testing.assert_close(output.logits.exp() - SPEC.resolve()["eps"], f @ model.E.T, rtol=0, atol=1e-12)
    torch.testing.assert_close(output.attention[:, 0, 0, 0], attention.squeeze(-1))
    labels = task.make_split("train", 0).labels
    mass = (attention.squeeze(-1) * (tokens == labels[:, None])).sum(1)  # attention on the label's positions
    expected = -torch.log(mass + SPEC.resolve()["eps"]).mean()
    torch.testing.assert_close(model.loss(output, labels), expected)


def test_key_query_and_embeddings():
    task = REGISTRY.task("scc-automaton").create({})
    model = build(task)
    W, E = model.key_query()
    assert W.shape == (8, 8) and E.shape == (6, 8) and W.requires_grad and not E.requires_grad
    torch.testing.assert_close(E.norm(dim=1), torch.ones(6, dtype=torch.float64))
    assert W.abs().max() <= 1 / math.sqrt(8)
    orthonormal = build(task, embeddings="orthonormal").E
    torch.testing.assert_close(orthonormal @ orthonormal.T, torch.eye(6, dtype=torch.float64))
    assert torch.count_nonzero(build(task, init="zero").W) == 0


def test_orthonormal_embeddings_need_k_at_most_d():
    task = REGISTRY.task("scc-automaton").create({"K": 10})
    with pytest.raises(ParamError, match="K <= d"):
        build(task, embeddings="orthonormal")


def _pair(task_name, task_params, model_name, steps):
    task = REGISTRY.task(task_name).create(task_params)
    spec = REGISTRY.model(model_name)
    return run_pairing(task, spec, spec.resolve(), spec.recipe.override({"steps": steps}), seed=0, accelerator="cpu")


@pytest.mark.parametrize("task_name, params", [
    ("scc-automaton", {"train_size": 200, "val_size": 100, "test_size": 100}),
    ("scc-implicit-bias", {}),
])
@pytest.mark.usefixtures("one_thread")
def test_layer_of_a_on_the_scc_tasks(task_name, params):
    result = _pair(task_name, params, "attn-paper-a", 10)
    assert result.train["steps"] == 10 and len(result.curve["loss"]) == 10
    assert math.isfinite(result.train["final_loss"])
    assert 0 <= result.metrics["top_scc_attention"] <= 1
    assert "svm_correlation" not in result.metrics  # [A]'s layer is not bilinear in token embeddings


@pytest.mark.parametrize("task_name, params", [
    ("random-walk", {"context_length": 24, "train_size": 200, "val_size": 100, "test_size": 100}),
    ("deterministic-walk", {"laps": 4, "train_size": 200, "val_size": 100, "test_size": 100}),
])
@pytest.mark.usefixtures("one_thread")
def test_layer_of_b_on_the_walks(task_name, params):
    result = _pair(task_name, params, "attn-paper-b", 300)
    assert math.isfinite(result.train["final_loss"])
    assert 0 <= result.metrics["parent_attention"] <= 1
    assert "value_transition_correlation" not in result.metrics  # no value matrix: the diagnostic is absent
    # The query is the parent token itself, so attending to its successor's token solves the walk.
    assert result.metrics["accuracy"] >= result.metrics["bayes_accuracy"] - 0.1
