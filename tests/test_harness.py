"""The Lightning harness: exact step counts in blocks, mini-batches, lr selection on validation, failures."""
from __future__ import annotations

import pytest

from tokbench.harness import NonFiniteLossError, run_pairing, train_model
from small_tasks import small_walk
from tokbench.plugins import registry


@pytest.mark.parametrize(("steps", "batch_size"), [(1, 0), (25, 0), (25, 16), (13, 64)])
def test_every_recipe_step_is_one_optimiser_step(steps, batch_size):
    task, spec = small_walk(), registry().model("attn-nope")
    recipe = spec.recipe.override({"steps": steps, "batch_size": batch_size, "optimizer": "adam"})
    train = task.make_split("train", 0)
    model, module, taken = train_model(task, spec, spec.resolve({}), recipe, 0, train, None, "cpu")
    optimizer = module.optimizer
    adam_steps = {int(state["step"]) for state in optimizer.state.values()}
    assert taken == steps and adam_steps == {steps}
    assert module.curve["step"][-1] == steps - 1


def test_lr_grid_keeps_the_best_rate_on_validation():
    task, spec = small_walk(), registry().model("attn-nope")
    recipe = spec.recipe.override({"steps": 5, "lr_grid": "0.0,0.05"})
    result = run_pairing(task, spec, spec.resolve({}), recipe, 0)
    selection = result.train["lr_selection_val_accuracy"]
    assert set(selection) == {"0", "0.05"}
    best = max(selection, key=lambda lr: (selection[lr], -list(selection).index(lr)))
    assert result.train["lr"] == float(best)
    assert result.metrics["val_accuracy"] == selection[best]


def test_a_diverging_loss_is_an_error_not_a_number():
    task, spec = small_walk(), registry().model("attn-nope")
    recipe = spec.recipe.override({"lr": 1e30, "steps": 20, "optimizer": "gd"})
    with pytest.raises(NonFiniteLossError, match="loss became nan at step 1"):
        run_pairing(task, spec, spec.resolve({}), recipe, 0)
