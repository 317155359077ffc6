"""Issue #11, execution under attack: workers killed at random moments, Ctrl+C, two runs on one folder,
thread counts and resuming, unwritable and full disks, a bogus Ray address. Every test bounds its time."""
from __future__ import annotations

import json
import os
import random
import resource
import signal
import socket
import subprocess
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest

from run_support import (TINY_SUITE, alive, descendants, interruptible, record_files, run_command, start_run,
                         wait_until, workers_of, write_suite)
from tokbench.cli import main
from tokbench.grid import expand
from tokbench.isolation import LocalExecutor
from tokbench.plugins import registry
from tokbench.results import load_records
from tokbench.suites import load_suite

# 8 pairings of a few hundred optimiser steps: long enough to kill workers while they train.
KILL_SUITE = """
seeds = 4
[[grid]]
tasks = ["random-walk"]
models = ["attn-nope", "attn-sinusoidal"]
[grid.task.random-walk]
context_length = 16
train_size = 128
val_size = 16
test_size = 64
[grid.train]
steps = 300
"""
# Sizes at which torch's intra-op threads change the last digits (2 threads against 1 did, before the fix).
THREADS_SUITE = """
seeds = 3
[[grid]]
tasks = ["random-walk"]
models = ["attn-nope", "attn-rope"]
[grid.task.random-walk]
context_length = 32
train_size = 256
val_size = 16
test_size = 256
[grid.train]
steps = 30
"""
RUN_LIMIT_SECONDS = 300


class StatusHistory(threading.Thread):
    """Polls a records folder every few milliseconds and keeps each record file's sequence of statuses."""

    def __init__(self, folder: Path) -> None:
        super().__init__(daemon=True)
        self.folder, self.seen, self.done = folder, defaultdict(list), threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            for path in self.folder.glob("*.json"):
                try:
                    status = json.loads(path.read_text())["status"]
                except (OSError, ValueError, KeyError):
                    continue
                history = self.seen[path.name]
                if not history or history[-1] != status:
                    history.append(status)
            time.sleep(0.005)


@pytest.mark.parametrize("jobs, kills, seed", [("2", 4, 11), ("1", 2, 12)])
def test_killing_workers_at_random_moments_fails_their_pairings_only(tmp_path, jobs, kills, seed):
    rng = random.Random(seed)
    suite, out_dir = write_suite(tmp_path, KILL_SUITE, "kill.toml"), tmp_path / "runs"
    args = ("--suite", str(suite), "--out", str(out_dir), "--jobs", jobs, "-q")
    history = StatusHistory(out_dir)
    history.start()
    run = start_run(*args, log=tmp_path / "run.log")
    killed = []
    try:
        assert wait_until(lambda: workers_of(run.pid) or run.poll() is not None, RUN_LIMIT_SECONDS)
        for _ in range(kills):
            time.sleep(rng.uniform(0.2, 2.0))
            workers = sorted(workers_of(run.pid))
            if run.poll() is not None or not workers:
                break
            os.kill(rng.choice(workers), signal.SIGKILL)  # what the OOM killer does
            killed.append(1)
        run.wait(timeout=RUN_LIMIT_SECONDS)
    finally:
        run.kill()
        history.done.set()
        history.join()
    log = (tmp_path / "run.log").read_text()
    assert killed and "Traceback" not in log and "BrokenProcessPool" not in log
    loaded = load_records(out_dir)
    assert not loaded.problems and len(loaded.records) == 8 == len(record_files(out_dir))
    assert not list(out_dir.glob(".*.tmp"))
    failed = [r for r in loaded.records.values() if r["status"] == "failed"]
    assert 1 <= len(failed) <= len(killed)  # a kill between two pairings fails nothing
    assert all(r["failure"] == {"phase": "worker", "exit_status": None, "signal": "SIGKILL"} for r in failed)
    assert run.returncode == (1 if failed else 0), log
    # No record was ever replaced: an ok record a worker finished is never overwritten by "worker died".
    assert all(statuses in (["ok"], ["failed"]) for statuses in history.seen.values()), dict(history.seen)
    # The next run trains the killed pairings again, and touches no other record.
    before = {f.name: f.read_bytes() for f in record_files(out_dir)}
    again = subprocess.run(run_command(*args, "--rerun", "failed"), capture_output=True, text=True,
                           timeout=RUN_LIMIT_SECONDS)
    assert again.returncode == 0, again.stderr
    assert sum(line.startswith("[") for line in again.stdout.splitlines()) == len(failed)
    after = {f.name: f.read_bytes() for f in record_files(out_dir)}
    assert all(after[name] == content for name, content in before.items() if b'"status": "ok"' in content)


def test_a_record_written_just_before_the_worker_died_is_kept(tmp_path):
    [pairing] = expand(load_suite(str(write_suite(tmp_path))), registry(), models=["last-token"], seeds=1)
    out_dir = tmp_path / "runs"
    out_dir.mkdir()
    executor = LocalExecutor(out_dir, None, jobs=1, threads=1)
    try:
        executor.submit(pairing)
        worker = executor.workers[0]
        # The worker writes its record and reports; the report is lost with the worker, killed right after.
        while worker.conn.recv()[0] != "done":
            pass
        written = (out_dir / pairing.filename).read_bytes()
        worker.process.kill()
        [(done, record)] = executor.wait()
    finally:
        executor.close(abort=True)
    assert done is pairing and record["status"] == "ok"
    assert (out_dir / pairing.filename).read_bytes() == written


def test_metrics_are_identical_at_jobs_1_jobs_2_and_after_a_kill_and_resume(tmp_path, capsys):
    suite = str(write_suite(tmp_path, THREADS_SUITE, "threads.toml"))
    for jobs in ("1", "2"):
        assert main(["run", "--suite", suite, "--out", str(tmp_path / f"jobs{jobs}"), "--jobs", jobs, "-q"]) == 0
    resumed = tmp_path / "resumed"
    first = start_run("--suite", suite, "--out", str(resumed), "--jobs", "2", "-q", log=tmp_path / "first.log")
    try:
        assert wait_until(lambda: record_files(resumed) or first.poll() is not None, RUN_LIMIT_SECONDS)
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=60)
    finally:
        first.kill()
    assert 1 <= len(record_files(resumed)) < 6
    assert main(["run", "--suite", suite, "--out", str(resumed), "--jobs", "1", "-q"]) == 0
    capsys.readouterr()

    def outcome(folder: Path) -> dict[str, str]:
        records = load_records(folder).records
        return {key: json.dumps([r["metrics"], r["curve"], r["attention_profile"]], sort_keys=True)
                for key, r in records.items()}
    reference = outcome(tmp_path / "jobs1")
    assert len(reference) == 6
    assert outcome(tmp_path / "jobs2") == reference
    assert outcome(resumed) == reference


def test_two_runs_on_one_folder_train_each_pairing_once(tmp_path):
    suite, out_dir = write_suite(tmp_path, KILL_SUITE, "two.toml"), tmp_path / "runs"
    args = ("--suite", str(suite), "--out", str(out_dir), "--jobs", "1", "-q", "--seeds", "2")
    runs = [start_run(*args, log=tmp_path / f"run{i}.log") for i in range(2)]
    try:
        for run in runs:
            run.wait(timeout=RUN_LIMIT_SECONDS)
    finally:
        for run in runs:
            run.kill()
    logs = [(tmp_path / f"run{i}.log").read_text() for i in range(2)]
    assert [run.returncode for run in runs] == [0, 0], logs
    lines = [line for log in logs for line in log.splitlines() if line.startswith("[")]
    trained = [line for line in lines if " ok " in line]
    assert len(trained) == 4, logs
    assert all("recorded meanwhile by another run" in line for line in lines if line not in trained)
    loaded = load_records(out_dir)
    assert not loaded.problems and len(loaded.records) == 4 == len(record_files(out_dir))


def test_ctrl_c_at_jobs_1_exits_130_and_keeps_what_finished(tmp_path):
    suite, out_dir = write_suite(tmp_path, KILL_SUITE, "ctrlc.toml"), tmp_path / "runs"
    run = start_run("--suite", str(suite), "--out", str(out_dir), "--jobs", "1", "-q", log=tmp_path / "run.log",
                    start_new_session=True, preexec_fn=interruptible)
    try:
        assert wait_until(lambda: record_files(out_dir) or run.poll() is not None, RUN_LIMIT_SECONDS)
        processes = descendants(run.pid)
        os.killpg(run.pid, signal.SIGINT)  # what Ctrl+C in a terminal sends: the whole process group
        run.wait(timeout=60)
    finally:
        run.kill()
    log = (tmp_path / "run.log").read_text()
    assert run.returncode == 130, log
    assert "interrupted; every pairing that finished has its record in" in log and "Traceback" not in log
    loaded = load_records(out_dir)
    assert not loaded.problems and 1 <= len(loaded.records) < 8
    assert all(r["status"] == "ok" for r in loaded.records.values())
    assert wait_until(lambda: not any(map(alive, processes)), 10)


@pytest.fixture
def read_only_folder(tmp_path):
    """A folder nobody can write into: permissions for a user, the immutable attribute for root."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("running as root on a file system without chattr +i: no way to make a folder read-only")
    yield folder
    subprocess.run(["chattr", "-i", str(folder)], check=True)


def test_a_read_only_out_folder_fails_before_any_training(tmp_path, read_only_folder, cli):
    done = cli("run", "--suite", str(write_suite(tmp_path)), "--out", str(read_only_folder), "-q", timeout=60)
    assert done.returncode == 3 and done.stderr.count("\n") == 1
    assert not done.stdout  # nothing trained: -q prints a line for every pairing that ran
    assert f"{read_only_folder}: cannot write records there:" in done.stderr


def test_a_full_disk_after_training_is_one_line_exit_3_and_loses_nothing_written(tmp_path, cli):
    suite, out_dir = str(write_suite(tmp_path)), tmp_path / "runs"
    assert cli("run", "--suite", suite, "--out", str(out_dir), "--model", "last-token", "-q").returncode == 0
    kept = {f.name: f.read_bytes() for f in record_files(out_dir)}

    def small_files() -> None:  # every file write past 512 bytes fails (EFBIG), like a full disk mid-record
        resource.setrlimit(resource.RLIMIT_FSIZE, (512, 512))

    done = subprocess.run(run_command("--suite", suite, "--out", str(out_dir), "-q", "--jobs", "1"),
                          capture_output=True, text=True, timeout=RUN_LIMIT_SECONDS, preexec_fn=small_files)
    assert done.returncode == 3, done.stderr
    errors = [line for line in done.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "cannot write the record of a finished pairing: File too large" in errors[0]
    assert "Traceback" not in done.stderr
    assert {f.name: f.read_bytes() for f in record_files(out_dir)} == kept
    assert not list(out_dir.glob(".*.tmp"))


def test_a_bogus_ray_address_fails_fast_in_one_line(tmp_path, cli):
    pytest.importorskip("ray")
    with socket.socket() as probe:  # a port where nothing listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    for address, code, message in ((f"127.0.0.1:{port}", 3, "no Ray cluster reachable there"),
                                   ("nowhere", 2, "--ray-address expects HOST:PORT")):
        started = time.monotonic()
        done = cli("run", "--suite", str(write_suite(tmp_path)), "--out", str(tmp_path / "runs"), "--executor", "ray",
                   "--ray-address", address, timeout=120)
        assert done.returncode == code and message in done.stderr, done.stderr
        assert len([line for line in done.stderr.splitlines() if "error" in line]) == 1
        assert time.monotonic() - started < 60 and "Traceback" not in done.stderr
        assert not record_files(tmp_path / "runs")


def test_jobs_beyond_the_cores_are_capped_with_a_note(tmp_path, capsys):
    from tokbench.runner import usable_cores

    assert main(["run", "--suite", str(write_suite(tmp_path, TINY_SUITE)), "--out", str(tmp_path / "runs"),
                 "--model", "last-token", "--seeds", "1", "--jobs", "64", "-q"]) == 0
    assert f"note: --jobs 64 capped at {usable_cores()} ({usable_cores()} usable cores" in capsys.readouterr().err
