"""benchmark/budget/cap.py: the suite's runs at its cap against the same runs with twice the steps."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from script_modules import BUDGET, load_script
from tokbench.leaderboard.aggregate import build
from tokbench.leaderboard.budgets import still_rising
from tokbench.results import load_records

# the suite records the check retrains: the republish's, and those of the families whose cap the check raised
SUITE_RECORDS = (BUDGET.parent / "republish" / "records", BUDGET / "pruning-records")


@pytest.fixture(scope="module")
def cap():
    return load_script(BUDGET / "cap.py")


def _params(steps: int, lr_grid: list[float], wd_grid: list[float], **train) -> dict:
    return {"task": {"context_length": 64}, "model": {"d": 64},
            "train": {"lr": 0.001, "steps": steps, "warmup_steps": steps // 20, "budgets": [100, steps],
                      "lr_grid": lr_grid, "wd_grid": wd_grid, "weight_decay": 0.1, "target": 0.995, **train}}


def _suite_record(lr: float, weight_decay: float, accuracy: float) -> dict:
    params = _params(10000, [0.00025, 0.001, 0.004], [0.0, 0.1])
    return {"status": "ok", "task": "mqar", "model": "gla", "seed": 0, "params": params,
            "metrics": {"accuracy": accuracy}, "train": {"steps": 10000, "lr": lr, "weight_decay": weight_decay}}


def test_a_longer_run_is_matched_with_the_suite_record_whose_choice_it_retrains(cap):
    suite = [_suite_record(0.00025, 0.0, 0.40)]
    planned = [("h1", "mqar", "gla", 0, _params(20000, [0.00025], [0.0]))]
    longer = {"h1": {"metrics": {"accuracy": 0.415}}}
    (cell,) = cap.cells(planned, suite, longer)
    assert (cell.lr, cell.weight_decay, cell.cap, cell.longer_cap) == (0.00025, 0.0, 10000, 20000)
    assert cell.gain == pytest.approx(0.015)
    assert cap.summary([cell], 0.01)[:3] == [1, 1, 0]
    (pending,) = cap.cells(planned, suite, {})
    assert pending.gain is None and cap.summary([pending], 0.01) == [1, 0, 0, None, None]


@pytest.mark.parametrize("planned_params", [
    _params(20000, [0.001], [0.0]),  # another rate than the sweep chose
    _params(20000, [0.00025], [0.1]),  # another weight decay
    _params(20000, [0.00025], [0.0], target=0.99),  # another protocol: only the cap's keys may differ
])
def test_a_planned_run_that_retrains_no_choice_of_the_suite_is_refused(cap, planned_params):
    with pytest.raises(ValueError, match="no suite record chose"):
        cap.cells([("h1", "mqar", "gla", 0, planned_params)], [_suite_record(0.00025, 0.0, 0.40)], {})


def test_every_cell_of_the_committed_check_retrains_a_cell_the_leaderboard_names_still_learning_at_the_cap(cap):
    """cap.toml retrains the suite's own choices (cells() raises otherwise), and only cells the page flags: the
    pruning check's sweeps (seed 0, middle rung) whose mean rose by more than 0.02 from step 3000 to the cap."""
    suite = [record for folder in SUITE_RECORDS for record in load_records(folder).records.values()]
    found = cap.cells(cap.plan(BUDGET / "cap.toml"), suite, {})
    flagged = {(item.cell.column.task, item.cell.row.model) for item in still_rising(build(suite))}
    assert found and {(c.task, c.model) for c in found} <= flagged
    assert all(c.seed == 0 and c.cap == 10000 and c.longer_cap == 20000 for c in found)


def test_the_tables_in_the_budget_readme_are_what_the_tool_prints_on_the_committed_records():
    printed = subprocess.run([sys.executable, str(BUDGET / "cap.py"), *map(str, SUITE_RECORDS),
                              str(BUDGET / "cap-records"), "--markdown"], capture_output=True, text=True, check=True).stdout
    readme = (BUDGET / "README.md").read_text(encoding="utf-8")
    assert printed.strip() and printed.strip() in readme
