"""Suites: TOML parsing with file:line errors, the built-in suites, grid expansion, --set routing, shards."""
from __future__ import annotations

import pytest

from run_support import write_suite
from tokbench.errors import ParamError, UnknownNameError, UsageError
from tokbench.grid import Pairing, expand, parse_settings, parse_shard, shard
from tokbench.plugins import registry
from tokbench.suites import SuiteError, builtin_suites, key_lines, load_suite, parse_suite

BASE = """seeds = 2
[[grid]]
tasks = ["random-walk"]
models = ["attn-paper-a", "attn-nope"]
"""


def grid(text: str, **kwargs) -> list[Pairing]:
    """The pairings of a suite given as TOML text."""
    return expand(parse_suite(text, "s.toml", "s"), registry(), **kwargs)


# ---- parsing ---------------------------------------------------------------------------------------------------

def test_key_lines_index_arrays_of_tables_and_dotted_keys():
    text = '[[grid]]\ntasks = "*"\n\n[[grid]]\nmodels = ["a"]\n[grid.task."random-walk"]\np = 0.5\ntrain.steps = 3\n'
    lines = key_lines(text)
    assert lines[("grid", 0)] == 1 and lines[("grid", 0, "tasks")] == 2
    assert lines[("grid", 1, "models")] == 5
    assert lines[("grid", 1, "task", "random-walk", "p")] == 7
    assert lines[("grid", 1, "task", "random-walk", "train", "steps")] == 8


@pytest.mark.parametrize("text, line, key", [
    ("seed = 3\n" + BASE, 1, "seed"),
    (BASE + "modles = ['x']\n", 5, "modles"),
    (BASE + "[budget]\nmax_step = 3\n", 6, "max_step"),
])
def test_unknown_keys_are_rejected_with_name_and_line(text, line, key):
    with pytest.raises(SuiteError, match=rf"^s\.toml:{line}: unknown key '{key}'"):
        parse_suite(text, "s.toml", "s")


def test_unknown_block_key_suggests_the_right_one():
    with pytest.raises(SuiteError, match=r"did you mean 'models'"):
        parse_suite(BASE + "modles = ['x']\n", "s.toml", "s")


def test_unknown_parameter_in_a_block_names_key_and_line():
    text = BASE + "[grid.task.random-walk]\nK = 6\npp = 0.5\n"
    with pytest.raises(ParamError, match=r"^s\.toml:7: task 'random-walk' has no parameter 'pp'.*did you mean 'p'"):
        grid(text)


def test_bad_parameter_value_names_its_line():
    with pytest.raises(ParamError, match=r"^s\.toml:6: p=2\.0 is out of range"):
        grid(BASE + "[grid.task.random-walk]\np = 2.0\n")


def test_bad_recipe_key_names_its_line():
    with pytest.raises(ParamError, match=r"^s\.toml:6: the training recipe has no parameter 'step'"):
        grid(BASE + "[grid.train]\nstep = 3\n")


@pytest.mark.parametrize("seeds", ["0", "[1, 1]", "[-1]", "'x'"])
def test_bad_seeds(seeds):
    with pytest.raises(SuiteError, match=r"^s\.toml:1: seeds must be"):
        parse_suite(f"seeds = {seeds}\n" + BASE.split("\n", 1)[1], "s.toml", "s")


def test_invalid_toml_and_missing_parts():
    with pytest.raises(SuiteError, match=r"s\.toml: invalid TOML"):
        parse_suite("seeds = \n", "s.toml", "s")
    with pytest.raises(SuiteError, match="at least one"):
        parse_suite("seeds = 1\n", "s.toml", "s")
    with pytest.raises(SuiteError, match=r"s\.toml:1: \[\[grid\]\] block 1 has no seeds"):
        parse_suite("[[grid]]\ntasks='*'\nmodels='*'\n", "s.toml", "s")


def test_unknown_suite_name_and_missing_file(tmp_path):
    with pytest.raises(UnknownNameError, match=r"unknown suite 'defualt' \(did you mean 'default'\?\)"):
        load_suite("defualt")
    with pytest.raises(SuiteError, match="does not exist"):
        load_suite(str(tmp_path / "nope.toml"))


# ---- the built-in suites ---------------------------------------------------------------------------------------

def test_builtin_suites_are_packaged():
    assert {"default", "paper"} <= set(builtin_suites())


def test_survey_suite_is_every_task_by_every_model_with_three_seeds():
    reg = registry()
    pairings = expand(load_suite("survey"), reg)
    seen = {(p.task_spec.name, p.model_spec.name) for p in pairings}
    assert seen == {(t, m) for t in reg.tasks for m in reg.models}
    seeds = {}
    for p in pairings:
        seeds.setdefault((p.task_spec.name, p.model_spec.name), set()).add(p.seed)
    assert all(len(s) >= 3 for s in seeds.values())
    budget = load_suite("survey").max_steps
    assert budget and all(p.recipe.steps <= budget for p in pairings)
    assert {p.recipe.steps for p in pairings if p.model_spec.name == "attn-paper-b"} == {budget}  # 4000 capped


def test_paper_suite_holds_the_papers_settings():
    pairings = expand(load_suite("paper"), registry())
    paper_a = [p for p in pairings if p.model_spec.name == "attn-paper-a"]
    walks = [p for p in paper_a if p.task_spec.name == "random-walk"]
    assert all(p.task_params["train_size"] == p.task_params["test_size"] == 1000 for p in walks)
    assert {p.task_params["p"] for p in walks if p.task_params["K"] == 6} == {0.5, 0.8}
    assert {(p.task_params["K"], p.task_params["context_length"]) for p in walks} == {(6, 96), (20, 100)}

    pitfall = [p for p in paper_a if p.task_spec.name == "deterministic-walk" and p.model_params["init"] == "zero"]
    exact = [p for p in pitfall if p.model_params["dtype"] == "float64" and p.model_params["positions"] == "onehot"]
    assert {(p.task_params["K"], p.task_params["laps"], p.recipe.steps) for p in exact} == {
        (6, 16, 50), (6, 16, 1000), (20, 5, 50)}
    assert {(p.model_params["dtype"], p.model_params["positions"]) for p in pitfall} == {
        ("float64", "onehot"), ("float32", "onehot"), ("float64", "sinusoidal")}
    assert all(p.recipe.optimizer == "gd" and p.recipe.lr == 1.0 for p in exact)

    scc = [p for p in pairings if p.task_spec.name == "scc-implicit-bias"]
    shapes = {p.task_params["variant"]: (p.task_params["n"], p.task_params["context_length"], p.task_params["K"])
              for p in scc}
    assert shapes == {"acyclic": (4, 6, 8), "cyclic": (6, 4, 6)}
    assert all(p.model_spec.name == "attn-paper-b" and p.model_params["d"] == 8 for p in scc)
    assert all((p.recipe.optimizer, p.recipe.lr, p.recipe.steps) == ("ngd", 0.01, 4000) for p in scc)
    assert len([p for p in scc if p.task_params["variant"] == "cyclic"]) == 10  # [B]'s 10 trials


# ---- expansion -------------------------------------------------------------------------------------------------

def test_expansion_crosses_tasks_models_and_seeds():
    pairings = grid(BASE)
    assert [(p.model_spec.name, p.seed) for p in pairings] == [
        ("attn-paper-a", 0), ("attn-paper-a", 1), ("attn-nope", 0), ("attn-nope", 1)]
    assert len({p.config_hash for p in pairings}) == 4


def test_skip_models_takes_members_out_of_a_block_and_tolerates_absent_names():
    text = """seeds = 1
[[grid]]
tasks = ["random-walk"]
models = "*"
skip_models = ["attn-*", "not-installed-model"]
[[grid]]
tasks = ["random-walk"]
models = ["attn-rope*", "no-such-family*"]
[grid.train]
steps = 3
"""
    pairings = expand(parse_suite(text, "skip.toml", "skip"), registry())
    first = {p.model_spec.name for p in pairings if p.recipe.steps != 3}
    assert first == {m for m in registry().models if not m.startswith("attn-")}
    assert {p.model_spec.name for p in pairings if p.recipe.steps == 3} == {"attn-rope", "attn-rope-zeroinit"}


def test_default_suite_takes_in_a_plugins_model(cli, plugin_site, tmp_path):
    env = plugin_site(v2="contract_v2")
    result = cli("run", "--dry-run", "--model", "two-layer-attention", "--task", "random-walk", env=env)
    assert result.returncode == 0 and "two-layer-attention" in result.stdout, result.stderr


def test_wildcards_patterns_and_star_tables():
    text = """seeds = 1
[[grid]]
tasks = "*"
models = ["attn-*"]
[grid.task."*"]
train_size = 64
p = 0.9
[grid.task.random-walk]
train_size = 32
[grid.task.not-installed]
x = 1
"""
    pairings = grid(text)
    assert {p.model_spec.name for p in pairings} == {m for m in registry().models if m.startswith("attn-")}
    sizes = {p.task_spec.name: p.task_params.get("train_size") for p in pairings}
    assert sizes["random-walk"] == 32 and sizes["deterministic-walk"] == 64  # the named table wins over "*"
    assert all(p.task_params.get("p", 0.9) == 0.9 for p in pairings)  # "*" reaches only tasks that declare p


def test_explicit_unknown_names_fail_with_their_line():
    with pytest.raises(UsageError, match=r"^s\.toml:4: unknown model 'attn-nop' \(did you mean 'attn-nope'"):
        grid(BASE.replace('"attn-nope"', '"attn-nop"'))
    with pytest.raises(UsageError, match=r"^s\.toml:5: unknown task 'not-installed'"):
        grid(BASE + "[grid.task.not-installed]\nx = 1\n")
    with pytest.raises(UsageError, match="names a task that this block does not select"):
        grid(BASE + "[grid.task.deterministic-walk]\nlaps = 2\n")


def test_budget_caps_default_recipes_but_not_explicit_steps():
    budget = BASE.replace("[[grid]]", "[budget]\nmax_steps = 20\n[[grid]]", 1)
    capped = grid(budget)
    assert {p.model_spec.name: p.recipe.steps for p in capped} == {"attn-paper-a": 20, "attn-nope": 20}
    explicit = grid(budget + "[grid.train]\nsteps = 70\n")
    assert {p.recipe.steps for p in explicit} == {70}


def test_filters_and_seed_override():
    pairings = grid(BASE, models=["attn-nope"], seeds=3)
    assert [(p.model_spec.name, p.seed) for p in pairings] == [("attn-nope", 0), ("attn-nope", 1), ("attn-nope", 2)]
    with pytest.raises(UnknownNameError, match="unknown model 'nope'"):
        grid(BASE, models=["nope"])
    with pytest.raises(UsageError, match="no pairing of s.toml matches --task deterministic-walk"):
        grid(BASE, tasks=["deterministic-walk"])


def test_overlapping_blocks_give_each_pairing_once():
    assert len(grid(BASE + BASE.split("\n", 1)[1])) == 4


# ---- --set routing ---------------------------------------------------------------------------------------------

def test_bare_keys_reach_every_namespace_that_declares_them():
    pairings = grid(BASE, settings=parse_settings(["p=0.7", "init=zero", "steps=4"]))
    assert all(p.task_params["p"] == 0.7 and p.recipe.steps == 4 for p in pairings)
    assert all(p.model_params["init"] == "zero" for p in pairings)  # both models declare init


def test_prefixed_keys_reach_only_their_namespace():
    pairings = grid(BASE, settings=parse_settings(["model.dtype=float32", "train.lr=0.5"]))
    paper = [p for p in pairings if p.model_spec.name == "attn-paper-a"]
    assert all(p.model_params["dtype"] == "float32" for p in paper)
    assert all("dtype" not in p.model_params for p in pairings if p.model_spec.name == "attn-nope")
    assert {p.recipe.lr for p in pairings} == {0.5}


def test_set_overrides_the_suite():
    pairings = grid(BASE + "[grid.task.random-walk]\np = 0.6\n", settings=parse_settings(["p=0.9"]))
    assert {p.task_params["p"] for p in pairings} == {0.9}


@pytest.mark.parametrize("item, message", [
    ("q=1", r"--set q=1: no parameter 'q' in the grid's tasks, models or recipe"),
    ("task.dtype=float32", r"--set task.dtype=float32: no parameter 'dtype' in the grid's tasks"),
    ("train.step=3", r"--set train.step: the training recipe has no parameter 'step' \(did you mean 'steps'"),
    ("pp=0.5", r"did you mean 'p'"),
    ("p=x", r"p='x' is not a valid float"),
    ("noequals", r"--set expects key=value"),
])
def test_set_errors(item, message):
    with pytest.raises(ParamError, match=message):
        grid(BASE, settings=parse_settings([item]))


# ---- shards ----------------------------------------------------------------------------------------------------

def test_shards_partition_the_grid_whatever_the_order():
    pairings = expand(load_suite("default"), registry())
    shards = [shard(pairings, i, 3) for i in range(3)]
    hashes = [{p.config_hash for p in s} for s in shards]
    assert sum(map(len, hashes)) == len(pairings) == len(set().union(*hashes))
    cells = [{p.variant.hashes(0) for p in s} for s in shards]
    assert max(map(len, cells)) - min(map(len, cells)) <= 1 and not cells[0] & cells[1]  # whole cells, balanced
    assert {p.config_hash for p in shard(list(reversed(pairings)), 1, 3)} == hashes[1]


@pytest.mark.parametrize("text", ["3/3", "1", "a/b", "-1/2", "0/0"])
def test_bad_shard(text):
    with pytest.raises(UsageError, match="--shard expects i/n"):
        parse_shard(text)


def test_suite_file_round_trip(tmp_path):
    suite = load_suite(str(write_suite(tmp_path)))
    assert suite.name == "tiny" and len(suite.blocks) == 1 and tuple(suite.blocks[0].seeds) == (0, 1)
