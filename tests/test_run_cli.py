"""``tokbench run`` in this process (one job): records, resume, failures, dry run, shards, usage errors."""
from __future__ import annotations

import json
import shutil
from dataclasses import replace

import pytest

from run_support import TINY_SUITE, record_files, write_suite
from tokbench.cli import main
from tokbench.plugins import registry
from tokbench.results import load_record, load_records
from tokbench.specs import Recipe


@pytest.fixture
def tiny(tmp_path):
    return write_suite(tmp_path)


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["run", "--jobs", "1", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_run_writes_one_valid_record_per_pairing_then_resumes(tmp_path, tiny, capsys):
    out_dir = tmp_path / "runs"
    code, out, err = run(capsys, "--suite", str(tiny), "--out", str(out_dir))
    assert code == 0, err
    files = record_files(out_dir)
    assert len(files) == 6
    records = [load_record(f) for f in files]
    assert {(r["model"], r["seed"]) for r in records} == {(m, s) for m in ("attn-paper-a", "attn-nope", "last-token")
                                                          for s in (0, 1)}
    assert all(r["status"] == "ok" and r["train"]["steps"] in (0, 3) for r in records)
    # Not a terminal: one plain line per finished pairing, then the leaderboard.
    lines = [line for line in out.splitlines() if line.startswith("[")]
    assert len(lines) == 6 and all(" ok " in line for line in lines)
    assert "6 of 6 pairings to run" in err

    before = {f.name: f.read_bytes() for f in files}
    code, out, err = run(capsys, "--suite", str(tiny), "--out", str(out_dir))
    assert code == 0 and "all 6 pairings already have records" in err
    assert not [line for line in out.splitlines() if line.startswith("[")]
    assert {f.name: f.read_bytes() for f in record_files(out_dir)} == before  # nothing rewritten

    code, out, _ = run(capsys, "--suite", str(tiny), "--out", str(out_dir), "--rerun", "all", "--model", "last-token")
    assert code == 0 and len([line for line in out.splitlines() if line.startswith("[")]) == 2


def test_a_failing_pairing_is_recorded_and_the_grid_goes_on(tmp_path, tiny, capsys):
    out_dir = tmp_path / "runs"
    # 3 orthogonal positions cannot hold the 9 of a context of 8: attn-paper-a raises, the others run.
    code, out, err = run(capsys, "--suite", str(tiny), "--out", str(out_dir), "--set", "model.position_dim=3")
    assert code == 1
    records = list(load_records(out_dir).records.values())
    failed = [r for r in records if r["status"] == "failed"]
    assert len(records) == 6 and {r["model"] for r in failed} == {"attn-paper-a"} and len(failed) == 2
    assert failed[0]["error"].startswith("ParamError: position_dim=3 is too small")
    assert failed[0]["metrics"] == {}
    assert "2 of 6 pairings failed" in err and "attn-paper-a seed 0: ParamError" in err
    assert len([line for line in out.splitlines() if line.startswith("[") and "FAILED" in line]) == 2

    # The default rerun leaves failed records alone, and still says the grid has failures.
    code, out, err = run(capsys, "--suite", str(tiny), "--out", str(out_dir), "--set", "model.position_dim=3")
    assert code == 1 and "already have records" in err
    code, out, err = run(capsys, "--suite", str(tiny), "--out", str(out_dir), "--set", "model.position_dim=3",
                         "--rerun", "failed")
    assert code == 1 and "2 of 6 pairings to run" in err


def test_a_non_finite_loss_fails_the_pairing(tmp_path, tiny, capsys):
    code, _, err = run(capsys, "--suite", str(tiny), "--out", str(tmp_path / "runs"), "--model", "attn-nope",
                       "--seeds", "1", "--set", "lr=1e30")
    assert code == 1
    [record] = load_records(tmp_path / "runs").records.values()
    assert record["status"] == "failed" and record["error"].startswith("NonFiniteLossError: loss became nan")


def test_dry_run_lists_pairings_and_trains_nothing(tmp_path, tiny, capsys):
    out_dir = tmp_path / "runs"
    run(capsys, "--suite", str(tiny), "--out", str(out_dir), "--model", "last-token", "--seeds", "1")
    code, out, _ = run(capsys, "--suite", str(tiny), "--out", str(out_dir), "--dry-run")
    assert code == 0
    lines = out.splitlines()
    assert lines[-1] == "6 pairings: 5 to run, 0 not applicable (recorded without training), 1 to skip"
    assert sum(line.startswith("skip  ok") for line in lines) == 1
    assert sum(line.startswith("run   missing") for line in lines) == 5
    assert len(record_files(out_dir)) == 1


def test_shards_merge_by_copying_folders(tmp_path, tiny, capsys):
    for i in range(2):
        assert run(capsys, "--suite", str(tiny), "--out", str(tmp_path / f"shard{i}"), "--shard", f"{i}/2",
                   "--model", "last-token", "attn-nope")[0] == 0
    merged = tmp_path / "merged"
    for i in range(2):
        shutil.copytree(tmp_path / f"shard{i}", merged, dirs_exist_ok=True)
    assert len(record_files(tmp_path / "shard0")) == len(record_files(tmp_path / "shard1")) == 2
    code, _, err = run(capsys, "--suite", str(tiny), "--out", str(merged), "--model", "last-token", "attn-nope")
    assert code == 0 and "all 4 pairings already have records" in err


def test_a_corrupt_file_is_skipped_with_a_warning_or_fails_when_strict(tmp_path, tiny, capsys):
    out_dir = tmp_path / "runs"
    out_dir.mkdir()
    (out_dir / "junk.json").write_text("{", encoding="utf-8")
    code, _, err = run(capsys, "--suite", str(tiny), "--out", str(out_dir), "--model", "last-token", "--seeds", "1")
    assert code == 0 and f"warning: skipped {out_dir / 'junk.json'}: corrupt JSON" in err
    code, _, err = run(capsys, "--suite", str(tiny), "--out", str(out_dir), "--strict")
    assert code == 2 and f"error: {out_dir / 'junk.json'}: corrupt JSON" in err


@pytest.mark.parametrize("args, message", [
    (["--task", "random-wlk"], "unknown task 'random-wlk' (did you mean 'random-walk'"),
    (["--set", "q=1"], "--set q=1: no parameter 'q'"),
    (["--shard", "2/2"], "--shard expects i/n"),
    (["--suite", "nosuch"], "unknown suite 'nosuch'"),
    (["--ray-address", "auto"], "--ray-address needs --executor ray"),
    (["--executor", "ray", "--threads", "2"], "--threads 2 needs --executor local"),
])
def test_usage_errors_exit_2_with_one_line(tmp_path, tiny, capsys, args, message):
    code, _, err = run(capsys, "--suite", str(tiny), "--out", str(tmp_path / "runs"), *args)
    assert code == 2
    assert err.count("\n") == 1 and message in err
    assert not (tmp_path / "runs").exists()


def test_bad_suite_file_exits_2_with_its_line(tmp_path, capsys):
    suite = write_suite(tmp_path, "seeds = 1\n[[grid]]\ntasks = '*'\nmodels = '*'\nsteps = 3\n", "bad.toml")
    code, _, err = run(capsys, "--suite", str(suite))
    assert code == 2 and f"{suite}:5: unknown key 'steps'" in err


def test_records_are_plain_json_with_the_identity(tmp_path, tiny, capsys):
    run(capsys, "--suite", str(tiny), "--out", str(tmp_path), "--model", "attn-paper-a", "--seeds", "1")
    [path] = record_files(tmp_path)
    record = json.loads(path.read_text())
    assert record["params"]["task"]["context_length"] == 8 and record["params"]["model"]["position_dim"] == 16
    assert record["params"]["train"] == {**json.loads(json.dumps(Recipe().identity())), "optimizer": "gd", "lr": 1.0, "steps": 3}
    assert record["provenance"]["git_commit"] is None or len(record["provenance"]["git_commit"]) == 40
    assert record["provenance"]["threads"] == 1
    assert len(record["curve"]["step"]) == 3 and len(record["attention_profile"]) == 8


def test_an_out_folder_that_cannot_be_created_is_an_environment_error(tmp_path, tiny, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    code, out, err = run(capsys, "--suite", str(tiny), "--out", str(blocker / "runs"))
    assert code == 3 and err.count("\n") == 1
    assert f"{blocker / 'runs'}: cannot write records there: Not a directory" in err and not out


def test_a_pairing_that_is_not_applicable_gets_its_record_and_is_no_failure(tmp_path, capsys, monkeypatch):
    # mqar is scored at every position; attn-nope-last is declared to predict only the last one.
    last_only = replace(registry().model("attn-nope"), name="attn-nope-last", predicts="last")
    monkeypatch.setitem(registry().models, last_only.name, last_only)
    code, out, err = run(capsys, "--task", "mqar", "--model", "attn-nope-last", "--seeds", "1", "--out", str(tmp_path))
    [record] = load_records(tmp_path).records.values()
    assert code == 0, err
    assert record["status"] == "not_applicable" and "predicts only the last position" in record["error"]
    assert record["metrics"] == {} and "failure" not in record
    assert "n/a" in out


def test_a_record_trained_under_another_plan_is_placed_on_the_suites_ladder(tmp_path, capsys):
    """A rung is not part of the identity: a record a ladder-free suite trained at a rung's values is that rung's
    record, and a run of the laddered suite writes the rung into it (once) instead of training it again."""
    flat = write_suite(tmp_path, TINY_SUITE.replace("seeds = 2", "seeds = 1"), "flat.toml")
    laddered = write_suite(tmp_path, TINY_SUITE.replace("seeds = 2", "seeds = 1").replace(
        "[grid.task.random-walk]\ncontext_length = 8\n",
        "[grid.ladder.random-walk]\ncontext_length = [4, 8]\nK = [6, 6]\n[grid.task.random-walk]\n"), "ladder.toml")
    out_dir = tmp_path / "runs"
    assert run(capsys, "--suite", str(flat), "--out", str(out_dir))[0] == 0
    assert all("ladder" not in load_record(f) for f in record_files(out_dir))
    code, _, err = run(capsys, "--suite", str(laddered), "--out", str(out_dir), "--dry-run")
    assert code == 0 and all("ladder" not in load_record(f) for f in record_files(out_dir))  # a dry run writes nothing
    code, _, err = run(capsys, "--suite", str(laddered), "--out", str(out_dir))
    assert code == 0 and "3 of 6 pairings to run" in err and "3 records" in err and "placed on this suite's" in err
    rungs = {(r["model"], r["params"]["task"]["context_length"]): r["ladder"]
             for r in map(load_record, record_files(out_dir))}
    assert len(rungs) == 6 and {key[1]: value["rung"] for key, value in rungs.items()} == {4: 0, 8: 1}
    code, _, err = run(capsys, "--suite", str(laddered), "--out", str(out_dir))
    assert code == 0 and "placed" not in err


def test_rung_narrows_a_laddered_plan_to_those_rungs_and_keeps_tasks_without_a_ladder(tmp_path, capsys):
    text = TINY_SUITE.replace("[grid.task.random-walk]\ncontext_length = 8\n",
                              "[grid.ladder.random-walk]\ncontext_length = [4, 8, 8]\nK = [6, 6, 12]\n"
                              "[grid.task.random-walk]\n")
    text += '[[grid]]\ntasks = ["majority"]\nmodels = ["last-token"]\n[grid.task.majority]\ntrain_size = 32\n'
    laddered = write_suite(tmp_path, text, "ladder.toml")
    code, out, err = run(capsys, "--suite", str(laddered), "--rung", "1", "--dry-run", "--out", str(tmp_path / "r"))
    planned = [line for line in out.splitlines() if line.startswith("run ")]
    assert code == 0 and len(planned) == 3 * 2 + 2  # the middle rung of the walk's ladder, majority without one
    assert "ladder  random-walk: context_length 8; K 6  (rung 1 of 3 x 3 models)" in out
    code, out, err = run(capsys, "--suite", str(laddered), "--rung", "0", "2", "--dry-run", "--out", str(tmp_path))
    assert code == 0 and len([line for line in out.splitlines() if line.startswith("run ")]) == 2 * 3 * 2 + 2
    with pytest.raises(SystemExit) as exit_info:
        run(capsys, "--suite", str(laddered), "--rung", "-1", "--dry-run")
    assert exit_info.value.code == 2 and "expected an integer >= 0" in capsys.readouterr().err
    code, _, err = run(capsys, "--suite", str(laddered), "--rung", "3", "--dry-run", "--out", str(tmp_path))
    assert code == 2 and err.count("\n") == 1 and "--rung 3: no ladder of this plan has that rung (its ladders " \
                                                   "have 3 rungs, counted from 0)" in err
