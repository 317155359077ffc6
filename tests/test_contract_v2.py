"""Contract v2 through a plugin written against it (tests/fake_plugins/contract_v2.py): labels at many
positions, attention per layer and head, graded targets, loss metrics against the Bayes predictor, full
recipes; and the pieces one by one."""
from __future__ import annotations

import json
import math
import sys
from dataclasses import fields, replace
from pathlib import Path

import pytest
import torch

from tokbench.errors import ParamError
from tokbench.harness import run_pairing
from tokbench.metrics import attention_metric, sequence_accuracy
from tokbench.model import ModelOutput, TokenModel
from tokbench.optim import make_optimizer, make_schedule
from tokbench.specs import ModelSpec, Recipe, TaskSpec
from tokbench.task import IGNORE, AttentionTarget

sys.path.insert(0, str(Path(__file__).parent / "fake_plugins"))
import contract_v2  # noqa: E402 - the plugin's hook module, importable from its folder

TINY = {"train_size": 256, "val_size": 64, "test_size": 128}


@pytest.fixture(scope="module")
def trained():
    task = contract_v2.PREVIOUS_TOKEN.create(TINY)
    spec = contract_v2.TWO_LAYER
    return run_pairing(task, spec, spec.resolve(), spec.recipe, seed=0, accelerator="cpu")


def test_multi_position_task_is_learned_and_scored_over_labelled_positions(trained):
    assert trained.metrics["accuracy"] >= 0.95
    assert trained.metrics["bayes_accuracy"] == 1.0


def test_diagnostics_name_their_layer_and_head(trained):
    assert trained.diagnostics["previous_attention"] == {"kind": "mass", "layer": "first", "head": 1}
    assert trained.diagnostics["prefix_uniformity"] == {"kind": "distribution", "layer": "last", "head": "mean"}
    assert trained.metrics["previous_attention"] >= 0.9  # the best head of the first layer attends to t - 1
    assert 0.0 <= trained.metrics["prefix_uniformity"] <= 1.0


def test_loss_metrics_against_the_bayes_predictor(trained):
    m = trained.metrics
    assert m["bayes_loss"] == 0.0  # a deterministic task: the Bayes predictor is certain
    assert m["excess_loss"] == pytest.approx(m["loss"]) and m["loss"] > 0
    assert 0 < m["excess_loss_se"] < m["loss"]


def test_reference_strategies_are_scored_on_the_evaluation_split_and_along_the_curve(trained):
    assert 0.0 <= trained.metrics["agree_copy_current"] < 0.5  # the model predicts the previous token instead
    curve = trained.curve["agree_copy_current"]
    assert len(curve) == len(trained.curve["step"]) and all(0.0 <= x <= 1.0 for x in curve)


def test_the_target_ends_training_before_the_cap(trained):
    assert trained.train["stopped_because"] == "target"
    assert trained.train["steps"] < trained.train["max_steps"] == contract_v2.TWO_LAYER.recipe.steps
    assert trained.train["steps"] % contract_v2.TWO_LAYER.recipe.eval_every == 0
    assert trained.curve["step"][-1] < trained.train["steps"]


def test_untrained_models_record_the_steps_they_took():
    from tokbench.plugins import registry

    reg = registry()
    task = reg.task("random-walk").create({"train_size": 50, "val_size": 20, "test_size": 20})
    spec = reg.model("uniform")
    result = run_pairing(task, spec, spec.resolve(), spec.recipe.override({"steps": 1000}), seed=0, accelerator="cpu")
    assert result.train["steps"] == 0


# --- scoring pieces --------------------------------------------------------------------------------

def test_sequence_accuracy_averages_each_sequence_over_its_labelled_positions():
    logits = torch.zeros(2, 3, 4)
    logits[..., 1] = 1.0  # always predicts token 1
    labels = torch.tensor([[IGNORE, 1, 2], [1, IGNORE, IGNORE]])
    assert sequence_accuracy(logits, labels).tolist() == [0.5, 1.0]


def test_the_loss_pools_scored_positions_and_its_gradient_is_bit_identical_to_ignore_index():
    """TokenModel.loss takes the scored rows before the log-softmax on a CPU (a speed-up): the gradient must be
    exactly what cross-entropy with ignore_index gives, and the unscored positions' gradient exactly zero."""
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(8, 16, 32, generator=generator, requires_grad=True)
    labels = torch.randint(0, 32, (8, 16), generator=generator)
    labels[:, ::3] = IGNORE
    model = TokenModel.__new__(TokenModel)  # the loss reads nothing of the instance
    fast = TokenModel.loss(model, ModelOutput(logits), labels)
    (fast_grad,) = torch.autograd.grad(fast, logits)
    reference = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE)
    (reference_grad,) = torch.autograd.grad(reference, logits)
    assert torch.equal(fast_grad, reference_grad)
    assert fast_grad[:, ::3].abs().sum() == 0 and fast_grad[:, 1].abs().sum() > 0
    assert fast.item() == pytest.approx(reference.item(), rel=1e-6)


def test_attention_metric_reduces_layers_heads_and_queries():
    n, L, H, T = 1, 2, 2, 3
    attention = torch.zeros(n, L, H, T, T)
    attention[0, 0, 0] = torch.eye(T)  # layer 0, head 0: each query on itself
    attention[0, 0, 1] = torch.tensor([[1.0, 0, 0], [1.0, 0, 0], [1.0, 0, 0]])  # head 1: always position 0
    attention[0, 1] = 1.0 / T
    labels = torch.tensor([[IGNORE, 5, 5]])
    on_self = AttentionTarget(torch.eye(T, dtype=torch.bool)[None], layer="first", head="best")
    values = attention_metric(attention, on_self, 0, labels)  # (n, H + 1): heads, then their mean
    assert values.tolist() == [[1.0, 0.0, 0.5]]
    uniform = AttentionTarget(torch.full((1, T, T), 1.0 / T), kind="distribution", layer="last")
    assert attention_metric(attention, uniform, 0, labels)[0, -1].item() == pytest.approx(1.0)
    # first layer, head 1 against the uniform target: total variation 2/3 at every query
    first = AttentionTarget(torch.full((1, T, T), 1.0 / T), kind="distribution", layer=0)
    assert attention_metric(attention, first, 0, labels)[0, 1].item() == pytest.approx(1 - 2 / 3)


def test_attention_target_rejects_unknown_kinds():
    with pytest.raises(ValueError, match="kind"):
        AttentionTarget(torch.zeros(1, 2), kind="overlap")


def test_a_last_position_model_does_not_apply_to_a_positions_task():
    from tokbench.plugins import registry

    reason = contract_v2.LAST_POSITION.applicability(contract_v2.PREVIOUS_TOKEN)
    assert reason and "last position" in reason
    assert contract_v2.TWO_LAYER.applicability(registry().task("random-walk")) is None
    with pytest.raises(ValueError, match="scoring"):
        TaskSpec("t", "1", "d", "m:x", scoring="everywhere")
    with pytest.raises(ValueError, match="predicts"):
        ModelSpec("m", "1", "d", "m:x", predicts="sometimes")


# --- recipes -------------------------------------------------------------------------------------

def _rates(recipe: Recipe) -> list[float]:
    weight = torch.nn.Parameter(torch.zeros(1))
    optimizer = make_optimizer(recipe, [weight])
    schedule = make_schedule(recipe, optimizer)
    rates = []
    for _ in range(recipe.steps):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        if schedule is not None:
            schedule.step()
    return rates


def test_schedules_warm_up_then_decay():
    assert _rates(Recipe(steps=5)) == [0.01] * 5
    warm = _rates(Recipe(steps=10, warmup_steps=4, schedule="cosine", lr=1.0))
    assert warm[:5] == pytest.approx([0.25, 0.4375, 0.625, 0.8125, 1.0])  # torch's LinearLR: the peak after warm-up
    assert warm[4:] == sorted(warm[4:], reverse=True) and warm[-1] < 0.1
    linear = _rates(Recipe(steps=4, schedule="linear", lr=1.0))
    assert linear == pytest.approx([1.0, 0.75, 0.5, 0.25])


def test_optimisers_take_the_recipes_settings():
    weight = [torch.nn.Parameter(torch.zeros(1))]
    adamw = make_optimizer(Recipe(optimizer="adamw", weight_decay=0.1, betas=(0.9, 0.95)), weight)
    assert isinstance(adamw, torch.optim.AdamW) and adamw.defaults["betas"] == (0.9, 0.95)
    assert adamw.defaults["weight_decay"] == 0.1
    sgd = make_optimizer(Recipe(optimizer="sgd", momentum=0.9), weight)
    assert isinstance(sgd, torch.optim.SGD) and sgd.defaults["momentum"] == 0.9


@pytest.mark.parametrize("given, message", [
    ({"momentum": "0.9"}, "needs optimizer=sgd"),
    ({"optimizer": "ngd", "weight_decay": "0.1"}, "no weight decay"),
    ({"betas": "0.9"}, "two numbers"),
    ({"schedule": "exponential"}, "not allowed"),
    ({"target": "1.5"}, "out of range"),
    ({"data": "fresh"}, "batch_size >= 1"),
])
def test_bad_recipes_are_parameter_errors(given, message):
    with pytest.raises(ParamError, match=message):
        Recipe().override(given)


def test_a_sweep_trains_every_lr_and_weight_decay_and_keeps_the_best_on_validation():
    task = contract_v2.PREVIOUS_TOKEN.create(TINY)
    spec = contract_v2.TWO_LAYER
    recipe = spec.recipe.override({"steps": "20", "target": "0", "lr_grid": "0.0001,0.03", "wd_grid": "0,0.1"})
    result = run_pairing(task, spec, spec.resolve(), recipe, seed=0, accelerator="cpu")
    selection = result.train["lr_selection_val_accuracy"]
    assert list(selection) == ["lr=0.0001,wd=0", "lr=0.0001,wd=0.1", "lr=0.03,wd=0", "lr=0.03,wd=0.1"]
    best = max(selection, key=selection.get)
    assert best == f"lr={result.train['lr']:g},wd={result.train['weight_decay']:g}"
    assert result.train["lr_grid"] == [0.0001, 0.03] and result.train["wd_grid"] == [0.0, 0.1]


def test_gradient_clipping_bounds_the_step():
    from tokbench.harness import train_model
    from tokbench.seeding import derive_seed

    task = contract_v2.PREVIOUS_TOKEN.create(TINY)
    spec = contract_v2.TWO_LAYER
    one_sgd_step = {"steps": "1", "target": "0", "optimizer": "sgd", "lr": "1", "warmup_steps": "0",
                    "schedule": "constant", "weight_decay": "0"}
    torch.manual_seed(derive_seed(0, "init"))  # the initialisation train_model starts from
    start = [p.detach().clone() for p in spec.build(spec.resolve(), task).parameters()]
    moved = {}
    for clip in ("0", "0.001"):
        recipe = spec.recipe.override({**one_sgd_step, "grad_clip": clip})
        model, _, _ = train_model(task, spec, spec.resolve(), recipe, 0, task.make_split("train", 0), None, "cpu")
        moved[clip] = math.sqrt(sum(float(((p.detach() - b) ** 2).sum()) for p, b in zip(model.parameters(), start)))
    assert moved["0.001"] == pytest.approx(0.001, rel=1e-3)  # lr 1 x a gradient clipped to norm 0.001
    assert moved["0"] > 0.01


def test_every_recipe_key_is_in_the_config_hash():
    from tokbench.results import config_hash, identity

    def hash_of(recipe: Recipe) -> str:
        return config_hash(identity("t", "1", "m", "1", {"task": {}, "model": {}, "train": recipe.identity()}, 0))

    base = Recipe(batch_size=8)  # fresh data needs a batch size
    # One valid change of every field of the recipe (a new field fails here until it has one)
    changed = {"optimizer": {"optimizer": "sgd"}, "lr": {"lr": 0.5}, "steps": {"steps": 7}, "batch_size": {"batch_size": 4},
               "lr_grid": {"lr_grid": (0.1, 1.0)}, "weight_decay": {"weight_decay": 0.1},
               "wd_grid": {"wd_grid": (0.0, 0.1)}, "sweep_steps": {"sweep_steps": 100},
                   "sweep_margin": {"sweep_steps": 100, "sweep_margin": 0.05},
               "momentum": {"optimizer": "sgd", "momentum": 0.5}, "betas": {"betas": (0.9, 0.95)},
               "schedule": {"schedule": "cosine"}, "warmup_steps": {"warmup_steps": 5}, "grad_clip": {"grad_clip": 1.0},
               "data": {"data": "fresh"}, "target": {"target": 0.9}, "patience": {"patience": 100},
               "min_delta": {"min_delta": 0.01}, "eval_every": {"eval_every": 10}, "budgets": {"budgets": (50,)},
               "validate_by": {"validate_by": "expected"}}
    assert set(changed) == {f.name for f in fields(Recipe)}
    for key, change in changed.items():
        if key in ("momentum", "sweep_margin"):  # each needs another key: compare with that key alone
            other = {"momentum": {"optimizer": "sgd"}, "sweep_margin": {"sweep_steps": 100}}[key]
            assert hash_of(replace(base, **change)) != hash_of(replace(base, **other)), key
            continue
        assert hash_of(replace(base, **change)) != hash_of(base), key
    assert json.loads(json.dumps(Recipe().to_json()))["betas"] == [0.9, 0.999]
