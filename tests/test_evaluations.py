"""Extra evaluation settings (issue 23's core): a trained model also evaluated at other values of a task's
declared evaluation axes, from a suite's [grid.evaluate] or --evaluate, recorded per setting."""
from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from tokbench.cli import main
from tokbench.errors import ParamError, UsageError
from tokbench.grid import Pairing, expand, parse_evaluations
from tokbench.harness import evaluate_setting, oracle_accuracy, run_pairing
from tokbench.isolation import execute
from tokbench.plugins import Registry, registry
from tokbench.results import canonical_json, config_hash, validate
from tokbench.seeding import derive_seed
from tokbench.suites import SuiteError, parse_suite

FIXED = "it learns one embedding per position up to the training length"
WALK = """seeds = 1
[[grid]]
tasks = ["random-walk", "majority"]
models = ["attn-nope", "fixed-nope"]
[grid.task.random-walk]
context_length = 8
"""


def fake_registry() -> Registry:
    """The built-ins, with random-walk declaring context_length an evaluation axis and a fixed-length model."""
    base = registry()
    walk = replace(base.tasks["random-walk"], evaluation_axes=("context_length",))
    majority = replace(base.tasks["majority"], evaluation_axes=(), evaluation_note="it is only defined at one length")
    fixed = replace(base.models["attn-nope"], name="fixed-nope", fixed_length=FIXED)
    return Registry({**base.tasks, "random-walk": walk, "majority": majority},
                    {**base.models, "fixed-nope": fixed}, base.plugins)


def grid(text: str, **kwargs) -> list[Pairing]:
    return expand(parse_suite(text, "s.toml", "s"), fake_registry(), **kwargs)


def of(pairings: list[Pairing], task: str, model: str) -> Pairing:
    (pairing,) = [p for p in pairings if (p.task_spec.name, p.model_spec.name) == (task, model)]
    return pairing


# ---- planning ----------------------------------------------------------------------------------------------------

def test_a_suite_evaluates_at_multiples_and_plain_values_in_declared_order():
    pairings = grid(WALK + '[grid.evaluate]\ncontext_length = ["x2", 32]\n')
    walk = of(pairings, "random-walk", "attn-nope")
    assert walk.variant.evaluate == ({"context_length": 16}, {"context_length": 32})
    assert walk.identity["params"]["evaluate"] == [{"context_length": 16}, {"context_length": 32}]
    assert walk.config_hash == config_hash(walk.identity)  # part of the identity
    plain = of(grid(WALK), "random-walk", "attn-nope")
    assert "evaluate" not in plain.identity["params"] and plain.config_hash != walk.config_hash
    majority = of(pairings, "majority", "attn-nope")  # not an axis of majority: not applicable at run time
    assert majority.variant.evaluate == ({"context_length": 2 * majority.task_params["context_length"]},
                                         {"context_length": 32})


@pytest.mark.parametrize("table, message", [
    ('context_length = ["y2"]', 'expected an integer or a multiple of the training value like "x2"'),
    ("context_length = []", "must list the values to evaluate at"),
    ("context_length = 2", "must list the values to evaluate at"),
])
def test_malformed_evaluations_are_suite_errors_at_their_line(table, message):
    with pytest.raises(SuiteError, match=f"^s.toml:8: .*{message}"):
        grid(WALK + "[grid.evaluate]\n" + table + "\n")


def test_a_pairing_two_blocks_plan_trains_once_at_every_setting_either_asks_for():
    """A baseline in two rankings, one of them with a length table: one training, one record, evaluated at the
    settings of both blocks in the order first asked; the other pairings of each block keep their own."""
    first = WALK.replace('models = ["attn-nope", "fixed-nope"]', 'models = ["attn-nope", "last-token"]')
    second = ('[[grid]]\ntasks = ["random-walk"]\nmodels = ["last-token", "fixed-nope"]\nseeds = [0, 1]\n'
              '[grid.task.random-walk]\ncontext_length = 8\n[grid.evaluate]\ncontext_length = ["x2", 32]\n')
    pairings = grid(first + '[grid.evaluate]\ncontext_length = [32]\n' + second)
    baseline = [p for p in pairings if (p.task_spec.name, p.model_spec.name) == ("random-walk", "last-token")]
    assert [p.seed for p in baseline] == [0, 1]  # the first block's seed 0 and the second's seed 1
    assert [p.variant.evaluate for p in baseline] == [({"context_length": 32}, {"context_length": 16})] * 2
    assert len({p.config_hash for p in pairings}) == len(pairings)
    assert of(pairings, "random-walk", "attn-nope").variant.evaluate == ({"context_length": 32},)
    assert of([p for p in pairings if p.seed == 0], "random-walk", "fixed-nope").variant.evaluate == (
        {"context_length": 16}, {"context_length": 32})
    # where one block asks for no evaluation, the pairing is the other block's, the same record
    plain = grid(first + second)
    (alone,) = [p for p in grid(second) if p.model_spec.name == "last-token" and p.seed == 0]
    assert of([p for p in plain if p.seed == 0], "random-walk", "last-token").config_hash == alone.config_hash


def test_an_axis_no_task_declares_and_an_invalid_value_name_their_line():
    with pytest.raises(ParamError, match="^s.toml:8: no task here declares 'K' among its evaluation axes"):
        grid(WALK + "[grid.evaluate]\nK = [12]\n")
    with pytest.raises(ParamError, match="^s.toml:8: .*context_length=0 is out of range"):
        grid(WALK + "[grid.evaluate]\ncontext_length = [0]\n")



def test_a_block_of_tasks_that_say_why_they_take_no_evaluation_plans_it_as_not_applicable():
    block = ('seeds = 1\n[[grid]]\ntasks = ["sparse-selection"]\nmodels = ["attn-nope"]\n'
             '[grid.evaluate]\ncontext_length = ["x2"]\n')
    (pairing,) = grid(block)
    assert pairing.variant.evaluate == ({"context_length": "x2"},)
    assert "position tokens" in pairing.task_spec.evaluation_note  # the reason its records give


def test_the_command_line_replaces_the_suites_evaluations():
    assert parse_evaluations(["context_length=x2,x4", "context_length=64"]) == {"context_length": ("x2", "x4", 64)}
    for bad in ("context_length", "context_length=", "context_length=x0"):
        with pytest.raises(UsageError, match="--evaluate"):
            parse_evaluations([bad])
    pairings = grid(WALK + '[grid.evaluate]\ncontext_length = ["x2"]\n', evaluate={"context_length": ("x4",)})
    assert of(pairings, "random-walk", "attn-nope").variant.evaluate == ({"context_length": 32},)
    with pytest.raises(ParamError, match="^--evaluate K: no task here declares 'K'"):
        grid(WALK, evaluate={"K": (12,)})


def test_a_dry_run_plans_and_prints_the_evaluations(tmp_path, monkeypatch, capsys):
    import tokbench.commands.run as run_command

    monkeypatch.setattr(run_command, "loaded_registry", fake_registry)
    suite = tmp_path / "s.toml"
    suite.write_text(WALK)
    code = main(["run", "--suite", str(suite), "--evaluate", "context_length=x2,x4", "--dry-run", "--out",
                 str(tmp_path / "runs")])
    out = capsys.readouterr().out
    assert code == 0
    assert ("evaluate  random-walk: context_length=16, context_length=32; not applicable for fixed-nope "
            "(fixed length)") in out
    T = fake_registry().task("majority").resolve()["context_length"]
    assert f"evaluate  majority: context_length={2 * T}, context_length={4 * T}; not applicable: it is only" in out


# ---- running -----------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def trained():
    reg = fake_registry()
    task = reg.task("random-walk").create({"K": 5, "context_length": 8, "train_size": 64, "val_size": 64,
                                           "test_size": 64})
    spec = reg.model("attn-nope")
    return reg, task, run_pairing(task, spec, spec.resolve({}), spec.recipe.override({"steps": 30}), 0,
                                  accelerator="cpu", evaluate_at=({"context_length": 16}, {"context_length": 32}))


def test_each_setting_is_evaluated_on_its_own_test_split_with_its_own_optimum(trained):
    reg, task, result = trained
    assert [e["overrides"] for e in result.evaluations] == [{"context_length": 16}, {"context_length": 32}]
    assert [e["status"] for e in result.evaluations] == ["ok", "ok"]
    for entry in result.evaluations:
        setting = reg.task("random-walk").create({**task.params, **entry["overrides"]})
        generator = torch.Generator().manual_seed(derive_seed(0, "data:test:" + canonical_json(entry["overrides"])))
        split = setting.generate(64, generator)
        assert split.tokens.shape[1] == entry["overrides"]["context_length"]
        metrics = entry["metrics"]
        assert metrics["oracle_accuracy"] == oracle_accuracy(setting, split)
        assert metrics["bayes_accuracy"] == setting.bayes_accuracy()
        assert 0.0 <= metrics["chance_accuracy"] <= metrics["oracle_accuracy"] <= 1.0
        assert "parent_attention" in metrics  # the attention diagnostics of that split


def test_a_fixed_length_model_or_a_task_without_the_axis_is_not_applicable_never_a_number():
    reg = fake_registry()
    walk = reg.task("random-walk").create({"context_length": 8, "test_size": 16})
    fixed = reg.model("fixed-nope")
    model = fixed.build(fixed.resolve({}), walk)
    entry = evaluate_setting(model, walk, fixed, {"context_length": 16}, 0, {})
    assert entry == {"overrides": {"context_length": 16}, "status": "not_applicable", "reason": FIXED}
    assert evaluate_setting(model, walk, fixed, {"context_length": 8}, 0, {})["status"] == "ok"  # the same length
    majority = reg.task("majority").create({})
    entry = evaluate_setting(model, majority, fixed, {"context_length": "x2"}, 0, {})
    assert entry == {"overrides": {"context_length": "x2"}, "status": "not_applicable",
                     "reason": "it is only defined at one length"}


def test_the_record_carries_the_evaluations(monkeypatch):
    pairing = of(grid(WALK.replace('"majority", ', "") + '[grid.evaluate]\ncontext_length = ["x2"]\n'
                      + '[grid.train]\nsteps = 3\n'), "random-walk", "fixed-nope")
    provenance = {"tokbench_version": "0", "git_commit": None, "python": "3", "torch": "2", "lightning": "2",
                  "device": "cpu", "started_at": "2026-01-01T00:00:00Z"}
    record = execute(pairing, provenance)
    validate(record)
    assert record["status"] == "ok", record["error"]
    assert record["evaluations"] == [{"overrides": {"context_length": 16}, "status": "not_applicable",
                                      "reason": FIXED}]
    assert record["params"]["evaluate"] == [{"context_length": 16}]


def test_a_length_limit_set_by_the_models_parameters_is_not_applicable_with_its_reason():
    """`transformer` with learned positions declares no fixed_length (its default, RoPE, extends); the limit shows
    in the forward pass as NotApplicable, which must give n/a with the model's reason, not a failed pairing."""
    reg = registry()
    walk = replace(reg.task("random-walk"), evaluation_axes=("context_length",)).create(
        {"context_length": 8, "test_size": 16})
    spec = reg.model("transformer")
    assert not spec.fixed_length
    params = spec.resolve({"positional": "learned"})
    model = spec.build(params, walk)
    entry = evaluate_setting(model, walk, spec, {"context_length": 16}, 0, params)
    assert entry["status"] == "not_applicable" and "position" in entry["reason"]
    assert "metrics" not in entry


def test_show_prints_the_evaluation_axes_and_a_fixed_length(monkeypatch, capsys):
    import tokbench.commands.listing as listing

    monkeypatch.setattr(listing, "loaded_registry", lambda *args, **kwargs: fake_registry())
    assert main(["show", "task", "random-walk"]) == 0
    assert "evaluation axes (what [grid.evaluate] may change): context_length" in capsys.readouterr().out
    assert main(["show", "model", "fixed-nope"]) == 0
    assert f"fixed length (not evaluated at other context lengths): {FIXED}" in capsys.readouterr().out


def test_the_oracle_reads_the_answer_of_the_longer_task():
    """causal-graph's Bayes predictor depends on its graph, one parent per position: at twice the length the oracle
    must be that task's (the training task's failed the whole pairing: an index past its 19 parents)."""
    reg = registry()
    graph = reg.task("causal-graph").create({"states": 4, "context_length": 10, "test_size": 64})
    spec = reg.model("bayes-optimal")
    params = spec.resolve()
    entry = evaluate_setting(spec.build(params, graph), graph, spec, {"context_length": 20}, 0, params)
    assert entry["status"] == "ok", entry
    assert entry["metrics"]["accuracy"] == entry["metrics"]["oracle_accuracy"]
