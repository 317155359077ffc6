"""The training protocol: fresh data per step, stopping on validation (target, plateau, cap), budget curves,
and the chance and oracle levels of accuracy."""
from __future__ import annotations

import pytest
import torch

from tokbench import harness
from tokbench.harness import _Blocks, _FreshBlocks, block_ends, run_pairing, train_model
from tokbench.errors import ParamError
from tokbench.metrics import chance_accuracy, expected_accuracy, prediction_accuracy
from small_tasks import small_walk
from tokbench.plugins import registry
from tokbench.seeding import derive_seed
from tokbench.specs import Recipe
from tokbench.task import IGNORE


def nope(**recipe):
    spec = registry().model("attn-nope")
    return spec, spec.recipe.override(recipe)


# ---- fresh data ------------------------------------------------------------------------------------------------

def test_fresh_blocks_draw_ten_steps_at_a_time_from_their_own_seed_whatever_the_schedule():
    task = small_walk()
    one_block = [b[0] for b in _FreshBlocks(task, 8, [25], seed=3)][0]
    pieces = torch.cat([b[0] for b in _FreshBlocks(task, 8, [2, 11, 1, 11], seed=3)])
    assert torch.equal(one_block, pieces)  # the data of a step does not depend on the block schedule
    for step in (0, 9, 10, 24):
        draw = task.training_batch(80, torch.Generator().manual_seed(derive_seed(3, f"data:train:draw{step // 10}")))
        assert torch.equal(one_block[step], draw.tokens[(step % 10) * 8:(step % 10 + 1) * 8])
    assert len({tuple(batch.flatten().tolist()) for batch in one_block}) == 25  # a new batch at every step


def test_fresh_training_uses_the_tasks_training_batch_and_is_reproducible(monkeypatch):
    task = small_walk()
    drawn = []
    original = type(task).training_batch

    def spy(self, n, generator):
        drawn.append(n)
        return original(self, n, generator)

    monkeypatch.setattr(type(task), "training_batch", spy)
    spec, recipe = nope(steps=12, batch_size=4, data="fresh")
    first = run_pairing(task, spec, spec.resolve({}), recipe, 0, accelerator="cpu")
    assert drawn[:2] == [40, 40] and first.train["data"] == "fresh"  # 12 steps: two draws of 10 steps
    second = run_pairing(task, spec, spec.resolve({}), recipe, 0, accelerator="cpu")
    assert first.metrics == second.metrics  # bit-reproducible from the run seed
    fixed = run_pairing(task, spec, spec.resolve({}), recipe.override({"data": "fixed"}), 0, accelerator="cpu")
    assert fixed.metrics["accuracy"] != first.metrics["accuracy"] or fixed.curve["loss"] != first.curve["loss"]


def test_fixed_mini_batches_do_not_depend_on_the_schedule():
    split = small_walk().make_split("train", 0)
    whole = torch.cat([b[0] for b in _Blocks(split, 8, [6], seed=1)])
    pieces = torch.cat([b[0] for b in _Blocks(split, 8, [1, 3, 2], seed=1)])
    assert torch.equal(whole, pieces)


# ---- the schedule and stopping -----------------------------------------------------------------------------------

def test_blocks_end_at_budgets_and_at_validation_checks():
    assert block_ends(Recipe(steps=50, budgets=(7, 100))) == [5, 7, 10, 15, 20, 25, 30, 35, 40, 45, 50]
    assert block_ends(Recipe(steps=30, budgets=(), target=0.9, eval_every=4)) == [
        3, 4, 6, 8, 9, 12, 15, 16, 18, 20, 21, 24, 27, 28, 30]


def scripted_validation(monkeypatch, values, oracle):
    """Validation accuracies in order, one per check, and the oracle's validation accuracy."""
    values = iter(values)
    monkeypatch.setattr(harness, "evaluate_accuracy", lambda model, split, label_law=None: next(values))
    monkeypatch.setattr(harness, "oracle_accuracy", lambda task, split, label_law=None: oracle)


def train_walk(recipe):
    task = small_walk()
    spec = registry().model("attn-nope")
    _, module, steps = train_model(task, spec, spec.resolve({}), recipe, 0, task.make_split("train", 0), None, "cpu",
                                   val=task.make_split("val", 0))
    return module, steps


def test_the_target_is_a_fraction_of_the_oracles_validation_accuracy_and_reaching_it_stops(monkeypatch):
    scripted_validation(monkeypatch, [0.3, 0.44, 0.45, 0.9, 0.9], oracle=0.5)
    module, steps = train_walk(Recipe(steps=100, eval_every=10, target=0.9, budgets=()))
    assert (steps, module.stopped_because) == (30, "target")  # 0.45 >= 0.9 x 0.5: reaching it is enough


def test_a_plateau_stops_after_patience_steps_without_a_gain_of_min_delta(monkeypatch):
    scripted_validation(monkeypatch, [0.5, 0.6, 0.6, 0.605, 0.7, 0.8], oracle=1.0)
    module, steps = train_walk(Recipe(steps=100, eval_every=10, patience=20, min_delta=0.01, budgets=()))
    assert (steps, module.stopped_because) == (40, "plateau")


def test_without_a_stop_training_runs_to_the_cap(monkeypatch):
    scripted_validation(monkeypatch, [0.1 * i for i in range(1, 10)], oracle=1.0)
    module, steps = train_walk(Recipe(steps=100, eval_every=10, target=0.99, patience=30, budgets=()))
    assert (steps, module.stopped_because) == (100, "cap")  # nine checks, none at the cap itself


def test_records_say_how_many_steps_of_the_cap_and_why():
    task, spec = small_walk(), registry().model("attn-nope")
    result = run_pairing(task, spec, spec.resolve({}), spec.recipe.override({"steps": 7}), 0, accelerator="cpu")
    assert (result.train["steps"], result.train["max_steps"], result.train["stopped_because"]) == (7, 7, "cap")
    uniform = registry().model("uniform")
    result = run_pairing(task, uniform, uniform.resolve({}), uniform.recipe, 0, accelerator="cpu")
    assert (result.train["steps"], result.train["stopped_because"]) == (0, "untrained")
    assert result.budget_curve == [{"step": 0, "accuracy": result.metrics["accuracy"], "final": True}]



# ---- validation by expected accuracy -----------------------------------------------------------------------------

def test_expected_accuracy_is_the_probability_of_the_label_at_the_prediction_over_scored_positions():
    law = torch.tensor([[0.5, 0.25, 0.25], [0.0, 1.0, 0.0]])
    assert expected_accuracy(torch.tensor([1, 1]), law, torch.tensor([0, 1])).tolist() == [0.25, 1.0]
    per_position = torch.tensor([[[0.2, 0.8], [0.6, 0.4], [0.5, 0.5]]])
    labels = torch.tensor([[IGNORE, 0, 1]])  # the first position is not scored, whatever it predicts
    assert expected_accuracy(torch.tensor([[0, 0, 1]]), per_position, labels).tolist() == pytest.approx([(0.6 + 0.5) / 2])


def sparse_selection(q: int):
    return registry().task("sparse-selection").create({"vocab_size": 4, "num_tokens": 16, "q": q, "train_size": 64,
                                                       "val_size": 400, "test_size": 64})


def test_expected_validation_scores_the_oracle_by_its_selected_counts_without_label_noise():
    task = sparse_selection(q=4)
    val = task.make_split("val", 0)
    law = harness.validation_law(task, val, Recipe(validate_by="expected"))
    counts = task.selected_counts(val.tokens)
    assert harness.oracle_accuracy(task, val, law) == pytest.approx((counts.max(1).values / 4.0).mean().item())
    assert harness.validation_law(task, val, Recipe()) is None  # the default reads the drawn labels
    # the labels' accuracy scatters around that expectation: one drawn label per sequence
    assert harness.oracle_accuracy(task, val) != harness.oracle_accuracy(task, val, law)


def test_expected_validation_needs_a_task_that_gives_the_law_of_its_labels():
    task = small_walk()
    with pytest.raises(ParamError, match="validate_by=labels"):
        harness.validation_law(task, task.make_split("val", 0), Recipe(validate_by="expected"))


def test_expected_validation_changes_a_runs_identity_only_when_set():
    assert "validate_by" not in Recipe().identity()
    assert Recipe(validate_by="expected").identity()["validate_by"] == "expected"
    assert "expectation over the task's label law" in Recipe(validate_by="expected").describe()
    with pytest.raises(ParamError, match="labels, expected"):
        Recipe().override({"validate_by": "bayes"})


# ---- budget curves -----------------------------------------------------------------------------------------------

def test_the_budget_curve_is_the_test_accuracy_at_each_budget_reached_then_the_final_step():
    task = small_walk()
    spec, recipe = nope(steps=30, budgets="10,20,50")
    result = run_pairing(task, spec, spec.resolve({}), recipe, 0, accelerator="cpu")
    assert [p["step"] for p in result.budget_curve] == [10, 20, 30]
    assert result.budget_curve[-1] == {"step": 30, "accuracy": result.metrics["accuracy"], "final": True}
    at_ten = run_pairing(task, spec, spec.resolve({}), recipe.override({"steps": 10}), 0, accelerator="cpu")
    assert result.budget_curve[0]["accuracy"] == at_ten.metrics["accuracy"]  # the same model, the same test split
    unobserved = run_pairing(task, spec, spec.resolve({}), recipe.override({"budgets": ""}), 0, accelerator="cpu")
    assert unobserved.metrics == result.metrics  # evaluating at the budgets changes nothing in training


# ---- chance and oracle -------------------------------------------------------------------------------------------

def test_chance_is_the_best_constant_guess_per_sequence_then_averaged():
    assert chance_accuracy(torch.tensor([1, 1, 2, 3])) == 0.5
    labels = torch.tensor([[IGNORE, 1, 1, 2],   # token 1: 2/3 of this sequence
                           [IGNORE, IGNORE, 2, 2]])  # token 2: all of it
    # guessing 1 scores (2/3 + 0) / 2, guessing 2 scores (1/3 + 1) / 2: the best constant guess is 2
    assert chance_accuracy(labels) == pytest.approx(2 / 3)


def test_every_record_has_chance_and_oracle_on_its_test_sequences():
    task, spec = small_walk(), registry().model("attn-nope")
    result = run_pairing(task, spec, spec.resolve({}), spec.recipe.override({"steps": 5}), 0, accelerator="cpu")
    test = task.make_split("test", 0)
    assert result.metrics["oracle_accuracy"] == prediction_accuracy(task.bayes_predict(test.tokens),
                                                                    test.labels).mean().item()
    assert result.metrics["chance_accuracy"] == chance_accuracy(test.labels)
    assert result.metrics["chance_accuracy"] < result.metrics["oracle_accuracy"]


# ---- records (schema 3) ------------------------------------------------------------------------------------------

def written(result, planned=({"context_length": 16}, {"context_length": 32})):
    from tokbench.grid import Pairing, Variant
    from tokbench.outcome import Outcome, record_of

    task, spec = registry().task("random-walk"), registry().model("attn-nope")
    recipe = spec.recipe.override({"steps": 3000})  # the cap the results below report (train.max_steps)
    pairing = Pairing(Variant(task, spec, task.resolve(), spec.resolve(), recipe, evaluate=planned), 0)
    provenance = {"tokbench_version": "0", "git_commit": None, "python": "3", "torch": "2", "lightning": "2",
                  "device": "cpu", "started_at": "2026-01-01T00:00:00Z"}
    return record_of(pairing, Outcome("2026-01-01T00:00:00Z", 0.1, result=result), provenance)


def test_a_record_carries_the_protocols_fields_and_they_are_checked():
    from tokbench.harness import PairingResult
    from tokbench.results import validate

    result = PairingResult(
        metrics={"accuracy": 0.5, "chance_accuracy": 0.2, "oracle_accuracy": 0.9},
        train={"steps": 300, "max_steps": 3000, "stopped_because": "plateau", "data": "fresh"},
        budget_curve=[{"step": 100, "accuracy": 0.3}, {"step": 300, "accuracy": 0.5, "final": True}],
        evaluations=[{"overrides": {"context_length": 16}, "status": "ok", "metrics": {"accuracy": 0.4}},
                     {"overrides": {"context_length": 32}, "status": "not_applicable", "reason": "learned positions"}])
    record = written(result)
    validate(record)
    assert record["schema_version"] == 3 and record["budget_curve"][-1]["final"] is True
    assert [e["status"] for e in record["evaluations"]] == ["ok", "not_applicable"]
    broken = [
        {**record, "train": {**record["train"], "stopped_because": "bored"}},
        {**record, "budget_curve": [{"step": 10, "accuracy": 1.5}]},
        {**record, "evaluations": [{"overrides": {"context_length": 16}, "status": "ok"}]},
        {**record, "evaluations": [{"overrides": {"context_length": 16}, "status": "not_applicable",
                                    "metrics": {"accuracy": 0.1}, "reason": "x"}]},
    ]
    for bad in broken:
        with pytest.raises(ValueError):
            validate(bad)
    plain = written(PairingResult(metrics=result.metrics, train=result.train), planned=())
    older = {k: v for k, v in plain.items() if k not in ("budget_curve", "evaluations")}
    validate({**older, "schema_version": 2})  # version 2 records still load


def test_a_recipe_without_the_new_keys_keeps_its_schema_2_identity():
    import json
    from pathlib import Path

    from tokbench.results import record_files

    published = Path(__file__).parents[1] / "leaderboard" / "records" / "paper"
    record = json.loads(next(p for p in record_files(published) if json.loads(p.read_text())["params"]["train"])
                        .read_text())
    stored = record["params"]["train"]
    rebuilt = Recipe().override({k: v for k, v in stored.items() if k != "early_stop"})
    assert json.loads(json.dumps(rebuilt.identity())) == stored  # hence the same config hash
    assert "data" not in rebuilt.identity() and rebuilt.override({"data": "fresh", "batch_size": 8}).identity()[
        "data"] == "fresh"


def test_a_run_stopped_by_its_target_has_each_budget_once_then_the_final_step():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent / "fake_plugins"))
    import contract_v2

    task = contract_v2.PREVIOUS_TOKEN.create({"train_size": 256, "val_size": 64, "test_size": 128})
    spec = contract_v2.TWO_LAYER
    recipe = spec.recipe.override({"budgets": "25,50,75,100,150,200,250,300,350,400,450,500,550"})
    result = run_pairing(task, spec, spec.resolve(), recipe, seed=0, accelerator="cpu")
    assert result.train["stopped_because"] == "target" and result.train["steps"] < recipe.steps
    steps = [p["step"] for p in result.budget_curve]
    assert steps == sorted(set(steps)) and steps[-1] == result.train["steps"]
    assert [b for b in recipe.budgets if b < result.train["steps"]] == steps[:-1]
