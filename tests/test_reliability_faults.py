"""Issue #21, second-round faults: shadowed packages, usage errors before workers, warm-ups, failed reruns, NaN
outputs, verify through isolated workers, tampered and duplicated records, publishing that prunes only its own files.

Every command runs in the test's own temporary folder with its own --out; time limits are generous (minutes),
and the tests that wait for a process wait for an event (a file, a worker), never for a few seconds.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from leaderboard_synth import publish, record, seeds, write
from run_support import TINY_SUITE, TINY_TASK, interruptible, record_files, wait_until, workers_of, write_suite
from tokbench.cli import main
from tokbench.grid import expand, parse_settings
from tokbench.isolation import interrupts_deferred
from tokbench.plugins import registry
from tokbench.results import load_record, load_records
from tokbench.suites import load_suite

TOKBENCH = Path(sys.executable).with_name("tokbench")  # the console script, as a user starts it


def hostile_suite(folder: Path, act: str = "none", seeds: int = 1) -> Path:
    return write_suite(folder, f'seeds = {seeds}\n[[grid]]\ntasks = ["random-walk"]\nmodels = ["hostile"]\n'
                               f'[grid.model.hostile]\nact = "{act}"\n{TINY_TASK}', "hostile.toml")


# ---- 3: a tokbench/ folder where the user stands ----------------------------------------------------------------

@pytest.mark.skipif(not TOKBENCH.exists(), reason="needs the tokbench console script beside the interpreter")
def test_run_from_a_folder_holding_an_empty_tokbench_folder_trains_its_pairing(tmp_path):
    (tmp_path / "tokbench").mkdir()  # e.g. the folder that holds a clone named tokbench
    suite = write_suite(tmp_path, TINY_SUITE.replace("seeds = 2", "seeds = 1"))
    done = subprocess.run([str(TOKBENCH), "run", "--suite", str(suite), "--out", "runs", "-q"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert {load_record(p)["status"] for p in record_files(tmp_path / "runs")} == {"ok"}


# ---- 4: usage errors come before the fork server ----------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["--task", "no-such-task"],
    ["--set", "train.steps=-1"],
    ["--shard", "3/2"],
    ["--ray-address", "localhost:1"],
    ["--suite", "no-such-suite.toml"],
])
def test_usage_errors_are_one_line_before_any_worker_process_starts(tmp_path, monkeypatch, capsys, argv):
    started = []
    monkeypatch.setattr("tokbench.commands.run.start_server", lambda: started.append(True))
    assert main(["run", *argv, "--out", str(tmp_path / "runs")]) == 2
    assert started == [] and capsys.readouterr().err.count("\n") == 1


# ---- 5: explicit steps scale the warm-up ------------------------------------------------------------------------

def _recipes(settings: list[str], model: str = "transformer-2l") -> list:
    grid = expand(load_suite("survey"), registry(), ["random-walk"], [model], 1, parse_settings(settings))
    return [p.recipe for p in grid]


def test_the_default_suite_is_a_first_look_that_points_to_the_full_suites():
    suite = load_suite("default")
    pairings = expand(suite, registry())
    assert {p.task_spec.name for p in pairings} == set(registry().tasks)  # every task, few models and seeds
    assert len({p.model_spec.name for p in pairings}) <= 6 and {p.seed for p in pairings} == {0, 1, 2}
    assert all(p.recipe.steps <= suite.max_steps <= 300 for p in pairings)
    assert "--suite tokbench" in suite.description


def test_a_default_run_ends_pointing_to_the_full_suites(cli, tmp_path):
    done = cli("run", "--task", "random-walk", "--model", "last-token", "--seeds", "1", "-q",
               "--out", str(tmp_path / "runs"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    # a narrowed run is not the first look, and says which sizes it took
    assert "default suite's first-look sizes" in last and "--suite tokbench" in last and "--suite survey" in last


def test_explicit_steps_scale_the_recipes_warm_up_and_an_explicit_warm_up_stays():
    default = registry().model("transformer-2l").recipe
    assert default.warmup_steps > 0
    [recipe] = _recipes(["train.steps=20"])
    assert (recipe.steps, recipe.warmup_steps) == (20, round(default.warmup_steps * 20 / default.steps))
    [recipe] = _recipes(["train.steps=20", "train.warmup_steps=3"])
    assert recipe.warmup_steps == 3


def test_a_warm_up_longer_than_the_steps_is_a_usage_error(cli, tmp_path):
    done = cli("run", "--suite", "survey", "--model", "transformer-2l", "--task", "random-walk", "--set", "train.steps=10",
               "--set", "train.warmup_steps=50", "--dry-run", "--out", str(tmp_path / "runs"), cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "warmup_steps=50 exceeds steps=10" in done.stderr


# ---- 11 and 12: failed reruns, NaN outputs -----------------------------------------------------------------------

def test_a_failed_rerun_all_keeps_the_ok_record_and_reports_the_failure(tmp_path, cli, plugin_site):
    env = plugin_site(hostile="hostile_model")
    suite, out = hostile_suite(tmp_path, seeds=2), tmp_path / "runs"
    first = cli("run", "--suite", str(suite), "--out", str(out), "-q", env=env, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    before = {p.name: p.read_bytes() for p in record_files(out)}
    again = cli("run", "--suite", str(suite), "--out", str(out), "--rerun", "all", "-q",
                env={**env, "HOSTILE_ACT": "raise"}, cwd=tmp_path)
    assert again.returncode == 1
    assert "2 of 2 pairings failed" in again.stderr and again.stderr.count("the earlier finished record is kept") == 2
    assert {p.name: p.read_bytes() for p in record_files(out)} == before


def test_nan_outputs_at_evaluation_give_a_failed_record(tmp_path, cli, plugin_site):
    env = plugin_site(hostile="hostile_model")
    done = cli("run", "--suite", str(hostile_suite(tmp_path, "nan_eval")), "--out", str(tmp_path / "runs"), "-q",
               env=env, cwd=tmp_path)
    assert done.returncode == 1
    [record] = load_records(tmp_path / "runs").records.values()
    assert record["status"] == "failed" and record["failure"]["phase"] == "evaluate"
    assert "NaN" in record["error"] and record["metrics"] == {}


# ---- 7: verify through the isolated workers ----------------------------------------------------------------------

@pytest.fixture
def verified(tmp_path, cli, plugin_site):
    """A folder with two ok hostile records (trained with act none) and the environment that installs the plugin."""
    env = plugin_site(hostile="hostile_model")
    out = tmp_path / "runs"
    done = cli("run", "--suite", str(hostile_suite(tmp_path, seeds=2)), "--out", str(out), "-q", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return out, env


def test_verify_passes_only_after_a_summary_counting_every_record(verified, cli, tmp_path):
    out, env = verified
    done = cli("verify", str(out), env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith("2 of 2 records checked reproduce")


@pytest.mark.parametrize("act, extra, failure", [
    ("os_exit0", [], "exited with status 0"),
    ("hang_term", ["--timeout", "20"], "timed out after 20 s"),
])
def test_verify_of_a_model_that_exits_0_or_hangs_fails_and_counts_every_record(verified, cli, tmp_path, act, extra,
                                                                                failure):
    out, env = verified
    done = cli("verify", str(out), *extra, env={**env, "HOSTILE_ACT": act}, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stdout.count("FAIL") == 2 and failure in done.stdout
    assert "0 of 2 records checked reproduce" in done.stderr
    assert record_files(out) and all(load_record(p)["status"] == "ok" for p in record_files(out))  # never written


def test_ctrl_c_stops_verify_with_130_and_a_summary(verified, tmp_path):
    out, env = verified
    process = subprocess.Popen([sys.executable, "-m", "tokbench.cli", "verify", str(out), "--jobs", "1"],
                               env={**os.environ, **env, "HOSTILE_ACT": "hang_term"}, cwd=tmp_path,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=interruptible)
    try:
        assert wait_until(lambda: workers_of(process.pid), timeout=300)  # retraining has begun
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=300)
    finally:
        process.kill()
    assert process.returncode == 130
    assert "records checked reproduce" in stderr and "not checked" in stderr and "interrupted" in stderr
    assert "Traceback" not in stderr


# ---- 9 and 10: publishing that prunes only its own files; tampered and duplicated records ---------------------

def test_prune_removes_only_what_an_earlier_publish_wrote(tmp_path):
    source = write(tmp_path / "runs", seeds(3, [0.5, 0.6, 0.7]))
    earlier = write(tmp_path / "earlier", [*seeds(3, [0.5, 0.6, 0.7]), record(seed=9, model="old"),
                                           record(seed=8, model="upgraded")])
    out = tmp_path / "board"
    assert publish("--records", str(earlier), "--out", str(out)) == 0
    foreign = [out / "plots" / "my_figure.png", out / "records" / "config.json", out / "notes.txt"]
    for path in foreign:
        path.write_text("mine")
    [upgraded] = (out / "records").glob("*__upgraded__*")  # since rewritten by a newer tokbench
    upgraded.write_text(json.dumps({**json.loads(upgraded.read_text()), "schema_version": 99}))
    assert publish("--records", str(source), "--out", str(out), "--prune") == 0
    assert all(path.read_text() == "mine" for path in foreign)  # files tokbench did not write stay
    assert not list((out / "records").glob("*__old__*")) and upgraded.exists()
    assert len(list((out / "records").glob("*.json"))) == 5  # the 3 published, the newer one, config.json


def test_a_hand_written_readme_is_not_overwritten(tmp_path, capsys):
    source, out = write(tmp_path / "runs", seeds(3, [0.5, 0.6, 0.7])), tmp_path / "board"
    out.mkdir()
    (out / "README.md").write_text("# My notes\n")
    assert publish("--records", str(source), "--out", str(out)) == 2
    assert (out / "README.md").read_text() == "# My notes\n" and not (out / "leaderboard.json").exists()
    assert capsys.readouterr().err.count("\n") == 1
    (out / "README.md").unlink()
    assert publish("--records", str(source), "--out", str(out)) == 0
    assert publish("--records", str(source), "--out", str(out)) == 0  # its own README is rewritten


@pytest.mark.parametrize("inside", ["", "sub"])
def test_out_in_the_records_folder_is_refused_in_one_line(tmp_path, capsys, inside):
    source = write(tmp_path / "runs", seeds(3, [0.5, 0.6, 0.7]))
    assert publish("--records", str(source), "--out", str(source / inside)) == 2
    assert capsys.readouterr().err.count("\n") == 1 and not (source / inside / "leaderboard.json").exists()


def test_verify_stops_on_an_edited_normalized_accuracy_naming_the_file(tmp_path, cli):
    source = write(tmp_path / "runs", seeds(3, [0.5, 0.6, 0.7]))
    path = sorted(source.glob("*.json"))[0]
    edited = json.loads(path.read_text())
    edited["metrics"]["normalized_accuracy"] *= 1.25
    path.write_text(json.dumps(edited))
    done = cli("verify", str(source), cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert str(path) in done.stderr and "normalized_accuracy" in done.stderr


def test_one_pairing_in_two_files_is_an_error_naming_both(tmp_path, capsys):
    source = write(tmp_path / "runs", seeds(3, [0.5, 0.6, 0.7]))
    first = sorted(source.glob("*.json"))[0]
    copy = write(source / "shard", [json.loads(first.read_text())]) / first.name
    assert main(["leaderboard", "--records", str(source)]) == 2
    err = capsys.readouterr().err
    assert str(first) in err and str(copy) in err
    assert main(["verify", str(source), "--integrity"]) == 2


def test_verify_integrity_checks_the_published_manifest_without_training(tmp_path, capsys):
    source, out = write(tmp_path / "runs", seeds(3, [0.5, 0.6, 0.7])), tmp_path / "board"
    assert publish("--records", str(source), "--out", str(out)) == 0
    capsys.readouterr()
    assert main(["verify", str(out / "records"), "--integrity"]) == 0
    assert "3 records valid" in capsys.readouterr().out
    path = sorted((out / "records").glob("*.json"))[0]
    edited = json.loads(path.read_text())  # a change no recomputation catches: a record's cpu
    edited["provenance"]["cpu"] = "elsewhere"
    path.write_text(json.dumps(edited, indent=1))
    added = write(out / "records", [record(seed=7)])
    assert main(["verify", str(out / "records"), "--integrity"]) == 1
    out_text = capsys.readouterr()
    assert f"{path.resolve()}: changed" in out_text.out and "does not list" in out_text.out
    assert "2 problems" in out_text.err
    assert len(list(added.glob("*.json"))) == 4
    assert main(["verify", str(source), "--integrity"]) == 1  # a folder with no manifest is no pass


# ---- 8: a plugin that calls os._exit(0) ----------------------------------------------------------------------

@pytest.mark.parametrize("plugin, module, error", [
    ("hosexit", "hook_os_exit", "register_tasks failed: RuntimeError: called os._exit(0)"),
    ("iosexit", "import_os_exit", "import failed: RuntimeError: called os._exit(0)"),
])
def test_a_plugin_calling_os_exit_0_is_reported_and_commands_go_on(tmp_path, cli, plugin_site, plugin, module, error):
    env = plugin_site(**{plugin: module})
    listing = cli("plugins", "--json", env=env, cwd=tmp_path)
    assert listing.returncode == 0
    [info] = [p for p in json.loads(listing.stdout) if p["name"] == plugin]
    assert info["status"] == "error" and info["error"] == error
    run = cli("run", "--task", "random-walk", "--model", "last-token", "--seeds", "1", "-q",
              "--out", str(tmp_path / "runs"), env=env, cwd=tmp_path)
    assert run.returncode == 0 and error in run.stderr and len(record_files(tmp_path / "runs")) == 1


# ---- 13: numbers a machine cannot hold, deep nesting, SIGTERM ----------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["--threads", "100000"], "expected at most"),
    (["--set", "train.steps=1000000000000"], "train.steps is 1,000,000,000,000 optimiser steps"),
    (["--set", "train_size=1000000000"], "train_size=1000000000 at context_length"),
    (["--set", "train.batch_size=100000000000"], "train.batch_size"),
])
def test_numbers_a_machine_cannot_hold_are_one_line_usage_errors_even_in_a_dry_run(tmp_path, capsys, argv, message):
    try:
        code = main(["run", "--task", "random-walk", "--model", "attn-nope", "--dry-run", *argv,
                     "--out", str(tmp_path / "runs")])
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err


def test_a_deeply_nested_suite_is_a_one_line_error(tmp_path, capsys):
    suite = write_suite(tmp_path, "seeds = 1\n[[grid]]\ntasks = " + "[" * 5000 + "]" * 5000 + "\nmodels = []\n")
    assert main(["run", "--suite", str(suite), "--dry-run", "--out", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nested too deeply" in err


def test_verify_of_a_record_claiming_more_threads_than_cores_fails_that_record(tmp_path, capsys):
    source = write(tmp_path / "runs", [record()])
    path = next(source.glob("*.json"))
    edited = json.loads(path.read_text())
    edited["provenance"]["threads"] = 100000
    path.write_text(json.dumps(edited))
    assert main(["verify", str(source)]) == 1
    captured = capsys.readouterr()
    assert "FAIL" in captured.out and "provenance.threads 100000" in captured.out
    assert "0 of 1 records checked reproduce" in captured.err


def test_sigterm_stops_a_run_with_one_interrupted_line_and_130(tmp_path, plugin_site):
    env = plugin_site(hostile="hostile_model")
    process = subprocess.Popen([sys.executable, "-m", "tokbench.cli", "run", "--suite",
                                str(hostile_suite(tmp_path, "hang", seeds=2)), "--out", str(tmp_path / "runs"), "-q"],
                               env={**os.environ, **env}, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        assert wait_until(lambda: workers_of(process.pid), timeout=300)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=300)
    finally:
        process.kill()
    assert process.returncode == 130
    assert "interrupted" in stderr and "run the same command again to resume" in stderr
    assert "Traceback" not in stderr and not record_files(tmp_path / "runs")



def test_an_interrupt_while_a_worker_starts_lands_after_the_start_not_inside_it():
    def interrupted(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupted)
    finished_start = False
    try:
        with pytest.raises(KeyboardInterrupt), interrupts_deferred():
            os.kill(os.getpid(), signal.SIGTERM)  # as a scheduler's SIGTERM landing mid-start
            finished_start = True
        assert finished_start
        assert signal.getsignal(signal.SIGTERM) is interrupted
    finally:
        signal.signal(signal.SIGTERM, previous)

# ---- 6: what the commands say ----------------------------------------------------------------------------------

def test_ls_keeps_descriptions_whole_past_et_al_and_iid(capsys):
    assert main(["ls", "tasks"]) == 0
    out = capsys.readouterr().out
    assert "(Nichani et al. 2024, single_parent.py)" in out and "i.i.d. uniform" in out


def test_the_dry_run_counts_not_applicable_pairings_apart(tmp_path, cli, plugin_site):
    # no built-in pairing is n/a since the single attention layers predict at every position: a plugin's
    # last-position-only model on a task scored at many positions is
    env = plugin_site(v2="contract_v2")
    result = cli("run", "--dry-run", "--task", "previous-token", "icl-markov", "--model", "last-position-attention",
                 "uniform", "--out", str(tmp_path / "runs"), env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    runs, inapplicable = sum(x.startswith("run ") for x in lines), sum(x.startswith("n/a ") for x in lines)
    assert inapplicable > 0 and runs > 0
    assert f": {runs} to run, {inapplicable} not applicable (recorded without training), 0 to skip" in lines[-1]


def test_verify_of_a_record_whose_plugin_is_missing_says_so(tmp_path, capsys):
    source = write(tmp_path / "runs", [record(model="not-installed-model")])
    assert main(["verify", str(source)]) == 1
    out = capsys.readouterr().out
    assert "model 'not-installed-model' is not installed here" in out and "unknown" not in out


@pytest.mark.parametrize("command", [["leaderboard", "--records"], ["verify"]])
def test_a_file_given_as_the_records_folder_is_named_as_not_a_folder(tmp_path, capsys, command):
    path = tmp_path / "records.json"
    path.write_text("{}")
    assert main([*command, str(path)]) == 2
    err = capsys.readouterr().err
    assert "not a folder" in err and "no such folder" not in err
