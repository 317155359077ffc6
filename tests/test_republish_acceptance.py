"""benchmark/republish/acceptance.py: the fair-comparison issue's requirements, checked on records."""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from script_modules import BENCHMARK, load_script
from tokbench.results import load_records

TOOL = BENCHMARK / "republish" / "acceptance.py"
acceptance = load_script(TOOL)
CHECK_CAP = acceptance.check_cap


@pytest.fixture(autouse=True)
def _cap_check_holds(monkeypatch):
    """The committed cap check retrains cells of the republish's own records, which synthetic sections do not hold;
    it has its own tests below."""
    monkeypatch.setattr(acceptance, "check_cap", lambda section, folder: acceptance.Check("a cap check", True, ""))
ATTENTION_ON_MQAR = "transformer-2l's mean test accuracy >= 0.97 on every mqar rung"


def _record(model: str, task: str, task_params: dict, accuracy: float = 0.99, seed: int = 0, lr: float = 0.001,
            lr_grid: tuple = (0.00025, 0.001, 0.004), heads: int | None = None, parameters: int | None = 1000,
            trained: bool = True, status: str = "ok") -> dict:
    model_params = {"d": 64} if heads is None else {"d": 64, "heads": heads}
    return {"status": status, "task": task, "task_version": "1", "model": model, "seed": seed,
            "metrics": {"accuracy": accuracy} if status == "ok" else {}, "train": {"wall_seconds": 360.0},
            "params": {"task": {**task_params, "test_size": 2000}, "model": model_params,
                       "train": {"lr": lr, "lr_grid": list(lr_grid)} if trained else {}},
            "size": None if parameters is None else {"parameters": parameters, "state": None}}


MQAR = [{"context_length": 64, "num_kv_pairs": 4}, {"context_length": 256, "num_kv_pairs": 16}]


def _passing() -> list[dict]:
    records = [_record("transformer-2l", "mqar", params, accuracy, seed)
               for params in MQAR for seed, accuracy in enumerate((0.98, 0.99))]
    records += [_record(model, "selective-copy", {"context_length": 256}) for model in acceptance.REQUIRED_MODELS]
    records += [_record("gru", "sparse-selection", {"num_tokens": 64}),
                _record("attn-alibi", "lag-walk", {"k": 4}, heads=4),
                _record("bayes-optimal", "mqar", MQAR[0], trained=False, parameters=None)]  # not trained: no size
    return records


def _failing(records: list[dict], scale: list[dict] = (), readme: str | None = None) -> list[str]:
    """The requirements the records miss, with a README that states their cost (360 s a record, one thread each)
    unless ``readme`` gives its text; the stopping check is the committed one."""
    hours = 0.1 * len(records)
    text = f"The section took **{hours:.1f} core-hours** on two cores." if readme is None else readme
    path = Path(tempfile.mkdtemp()) / "README.md"
    path.write_text(text, encoding="utf-8")
    return [check.requirement for check in acceptance.checks(records, scale, readme=path) if not check.holds]


def test_records_that_meet_every_requirement_pass_every_check():
    assert _failing(_passing()) == []


def test_each_requirement_fails_on_the_records_that_miss_it():
    base = _passing()
    unsized = [*base, _record("gru", "majority", {}, parameters=None)]
    assert _failing(unsized) == ["every trained record carries a parameter count"]
    one_rate = [*base, _record("lstm", "majority", {}, lr_grid=())]
    assert _failing(one_rate) == ["every (model, task family) pair tried at least 3 learning rates"]
    no_mamba = [r for r in base if r["model"] != "mamba"]
    assert _failing(no_mamba) == ["mamba, transformer-4l, gla, h3 have trained records"]
    short = [r for r in base if not (r["task"] == "mqar" and r["params"]["task"]["context_length"] >= 256)]
    assert _failing(short) == ["mqar records with context_length >= 256"]
    weak = [*base, _record("transformer-2l", "mqar", MQAR[0], accuracy=0.93, seed=2)]  # that rung's mean: 0.967
    assert _failing(weak) == [ATTENTION_ON_MQAR]
    no_long_copy = [r for r in base if r["task"] != "selective-copy"] + [
        _record(model, "selective-copy", {"context_length": 128}) for model in acceptance.REQUIRED_MODELS]
    assert _failing(no_long_copy) == ["selective-copy records with context_length >= 256"]
    one_head = [r for r in base if r["model"] != "attn-alibi"] + [_record("attn-alibi", "lag-walk", {"k": 4})]
    assert _failing(one_head) == ["an attn-alibi record with more than one head"]


def test_a_readme_that_does_not_state_the_cost_and_a_stopping_check_too_small_fail(tmp_path):
    assert _failing(_passing(), readme="The section's cost is to be announced.") == [
        "the README states the section's cost"]
    (stopping,) = [c for c in acceptance.checks(_passing(), stopping=tmp_path) if c.requirement.startswith("a stopping")]
    assert not stopping.holds and stopping.found == "0 of 0 pairs within 0.01"


def test_a_failed_seed_or_a_rung_without_attention_fails_the_mqar_bar():
    """Only ok records are trained, but a rung with a failed transformer-2l seed, or with no transformer-2l record
    where other models ran it, does not show attention solving it."""
    base = _passing()
    diverged = [*base, _record("transformer-2l", "mqar", MQAR[0], seed=2, status="failed")]
    assert _failing(diverged) == [ATTENTION_ON_MQAR]
    unrun = [*base, _record("bayes-optimal", "mqar", {"context_length": 128, "num_kv_pairs": 8}, trained=False)]
    assert _failing(unrun) == [ATTENTION_ON_MQAR]
    (check,) = [c for c in acceptance.checks(unrun) if c.requirement == ATTENTION_ON_MQAR]
    assert "context_length=128,num_kv_pairs=8,test_size=2000: no record" not in check.found  # split sizes are not
    assert "context_length=128,num_kv_pairs=8: no record" in check.found  # part of a rung's name


def test_a_rung_is_its_task_setting_whatever_the_split_sizes_and_a_seed_counts_once():
    base = _passing()
    resized = _record("transformer-2l", "mqar", MQAR[0], accuracy=0.96, seed=2)
    resized["params"]["task"]["test_size"] = 500  # the same rung: its mean is 0.977 over 3 seeds
    assert _failing([*base, resized]) == []
    evaluated_twice = _record("transformer-2l", "mqar", MQAR[0], accuracy=0.90, seed=0)  # seed 0 again (another
    assert _failing([*base, evaluated_twice]) == []                                       # --evaluate): one run


def test_the_larger_sizes_may_be_in_the_gpu_scale_section():
    base = _passing()
    moved = [r for r in base if r["task"] != "sparse-selection"]
    assert _failing(moved) == ["sparse-selection records with num_tokens >= 64"]
    assert _failing(moved, scale=[_record("gru", "sparse-selection", {"num_tokens": 128})]) == []
    section_short = [r for r in base if not (r["task"] == "mqar" and r["params"]["task"]["context_length"] >= 256)]
    assert _failing(section_short, scale=[_record("gru", "mqar", {"context_length": 512})]) == []


def test_rates_count_across_a_pairs_records():
    """Three records of one pair, each at its own single rate, have tried three rates."""
    records = _passing() + [_record("lstm", "majority", {"context_length": c}, lr=lr, lr_grid=())
                            for c, lr in ((32, 0.001), (64, 0.003), (64, 0.012))]
    assert _failing(records) == []


def test_the_command_exits_1_and_names_what_is_missing_and_2_for_a_missing_folder(tmp_path):
    result = subprocess.run([sys.executable, str(TOOL), str(tmp_path)], capture_output=True, text=True)
    assert result.returncode == 1 and "missing: mamba, transformer-4l, gla, h3" in result.stdout
    result = subprocess.run([sys.executable, str(TOOL), str(tmp_path), "--scale", str(tmp_path / "absent")],
                            capture_output=True, text=True)
    assert result.returncode == 2 and result.stdout == "" and "no such records folder" in result.stderr


def test_several_folders_are_one_section_and_a_pairing_in_two_of_them_is_exit_2(tmp_path):
    """Several folders (shards not yet merged, say) are one section."""
    record = next(iter(sorted((BENCHMARK / "republish" / "records").glob("*.json"))))
    first, second = tmp_path / "first", tmp_path / "second"
    for folder in (first, second):
        folder.mkdir()
    shutil.copy(record, first)
    result = subprocess.run([sys.executable, str(TOOL), str(first), str(second)], capture_output=True, text=True)
    assert result.returncode == 1 and "over 1 runs" in result.stdout
    shutil.copy(record, second)
    result = subprocess.run([sys.executable, str(TOOL), str(first), str(second)], capture_output=True, text=True)
    assert result.returncode == 2 and result.stdout == "" and "also in an earlier folder" in result.stderr


def test_the_cap_check_reads_its_committed_runs_as_its_tool_pairs_them(tmp_path):
    """Every cell the page names still learning at the cap needs its run retrained at twice the steps: on the
    committed records (the republish's and the sweeps whose caps the check raised) the row counts the cells
    cap_plan.py names with a cap run of the same task, model, parameters, seed, rate and weight decay at twice the
    steps (matched here without cap.py); without cap runs none is retrained and it fails."""
    section = [record for folder in (BENCHMARK / "republish" / "records", BENCHMARK / "budget" / "retired-records")
               for record in load_records(folder).records.values()]
    needed = load_script(BENCHMARK / "budget" / "cap_plan.py").retrained(section)
    runs = list(load_records(BENCHMARK / "budget" / "cap-records").records.values())

    def run_of(record):
        def same(run):
            return (run["task"], run["model"], run["seed"], run["params"]["task"], run["params"]["model"],
                    run["train"]["lr"], run["train"].get("weight_decay", 0.0), run["params"]["train"]["steps"]) == \
                (record["task"], record["model"], record["seed"], record["params"]["task"], record["params"]["model"],
                 record["train"]["lr"], record["train"].get("weight_decay", 0.0), 2 * record["params"]["train"]["steps"])
        return next((run for run in runs if same(run)), None)

    gains = [run["metrics"]["accuracy"] - record["metrics"]["accuracy"]
             for record, run in ((record, run_of(record)) for record in needed) if run]
    within = sum(round(abs(gain), 9) <= 0.01 for gain in gains)
    check = CHECK_CAP(section)
    assert len(needed) > 0 and check.found.startswith(f"{len(gains)} of {len(needed)} cells retrained, {within} within")
    assert check.holds == (len(gains) == len(needed) and within >= 0.95 * len(needed))
    empty = CHECK_CAP(section, tmp_path)
    assert not empty.holds and empty.found.startswith(f"0 of {len(needed)} cells retrained, 0 within 0.01; not ")


def test_a_section_with_no_cell_still_learning_at_the_cap_holds():
    solved = [record for record in load_records(BENCHMARK / "republish" / "records").records.values()
              if record["task"] == "icl-markov" and record["model"] == "gru"]  # at its target
    check = CHECK_CAP(solved)
    assert solved and check.holds and check.found == "0 of 0 cells retrained, 0 within 0.01"
