"""Suite ladders, relative sweeps, per-model recipe tables and the budget's warm-up: planning only, no training."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from test_records import PROVENANCE
from test_suites import grid
from tokbench.errors import ParamError, UsageError
from tokbench.grid import Pairing, Rung, expand, parse_settings
from tokbench.harness import PairingResult
from tokbench.outcome import Outcome, record_of
from tokbench.params import Param
from tokbench.plugins import registry
from tokbench.results import record_files, validate
from tokbench.specs import Recipe, TaskSpec
from tokbench.suites import SuiteError, load_suite, parse_suite

PUBLISHED = Path(__file__).parents[1] / "leaderboard" / "records"

WALK = """seeds = 2
[[grid]]
tasks = ["random-walk"]
models = ["attn-nope"]
"""
LADDER = WALK + """[grid.ladder.random-walk]
K = [6, 12, 24]
context_length = [8, 16, 32]
"""
MODELS = """seeds = 1
[[grid]]
tasks = ["random-walk"]
models = ["attn-nope", "attn-paper-a", "attn-paper-b", "gru", "transformer", "uniform", "last-token", "bayes-optimal"]
"""
def line_of(text: str, fragment: str) -> int:
    """The 1-based line of the only line of ``text`` that starts with ``fragment``."""
    (number,) = [i for i, line in enumerate(text.splitlines(), 1) if line.startswith(fragment)]
    return number


def with_budget(max_steps: int, text: str) -> str:
    return text.replace("[[grid]]", f"[budget]\nmax_steps = {max_steps}\n[[grid]]", 1)


def by_model(pairings: list[Pairing]) -> dict[str, Pairing]:
    return {p.model_spec.name: p for p in pairings}


# ---- ladders -----------------------------------------------------------------------------------------------------

def test_a_ladder_expands_to_one_variant_per_rung_with_its_values():
    pairings = grid(LADDER)
    assert [(p.task_params["K"], p.task_params["context_length"], p.seed) for p in pairings] == [
        (6, 8, 0), (6, 8, 1), (12, 16, 0), (12, 16, 1), (24, 32, 0), (24, 32, 1)]
    assert [p.variant.rung for p in pairings[::2]] == [
        Rung(0, 3, {"K": 6, "context_length": 8}), Rung(1, 3, {"K": 12, "context_length": 16}),
        Rung(2, 3, {"K": 24, "context_length": 32})]
    assert len({p.config_hash for p in pairings}) == 6
    assert all(p.variant is q.variant for p, q in zip(pairings[::2], pairings[1::2]))  # seeds share their rung


def test_a_rung_is_not_part_of_the_identity():
    rung = grid(LADDER)[2]
    table = grid(WALK + "[grid.task.random-walk]\nK = 12\ncontext_length = 16\n")[0]
    assert rung.variant.rung is not None and table.variant.rung is None
    assert (rung.config_hash, rung.seed) == (table.config_hash, table.seed)


def test_the_ladder_leaves_the_tasks_other_parameters_to_the_block():
    pairings = grid(LADDER.replace("[grid.ladder", "[grid.task.random-walk]\np = 0.6\n[grid.ladder"))
    assert {p.task_params["p"] for p in pairings} == {0.6}
    assert {p.task_params["K"] for p in pairings} == {6, 12, 24}


@pytest.mark.parametrize("ladder, at, message", [
    ("K = [6, 12]\ncontext_length = [8, 16, 32]\n", "[grid.ladder.random-walk]",
     r"the ladder of 'random-walk' lists \[2, 3\] values: every parameter needs one value per rung"),
    ("K = [6]\n", "K =", r"K must list one value per rung \(at least two\), easiest first, got \[6\]"),
    ("K = 6\n", "K =", r"K must list one value per rung \(at least two\), easiest first, got 6"),
    ("K = [[6], [12]]\n", "K =", r"K must list one value per rung"),
])
def test_malformed_ladders_are_suite_errors_at_their_line(ladder, at, message):
    text = WALK + "[grid.ladder.random-walk]\n" + ladder
    with pytest.raises(SuiteError, match=rf"^s\.toml:{line_of(text, at)}: {message}"):
        parse_suite(text, "s.toml", "s")


def test_a_ladder_varies_only_declared_difficulty_parameters():
    text = WALK + "[grid.ladder.random-walk]\nK = [6, 12]\np = [0.5, 0.8]\n"
    declared = ", ".join(registry().tasks["random-walk"].difficulty)
    with pytest.raises(ParamError, match=rf"^s\.toml:{line_of(text, 'p =')}: a ladder varies only the task's "
                                         rf"declared difficulty parameters; 'random-walk' declares: {declared}$"):
        grid(text)


def test_a_key_set_by_the_ladder_and_the_task_table_is_an_error():
    text = WALK + "[grid.task.random-walk]\nK = 6\n[grid.ladder.random-walk]\nK = [6, 12]\n"
    with pytest.raises(ParamError, match=rf"^s\.toml:{line_of(text, 'K = [')}: 'K' is set both by the ladder and "
                                         "by the block's task table"):
        grid(text)


def test_a_ladder_value_out_of_range_names_its_line():
    text = WALK + "[grid.ladder.random-walk]\nK = [6, 1]\n"
    with pytest.raises(ParamError, match=rf"^s\.toml:{line_of(text, 'K =')}: K=1 is out of range"):
        grid(text)


def test_a_ladder_for_a_task_the_block_does_not_select_is_an_error():
    text = WALK + "[grid.ladder.mqar]\nnum_kv_pairs = [2, 4]\n"
    with pytest.raises(UsageError, match=rf"^s\.toml:{line_of(text, '[grid.ladder')}: \[grid\.ladder\.mqar\] names a "
                                         "task that this block does not select"):
        grid(text)
    unknown = WALK + "[grid.ladder.not-installed]\nx = [1, 2]\n"
    with pytest.raises(UsageError, match=rf"^s\.toml:{line_of(unknown, '[grid.ladder')}: unknown task 'not-installed'"):
        grid(unknown)


def test_a_pattern_block_tolerates_ladders_of_absent_and_skipped_tasks():
    text = """seeds = 1
[[grid]]
tasks = ["random-*", "deterministic-walk"]
skip_tasks = ["deterministic-walk"]
models = ["last-token"]
[grid.ladder.not-installed]
x = [1, 2]
[grid.ladder.deterministic-walk]
K = [4, 8]
[grid.ladder.random-walk]
K = [6, 12]
"""
    assert [(p.task_spec.name, p.task_params["K"]) for p in grid(text)] == [("random-walk", 6), ("random-walk", 12)]


def test_set_on_a_laddered_key_is_what_the_record_says_was_trained():
    pairings = grid(LADDER, settings=parse_settings(["task.K=9"]))
    assert [p.variant.rung for p in pairings[::2]] == [
        Rung(i, 3, {"K": 9, "context_length": n}) for i, n in enumerate((8, 16, 32))]
    result = PairingResult(metrics={"accuracy": 0.5}, train={"steps": 1}, curve={})
    record = record_of(pairings[0], Outcome("2026-01-01T00:00:00Z", 0.1, result=result), PROVENANCE)
    validate(json.loads(json.dumps(record)))
    assert record["ladder"] == {"rung": 0, "rungs": 3, "axes": {"K": 9, "context_length": 8}}
    assert record["params"]["task"]["K"] == 9


def test_a_difficulty_axis_must_be_a_declared_parameter():
    with pytest.raises(ValueError, match=r"task 'toy': difficulty names undeclared parameters \['depth'\]"):
        TaskSpec("toy", "1", "a toy", "toy:Toy", params=(Param("width", "int", 2),), difficulty=("width", "depth"))


# ---- [grid.sweep] ------------------------------------------------------------------------------------------------

def test_the_sweep_multiplies_each_models_own_lr_rounded_to_12_digits():
    reg = registry()
    assert (reg.models["attn-nope"].recipe.lr, reg.models["gru"].recipe.lr) == (0.01, 0.003)
    assert 0.01 * 0.7 != 0.007 and 0.003 * 3 != 0.009  # what the rounding is for
    pairings = by_model(grid(MODELS + "[grid.sweep]\nlr_factors = [0.7, 1.0, 3.0]\n"))
    assert pairings["attn-nope"].recipe.lr_grid == (0.007, 0.01, 0.03)
    assert pairings["gru"].recipe.lr_grid == (0.0021, 0.003, 0.009)
    for name in ("attn-paper-a", "attn-paper-b", "transformer"):
        lr = reg.models[name].recipe.lr
        assert pairings[name].recipe.lr_grid == pytest.approx((0.7 * lr, lr, 3 * lr), rel=1e-12)
    assert all(p.recipe.wd_grid == () for p in pairings.values())


def test_the_sweep_is_relative_to_the_blocks_recipe():
    text = MODELS + "[grid.train]\nlr = 0.5\n[grid.sweep]\nlr_factors = [1.0, 0.2]\n"
    assert by_model(grid(text))["attn-nope"].recipe.lr_grid == (0.5, 0.1)


def test_weight_decay_sweeps_the_recipes_that_use_weight_decay_only():
    pairings = by_model(grid(MODELS + "[grid.sweep]\nweight_decay = [0.0, 0.1]\n"))
    assert pairings["attn-paper-b"].recipe.optimizer == "ngd" and pairings["attn-paper-b"].recipe.wd_grid == ()
    trained = [p for p in pairings.values() if p.model_spec.trained and p.model_spec.name != "attn-paper-b"]
    uses = [p for p in trained if p.model_spec.recipe.weight_decay]
    assert uses and {p.recipe.optimizer for p in trained} == {"gd", "adam", "adamw"}
    assert all(p.recipe.wd_grid == (0.0, 0.1) and p.recipe.lr_grid == () for p in uses)
    assert all(p.recipe.wd_grid == () for p in trained if not p.model_spec.recipe.weight_decay)
    # a block that gives the recipe a weight decay makes it swept
    decayed = by_model(grid(MODELS + "[grid.train.attn-nope]\nweight_decay = 0.01\n"
                                     "[grid.sweep]\nweight_decay = [0.0, 0.1]\n"))
    assert decayed["attn-nope"].recipe.wd_grid == (0.0, 0.1)


def test_the_sweep_leaves_untrained_models_and_their_hashes_alone():
    plain = by_model(grid(MODELS))
    swept = by_model(grid(MODELS + "[grid.sweep]\nlr_factors = [1.0, 3.0]\nweight_decay = [0.0, 0.1]\n"))
    untrained = [name for name, p in plain.items() if not p.model_spec.trained]
    assert sorted(untrained) == ["bayes-optimal", "last-token", "uniform"]
    for name in untrained:
        assert swept[name].recipe == plain[name].recipe and swept[name].config_hash == plain[name].config_hash
    assert swept["attn-nope"].config_hash != plain["attn-nope"].config_hash


SWEPT = MODELS + "[grid.sweep]\nlr_factors = [1.0, 3.0]\nweight_decay = [0.0, 0.1]\n"


# --set wins over the suite (grid.py's precedence), so a relative sweep is taken around the recipe it leaves.
def test_set_train_lr_moves_the_relative_sweep():
    explicit = by_model(grid(SWEPT, settings=parse_settings(["train.lr_grid=0.1,0.2"])))["attn-nope"]
    assert explicit.recipe.lr_grid == (0.1, 0.2)
    moved = by_model(grid(SWEPT, settings=parse_settings(["train.lr=0.5"])))["attn-nope"]
    assert [candidate.lr for candidate in moved.recipe.candidates()] == [0.5, 1.5]  # attn-nope: no weight decay


def test_set_train_optimizer_and_weight_decay_decide_whether_weight_decay_is_swept():
    to_adam = grid(SWEPT, models=["attn-paper-b"], settings=parse_settings(["train.optimizer=adam"]))
    assert [p.recipe.wd_grid for p in to_adam] == [()]  # its recipe has no weight decay
    decayed = parse_settings(["train.optimizer=adam", "train.weight_decay=0.01"])
    assert [p.recipe.wd_grid for p in grid(SWEPT, models=["attn-paper-b"], settings=decayed)] == [(0.0, 0.1)]
    to_ngd = grid(SWEPT, models=["transformer"],
                  settings=parse_settings(["train.optimizer=ngd", "train.weight_decay=0"]))
    assert [p.recipe.wd_grid for p in to_ngd] == [()]


@pytest.mark.parametrize("sweep, message", [
    ("lr_factors = []", r"lr_factors must be a non-empty list of numbers > 0, got \[\]"),
    ("lr_factors = [1.0, -3.0]", r"lr_factors must be a non-empty list of numbers > 0"),
    ("lr_factors = [0.0]", r"lr_factors must be a non-empty list of numbers > 0"),
    ("lr_factors = [true]", r"lr_factors must be a non-empty list of numbers > 0, got \[True\]"),
    ("lr_factors = [nan]", r"lr_factors must be a non-empty list of numbers > 0, got \[nan\]"),
    ("lr_factors = 3.0", r"lr_factors must be a non-empty list of numbers > 0, got 3\.0"),
    ("weight_decay = [-0.1]", r"weight_decay must be a non-empty list of numbers >= 0"),
    ("weight_decay = [inf]", r"weight_decay must be a non-empty list of numbers >= 0"),
    ("lr = [1.0]", r"unknown key 'lr' in \[grid\.sweep\]"),
])
def test_bad_sweep_values_are_suite_errors_at_their_line(sweep, message):
    text = MODELS + "[grid.sweep]\n" + sweep + "\n"
    with pytest.raises(SuiteError, match=rf"^s\.toml:{line_of(text, sweep)}: {message}"):
        parse_suite(text, "s.toml", "s")


def test_a_models_own_sweep_replaces_the_blocks_keys_for_the_models_it_names_only():
    text = (SWEPT + "[grid.sweep.model.gru]\nlr_factors = [0.25, 1.0, 4.0]\n"
            "[grid.sweep.model.\"trans*\"]\nlr_factors = [1.0]\n")
    pairings, plain = by_model(grid(text)), by_model(grid(SWEPT))
    assert pairings["gru"].recipe.lr_grid == (0.00075, 0.003, 0.012)
    assert pairings["attn-nope"].recipe == plain["attn-nope"].recipe  # the block's sweep
    lr = registry().models["transformer"].recipe.lr
    assert pairings["transformer"].recipe.lr_grid == (lr,) and pairings["transformer"].recipe.wd_grid == (0.0, 0.1)


@pytest.mark.parametrize("table, message", [
    ("[grid.sweep.model.gru]\nlr = [1.0]", r"unknown key 'lr' in \[grid\.sweep\.model\.gru\]"),
    ("[grid.sweep.model.gru]\nlr_factors = []", r"lr_factors must be a non-empty list of numbers > 0, got \[\]"),
])
def test_bad_model_sweeps_are_suite_errors_at_their_line(table, message):
    text = SWEPT + table + "\n"
    with pytest.raises(SuiteError, match=rf"^s\.toml:{line_of(text, table.splitlines()[1])}: {message}"):
        parse_suite(text, "s.toml", "s")


@pytest.mark.parametrize("name, message", [("lstm", "names a model that this block does not select"),
                                           ("\"ls*\"", "matches no model of this block")])
def test_a_model_sweep_must_name_a_model_of_the_block(name, message):
    text = SWEPT + f"[grid.sweep.model.{name}]\nlr_factors = [1.0]\n"
    with pytest.raises(UsageError, match=rf"^s\.toml:{line_of(text, '[grid.sweep.model.')}: \[grid\.sweep\.model\."):
        grid(text)
    with pytest.raises(UsageError, match=message):
        grid(text)


# ---- [grid.train.NAME] and the budget ----------------------------------------------------------------------------

def test_a_model_table_overrides_only_the_models_it_names_and_wins_over_the_blocks():
    text = MODELS + """[grid.train]
steps = 5
batch_size = 4
[grid.train.attn-nope]
steps = 7
[grid.train."attn-paper-*"]
batch_size = 8
"""
    recipes = {name: (p.recipe.steps, p.recipe.batch_size) for name, p in by_model(grid(text)).items()
               if p.model_spec.trained}
    assert recipes == {"attn-nope": (7, 4), "attn-paper-a": (5, 8), "attn-paper-b": (5, 8), "gru": (5, 4),
                       "transformer": (5, 4)}


@pytest.mark.parametrize("table, message", [
    ("attn-nop", r"unknown model 'attn-nop' \(did you mean 'attn-nope'"),
    ("gru", r"\[grid\.train\.gru\] names a model that this block does not select"),
    ('"mamba*"', r"\[grid\.train\.mamba\*\] matches no model of this block"),
])
def test_a_model_table_must_name_a_model_of_the_block(table, message):
    text = WALK + f"[grid.train.{table}]\nsteps = 3\n"
    with pytest.raises(UsageError, match=rf"^s\.toml:{line_of(text, '[grid.train')}: {message}"):
        grid(text)


def test_a_pattern_block_tolerates_tables_of_absent_models_and_checks_their_keys():
    text = """seeds = 1
[[grid]]
tasks = ["random-walk"]
models = ["attn-nope", "not-installed*"]
[grid.train.not-installed-model]
steps = 3
[grid.train.attn-nope]
steps = 4
"""
    assert [p.recipe.steps for p in grid(text)] == [4]
    bad = WALK + "[grid.train.attn-nope]\nstep = 3\n"
    with pytest.raises(ParamError, match=rf"^s\.toml:{line_of(bad, 'step =')}: the training recipe has no parameter "
                                         "'step'"):
        grid(bad)


def test_the_budget_keeps_the_schedules_shape():
    default = registry().models["transformer"].recipe
    assert (default.steps, default.warmup_steps) == (1000, 50)
    capped = by_model(grid(with_budget(100, MODELS)))
    assert (capped["transformer"].recipe.steps, capped["transformer"].recipe.warmup_steps) == (100, 5)
    assert capped["transformer"].recipe.schedule == default.schedule
    explicit = by_model(grid(with_budget(100, MODELS) + "[grid.train.transformer]\nwarmup_steps = 20\n"))
    assert (explicit["transformer"].recipe.steps, explicit["transformer"].recipe.warmup_steps) == (100, 20)
    uncapped = by_model(grid(with_budget(1000, MODELS)))
    assert (uncapped["transformer"].recipe.steps, uncapped["transformer"].recipe.warmup_steps) == (1000, 50)


def test_explicit_steps_get_the_same_recipe_with_or_without_a_budget():
    # explicit steps are not capped (docs/suites.md), so nothing of the cap, its shrunk warm-up included, remains
    def recipe(text: str, **kwargs) -> Recipe:
        (pairing,) = grid(text, models=["transformer"], **kwargs)
        return pairing.recipe

    table = MODELS + "[grid.train.transformer]\nsteps = 1000\n"
    assert recipe(with_budget(100, table)) == recipe(table)
    steps = parse_settings(["train.steps=1000"])
    assert recipe(with_budget(100, MODELS), settings=steps) == recipe(MODELS, settings=steps)


# ---- the built-in suites keep their hashes -----------------------------------------------------------------------

def test_every_published_paper_record_is_still_planned_by_the_paper_suite():
    records = [json.loads(path.read_text()) for path in record_files(PUBLISHED / "paper")]
    assert records
    variants = {id(p.variant): p.variant for p in expand(load_suite("paper"), registry())}.values()
    seeds = range(max(r["seed"] for r in records) + 1)  # adaptive seeds go beyond the suite's
    planned = {variant.hashes(seed) for variant in variants for seed in seeds}
    assert [r["config_hash"] for r in records if r["config_hash"] not in planned] == []
    assert all(variant.rung is None for variant in variants)


def test_a_task_table_sets_recipe_keys_for_one_task_and_a_model_table_wins_over_it():
    text = """seeds = 1
[[grid]]
tasks = ["random-walk", "lag-walk"]
models = ["attn-nope", "gru"]
[grid.train]
steps = 50
[grid.train.task.lag-walk]
steps = 70
lr = 0.2
[grid.train.gru]
lr = 0.5
"""
    recipes = {(p.task_spec.name, p.model_spec.name): p.recipe for p in grid(text)}
    assert recipes["random-walk", "attn-nope"].steps == 50 and recipes["lag-walk", "attn-nope"].steps == 70
    assert recipes["lag-walk", "attn-nope"].lr == 0.2 and recipes["lag-walk", "gru"].lr == 0.5


@pytest.mark.parametrize("table, message", [
    ("[grid.train.task.majority]\nsteps = 70\n",
     r"s.toml:\d+: \[grid.train.task.majority\] names no task of this block"),
    ("[grid.train.task]\nlag-walk = 3\n", r"s.toml:\d+: expected a table \[grid.train.task.lag-walk\]"),
])
def test_a_task_table_must_name_a_task_of_the_block(table, message):
    with pytest.raises(UsageError, match=message):
        grid(MODELS.replace('"random-walk"', '"random-walk", "lag-walk"') + table)
