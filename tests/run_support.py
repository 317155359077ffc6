"""Small suites and helpers shared by the ``tokbench run`` tests."""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

# 3 models x 2 seeds on a short random walk, 3 optimiser steps: a whole grid in a few seconds.
TINY_SUITE = """
seeds = 2
[[grid]]
tasks = ["random-walk"]
models = ["attn-paper-a", "attn-nope", "last-token"]
[grid.task.random-walk]
context_length = 8
train_size = 32
val_size = 16
test_size = 32
[grid.model.attn-paper-a]
position_dim = 16
[grid.train]
steps = 3
"""


# A random walk at tiny sizes, as a suite fragment: where the misbehaviour, not the training, is under test.
TINY_TASK = """
[grid.task.random-walk]
context_length = 8
train_size = 32
val_size = 16
test_size = 16
"""


def write_suite(folder: Path, text: str = TINY_SUITE, name: str = "tiny.toml") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def record_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.json"))


# ---- processes (Linux /proc), for the tests that kill runs and workers -------------------------------------------

def children(pid: int) -> set[int]:
    found = set()
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            found |= {int(c) for c in (task / "children").read_text().split()}
    except (FileNotFoundError, ProcessLookupError):
        pass
    return found


def descendants(pid: int) -> set[int]:
    found, todo = set(), [pid]
    while todo:
        new = children(todo.pop()) - found
        found |= new
        todo += new
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return ""


def workers_of(pid: int) -> set[int]:
    """The worker processes of the `tokbench run` process ``pid``: the children of its fork server."""
    servers = [c for c in children(pid) if "forkserver" in _cmdline(c)]
    return set().union(*map(children, servers)) if servers else set()


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def wait_until(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def run_command(*args: str) -> list[str]:
    """The command line of ``tokbench run ARGS`` in a fresh interpreter."""
    return [sys.executable, "-m", "tokbench.cli", "run", *args]


def interruptible() -> None:
    """``preexec_fn`` of a command a test stops with Ctrl+C's SIGINT: restore its default action, as a terminal's
    shell does. A process that starts with SIGINT ignored keeps it ignored (Python installs KeyboardInterrupt only
    over the default), and pytest-xdist's workers, which start these commands, ignore it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_run(*args: str, log: Path, **popen) -> subprocess.Popen:
    """``tokbench run ARGS`` in the background, stdout and stderr into ``log``."""
    with log.open("w") as handle:
        return subprocess.Popen(run_command(*args), stdout=handle, stderr=subprocess.STDOUT, **popen)
