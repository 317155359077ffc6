"""benchmark/budget/plateau.py: where a learning curve flattens, from the budget curves of run records."""
from __future__ import annotations

import subprocess
import sys

import pytest

from script_modules import BUDGET, load_script

TOOL = BUDGET / "plateau.py"


@pytest.fixture(scope="module")
def plateau_tool():
    return load_script(TOOL)


def test_the_plateau_is_the_first_budget_from_which_the_curve_stays_near_its_end(plateau_tool):
    # a dip back out of the band after 300 moves the plateau to 3000: "stays", not "touches"
    assert plateau_tool.plateau({100: 0.2, 300: 0.79, 1000: 0.70, 3000: 0.80}, 0.02, ["cap"]) == (3000, True)
    assert plateau_tool.plateau({100: 0.2, 300: 0.79, 1000: 0.80, 3000: 0.80}, 0.02, ["cap"]) == (300, False)


def test_a_curve_gaining_at_the_cap_is_rising_only_when_a_run_reached_the_cap_as_on_the_page(plateau_tool):
    curve = {100: 0.3, 300: 0.5, 1000: 0.9}
    assert plateau_tool.plateau(curve, 0.02, ["plateau", "cap"]) == (1000, True)
    assert plateau_tool.plateau(curve, 0.02, ["target", "target"]) == (1000, False)
    # a seed that stopped on a plateau late, above the others, lifts the mean without anyone learning at the cap
    assert plateau_tool.plateau(curve, 0.02, ["plateau", "plateau"]) == (1000, False)


def test_a_run_that_stopped_early_keeps_its_final_accuracy_at_later_budgets(plateau_tool):
    run = [{"step": 100, "accuracy": 0.4}, {"step": 300, "accuracy": 0.8}, {"step": 420, "accuracy": 0.99,
                                                                            "final": True}]
    assert [plateau_tool._accuracy_at(run, step) for step in (100, 300, 1000, 3000)] == [0.4, 0.8, 0.99, 0.99]


def test_the_family_summary_names_the_latest_plateau_and_the_cells_still_rising(plateau_tool):
    body = [["mqar", "1", "gru", 3, "0.2", 1000, "", ""], ["mqar", "2", "lstm", 3, "0.3", 10000, "", "yes"],
            ["mqar", "0", "transformer-2l", 3, "0.9", 3000, "yes", ""], ["majority", "0", "gru", 3, "0.9", 100, "yes", ""]]
    header, lines = plateau_tool.families(body)
    assert header[0] == "task" and lines == [["majority", 1, 1, 100, "none"], ["mqar", 3, 1, 10000, "lstm@2"]]


def test_the_family_table_in_the_budget_readme_is_what_the_tool_prints_on_the_committed_records():
    root = TOOL.parents[2]
    printed = subprocess.run([sys.executable, str(TOOL), str(root / "leaderboard" / "records" / "tokbench"),
                              "--families", "--markdown"], capture_output=True, text=True, check=True).stdout
    assert printed.strip() and printed.strip() in (TOOL.parent / "README.md").read_text()


def test_each_cell_is_read_at_its_own_budgets_where_families_train_to_different_caps(plateau_tool, tmp_path):
    """The tokbench suite's majority (cap 10000) beside its selective copying (cap 20000): majority's cell ends at
    its own cap, where its rise from 3000 is read, not at the other's 20000 with its final accuracy carried there."""
    records = BUDGET.parent / "republish" / "records"
    for pattern in ("majority__gru__*.json", "selective-copy__gru__*.json"):
        source = sorted(records.glob(pattern))[0]
        (tmp_path / source.name).write_bytes(source.read_bytes())
    table, stops = plateau_tool.curves(tmp_path)
    steps = {cell[0]: sorted(per_step) for cell, per_step in table.items()}
    assert steps == {"majority": [100, 300, 1000, 3000, 10000], "selective-copy": [100, 300, 1000, 3000, 10000, 20000]}
    header, body = plateau_tool.rows(table, stops, 0.02)
    majority = next(row for row in body if row[0] == "majority")
    assert majority[-1] == "yes" and majority[header.index("acc@20000")] == ""  # rising at its cap (0.864 -> 0.900)
