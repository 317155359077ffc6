"""Benchmark section for replicas trained together: one stack against the same replicas one by one.

    python benchmark/bench/run.py --only stack [--quick]

A cell of 3 seeds x 3 learning rates (0.3, 1 and 3 x the model's own) of transformer-2l and of the
GRU on mqar, batch 64, fresh sequences (the tokbench suite's protocol), 200 steps: one
``train_replicas`` call for the 9 replicas against 9 ``train_model`` calls, the splits made
beforehand for both. The two sides alternate and the medians are kept; both train the same
numbers (tests/test_replicas.py). benchmark/bench/gpu.py runs the same comparison on a GPU.
"""
from __future__ import annotations

import statistics
from dataclasses import replace

from timing import median_seconds
from tokbench.harness import SeedData, train_model, train_replicas
from tokbench.plugins import registry

TASK = "mqar"
MODELS = ("transformer-2l", "gru")
RATE_FACTORS = (0.3, 1.0, 3.0)


def cell(model: str, steps: int, seeds: int, rates: int, accelerator: str, repeats: int,
         stacking: str = "auto") -> tuple[float, float, str]:
    """Median seconds of training one cell together and of its replicas one by one, and how the stack stepped."""
    reg = registry()
    task, spec = reg.task(TASK).create({}), reg.model(model)
    params = spec.resolve({})
    base = spec.recipe.override({"steps": steps, "batch_size": 64, "data": "fresh"})
    plan = [(replace(base, lr=base.lr * factor), seed) for seed in range(seeds) for factor in RATE_FACTORS[:rates]]
    data = {seed: SeedData(task.make_split("train", seed)) for seed in range(seeds)}
    modes = []

    def together() -> None:
        modes.append(train_replicas(task, spec, params, plan, data, None, accelerator, stacking)[0].stacking)

    def one_by_one() -> None:
        for recipe, seed in plan:
            train_model(task, spec, params, recipe, seed, data[seed].train, None, accelerator)

    warm = [(replace(recipe, steps=2), seed) for recipe, seed in plan[:2]]  # imports, allocator, kernels
    train_replicas(task, spec, params, warm, data, None, accelerator, stacking)
    times_together, times_alone = [], []
    for _ in range(repeats):
        times_together.append(median_seconds(together, 1))
        times_alone.append(median_seconds(one_by_one, 1))
    return statistics.median(times_together), statistics.median(times_alone), modes[-1]


def run(quick: bool) -> list[tuple[str, float, str]]:
    steps, seeds, rates = (10, 2, 2) if quick else (200, 3, 3)
    rows = []
    for model in MODELS:
        together, alone, mode = cell(model, steps, seeds, rates, "cpu", 1)
        rows.append((f"{seeds * rates} replicas together / one by one, {model}, {TASK}", together / alone,
                     f"{seeds} seeds x {rates} rates, {steps} steps of batch 64, fresh data, CPU, step: {mode} "
                     f"(target <= 1.0); one by one {alone:.1f} s"))
    return rows
