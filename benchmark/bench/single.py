"""Benchmark section for one pairing: what isolating it in a worker process costs.

One side is a whole `tokbench run` of a single pairing (start-up, the worker, training, the record,
the summary). The other is the same pairing trained in a plain Python process with one torch
thread, plus the CLI's start-up (the same command as a dry run: plugins, grid, plan). Every
timing is a fresh process, as a user runs it.
"""
from __future__ import annotations

import os
import sys
import tempfile
from itertools import count
from pathlib import Path

from timing import compare, process_seconds

PLAIN = """
import sys, torch
torch.set_num_threads(1)
from tokbench.harness import run_pairing
from tokbench.plugins import registry
reg = registry()
task, model = reg.task("random-walk"), reg.model("attn-paper-a")
recipe = model.recipe.override({{"steps": {steps}}})
run_pairing(task.create({{}}), model, model.resolve({{}}), recipe, 0)
"""


def run(quick: bool) -> list[tuple[str, float, str]]:
    steps = 100 if quick else 500
    cli = [sys.executable, "-m", "tokbench.cli", "run", "--task", "random-walk", "--model", "attn-paper-a",
           "--seeds", "1", "--set", f"train.steps={steps}", "-q"]
    load = os.getloadavg()[0]  # on a loaded machine the parent and the workers' imports cannot overlap
    with tempfile.TemporaryDirectory() as tmp:
        fresh = (Path(tmp) / f"out{i}" for i in count())

        def tokbench() -> float:
            return process_seconds([*cli, "--out", str(next(fresh))])

        def plain_and_start_up() -> float:
            return (process_seconds([sys.executable, "-c", PLAIN.format(steps=steps)])
                    + process_seconds([*cli, "--dry-run", "--out", str(next(fresh))]))

        whole, parts = compare(tokbench, plain_and_start_up, 2 if quick else 5)
    return [(f"one pairing: `tokbench run` / (plain process + CLI start-up), attn-paper-a, {steps} GD steps",
             whole / parts, f"target <= 1.0; {whole:.1f} s against {parts:.1f} s (medians); load average "
             f"{load:.1f} before")]
