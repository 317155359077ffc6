"""Local worker processes: one thread each, and a SIGKILL in the middle of a grid loses and repeats nothing."""
from __future__ import annotations

import signal
import subprocess
import sys

from run_support import alive, descendants, record_files, start_run, wait_until, workers_of, write_suite
from tokbench.isolation import LocalExecutor
from tokbench.results import load_records
from tokbench.runner import make_executor

# 9 pairings of a few hundred optimiser steps each: long enough to kill the run in the middle.
SLOW_SUITE = """
seeds = 3
[[grid]]
tasks = ["random-walk"]
models = ["attn-nope", "attn-sinusoidal", "attn-learned"]
[grid.task.random-walk]
context_length = 16
train_size = 128
val_size = 16
test_size = 64
[grid.train]
steps = 200
"""


def test_every_worker_trains_with_one_thread_unless_told(tmp_path):
    pool = make_executor("local", tmp_path, None, jobs=2, pending=10)
    assert isinstance(pool, LocalExecutor) and pool.jobs == 2 and pool.threads == 1
    # Never more workers than pairings; a single pairing still runs in a worker process.
    single = make_executor("local", tmp_path, None, jobs=8, pending=1, threads=2)
    assert isinstance(single, LocalExecutor) and single.jobs == 1 and single.threads == 2


def test_sigkill_mid_grid_then_rerun_gives_each_pairing_exactly_one_record(tmp_path):
    suite, out_dir = write_suite(tmp_path, SLOW_SUITE, "slow.toml"), tmp_path / "runs"
    args = ("--suite", str(suite), "--out", str(out_dir), "--jobs", "2", "-q")
    first = start_run(*args, log=tmp_path / "first.log")
    try:
        assert wait_until(lambda: len(record_files(out_dir)) >= 2 or first.poll() is not None, 300)
        workers, helpers = workers_of(first.pid), descendants(first.pid)
        first.send_signal(signal.SIGKILL)
        first.wait()
    finally:
        first.kill()
    assert first.returncode == -signal.SIGKILL, (tmp_path / "first.log").read_text()
    # The workers notice that their parent is gone and stop: none trains on as an orphan. Their fork server
    # (which trains nothing) leaves too, once its interpreter has shut down.
    assert workers and wait_until(lambda: not any(map(alive, workers)), 10)
    assert wait_until(lambda: not any(map(alive, helpers)), 60)

    survivors = {f.name: f.read_bytes() for f in record_files(out_dir)}
    assert 2 <= len(survivors) < 9, "the kill must land in the middle of the grid"
    second = subprocess.run([sys.executable, "-m", "tokbench.cli", "run", *args], capture_output=True, text=True,
                            timeout=600)
    assert second.returncode == 0, second.stderr
    trained_again = [line for line in second.stdout.splitlines() if line.startswith("[")]
    assert len(trained_again) == 9 - len(survivors)

    loaded = load_records(out_dir)
    assert not loaded.problems and len(loaded.records) == 9 == len(record_files(out_dir))
    assert all(r["status"] == "ok" for r in loaded.records.values())
    # No finished pairing was trained twice: every record that survived the kill is untouched.
    assert all((out_dir / name).read_bytes() == content for name, content in survivors.items())
    assert not any(alive(pid) for pid in helpers)

