"""benchmark/budget/sweep.py: where each sweep's choice falls in its grid, and the counts per schedule."""
from __future__ import annotations

import subprocess
import sys

import pytest

from script_modules import BUDGET, load_script

TOOL = BUDGET / "sweep.py"
sweep = load_script(TOOL)


def _record(selection: dict[str, float], schedule: str = "constant", seed: int = 0, status: str = "ok") -> dict:
    return {"status": status, "task": "lag-walk", "model": "attn-t5bias", "seed": seed,
            "train": {"schedule": schedule, "stopped_because": "cap", "lr_selection_val_accuracy": selection},
            "ladder": {"axes": {"k": 16}}}


@pytest.mark.parametrize(("selection", "place", "margin"), [
    ({"0.0025": 0.30, "0.01": 0.28, "0.04": 0.27}, "low", 0.02),
    ({"0.0025": 0.30, "0.01": 0.31, "0.04": 0.27}, "inside", 0.01),
    ({"0.0025": 0.20, "0.01": 0.28, "0.04": 0.29}, "high", 0.01),
    ({"0.0025": 0.80, "0.01": 0.80, "0.04": 0.27}, "tie", 0.0),
    # two weight decays at one rate sharing the best accuracy: that rate is the choice, no tie
    ({"lr=0.0025,wd=0": 0.30, "lr=0.01,wd=0": 0.33, "lr=0.01,wd=0.1": 0.33, "lr=0.04,wd=0": 0.31}, "inside", 0.02),
    # weight decay crossed in: the edge is the rate's, and the margin is over the other rates only
    ({"lr=0.0025,wd=0": 0.30, "lr=0.0025,wd=0.1": 0.29, "lr=0.01,wd=0": 0.25, "lr=0.01,wd=0.1": 0.26}, "low", 0.04),
])
def test_a_choice_is_placed_in_its_grid_by_rate(selection, place, margin):
    (choice,) = sweep.choices([_record(selection)])
    assert choice.place == place
    assert choice.margin == pytest.approx(margin)
    assert choice.rung == "k=16"


def test_records_without_a_rate_choice_are_left_out():
    records = [_record({}), _record({"0.01": 0.5}), _record({"lr=0.01,wd=0": 0.5, "lr=0.01,wd=0.1": 0.6}),
               _record({"0.0025": 0.3, "0.01": 0.2}, status="failed")]
    assert sweep.choices(records) == []


def test_a_run_beyond_the_edge_extends_its_sweep_and_only_its_own():
    """edges.toml: one candidate at x 16 of the same configuration and seed joins the sweep's row; another seed's,
    or another configuration's, does not."""
    params = {"task": {"context_length": 20}, "model": {"width": 256}, "train": {"lr": 0.001, "steps": 10000}}
    full = {**_record({"lr=0.00025,wd=0.1": 0.27, "lr=0.001,wd=0.1": 0.31, "lr=0.004,wd=0.1": 0.34}, "cosine"),
            "params": {**params, "train": {**params["train"], "lr_grid": [0.00025, 0.001, 0.004], "wd_grid": [0.0, 0.1]}}}
    beyond = {**_record({"lr=0.016,wd=0.1": 0.33}, "cosine"),
              "params": {**params, "train": {**params["train"], "lr_grid": [0.016], "wd_grid": [0.1]}}}
    beyond["train"]["stopped_because"] = "target"
    elsewhere = {**beyond, "seed": 1}
    other = {**beyond, "params": {**params, "model": {"width": 64}}}
    (choice,) = sweep.choices([beyond, full, elsewhere, other])
    assert choice.rates == (0.00025, 0.001, 0.004, 0.016) and choice.accuracies == (0.27, 0.31, 0.34, 0.33)
    assert (choice.place, choice.stopped_because) == ("inside", "cap")
    assert choice.margin == pytest.approx(0.01)


def test_summary_counts_places_and_clear_edges_per_schedule_and_grid():
    records = [_record({"0.0025": 0.30, "0.01": 0.28, "0.04": 0.27}, seed=0),  # low, clear
               _record({"0.0025": 0.30, "0.01": 0.295, "0.04": 0.27}, seed=1),  # low, within noise
               _record({"0.0025": 0.80, "0.01": 0.80, "0.04": 0.80}, seed=2),  # tie
               _record({"0.000625": 0.3, "0.0025": 0.4, "0.01": 0.35, "0.04": 0.2}, schedule="cosine")]  # inside
    rows = sweep.summary(sweep.choices(records), tolerance=0.01)
    assert rows == [["constant", 3, 3, 2, 0, 0, 1, 1], ["cosine", 4, 1, 0, 0, 1, 0, 0]]


def test_the_command_prints_both_tables_for_an_empty_folder(tmp_path, capsys):
    assert sweep.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "validation accuracy" in out and "edge by > 0.01" in out


@pytest.mark.parametrize("args", [[BUDGET / "sweep-records"],  # the single layers'; the architectures': the
                                  [BUDGET.parent / "republish" / "records", BUDGET / "retired-records",  # check's
                                   BUDGET / "edges-records",  # sweeps
                                   "--suite", BUDGET / "pruning.toml", BUDGET / "edges.toml"]])
def test_the_tables_in_the_budget_readme_are_what_the_tool_prints_on_the_committed_checks(args):
    printed = subprocess.run([sys.executable, str(TOOL), *map(str, args), "--markdown"],
                             capture_output=True, text=True, check=True).stdout
    readme = (TOOL.parent / "README.md").read_text()
    assert printed.count("|") > 100 and printed.strip() in readme
    # in its own section: the single layers' sweeps before the architectures', the architectures' after
    at, architectures = readme.index(printed.strip()), readme.index("**The architectures.**")
    assert (at > architectures) is ("--suite" in args)


def test_a_suite_keeps_only_the_records_of_its_plan(tmp_path):
    """--suite: among the republish's records only the pruning check's sweeps (its plan's hashes) are read."""
    every = subprocess.run([sys.executable, str(TOOL), str(BUDGET.parent / "republish" / "records")],
                           capture_output=True, text=True, check=True).stdout
    planned = subprocess.run([sys.executable, str(TOOL), str(BUDGET.parent / "republish" / "records"), "--suite",
                              str(BUDGET / "pruning.toml")], capture_output=True, text=True, check=True).stdout
    assert "attn-" in every and "attn-" not in planned and "transformer-2l" in planned


def test_records_of_another_model_version_are_not_one_sweep():
    """A version bump changes what trains (and the config hash) though the parameters may read alike."""
    old = _record({"0.0025": 0.30, "0.01": 0.28})
    new = {**_record({"0.04": 0.35}), "model_version": "2"}
    assert sorted(len(choice.rates) for choice in sweep.choices([old, new, _record({"0.04": 0.27})])) == [3]

