"""A sweep that prunes (``train.sweep_steps``): every candidate trains to that step, the best on validation goes on.

The kept candidate's run must be the run it gets alone (same initialisation, batches and schedule sized to the
cap), so its record is exact; the others stop there; the record says what was chosen, when, and on what.
"""
from __future__ import annotations

from dataclasses import replace

import pytest

from tokbench.errors import ParamError
from tokbench.harness import SeedData, run_pairing, train_replicas
from tokbench.plugins import registry
from tokbench.specs import Recipe

from small_tasks import small_mqar

RATES = "0.0003,0.003,0.03"


def recipe(**given):
    spec = registry().model("linear-attention")
    return spec, spec.recipe.override({"steps": 40, "data": "fresh", "batch_size": 16, "eval_every": 10,
                                       "budgets": "10,30", "lr_grid": RATES, "schedule": "cosine", **given})


@pytest.mark.parametrize("target", [0.0, 0.6])
def test_the_kept_candidate_is_the_run_it_gets_alone_and_the_others_stop_at_sweep_steps(target):
    task = small_mqar()
    spec, pruned = recipe(sweep_steps=20, target=target)
    params = spec.resolve({})
    swept = run_pairing(task, spec, params, pruned, seed=1, accelerator="cpu")
    choice = swept.train["lr_selection_val_accuracy"]
    assert swept.train["selected_at"] == 20 and set(choice) == {"0.0003", "0.003", "0.03"}
    kept = max(choice, key=lambda lr: (choice[lr], -list(choice).index(lr)))  # ties: the earlier candidate
    assert swept.train["lr"] == float(kept)
    alone = run_pairing(task, spec, params, replace(pruned, lr=float(kept), lr_grid=(), sweep_steps=0), seed=1,
                        accelerator="cpu")
    assert swept.metrics == alone.metrics and swept.curve == alone.curve
    assert swept.budget_curve == alone.budget_curve
    for key in ("steps", "stopped_because", "final_loss"):
        assert swept.train[key] == alone.train[key]


def test_pruned_candidates_train_to_sweep_steps_only_and_are_compared_on_validation_there():
    task = small_mqar()
    spec, pruned = recipe(sweep_steps=20)
    seed = 0
    data = {seed: SeedData(task.make_split("train", seed), task.make_split("val", seed), task.make_split("test", seed))}
    plan = [(candidate, seed) for candidate in pruned.candidates()]
    replicas = train_replicas(task, spec, spec.resolve({}), plan, data, None, "cpu")
    assert sorted(r.stopped_because for r in replicas) == ["cap", "pruned", "pruned"]
    assert sorted(r.steps_taken for r in replicas) == [20, 20, 40]
    kept = next(r for r in replicas if r.stopped_because == "cap")
    assert {r.selected_at for r in replicas} == {20}
    assert kept.selection_accuracy == max(r.selection_accuracy for r in replicas)
    assert sum(r.steps_taken for r in replicas) == pruned.replica_steps() == 3 * 20 + 20


def test_a_margin_keeps_the_candidates_near_the_best_and_chooses_among_them_at_the_end():
    task = small_mqar()
    spec, pruned = recipe(sweep_steps=20, target=0.99)
    seed = 0
    data = {seed: SeedData(task.make_split("train", seed), task.make_split("val", seed), task.make_split("test", seed))}

    def train(sweep):
        return train_replicas(task, spec, spec.resolve({}), [(c, seed) for c in sweep.candidates()], data, None, "cpu")
    at_20 = sorted(r.selection_accuracy for r in train(pruned))
    assert at_20[2] > at_20[1] > at_20[0], "the case needs three distinct validation accuracies at step 20"
    margin = (2 * at_20[2] - at_20[1] - at_20[0]) / 2  # between the second's gap and the third's: keeps two
    kept = train(replace(pruned, sweep_margin=margin))
    assert [r.stopped_because == "pruned" for r in kept] == [r.selection_accuracy < at_20[2] - margin for r in kept]
    assert sorted(r.steps_taken for r in kept if r.stopped_because == "pruned") == [20]
    full = train(replace(pruned, sweep_steps=0))
    for with_margin, unpruned in zip(kept, full):  # a kept run is the run it gets in a full sweep
        if with_margin.stopped_because != "pruned":
            assert with_margin.curve == unpruned.curve and with_margin.steps_taken == unpruned.steps_taken


def test_a_margin_that_keeps_every_candidate_makes_the_full_sweeps_choice():
    task = small_mqar()
    spec, full = recipe(target=0.99)
    params = spec.resolve({})
    everyone = run_pairing(task, spec, params, replace(full, sweep_steps=20, sweep_margin=1.0), seed=1,
                           accelerator="cpu")
    alone = run_pairing(task, spec, params, full, seed=1, accelerator="cpu")
    assert everyone.train["selected_at"] == 20 and everyone.train["lr_selection_kept"] == ["0.0003", "0.003", "0.03"]
    assert everyone.train["lr_selection_val_accuracy"] == alone.train["lr_selection_val_accuracy"]
    assert everyone.train["lr"] == alone.train["lr"] and everyone.metrics == alone.metrics
    assert everyone.curve == alone.curve


def test_a_margin_without_sweep_steps_is_refused_and_may_train_a_full_sweep():
    with pytest.raises(ParamError, match="sweep_margin=0.05 needs sweep_steps"):
        Recipe(steps=1000, lr_grid=(0.1, 0.2), sweep_margin=0.05)
    margin = Recipe(steps=1000, lr_grid=(0.1, 0.2, 0.4), sweep_steps=300, sweep_margin=0.05)
    assert margin.replica_steps() == 3 * 1000  # every candidate may be within it
    assert "within 0.05 of the best" in margin.describe()


def test_a_full_sweep_records_every_candidates_validation_checks():
    task = small_mqar()
    spec, full = recipe(target=0.99)
    result = run_pairing(task, spec, spec.resolve({}), full, seed=0, accelerator="cpu")
    curves = result.train["lr_selection_val_curve"]
    assert set(curves) == {"0.0003", "0.003", "0.03"} and "selected_at" not in result.train
    for curve in curves.values():
        assert curve["step"] == [10, 20, 30] and len(curve["accuracy"]) == 3  # no check at the cap itself


def test_the_planned_replica_steps_count_the_pruned_sweep():
    base = Recipe(steps=10000, lr_grid=(0.1, 0.2, 0.4), wd_grid=(0.0, 0.1), eval_every=100, target=0.9)
    assert base.replica_steps() == 6 * 10000
    assert replace(base, sweep_steps=1000).replica_steps() == 6 * 1000 + 9000
    assert replace(base, sweep_steps=10000).replica_steps() == 6 * 10000  # at the cap: no pruning
    assert replace(base, lr_grid=(), wd_grid=(), sweep_steps=1000).replica_steps() == 10000  # nothing to sweep


def test_sweep_steps_off_the_validation_checks_is_refused():
    with pytest.raises(ParamError, match="multiple of eval_every"):
        Recipe(steps=1000, target=0.9, eval_every=100, sweep_steps=150)


def test_the_first_candidate_to_reach_its_target_ends_the_sweep_there():
    task = registry().task("random-walk").create({"K": 5, "context_length": 8, "train_size": 64, "val_size": 64,
                                                  "test_size": 64})
    spec = registry().model("attn-nope")
    base = spec.recipe.override({"steps": 60, "batch_size": 16, "target": 0.9, "eval_every": 10, "budgets": "10,20",
                                 "lr_grid": "0.001,0.01,0.05"})
    seed = 1  # measured: lr 0.01 reaches the target at step 10, 0.05 at 20, 0.001 never
    data = {seed: SeedData(task.make_split("train", seed), task.make_split("val", seed), task.make_split("test", seed))}

    def train(recipe):
        return train_replicas(task, spec, spec.resolve({}), [(c, seed) for c in recipe.candidates()], data, None, "cpu")
    full = train(base)
    first = min(r.steps_taken for r in full if r.stopped_because == "target")
    assert first < 50 and any(r.stopped_because == "cap" for r in full)  # a race the sweep can end early
    pruned = train(replace(base, sweep_steps=50))
    kept = [r for r in pruned if r.stopped_because != "pruned"]
    assert len(kept) == 1 and kept[0].stopped_because == "target" and kept[0].steps_taken == first
    assert {r.steps_taken for r in pruned} == {first} and {r.selected_at for r in pruned} == {first}


def test_a_patience_as_long_as_the_cap_keeps_every_candidates_checks_and_stops_nothing():
    """What the pruning check trains majority with (benchmark/budget/pruning.toml): no target, and a plateau rule
    no run can meet, so that a full sweep keeps every candidate's validation checks for the replay and trains as
    the suite's majority sweep does, every candidate to the cap."""
    task = small_mqar()
    spec, full = recipe(target=0.0, patience=40)
    swept = run_pairing(task, spec, spec.resolve({}), full, seed=1, accelerator="cpu")
    curves = swept.train["lr_selection_val_curve"]
    assert sorted(curves) == ["0.0003", "0.003", "0.03"]
    assert all(curve["step"] == [10, 20, 30] for curve in curves.values())  # no check at the cap
    assert swept.train["steps"] == 40 and swept.train["stopped_because"] == "cap"
    assert swept.train["lr_selection_stopped_because"] == dict.fromkeys(curves, "cap")
