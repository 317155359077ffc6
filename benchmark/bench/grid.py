"""Benchmark section for `tokbench run`: the default suite with --jobs 2 against --jobs 1, as a user runs it.

Each side is one `tokbench run` process from start to end (imports, worker start-up, every
pairing, the summary), into a fresh records folder. --quick runs one seed per pairing.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tokbench.runner import usable_cores


def _run_default(jobs: int, quick: bool, out: Path) -> tuple[float, int]:
    """Wall seconds of one `tokbench run` of the default suite, and the pairings it trained."""
    args = [sys.executable, "-m", "tokbench.cli", "run", "--jobs", str(jobs), "--out", str(out), "-q"]
    if quick:
        args += ["--seeds", "1"]
    start = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"tokbench run --jobs {jobs} failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds, sum(line.startswith("[") for line in done.stdout.splitlines())


def run(quick: bool) -> list[tuple[str, float, str]]:
    load = os.getloadavg()[0]  # other processes skew --jobs 1 most: its 2 torch threads wait for each other
    with tempfile.TemporaryDirectory() as tmp:
        one, pairings = _run_default(1, quick, Path(tmp) / "jobs1")
        two, _ = _run_default(2, quick, Path(tmp) / "jobs2")
    suite = "default suite" + (" (1 seed)" if quick else "")
    return [
        (f"{suite}: --jobs 2 speed-up over --jobs 1", one / two,
         f"{usable_cores()} cores, load average {load:.1f} before; target >= 1.7 on 2 cores; "
         f"--jobs 1 {one:.0f} s, --jobs 2 {two:.0f} s"),
        (f"{suite}: wall seconds with --jobs 2", two, f"{pairings} pairings, whole `tokbench run` process"),
    ]
