"""Benchmark section for planning: `tokbench run --dry-run` of a grid of a million pairings, as a user runs it.

Each side is one `tokbench run --dry-run` process (imports, expanding the grid, hashing every
pairing, one line per pairing into a pipe). The grid is 2 tasks x 4 models x N seeds. The
ratio of the large grid's time to the grid ten times smaller is about 10 when planning is
linear (less, as the start-up is shared); the quadratic labelling of old took hours here.
"""
from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SUITE = """seeds = {seeds}
[[grid]]
tasks = ["random-walk", "deterministic-walk"]
models = ["attn-paper-a", "attn-nope", "attn-rope", "last-token"]
"""


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _dry_run(folder: Path, pairings: int) -> tuple[float, float]:
    """Wall and CPU seconds of one `tokbench run --dry-run` of a grid of ``pairings`` pairings."""
    suite = folder / f"grid-{pairings}.toml"
    suite.write_text(SUITE.format(seeds=pairings // 8), encoding="utf-8")
    args = [sys.executable, "-m", "tokbench.cli", "run", "--dry-run", "--suite", str(suite), "--out",
            str(folder / "runs")]
    start, cpu = time.perf_counter(), _cpu_seconds()
    done = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seconds, cpu = time.perf_counter() - start, _cpu_seconds() - cpu
    last = f"{pairings} pairings: {pairings} to run, 0 not applicable (recorded without training), 0 to skip\n"
    if done.returncode != 0 or not done.stdout.endswith(last):
        raise RuntimeError(f"dry run of {pairings} pairings failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds, cpu


def run(quick: bool) -> list[tuple[str, float, str]]:
    large = 100_000 if quick else 1_000_000
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        small_seconds, _ = _dry_run(Path(tmp), large // 10)
        large_seconds, large_cpu = _dry_run(Path(tmp), large)
    # The children's peak resident memory: the larger of the two runs, which is the large one.
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return [
        (f"--dry-run of {large:,} pairings: wall seconds", large_seconds,
         f"target < 30 s; load average {load:.1f} before; whole process, lines into a pipe"),
        (f"--dry-run of {large:,} pairings: CPU seconds", large_cpu,
         "user + system CPU time of the process; on an idle machine its wall time is close to this"),
        (f"--dry-run of {large:,} pairings: peak memory (MB)", peak_mb, "target < 1024 MB"),
        (f"--dry-run time ratio, {large:,} / {large // 10:,} pairings", large_seconds / small_seconds,
         f"about 10 or less when planning is linear; {large // 10:,} took {small_seconds:.1f} s"),
    ]
