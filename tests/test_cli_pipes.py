"""Output into pipes: a reader that stops early gets no traceback, and piped tables keep whole names."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest


def _tokbench(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tokbench.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def test_a_closed_pipe_is_no_traceback():
    """`tokbench ls models --json | head -0`: the reader is gone before the first write."""
    process = _tokbench("ls", "models", "--json")
    process.stdout.close()
    err = process.stderr.read().decode()
    process.wait(timeout=120)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


@pytest.mark.parametrize("args, keep", [
    (("run", "--suite", "tokbench", "--dry-run", "--out", "never-written"), 1),  # `| head -1`: thousands of lines
    (("ls", "models", "--json"), 100),  # `| head -c 100`: more than a pipe holds
])
def test_a_reader_that_stops_early_ends_the_command_quietly(tmp_path, args, keep):
    """Before, the write into the closed pipe was reported as `tokbench: error: None: Broken pipe`, exit 3."""
    process = subprocess.Popen([sys.executable, "-m", "tokbench.cli", *args], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, cwd=tmp_path)
    assert process.stdout.read(keep)
    process.stdout.close()
    err = process.stderr.read().decode()
    assert process.wait(timeout=300) in (0, 141), err
    assert "Broken pipe" not in err and "Traceback" not in err and "error" not in err, err
    assert not (tmp_path / "never-written").exists()


def test_piped_tables_are_not_folded_at_80_columns():
    # piped and without COLUMNS (a user's setting, which piped tables follow: tests/test_plugins_run.py)
    env = {key: value for key, value in os.environ.items() if key != "COLUMNS"}
    done = subprocess.run([sys.executable, "-m", "tokbench.cli", "ls", "models"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "attn-onehot-concat-zeroinit" in done.stdout  # one whole name, not "attn-onehot-c" / "oncat"
