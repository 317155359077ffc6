"""Every registered model runs on every registered task: shapes, finite logits, attention rows
summing to 1, one optimiser step that changes the weights, and a 2-step pairing through the harness."""
from __future__ import annotations

import math

import pytest
import torch

from tokbench.errors import UsageError
from tokbench.harness import run_pairing
from tokbench.optim import make_optimizer
from tokbench.plugins import registry

TINY = {"train_size": 32, "val_size": 16, "test_size": 16}
REGISTRY = registry()


def tiny_task(name: str):
    spec = REGISTRY.task(name)
    declared = {p.name for p in spec.params}
    return spec.create({key: value for key, value in TINY.items() if key in declared})


@pytest.mark.parametrize("task_name", sorted(REGISTRY.tasks))
@pytest.mark.parametrize("model_name", sorted(REGISTRY.models))
def test_model_runs_on_task(model_name, task_name):
    task, spec = tiny_task(task_name), REGISTRY.model(model_name)
    split = task.make_split("train", 0)
    n, T = split.tokens.shape
    torch.manual_seed(0)
    try:
        model = spec.build(spec.resolve(), task)
    except UsageError as exc:  # a declared incompatibility is allowed; it must be a one-line usage error
        pytest.skip(f"{model_name} refuses {task_name}: {exc}")
    model.fit(split)

    output = model(split.tokens)
    assert output.logits.shape == (n, task.vocab_size)
    assert torch.isfinite(output.logits).all()
    for weights in (output.attention, output.head_attention):
        if weights is not None:
            assert weights.shape[0] == n and weights.shape[-1] >= T
            assert (weights >= 0).all()
            torch.testing.assert_close(weights.sum(-1).double(), torch.ones(weights.shape[:-1], dtype=torch.float64),
                                       rtol=0, atol=1e-5)

    trainable = [p for p in model.parameters() if p.requires_grad]
    if trainable and spec.recipe.steps > 0:
        before = [p.detach().clone() for p in trainable]
        loss = model.loss(output, split.labels)
        assert torch.isfinite(loss)
        loss.backward()
        make_optimizer(spec.recipe.optimizer, trainable, spec.recipe.lr).step()
        assert any(not torch.equal(b, p) for b, p in zip(before, trainable)), "one step left every weight unchanged"

    recipe = spec.recipe.override({"steps": min(spec.recipe.steps, 2), "lr_grid": ()})
    result = run_pairing(task, spec, spec.resolve(), recipe, seed=0, accelerator="cpu")
    assert result.train["steps"] == (recipe.steps if trainable else 0)
    assert 0.0 <= result.metrics["accuracy"] <= 1.0
    if result.train["steps"]:
        assert math.isfinite(result.train["final_loss"])
