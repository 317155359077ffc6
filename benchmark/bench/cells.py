"""Benchmark section for cells: a whole `tokbench run` with `--cells seeds` against `--cells off`.

    python benchmark/bench/run.py --only cells [--quick]

One suite of 3 seeds x 3 swept rates (x 1/4, 1 and 4, the tokbench suite's grid) of the GRU and of
transformer-2l on a short mqar (T = 32, 4 pairs), fresh batches of 64, 200 steps and no early stop,
run as a user runs it: one `tokbench run` process into a fresh records folder, `--jobs 1`. With
`--cells seeds` one worker trains each cell's 3 seeds and their 9 candidates as one stack of
replicas; with `--cells off` each seed's 3 candidates train as a stack of their own in a worker of
their own. Both write the same records (tests/test_runner_cells.py). The two sides alternate and the
medians are kept; `auto` (the default) groups seeds only where torch sees a GPU, because on CPUs a
stack steps its replicas one after another and a cell holds one `--jobs` slot for all its seeds.
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
from pathlib import Path

from timing import process_seconds

SUITE = """
seeds = 3
[[grid]]
tasks = ["mqar"]
models = ["gru", "transformer-2l"]
[grid.task.mqar]
context_length = 32
num_kv_pairs = 4
num_queries = 4
vocab_size = 256
val_size = 256
test_size = 256
[grid.model."*"]
d = 64
[grid.model.gru]
hidden = 64
[grid.train]
data = "fresh"
batch_size = 64
steps = {steps}
eval_every = 100
[grid.sweep]
lr_factors = [0.25, 1.0, 4.0]
"""


def whole_run(suite: Path, mode: str) -> float:
    """Wall seconds of one `tokbench run --cells MODE` of ``suite`` into a fresh folder."""
    with tempfile.TemporaryDirectory() as out:
        return process_seconds([sys.executable, "-m", "tokbench.cli", "run", "--suite", str(suite), "--out", out,
                                "--cells", mode, "--jobs", "1", "-q"])


def run(quick: bool) -> list[tuple[str, float, str]]:
    steps, repeats = (30, 1) if quick else (200, 3)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        suite = Path(tmp) / "cells.toml"
        suite.write_text(SUITE.format(steps=steps), encoding="utf-8")
        together, apart = [], []
        for _ in range(repeats):  # alternated, so both sides see the same load
            together.append(whole_run(suite, "seeds"))
            apart.append(whole_run(suite, "off"))
    seconds_together, seconds_apart = statistics.median(together), statistics.median(apart)
    return [(f"`tokbench run` --cells seeds / --cells off (GRU and transformer-2l on mqar: 2 cells of 3 seeds x 3 rates, {steps} steps, --jobs 1)",
             seconds_together / seconds_apart,
             f"medians of {repeats}: {seconds_together:.1f} s against {seconds_apart:.1f} s; target <= 1.0 on a CPU; "
             f"load average {load:.1f} before, {os.getloadavg()[0]:.1f} after")]
