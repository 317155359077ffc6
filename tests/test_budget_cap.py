"""benchmark/budget/cap.py: the suite's runs at its cap against the same runs with twice the steps."""
from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from script_modules import BUDGET, load_script
from tokbench.leaderboard.aggregate import build
from tokbench.leaderboard.budgets import still_rising
from tokbench.results import load_records

# the suite records the check retrains: the republish's, and those of the families whose cap the check raised
SUITE_RECORDS = (BUDGET.parent / "republish" / "records", BUDGET / "retired-records")


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
    assert pending.gain is None and cap.summary([pending], 0.01) == [1, 0, 0, None, None, None]


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


# the architectures' first round; the single layers' first, second (lag-walk at 20000) and third (split seeds)
ROUNDS = ["cap.toml", "cap-single.toml", "cap-20000.toml", "cap-split.toml"]
# the rounds whose caps rose on the test gain; later rounds decide on the validation gain (budget README)
DECIDED_ON_TEST = ROUNDS[:4]


@pytest.mark.parametrize("suite", ROUNDS)
def test_the_tables_in_the_budget_readme_are_what_the_tool_prints_on_the_committed_records(suite):
    printed = subprocess.run([sys.executable, str(BUDGET / "cap.py"), *map(str, SUITE_RECORDS),
                              str(BUDGET / "cap-records"), "--suite", str(BUDGET / suite), "--markdown"],
                             capture_output=True, text=True, check=True).stdout
    readme = (BUDGET / "README.md").read_text(encoding="utf-8")
    assert printed.strip() and printed.strip() in readme


def _run(steps: int, accuracy: float) -> dict:
    params = _params(steps, [0.00025], [0.0])
    return {"status": "ok", "task": "mqar", "model": "gla", "seed": 0, "params": params,
            "metrics": {"accuracy": accuracy}, "train": {"steps": steps, "lr": 0.00025, "weight_decay": 0.0}}


def test_a_run_pairs_with_its_choice_at_the_nearest_other_cap_never_at_its_own(cap):
    """A record and a run at the same cap are two runs of one protocol; a run retrains the record at the longest cap
    below its own, and a record is retrained by the run at the shortest cap above its own."""
    old = _suite_record(0.00025, 0.0, 0.40)  # 10000 steps
    new = {**_suite_record(0.00025, 0.0, 0.42), "params": _params(20000, [0.00025, 0.001, 0.004], [0.0, 0.1])}
    twice, four_times = _run(20000, 0.42), _run(40000, 0.43)
    assert [(c.cap, c.longer_cap, c.longer) for c in cap.paired([old, new], [four_times, twice])] == \
        [(10000, 20000, 0.42), (20000, 40000, 0.43)]
    assert [c.longer for c in cap.paired([new], [twice])] == [None]  # its own cap: not a longer run
    planned = [("h2", "mqar", "gla", 0, four_times["params"]), ("h1", "mqar", "gla", 0, twice["params"])]
    assert [(c.cap, c.longer_cap) for c in cap.cells(planned, [new, old], {})] == [(20000, 40000), (10000, 20000)]
    with pytest.raises(ValueError, match="at a shorter cap"):
        cap.cells([("h1", "mqar", "gla", 0, twice["params"])], [new], {})


def _curved(record: dict, key: str, accuracies: list[float], schedule: str = "constant") -> dict:
    """``record`` with its kept candidate's validation checks (every 100 steps) under ``key`` and a schedule."""
    curve = {"step": [100 * (i + 1) for i in range(len(accuracies))], "accuracy": accuracies}
    record["params"]["train"].update(schedule=schedule, warmup_steps=0)
    record["train"]["lr_selection_val_curve"] = {key: curve, "lr=0.004,wd=0": {"step": [100], "accuracy": [0.9]}}
    return record


def test_the_validation_gain_averages_each_runs_last_checks_and_reads_a_constant_run_as_continued(cap):
    """A constant rate's final iterate wobbles on a plateau: the test gain sees the wobble, the mean of the last
    checks does not. Where the shorter record kept no curve, a constant run's own checks up to its cap stand in."""
    flat = [0.80, 0.84] * 10  # the last ten checks average 0.82, whichever the final one
    source = _curved(_suite_record(0.00025, 0.0, 0.40), "lr=0.00025,wd=0", flat)
    longer = _curved(_run(20000, 0.43), "lr=0.00025,wd=0", flat + [0.81, 0.83] * 5)
    (cell,) = cap.paired([source], [longer])
    assert cell.gain == pytest.approx(0.03) and cell.val_gain == pytest.approx(0.0)
    del source["train"]["lr_selection_val_curve"]  # an older record: the continued run's checks up to 10000 steps
    longer["train"]["lr_selection_val_curve"]["lr=0.00025,wd=0"] = {
        "step": [100 * (i + 1) for i in range(200)], "accuracy": [0.5] * 100 + [0.7] * 100}
    assert cap.paired([source], [longer])[0].val_gain == pytest.approx(0.2)
    for record in (source, longer):
        record["params"]["train"]["schedule"] = "cosine"  # another schedule: the longer run is not a continuation
    assert cap.paired([source], [longer])[0].val_gain is None


# ---- cap_plan.py: the cap check's suite, written from the cells a page names still learning at the cap ---------

@pytest.fixture(scope="module")
def cap_plan():
    return load_script(BUDGET / "cap_plan.py")


def test_a_cap_run_keeps_the_recipe_but_the_cap_and_narrows_the_sweep_to_the_choice(cap_plan):
    record = {"params": {"train": {**_params(10000, [0.00025, 0.001, 0.004], [0.0, 0.1])["train"], "patience": 10000,
                                   "early_stop": 0.0, "schedule": "cosine"}},
              "train": {"lr": 0.004, "weight_decay": 0.0}}
    longer = cap_plan.recipe(record, 2)
    assert longer == {"lr": 0.004, "weight_decay": 0.0, "steps": 20000, "budgets": [100, 10000, 20000],
                      "target": 0.995, "patience": 20000, "schedule": "cosine"}  # warm-up: the recipe's, at 20000
    record["params"]["train"]["patience"] = 500  # a plateau rule that can fire is the record's own
    assert cap_plan.recipe(record, 3)["patience"] == 500 and cap_plan.recipe(record, 3)["steps"] == 30000


def test_the_written_suite_retrains_each_named_cell_as_cap_py_pairs_it_and_covers_the_hand_written_check(
        cap_plan, cap, tmp_path):
    """On the committed architecture sweeps at the old cap, the tool plans every cell cap.toml retrained (written by
    hand before the tool), with the same seed, rate and weight decay; cap.py pairs each planned run with its record
    (it raises for any other)."""
    records = [record for folder in SUITE_RECORDS for record in load_records(folder).records.values()]
    written = tmp_path / "cap.toml"
    written.write_text(cap_plan.suite(cap_plan.retrained(records), 2, "test"), encoding="utf-8")
    planned = cap.cells(cap.plan(written), records, {})
    by_hand = cap.cells(cap.plan(BUDGET / "cap.toml"), records, {})
    def choices(cells):
        return {(c.task, c.model, c.seed, c.lr, c.weight_decay, c.cap, c.longer_cap) for c in cells}

    assert choices(by_hand) <= choices(planned)
    assert {c.longer_cap for c in planned} == {2 * c.cap for c in planned}


@pytest.mark.parametrize("suite, cells", [("cap-single.toml", 10), ("cap-20000.toml", 1), ("cap-split.toml", 4)])
def test_every_cell_of_a_committed_single_layer_round_is_one_the_tool_writes_from_its_records(
        cap_plan, capsys, suite, cells):
    """Its first line names the command as it ran. The records a round retrained have since moved to
    retired-records (the block's cap rose) and the republish's folder grows, so each block of the committed suite
    must be one the tool writes now from the folders that hold the variants' records, its record unchanged."""
    committed = (BUDGET / suite).read_text(encoding="utf-8")
    command = shlex.split(committed.splitlines()[0].split("`")[1])
    assert command[:2] == ["python", "benchmark/budget/cap_plan.py"]
    assert cap_plan.main([*map(str, SUITE_RECORDS), "--model", "attn-*"]) == 0
    def blocks(text):
        return text.split("[[grid]]")[1:]

    written = blocks(capsys.readouterr().out)
    assert len(blocks(committed)) == cells and all(block in written for block in blocks(committed))


def test_a_missing_or_empty_folder_is_exit_2_and_nothing_to_retrain_is_exit_1(tmp_path):
    def plan(*folders):
        return subprocess.run([sys.executable, str(BUDGET / "cap_plan.py"), *map(str, folders)],
                              capture_output=True, text=True)

    absent, empty = plan(tmp_path / "absent"), plan(tmp_path)
    assert absent.returncode == 2 and "no such records folder" in absent.stderr and absent.stdout == ""
    assert empty.returncode == 2 and empty.stderr.startswith("cap_plan.py: no records in") and empty.stdout == ""
    solved = next(BUDGET.parent.joinpath("republish", "records").glob("icl-markov__gru__*.json"))  # at its target
    (tmp_path / solved.name).write_bytes(solved.read_bytes())
    done = plan(tmp_path)
    assert done.returncode == 1 and "nothing to retrain" in done.stderr and done.stdout == ""


def test_the_suite_trains_every_family_where_its_cells_gained_to_the_longer_cap(cap):
    """The caps by block and family follow from the check's rounds: where a retrained cell of a family gained more
    than 0.01 (on test in the four rounds committed by 2026-12-07, on validation in later ones), the tokbench
    suite trains that block on that family to at least the longest cap such a gain was found at; where every cell
    of every round held, the cap they tested is kept (raising it there would cost without evidence). A model's block is the families the suite trains it on (the architectures' seven, the
    single layers' two)."""
    records = [record for folder in SUITE_RECORDS for record in load_records(folder).records.values()]
    runs = load_records(BUDGET / "cap-records").records
    rounds = {suite: cap.cells(cap.plan(BUDGET / suite), records, runs) for suite in ROUNDS}
    caps = {(p.task_spec.name, p.model_spec.name): p.variant.params["train"]["steps"]
            for p in load_script(BUDGET / "stopping.py").planned_pairings(Path("tokbench"))
            if p.variant.params["train"]}  # baselines train nothing

    def family(c):
        return c.task, frozenset(task for task, model in caps if model == c.model)

    gained: dict = {}
    for suite, cells in rounds.items():
        for c in cells:
            if round(c.gain if suite in DECIDED_ON_TEST else c.val_gain, 9) > 0.01:
                gained[family(c)] = max(gained.get(family(c), 0), c.longer_cap)
    assert gained and all(cells and all(c.gain is not None for c in cells) for cells in rounds.values())
    for c in (c for cells in rounds.values() for c in cells):
        if family(c) in gained:
            assert caps[c.task, c.model] >= gained[family(c)], (c.task, c.model)
        else:
            assert caps[c.task, c.model] == c.cap, (c.task, c.model)


def test_skip_retrained_leaves_out_the_cells_a_folder_of_cap_runs_retrains_and_refuses_a_missing_folder(tmp_path):
    def plan(*args):
        return subprocess.run([sys.executable, str(BUDGET / "cap_plan.py"), *map(str, SUITE_RECORDS), *args],
                              capture_output=True, text=True)

    every, skipped = plan(), plan("--skip-retrained", BUDGET / "cap-records")
    left = skipped.stdout.split("[[grid]]")[1:]
    assert every.returncode == 0 and every.stdout.count("[[grid]]") > len(left)
    assert all(block in every.stdout for block in left)  # what is left is what the plain plan writes
    sweeps = plan("--skip-retrained", SUITE_RECORDS[0])  # full sweeps, not cap runs: they retrain nothing
    assert sweeps.returncode == 0 and sweeps.stdout.split("\n", 1)[1] == every.stdout.split("\n", 1)[1]
    missing = plan("--skip-retrained", tmp_path / "absent")
    assert missing.returncode == 2 and "no such records folder" in missing.stderr and missing.stdout == ""


def test_a_run_on_another_kind_of_device_is_not_a_pair_and_the_plan_can_keep_to_one_kind(cap, cap_plan):
    """As in the stopping check, a GPU's kernels and a CPU's round differently: a pair across them measures both."""
    record = _suite_record(0.00025, 0.0, 0.40)
    on_gpu = {**_run(20000, 0.42), "provenance": {"device": "cuda (NVIDIA H100 80GB HBM3)"}}
    assert [c.longer for c in cap.paired([record], [on_gpu])] == [None]
    assert [c.longer for c in cap.paired([record], [_run(20000, 0.42)])] == [0.42]  # both without a device: a pair
    records = [r for folder in SUITE_RECORDS for r in load_records(folder).records.values()]
    assert cap_plan.retrained(records, device="cpu") == cap_plan.retrained(records)  # every run so far: CPU
    assert cap_plan.retrained(records, device="cuda") == []
