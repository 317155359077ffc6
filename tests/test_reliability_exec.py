"""Issue #11, execution: pairings that raise, exit, crash or hang, and plugins that exit or hang while loading.

Every test reproduces an attack from the issue and bounds its own time. Each command runs in the test's own
temporary folder with its own --out, so a ``runs/`` folder where pytest starts changes nothing; time limits are
generous (tens of seconds), so that a loaded machine cannot make a well-behaved pairing or plugin miss them.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from run_support import TINY_TASK, record_files, write_suite
from tokbench.grid import Pairing
from tokbench.outcome import Failure, Outcome, record_of
from tokbench.plugins import registry
from tokbench.results import load_records, validate

ACTS = ("none", "raise", "sys_exit", "os_exit", "segfault", "hang", "not_applicable")
PAIRING_TIMEOUT = 30  # seconds: the hanging pairing waits this long; the tiny ones train in well under a second
PLUGIN_TIMEOUT = 20  # seconds: the hanging hook waits this long; the built-in plugins import in a few


def suite_of_acts(folder: Path, acts=ACTS) -> Path:
    blocks = ['seeds = 1\n[[grid]]\ntasks = ["random-walk"]\nmodels = ["hostile-missing"]\n' + TINY_TASK]
    for act in acts:
        blocks.append(f'[[grid]]\ntasks = ["random-walk"]\nmodels = ["hostile"]\n[grid.model.hostile]\n'
                      f'act = "{act}"\n{TINY_TASK}')
    return write_suite(folder, "\n".join(blocks), "hostile.toml")


def by_act(out_dir: Path) -> dict[str, dict]:
    records = load_records(out_dir).records.values()
    return {r["params"]["model"].get("act", "missing"): r for r in records}


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_each_hostile_pairing_gets_a_record_saying_what_happened_and_the_grid_goes_on(
        tmp_path, cli, plugin_site, jobs):
    env = plugin_site(hostile="hostile_model")
    out_dir = tmp_path / "runs"
    started = time.monotonic()
    done = cli("run", "--suite", str(suite_of_acts(tmp_path)), "--out", str(out_dir), "--jobs", jobs,
               "--timeout", str(PAIRING_TIMEOUT), "-q", env=env, cwd=tmp_path, timeout=600)
    assert time.monotonic() - started < 600
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    records = by_act(out_dir)
    assert len(records) == 8 == len(record_files(out_dir))
    assert records["none"]["status"] == "ok"
    where = ("phase", "exit_status", "signal")  # an exception's type, message and frames: tests/test_failure_details.py
    failures = {act: (r["status"], r.get("failure") and {k: r["failure"][k] for k in where}, r["error"])
                for act, r in records.items() if act != "none"}
    assert failures["raise"] == ("failed", {"phase": "train", "exit_status": None, "signal": None},
                                 "RuntimeError: raised on purpose while training")
    assert failures["sys_exit"] == ("failed", {"phase": "train", "exit_status": 0, "signal": None}, "SystemExit: 0")
    assert failures["os_exit"][:2] == ("failed", {"phase": "worker", "exit_status": 7, "signal": None})
    assert "exited with status 7" in failures["os_exit"][2]
    assert failures["segfault"][:2] == ("failed", {"phase": "worker", "exit_status": None, "signal": "SIGSEGV"})
    assert failures["hang"] == ("failed", {"phase": "timeout", "exit_status": None, "signal": None},
                                f"timed out after {PAIRING_TIMEOUT} s")
    assert failures["missing"][:2] == ("failed", {"phase": "environment", "exit_status": None, "signal": None})
    assert failures["not_applicable"] == ("not_applicable", None, "this model refuses every task")
    assert "6 of 8 pairings failed" in done.stderr
    # A plain rerun retries only the pairing that failed for the environment (its module was missing).
    again = cli("run", "--suite", str(suite_of_acts(tmp_path)), "--out", str(out_dir), "--dry-run", env=env,
                cwd=tmp_path)
    [retried] = [line for line in again.stdout.splitlines() if line.startswith("run ")]
    assert "hostile-missing" in retried


@pytest.mark.parametrize("plugin, module, error", [
    ("hexit", "hook_exit", "register_tasks failed: SystemExit: 0"),
    ("iexit", "import_exit", "import failed: SystemExit: 0"),
    ("hsleep", "hook_sleep", f"register_models failed: TimeoutError: did not finish within {PLUGIN_TIMEOUT} s"),
])
def test_a_plugin_that_exits_or_hangs_is_reported_and_every_command_goes_on(
        tmp_path, cli, plugin_site, plugin, module, error):
    env = {**plugin_site(**{plugin: module}), "TOKBENCH_PLUGIN_TIMEOUT": str(PLUGIN_TIMEOUT)}
    listing = cli("plugins", "--json", env=env, cwd=tmp_path, timeout=300)
    assert listing.returncode == 0
    [info] = [p for p in json.loads(listing.stdout) if p["name"] == plugin]
    assert info["status"] == "error" and info["error"].startswith(error)
    tasks = cli("ls", "tasks", env=env, cwd=tmp_path, timeout=300)
    assert tasks.returncode == 0 and "random-walk" in tasks.stdout
    assert f"plugin {plugin!r} (tokbench-fake-plugins) failed and was skipped: {error}" in tasks.stderr
    run = cli("run", "--task", "random-walk", "--model", "last-token", "--seeds", "1", "--dry-run",
              "--out", str(tmp_path / "runs"), env=env, cwd=tmp_path, timeout=300)
    assert run.returncode == 0 and error in run.stderr and "1 pairings: 1 to run, 0 not applicable" in run.stdout


def test_a_bad_plugin_time_limit_is_a_usage_error(tmp_path, cli):
    done = cli("ls", "tasks", env={"TOKBENCH_PLUGIN_TIMEOUT": "soon"}, cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "TOKBENCH_PLUGIN_TIMEOUT" in done.stderr


def test_a_failed_record_of_an_untrained_model_says_0_steps():
    task, model = registry().task("random-walk"), registry().model("last-token")
    pairing = Pairing.of(task, model, task.resolve({}), model.resolve({}), model.recipe.override({"steps": 9}), 0)
    provenance = {"tokbench_version": "0", "git_commit": None, "python": "3", "torch": "2", "lightning": "2",
                  "device": "cpu", "threads": 1}
    outcome = Outcome("2026-01-01T00:00:00Z", 0.5, error="RuntimeError: x", failure=Failure("worker", signal="SIGKILL"))
    record = record_of(pairing, outcome, provenance)
    validate(record)
    assert record["params"]["train"] == {} and record["train"]["steps"] == 0
    assert record["failure"] == {"phase": "worker", "exit_status": None, "signal": "SIGKILL"}
