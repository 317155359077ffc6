"""The canonical tokbench suite: its plan, and a narrowed run that gives the same records whole, sharded or on Ray."""
from __future__ import annotations

import re
from fnmatch import fnmatchcase
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from tokbench.cli import main
from tokbench.plugins import registry
from tokbench.results import load_records, record_schema
from tokbench.suites import load_suite

# Two families (lag-walk is in both blocks), three models (one trained, two baselines) at a few steps and small
# splits: the suite's ladders, and adaptive seeding in shards, cheaply. The suite itself runs 3 fixed seeds; here seeds 0-1 first, and a target
# (+-0.02) out of reach at 64 test sequences, so adaptive seeding adds a third seed to every cell with a spread.
NARROW = ["--suite", "tokbench", "--task", "lag-walk", "majority", "--model", "transformer", "last-token", "uniform",
          "--seeds", "2", "--target-ci", "0.02", "--max-seeds", "3", "--set", "train.steps=4", "--set", "train_size=64",
          "--set", "val_size=32", "--set", "test_size=64", "-q"]
LADDER_LINE = re.compile(r"^ladder  (\S+): (.+)  \((\d+) rungs x (\d+) models\)$")
Records = dict[str, dict[str, Any]]


def run(*args: str) -> None:
    assert main(["run", *NARROW, *args]) == 0


def records_of(*folders: Path) -> Records:
    merged: Records = {}
    for folder in folders:
        loaded = load_records(folder)
        assert not loaded.problems and not set(merged) & set(loaded.records)
        merged.update(loaded.records)
    return merged


def comparable(record: dict[str, Any]) -> dict[str, Any]:
    """A record without what differs between two runs of the same pairing: where and when it ran, and how long."""
    train = {k: v for k, v in record["train"].items() if k != "wall_seconds"}
    return {**{k: v for k, v in record.items() if k != "provenance"}, "train": train}


def assert_same_records(ours: Records, reference: Records) -> None:
    assert set(ours) == set(reference)
    for key, record in ours.items():
        assert comparable(record) == comparable(reference[key]), record["config_hash"]


@pytest.fixture(scope="module")
def local_records(tmp_path_factory: pytest.TempPathFactory) -> Records:
    out = tmp_path_factory.mktemp("local")
    run("--out", str(out), "--jobs", "2")
    return records_of(out)


# ---- the plan --------------------------------------------------------------------------------------------------

def test_the_suite_ladders_every_builtin_family_on_its_declared_difficulty_axes():
    reg = registry()
    blocks = load_suite("tokbench").blocks
    builtin = {name for name, spec in reg.tasks.items() if spec.plugin == "tokbench"}
    # out: scc-implicit-bias (scored on its training split) and the three families on which the last-token
    # baseline is Bayes-optimal, so they rank nothing (the suite's header; the paper suite runs [A]'s walks)
    unranked = {"scc-implicit-bias", "random-walk", "deterministic-walk", "markov-switch"}
    tasks = [task for block in blocks for task in block.tasks]
    ladders = {task: ladder for block in blocks for task, ladder in block.ladders.items()}
    assert set(tasks) == set(ladders) == builtin - unranked
    # a family in both rankings (lag-walk) climbs one ladder
    assert all(block.ladders[task] == ladders[task] for block in blocks for task in block.tasks)
    for task, ladder in ladders.items():
        assert reg.tasks[task].difficulty and set(ladder) <= set(reg.tasks[task].difficulty), task
        assert {len(values) for values in ladder.values()} == {3}, task


def test_show_task_names_each_familys_difficulty_axes_and_pitfall(capsys):
    reg = registry()
    for task in (task for block in load_suite("tokbench").blocks for task in block.tasks):
        assert main(["show", "task", task]) == 0
        out = " ".join(capsys.readouterr().out.split())  # unwrapped
        spec = reg.tasks[task]
        assert f"difficulty axes (what a suite's ladder may vary): {', '.join(spec.difficulty)}" in out, task
        pitfall = f"pitfall: {' '.join(spec.pitfall.split())}"
        assert pitfall in out if spec.pitfall else "pitfall:" not in out, task


def test_dry_run_shows_one_ladder_per_family_and_plans_every_model_of_its_block_at_every_rung(tmp_path, capsys):
    assert main(["run", "--suite", "tokbench", "--dry-run", "--out", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    reg = registry()
    blocks = load_suite("tokbench").blocks
    selected: dict[str, set[str]] = {}
    for block in blocks:
        for task in block.tasks:
            names = (m for m in reg.models if any(fnmatchcase(m, pattern) for pattern in block.models))
            selected.setdefault(task, set()).update(names)
    models = {task: len(names) for task, names in selected.items()}
    ladders = {task: ladder for block in blocks for task, ladder in block.ladders.items()}
    printed = {m.group(1): m for m in map(LADDER_LINE.match, lines) if m}
    assert list(printed) == list(dict.fromkeys(task for block in blocks for task in block.tasks))
    for task, match in printed.items():
        axes = "; ".join(f"{key} {' -> '.join(map(str, values))}" for key, values in ladders[task].items())
        assert (match.group(2), int(match.group(3)), int(match.group(4))) == (axes, 3, models[task])
    pairings = sum(3 * models[task] * len(blocks[0].seeds) for task in ladders)
    inapplicable = sum(line.startswith("n/a ") for line in lines)  # recorded without training, not run
    assert len(ladders) == 8 and lines[-1] == (f"{pairings} pairings: {pairings - inapplicable} to run, "
                                               f"{inapplicable} not applicable (recorded without training), 0 to skip")


def test_both_rankings_train_under_one_protocol():
    architectures, variants = load_suite("tokbench").blocks
    # the differences by design: the architecture recipes anneal (cosine over the cap), the theory papers' single
    # layers keep their papers' constant rates (benchmark/budget/README.md, sweep range); each block's caps are its
    # own rounds of the cap check's (below)
    caps = ("task", "steps", "budgets")
    assert {key: value for key, value in variants.train.items() if key not in caps} == {
        key: value for key, value in architectures.train.items() if key not in ("validate_by", "schedule", *caps)}
    assert architectures.train["schedule"] == "cosine" and "schedule" not in variants.train
    assert architectures.train["validate_by"] == "expected"  # where the task has a label law ...
    # majority: no target stop (the stopping check: it cost up to 0.015), and a patience no run can meet, which keeps
    # every candidate's validation checks (what a pruned sweep chooses on)
    # the caps by family (benchmark/budget, "The cap check"): twice the block's where twice the steps gained, with the
    # budgets extended to the new cap; the block's own on icl-markov and majority, where it held
    longer = {"steps": 2 * architectures.train["steps"],
              "budgets": [*architectures.train["budgets"], 2 * architectures.train["steps"]]}
    assert architectures.train["task"] == {
        "lag-walk": {"validate_by": "labels", **longer},  # ... lag-walk has none
        "majority": {"target": 0, "patience": architectures.train["steps"]},
        **dict.fromkeys(("causal-graph", "mqar", "selective-copy", "sparse-selection"), longer)}
    assert architectures.train["steps"] == 10000
    # the single layers: 20000 (scc-automaton's third round), 40000 on lag-walk (its second)
    assert (variants.train["steps"], variants.train["budgets"]) == (longer["steps"], longer["budgets"])
    assert variants.train["task"] == {"lag-walk": {"steps": 40000, "budgets": [*longer["budgets"], 40000]}}
    assert architectures.train["target"] and not architectures.train.get("patience")  # no plateau rule
    assert (architectures.sweep, architectures.seeds) == (variants.sweep, variants.seeds)
    # the length table is the variants'; the architectures' middle rungs at seed 0 are then the pruning check's sweeps
    assert not architectures.evaluate and variants.evaluate == {"context_length": ("x2", "x4")}
    # one grid is wider: the LSTM's optimum on lag-walk lies at x 1/16 (benchmark/budget, "The sweep range")
    assert architectures.model_sweeps == {"lstm": {"lr_factors": (0.0625, 0.25, 1.0, 4.0)}} and not variants.model_sweeps
    assert architectures.task_params["*"] == variants.task_params["*"]
    assert architectures.ladders["lag-walk"] == variants.ladders["lag-walk"]
    assert architectures.task_params["lag-walk"] == variants.task_params["lag-walk"]
    learned = set(architectures.models) - {"last-token", "uniform", "context-guess", "bayes-optimal"}
    assert {"mamba", "transformer-4l", "gla", "h3"} <= learned and variants.models[0] == "attn-*"
    assert architectures.model_params["*"] == {"d": 64, "hidden": 64}
    assert variants.model_params["attn-alibi"]["heads"] > 1


def test_dry_run_plans_evaluations_at_two_and_four_times_the_training_length(tmp_path, capsys):
    assert main(["run", "--suite", "tokbench", "--task", "lag-walk", "--model", "attn-nope", "attn-learned",
                 "--dry-run", "--out", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    (evaluate,) = [line for line in lines if line.startswith("evaluate  lag-walk")]
    # lag-walk trains at T = 64; learned absolute positions cannot run longer and say so
    assert "context_length=128, context_length=256" in evaluate and "attn-learned" in evaluate
    assert "attn-nope" not in evaluate.partition("not applicable")[2]


# ---- a narrowed run, three ways ----------------------------------------------------------------------------------

def test_adaptive_seeding_of_the_narrowed_run_adds_seeds(local_records):
    cells = Counter((r["task"], r["model"], r["ladder"]["rung"]) for r in local_records.values())
    assert len(cells) == 2 * 3 * 3 and set(cells.values()) <= {2, 3} and 3 in cells.values()
    for record in local_records.values():
        note, seeds = record["adaptive"], cells[record["task"], record["model"], record["ladder"]["rung"]]
        assert (note["target_ci"], note["max_seeds"], note["seeds"]) == (0.02, 3, seeds)
        assert note["stopped"] in (("target reached",) if seeds == 2 else ("target reached", "max seeds"))


def test_two_shards_give_the_records_of_one_run(local_records, tmp_path):
    for index in range(2):
        run("--out", str(tmp_path / f"shard{index}"), "--shard", f"{index}/2", "--jobs", "2")
    shards = [records_of(tmp_path / f"shard{index}") for index in range(2)]
    assert all(shards)
    assert_same_records(records_of(tmp_path / "shard0", tmp_path / "shard1"), local_records)
    merged = tmp_path / "merged"
    for index in range(2):
        shutil.copytree(tmp_path / f"shard{index}", merged, dirs_exist_ok=True)
    assert_same_records(records_of(merged), local_records)


def test_a_two_process_ray_cluster_gives_the_records_of_one_run(local_records, tmp_path):
    ray = pytest.importorskip("ray", reason="Ray is not installed; `pip install 'tokbench[ray]'` to test it")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        run("--out", str(tmp_path / "ray"), "--executor", "ray")
    finally:
        ray.shutdown()
    assert_same_records(records_of(tmp_path / "ray"), local_records)


def test_records_validate_and_carry_their_rung_and_the_specs_metadata(local_records):
    reg = registry()
    validator = Draft202012Validator(record_schema())
    for record in local_records.values():
        assert not list(validator.iter_errors(record)), record["config_hash"]
        task, model = reg.tasks[record["task"]], reg.models[record["model"]]
        ladder = record["ladder"]
        assert ladder["rungs"] == 3 and 0 <= ladder["rung"] < 3
        assert ladder["axes"] == {key: record["params"]["task"][key] for key in ladder["axes"]}
        assert set(ladder["axes"]) <= set(task.difficulty)
        meta = record["meta"]
        assert meta["task_difficulty"] == list(task.difficulty) and meta["task_pitfall"] == task.pitfall
        assert meta["model_family"] == model.family_name
    assert {r["meta"]["task_pitfall"] != "" for r in local_records.values() if r["task"] == "majority"} == {True}
    climbed = {(r["task"], r["ladder"]["rung"]): r["ladder"]["axes"] for r in local_records.values()}
    ladders = {task: ladder for block in load_suite("tokbench").blocks for task, ladder in block.ladders.items()}
    assert climbed == {(task, i): {key: values[i] for key, values in ladders[task].items()}
                       for task in ("lag-walk", "majority") for i in range(3)}
