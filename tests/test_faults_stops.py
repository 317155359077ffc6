"""Issue #32, item 1: a stop loses nothing. SIGTERM to the whole process group (what `timeout` and batch schedulers
send) at each moment of a pairing ends every worker without a traceback and leaves no failed record; a plain rerun
completes the grid."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from run_support import TINY_TASK, interruptible, record_files, wait_until, workers_of, write_suite
from tokbench.grid import expand
from tokbench.isolation import LocalExecutor
from tokbench.plugins import load_registry
from tokbench.results import load_records
from tokbench.suites import load_suite

PAIRINGS = 8
SUITE = f'seeds = {PAIRINGS}\n[[grid]]\ntasks = ["random-walk"]\nmodels = ["pausing"]\n{TINY_TASK}'
LIMIT_SECONDS = 300


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def _start(tmp_path: Path, env: dict[str, str], moment: str | None, log: Path) -> subprocess.Popen:
    marks = tmp_path / f"marks-{moment}"
    marks.mkdir(exist_ok=True)
    pause = {"PAUSE_AT": moment, "PAUSE_MARKS": str(marks)} if moment else {}
    command = [sys.executable, "-m", "tokbench.cli", "run", "--suite", str(tmp_path / "stops.toml"),
               "--out", str(tmp_path / "runs"), "--jobs", "2", "-q"]
    with log.open("w") as handle:
        return subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, cwd=tmp_path,
                                env={**os.environ, **env, **pause}, start_new_session=True, preexec_fn=interruptible)


def test_sigterm_to_the_process_group_at_every_moment_fails_nothing_and_a_plain_rerun_completes(tmp_path,
                                                                                               plugin_site):
    env = plugin_site(pausing="pausing_model")
    write_suite(tmp_path, SUITE, "stops.toml")
    out = tmp_path / "runs"
    for moment in ("start", "build", "train", "evaluate", "write"):
        log = tmp_path / f"{moment}.log"
        run = _start(tmp_path, env, None if moment == "start" else moment, log)
        marks = tmp_path / f"marks-{moment}"
        try:
            reached = (lambda: workers_of(run.pid)) if moment == "start" else (lambda: any(marks.iterdir()))
            assert wait_until(lambda: reached() or run.poll() is not None, LIMIT_SECONDS), moment
            assert run.poll() is None, f"{moment}: the run ended before the stop\n{log.read_text()}"
            os.killpg(run.pid, signal.SIGTERM)
            run.wait(timeout=LIMIT_SECONDS)
        finally:
            if run.poll() is None:
                os.killpg(run.pid, signal.SIGKILL)
        text = log.read_text()
        assert run.returncode == 130, f"{moment}: exit {run.returncode}\n{text}"
        assert "Traceback" not in text and "Error" not in text, f"{moment}:\n{text}"
        assert "run the same command again to resume" in text
        assert wait_until(lambda: _group_gone(run.pid), 30), f"{moment}: processes of the run outlive it"
        loaded = load_records(out)
        assert not loaded.problems and not list(out.glob(".*.tmp")), moment
        statuses = [r["status"] for r in loaded.records.values()]
        assert set(statuses) <= {"ok"}, f"{moment}: {statuses}"
        assert len(statuses) < PAIRINGS, f"{moment}: nothing was left to interrupt"
    rerun = _start(tmp_path, env, None, tmp_path / "rerun.log")
    assert rerun.wait(timeout=LIMIT_SECONDS) == 0, (tmp_path / "rerun.log").read_text()
    loaded = load_records(out)
    assert [r["status"] for r in loaded.records.values()] == ["ok"] * PAIRINGS == ["ok"] * len(record_files(out))


def test_a_worker_stopped_while_it_trains_writes_no_record_and_stops_the_run(tmp_path, plugin_site, monkeypatch):
    """Lightning's SIGTERM handling inside fit raised SIGTERMException, which the worker recorded as a failure."""
    monkeypatch.syspath_prepend(plugin_site(pausing="pausing_model")["PYTHONPATH"].split(os.pathsep)[0])
    marks = tmp_path / "marks"
    marks.mkdir()
    for key, value in {"PAUSE_AT": "train", "PAUSE_MARKS": str(marks), "PAUSE_SECONDS": "5"}.items():
        monkeypatch.setenv(key, value)
    suite = load_suite(str(write_suite(tmp_path, SUITE.replace(f"seeds = {PAIRINGS}", "seeds = 1"), "one.toml")))
    [pairing] = expand(suite, load_registry())
    out = tmp_path / "runs"
    out.mkdir()
    executor = LocalExecutor(out, None, jobs=1, threads=1)
    try:
        executor.submit(pairing)
        assert wait_until(lambda: any(marks.iterdir()), LIMIT_SECONDS)
        os.kill(executor.workers[0].process.pid, signal.SIGTERM)
        with pytest.raises(KeyboardInterrupt):
            executor.wait()
    finally:
        executor.close(abort=True)
    assert not list(out.iterdir()), [json.loads(p.read_text())["error"] for p in out.glob("*.json")]


def test_a_model_that_raises_keyboard_interrupt_is_recorded_as_such(tmp_path, cli, plugin_site):
    """Lightning's fit turns a KeyboardInterrupt into sys.exit(1): the record said `SystemExit: 1`."""
    env = plugin_site(hostile="hostile_model")
    suite = write_suite(tmp_path, f'seeds = 1\n[[grid]]\ntasks = ["random-walk"]\nmodels = ["hostile"]\n'
                                  f'[grid.model.hostile]\nact = "interrupt"\n{TINY_TASK}', "interrupt.toml")
    done = cli("run", "--suite", str(suite), "--out", str(tmp_path / "runs"), "-q", env=env, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    [rec] = load_records(tmp_path / "runs").records.values()
    assert rec["error"] == "KeyboardInterrupt" and rec["failure"]["exception"] == "KeyboardInterrupt"
    assert rec["failure"]["phase"] == "train"
