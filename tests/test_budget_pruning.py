"""benchmark/budget/pruning.py: the choice a pruning sweep would make at step S, replayed on a full sweep."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from script_modules import BUDGET, load_script
from tokbench.leaderboard.aggregate import BUDGET_KEYS  # the cap and what is sized to it
from tokbench.results import canonical_json, load_records


@pytest.fixture(scope="module")
def pruning():
    return load_script(BUDGET / "pruning.py")


def record(curves, final, cap=1000, pruned=False):
    train = {"max_steps": cap, "eval_every": 100, "lr_selection_val_curve": curves,
             "lr_selection_val_accuracy": final}
    if pruned:
        train["selected_at"] = 200
    return {"status": "ok", "task": "mqar", "model": "gru", "seed": 0, "train": train}


# "slow" takes off late and ends best; "fast" leads early and ends lower; "solved" reaches its target at step 300
CURVES = {"slow": {"step": [100, 200, 300, 400, 900], "accuracy": [0.20, 0.25, 0.30, 0.60, 0.95]},
          "fast": {"step": [100, 200, 300, 400, 900], "accuracy": [0.30, 0.50, 0.70, 0.80, 0.90]},
          "solved": {"step": [100, 200, 300], "accuracy": [0.10, 0.20, 0.99]}}
FINAL = {"slow": 0.95, "fast": 0.90, "solved": 0.99}


def test_a_choice_at_s_reads_each_candidate_there_or_at_its_stop(pruning):
    (sweep,) = pruning.sweeps([record(CURVES, FINAL)])
    assert sweep.chosen() == "solved"
    assert sweep.chosen_at(200) == "fast" and sweep.loss_at(200) == pytest.approx(0.09)
    assert sweep.chosen_at(300) == sweep.chosen_at(400) == "solved" and sweep.loss_at(400) == 0


def test_ties_go_to_the_earlier_candidate_as_the_harness_breaks_them(pruning):
    curves = {"a": {"step": [100, 900], "accuracy": [0.5, 0.5]}, "b": {"step": [100, 900], "accuracy": [0.5, 0.6]}}
    (sweep,) = pruning.sweeps([record(curves, {"a": 0.5, "b": 0.6})])
    assert sweep.chosen_at(100) == "a" and sweep.loss_at(100) == pytest.approx(0.1)


def test_replica_steps_count_a_stop_and_the_cap(pruning):
    (sweep,) = pruning.sweeps([record(CURVES, FINAL)])
    # slow and fast ran to the cap (their last check is one before it), solved stopped at 300
    assert sweep.replica_steps() == 1000 + 1000 + 300
    assert sweep.replica_steps(200) == 3 * 200 + (1000 - 200)  # fast kept, on to the cap
    assert sweep.replica_steps(400) == 3 * 300  # solved at 300: kept, and the sweep ends there


def test_a_target_reached_at_the_last_check_before_the_cap_counts_as_solved_where_the_record_says_so(pruning):
    curves = {"late": {"step": [100, 900], "accuracy": [0.5, 0.99]},
              "capped": {"step": [100, 900], "accuracy": [0.6, 0.9]}}
    final = {"late": 0.99, "capped": 0.9}
    stated = record(curves, final)
    stated["train"]["lr_selection_stopped_because"] = {"late": "target", "capped": "cap"}
    (old,), (new,) = pruning.sweeps([record(curves, final)]), pruning.sweeps([stated])
    assert old.replica_steps() == 2000  # without the stops, a curve ending at 900 reads as a run to the cap
    assert new.replica_steps() == 900 + 1000 and new.chosen_at(950) == "late"


def test_the_first_candidate_to_reach_its_target_is_kept_as_the_harness_keeps_it(pruning):
    curves = {"early": {"step": [100, 200], "accuracy": [0.5, 0.99]},
              "later": {"step": [100, 200, 300], "accuracy": [0.5, 0.9, 0.995]},
              "never": {"step": [100, 200, 300, 400, 900], "accuracy": [0.5, 0.6, 0.7, 0.8, 0.9]}}
    (sweep,) = pruning.sweeps([record(curves, {"early": 0.99, "later": 0.995, "never": 0.9})])
    assert sweep.chosen() == "later" and sweep.chosen_at(1000) == "early"
    assert sweep.loss_at(1000) == pytest.approx(0.005)  # at most 1 - target of the oracle's accuracy
    assert sweep.chosen_at(100) == "early"  # nothing solved yet: the best at 100, ties to the earlier


def test_a_margin_keeps_every_candidate_level_with_the_best_through_a_flat_start(pruning):
    """The LSTM on lag-walk in miniature: both candidates sit at chance at step 300, the one a hair behind takes off
    later. The best-only rule keeps the other and loses the take-off; a margin of 0.01 keeps both to the end."""
    curves = {"late": {"step": [100, 300, 600, 900], "accuracy": [0.17, 0.166, 0.45, 0.58]},
              "flat": {"step": [100, 300, 600, 900], "accuracy": [0.16, 0.168, 0.17, 0.17]},
              "behind": {"step": [100, 300, 600, 900], "accuracy": [0.10, 0.12, 0.15, 0.16]}}
    (sweep,) = pruning.sweeps([record(curves, {"late": 0.58, "flat": 0.17, "behind": 0.16})])
    assert sweep.chosen_at(300) == "flat" and sweep.loss_at(300) == pytest.approx(0.41)
    assert sweep.chosen_at(300, 0.01) == "late" and sweep.loss_at(300, 0.01) == 0
    assert sweep.replica_steps(300) == 3 * 300 + 700
    assert sweep.replica_steps(300, 0.01) == 3 * 300 + 2 * 700  # "behind" (0.048 below) is dropped
    assert sweep.chosen_at(300, 0.05) == "late" and sweep.replica_steps(300, 0.05) == 3 * 1000


def test_only_full_sweeps_with_every_curve_are_replayed(pruning):
    records = [record(CURVES, FINAL, pruned=True), {"status": "failed", "task": "mqar"},
               {"status": "ok", "task": "mqar", "model": "gru", "seed": 0, "train": {"lr_selection_val_accuracy": {}}}]
    assert pruning.sweeps(records) == []
    _, _, _, summary = pruning.tables(pruning.sweeps([record(CURVES, FINAL)]), [200, 300], 0.01)
    assert [row[:5] for row in summary] == [[200, 1, 0, 0, "0.000"], [300, 1, 1, 1, "1.000"]]


RECORDS = (BUDGET.parent / "republish" / "records", BUDGET / "retired-records")  # the suite's, and those it left


@pytest.mark.parametrize("rule", [[], ["--keep-within", "0.01"]])
def test_the_tables_in_the_budget_readme_are_what_the_tool_prints_on_the_committed_records(rule):
    printed = subprocess.run([sys.executable, str(BUDGET / "pruning.py"), *map(str, RECORDS), "--markdown", *rule],
                             capture_output=True, text=True, check=True).stdout
    readme = (BUDGET / "README.md").read_text(encoding="utf-8")
    summary = printed.strip().split("\n\n")[-1]  # the rule's summary; the default's per-sweep table too
    assert summary and (printed.strip() if not rule else summary) in readme


def test_each_sweep_of_the_check_is_the_suites_record_but_for_the_cap_its_family_raised():
    """Each sweep is the pairing the suite's architecture block plans for that model on the family's middle rung at
    seed 0 (recipe, grid, the LSTM's wider one, widths, no evaluations), trained once for both, where the suite
    kept the check's cap of 10000 steps; where it raised a family's cap, the sweeps differ from the suite's in the
    cap and what is sized to it, nothing else. The sweeps of those families are in retired-records."""
    stopping = load_script(BUDGET / "stopping.py")

    def keyed(suite):
        return {(p.task_spec.name, p.model_spec.name, p.seed, canonical_json(p.variant.params["task"]),
                 canonical_json(p.variant.params["model"])): p for p in stopping.planned_pairings(suite)}

    check, suite = keyed(BUDGET / "pruning.toml"), keyed(Path("tokbench"))
    assert len(check) == 63 and check.keys() <= suite.keys()
    raised = set()
    for key, sweep in check.items():
        ours, theirs = sweep.variant.params["train"], suite[key].variant.params["train"]
        if sweep.config_hash != suite[key].config_hash:
            assert theirs["steps"] > ours["steps"] == 10000, key
            assert {k for k in ours.keys() | theirs.keys() if ours.get(k) != theirs.get(k)} <= set(BUDGET_KEYS), key
            raised.add(key[0])
    assert raised == {"causal-graph", "lag-walk", "mqar", "selective-copy", "sparse-selection"}
    kept, retired = (load_records(folder).records.keys() for folder in RECORDS)
    swept = {check[key].config_hash for key in check if key[0] in raised}
    assert len(swept & retired) == 31 and not swept & kept  # the sweeps run before the caps rose, all retired
