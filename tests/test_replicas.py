"""Replicas trained together equal the same replicas trained one by one.

One after another (the CPU's way): bit for bit. Vectorised (``stacking="vmap"``, a GPU's way, forced
here on the CPU): within float tolerance, :data:`LOSS_TOLERANCE` on every logged loss and
:data:`ACCURACY_TOLERANCE` on accuracies, with the same steps taken and the same reason to stop.
"""
from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from tokbench.harness import SeedData, run_cell, run_pairing, train_model, train_replicas
from small_tasks import small_mqar, small_walk
from tokbench.plugins import registry
from tokbench.replicas import NonFiniteLossError

LOSS_TOLERANCE = 1e-4  # relative and absolute; measured: at most 3e-6 over 60 Adam steps
ACCURACY_TOLERANCE = 0.02  # verify's tolerance across environments; measured: equal
RATES = (0.001, 0.01, 0.05)
SEEDS = (0, 1)


# (task, model, recipe): fixed mini-batches with a target that the faster rates reach first; the full
# training split at every step; fresh sequences at every step, scored at many positions.
CASES = {
    "fixed": (small_walk, "attn-nope", {"steps": 60, "batch_size": 16, "target": 0.9, "eval_every": 10,
                                        "budgets": "10,20,40"}),
    "full-batch": (small_walk, "attn-nope", {"steps": 30, "batch_size": 0, "budgets": "10"}),
    "fresh": (small_mqar, "linear-attention", {"steps": 30, "data": "fresh", "batch_size": 16, "target": 0.6,
                                               "eval_every": 10, "budgets": "20"}),
    # F.scaled_dot_product_attention: fused kernels alone, the math form in a vmapped stack. Its rates are the
    # tokbench suite's grid around the recipe's 0.001 (x 1/4, 1, 4): at RATES' 0.05, 50 times the recipe's, the
    # loss jumps from step to step and amplifies the kernels' rounding differences (measured: 2e-7 relative over
    # 10 steps, 4e-3 by step 30, the accuracies still equal); at the suite's rates they stay at 2e-7.
    "sdpa": (small_mqar, "transformer-2l", {"steps": 30, "data": "fresh", "batch_size": 16, "eval_every": 10,
                                            "budgets": "20", "lr_grid": "0.00025,0.001,0.004"}),
}


def together_and_alone(case: str, stacking: str):
    make_task, name, overrides = CASES[case]
    task, spec = make_task(), registry().model(name)
    params, base = spec.resolve({}), spec.recipe.override(overrides)
    plan = [(replace(base, lr=lr, lr_grid=()), seed) for seed in SEEDS for lr in base.lr_grid or RATES]
    data = {seed: SeedData(task.make_split("train", seed), task.make_split("val", seed), task.make_split("test", seed))
            for seed in SEEDS}
    together = train_replicas(task, spec, params, plan, data, None, "cpu", stacking=stacking)
    alone = [train_model(task, spec, params, recipe, seed, data[seed].train, None, "cpu", data[seed].val,
                         data[seed].evaluation) for recipe, seed in plan]
    return together, alone


@pytest.mark.parametrize("case", list(CASES))
def test_replicas_one_after_another_are_bit_identical_to_training_alone(case):
    together, alone = together_and_alone(case, "sequential")
    assert {r.stacking for r in together} == {"sequential"}
    for replica, (model, single, steps) in zip(together, alone, strict=True):
        assert (replica.steps_taken, replica.stopped_because) == (steps, single.stopped_because)
        assert replica.curve == single.curve and replica.budget_curve == single.budget_curve
        assert all(torch.equal(a, b) for a, b in zip(replica.model.parameters(), model.parameters(), strict=True))
    if case == "fixed":  # the stack really had replicas stop early while others went on
        assert {r.stopped_because for r in together} == {"target", "cap"}
        assert len({r.steps_taken for r in together}) > 1


@pytest.mark.parametrize("case", ["fixed", "fresh", "sdpa"])
def test_vmapped_replicas_equal_training_alone_within_tolerance(case):
    together, alone = together_and_alone(case, "vmap")
    assert {r.stacking for r in together} == {"vmap"} and {r.replicas for r in together} == {len(together)}
    for replica, (model, single, steps) in zip(together, alone, strict=True):
        assert (replica.steps_taken, replica.stopped_because) == (steps, single.stopped_because)
        assert replica.curve["step"] == single.curve["step"]
        assert replica.curve["loss"] == pytest.approx(single.curve["loss"], rel=LOSS_TOLERANCE, abs=LOSS_TOLERANCE)
        assert replica.curve["accuracy"] == pytest.approx(single.curve["accuracy"], abs=ACCURACY_TOLERANCE)
        assert [p["step"] for p in replica.budget_curve] == [p["step"] for p in single.budget_curve]
        assert [p["accuracy"] for p in replica.budget_curve] == pytest.approx(
            [p["accuracy"] for p in single.budget_curve], abs=ACCURACY_TOLERANCE)
    if case == "fixed":
        assert {r.stopped_because for r in together} == {"target", "cap"}


def test_a_cell_gives_each_seed_the_record_it_gets_alone_and_draws_each_seeds_data_once(monkeypatch):
    task, spec = small_mqar(), registry().model("gru")
    recipe = spec.recipe.override({"steps": 12, "data": "fresh", "batch_size": 8, "lr_grid": "0.001,0.01"})
    draws = []
    original = type(task).training_batch
    monkeypatch.setattr(type(task), "training_batch", lambda self, n, g: draws.append(n) or original(self, n, g))
    cell = run_cell(task, spec, spec.resolve({}), recipe, [0, 1, 2], accelerator="cpu")
    assert len(draws) == 3 * 2  # 12 steps are 2 draws per seed, shared by the seed's two candidates
    for seed, together in enumerate(cell):
        alone = run_pairing(task, spec, spec.resolve({}), recipe, seed, accelerator="cpu")
        assert together.metrics == alone.metrics and together.curve == alone.curve
        assert together.budget_curve == alone.budget_curve and together.size == alone.size
        assert together.train.pop("replicas") == 6 and alone.train.pop("replicas") == 2
        for result in (together, alone):
            assert result.train.pop("stacking") == "sequential"
            del result.train["wall_seconds"]
        assert together.train == alone.train


def test_a_replica_whose_loss_diverges_fails_alone_and_the_others_go_on():
    task, spec = small_walk(), registry().model("attn-nope")
    good = spec.recipe.override({"steps": 20, "optimizer": "gd"})
    plan = [(replace(good, lr=1e30), 0), (good, 0)]
    data = {0: SeedData(task.make_split("train", 0))}
    diverged, trained = train_replicas(task, spec, spec.resolve({}), plan, data, None, "cpu")
    assert isinstance(diverged.error, NonFiniteLossError) and "loss became nan at step 1" in str(diverged.error)
    _, alone, steps = train_model(task, spec, spec.resolve({}), good, 0, data[0].train, None, "cpu")
    assert trained.error is None and trained.steps_taken == steps == 20 and trained.curve == alone.curve


@pytest.mark.parametrize(("model", "stacking", "expected"), [
    ("attn-nope", "auto", "sequential"),  # the CPU: one after another, measured faster there
    ("attn-nope", "vmap", "vmap"),
    ("gru", "vmap", "sequential"),  # torch has no batching rule for its fused kernel
    ("transformer", "vmap", "vmap"),  # its fused attention kernel has no batching rule: the stack takes the math form
])
def test_stacking_falls_back_to_one_after_another_where_vmap_does_not_apply(model, stacking, expected):
    task, spec = small_mqar(), registry().model(model)
    recipe = spec.recipe.override({"steps": 2, "batch_size": 8})
    plan = [(recipe, 0), (recipe, 1)]
    data = {seed: SeedData(task.make_split("train", seed)) for seed in (0, 1)}
    replicas = train_replicas(task, spec, spec.resolve({}), plan, data, None, "cpu", stacking=stacking)
    assert {r.stacking for r in replicas} == {expected}


def test_replicas_of_a_stack_differ_only_in_rate_and_weight_decay():
    task, spec = small_walk(), registry().model("attn-nope")
    recipe = spec.recipe.override({"steps": 2})
    data = {0: SeedData(task.make_split("train", 0))}
    with pytest.raises(ValueError, match="lr and weight_decay only"):
        train_replicas(task, spec, spec.resolve({}), [(recipe, 0), (replace(recipe, steps=3), 0)], data, None, "cpu")


def test_a_vmapped_stack_that_runs_out_of_device_memory_goes_on_one_replica_after_another(monkeypatch):
    import tokbench.replicas as replicas

    def out_of_memory(*args):  # as a device would say it; the probe's own vmapped step still runs
        raise torch.cuda.OutOfMemoryError("CUDA out of memory (simulated)")

    monkeypatch.setattr(replicas, "_vmapped", out_of_memory)
    monkeypatch.setattr(replicas, "_probe", lambda *args: True)
    together, alone = together_and_alone("fresh", "vmap")
    assert {r.stacking for r in together} == {"vmap, then sequential (out of device memory)"}
    for replica, (model, single, steps) in zip(together, alone, strict=True):  # every step went one by one: bit for bit
        assert replica.curve == single.curve and replica.steps_taken == steps
        assert all(torch.equal(a, b) for a, b in zip(replica.model.parameters(), model.parameters(), strict=True))
