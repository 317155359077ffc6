"""The GPU benchmark: ratios measured side by side in one call of under 8 minutes on one GPU machine.

    python benchmark/bench/gpu.py [--quick] [--deadline SECONDS] [--json FILE]

1. Replicas together / one by one on the GPU: a cell of 3 seeds x 3 rates of transformer-2l and of the
   GRU on mqar, batch 64, fresh data, 200 steps (``stack.cell``, as the CPU section ``stack``).
2. GPU / CPU per step, one replica, per model of the ``tokbench`` suite, at the suite's own recipe on
   the model's middle mqar rung (the first pairing it applies to where mqar does not): the marginal
   cost of a step, the difference of two runs of different lengths over their difference in steps,
   so the trainer's start-up is not counted; the CPU side runs on one torch thread, as a worker.
3. The projected time of the whole ``tokbench`` suite on one GPU: per model, the replica-steps of
   its pairings in the suite's plan (``Recipe.replica_steps``: step cap x sweep candidates, or a pruned
   sweep's count, every seed; the cap is an upper
   bound, as a stop ends most runs earlier) x its GPU cost per replica-step in a stack of its
   cell's size; beside it the same plan at the CPU cost, one replica at a time.
4. Overhead per step (issue 31 item 2; ``overhead.py``), on the suite's cell of transformer-2l on its middle mqar
   rung as one stack (3 seeds x 3 rates x 2 weight decays = 18 replicas) at the suite's recipe, batch 64, each
   side against what the harness does now, the two alternating, medians kept:
   - fresh data / training step: one step's fresh batches of every seed, drawn on the CPU as ``_FreshBlocks``
     draws them and copied to the device, over one training step of the stack (vmapped forward and backward,
     clipping, optimiser and schedule per replica): what drawing data on the device could save at most;
   - evaluation batched / one by one: every replica's validation accuracy in one vmapped pass over the stack,
     over one model after another (``evaluate_accuracy``, as stops and the sweep's choice take it); in the note
     also one by one with the argmax on the device, and whether the accuracies are the same;
   - torch.compile / eager, per mode (``reduce-overhead``, i.e. CUDA graphs, then the default mode, on a GPU;
     the default mode alone elsewhere; ``aot_eager`` instead of inductor with ``--quick`` on a CPU): seconds per
     forward and backward of the stack (``replicas._vmapped``, as ``StackStep`` vmapped), with the compile and
     warm-up seconds, graph breaks and skipped CUDA graphs, and whether losses, logits and gradients equal
     eager's within 1e-4, in the note; a compile that raises is a row saying so (its value NaN).

Rows are printed (and the JSON rewritten) as they are measured. Models are measured largest share of the
plan first; once fewer than ``OVERHEAD_RESERVE`` (100) seconds are left before ``--deadline`` the rest are left
out of the projection and named; a part of section 4 starts only with the seconds it needs left (a
compile: 60 s, then 1.5 x the last one's), and the parts left out are named in a last row. Without a GPU
(``--quick`` on a CPU, as the tests run it) every "GPU" side runs on the CPU, and the output says so.
Every figure is a ratio or a sum of timings taken in this one run.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

SUITE = "tokbench"
STACK_MODELS = ("transformer-2l", "gru")
QUICK_MODELS = ("transformer-2l",)
PREFERRED_TASK = "mqar"
OVERHEAD_MODEL = "transformer-2l"  # the stack whose per-step overhead is measured (overhead.py)
OVERHEAD_RESERVE = 100.0  # seconds before --deadline that the projection leaves to the step-overhead section


def _plan(models: tuple[str, ...] | None):
    """Per model: its replica-steps in the suite's plan, the pairing whose step cost stands for it, and the
    size of its cells (seeds x sweep candidates)."""
    from tokbench.grid import expand
    from tokbench.plugins import registry
    from tokbench.suites import load_suite

    steps: Counter[str] = Counter()
    seeds: dict[tuple[str, int], set[int]] = {}
    chosen = {}
    for pairing in expand(load_suite(SUITE), registry(), models=models or ()):
        if pairing.not_applicable is not None or not pairing.model_spec.trained:
            continue
        name, recipe = pairing.model_spec.name, pairing.recipe
        steps[name] += recipe.replica_steps()
        seeds.setdefault((name, id(pairing.variant)), set()).add(pairing.seed)
        if name not in chosen or (_preferred(pairing) and not _preferred(chosen[name])):
            chosen[name] = pairing
    cell = {name: max(len(s) for (n, _), s in seeds.items() if n == name) * len(chosen[name].recipe.candidates())
            for name in chosen}
    return steps, chosen, cell


def _preferred(pairing) -> bool:
    """Whether ``pairing`` is on the middle rung of the preferred task (or on that task, where it has no rungs)."""
    rung = pairing.variant.rung
    return pairing.task_spec.name == PREFERRED_TASK and (rung is None or rung.index == rung.count // 2)


def _seconds(pairing, replicas: int, steps: int, accelerator: str) -> float:
    """Wall seconds of training ``replicas`` replicas of ``pairing`` together for ``steps`` steps (no stops)."""
    from tokbench.harness import SeedData, train_replicas

    task = pairing.task_spec.create(pairing.task_params)
    recipe = replace(pairing.recipe, steps=steps, target=0.0, patience=0, lr_grid=(), wd_grid=())
    data = {seed: SeedData(task.make_split("train", seed)) for seed in range(replicas)}
    plan = [(recipe, seed) for seed in range(replicas)]
    start = time.perf_counter()
    train_replicas(task, pairing.model_spec, pairing.model_params, plan, data, None, accelerator)
    return time.perf_counter() - start


def step_cost(pairing, replicas: int, accelerator: str, short: int, long: int) -> float:
    """Seconds per replica-step: the marginal cost of ``long - short`` more steps of a stack of ``replicas``
    (where noise makes that negative, the long run's seconds per step, start-up included: an upper bound)."""
    _seconds(pairing, replicas, 2, accelerator)  # warm-up: imports, allocator, kernels
    seconds = _seconds(pairing, replicas, long, accelerator)
    marginal = (seconds - _seconds(pairing, replicas, short, accelerator)) / (long - short)
    return (marginal if marginal > 0 else seconds / long) / replicas


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="one model, a few steps, stacks of 2: checks that it runs, measures nothing")
    parser.add_argument("--deadline", type=float, default=420.0,
                        help="seconds after which no further model or part is measured (default 420)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    started = time.perf_counter()
    sys.path.insert(0, str(Path(__file__).parent))
    import torch

    torch.set_num_threads(1)  # as each `tokbench run` worker
    import overhead
    import stack

    gpu = torch.cuda.is_available()
    device = torch.cuda.get_device_name(0) if gpu else "no GPU: the GPU side ran on the CPU"
    accelerator = "gpu" if gpu else "cpu"
    rows: list[tuple[str, float, str]] = []

    def emit(row: tuple[str, float, str]) -> None:  # each row as soon as it is measured: a timeout loses no row
        rows.append(row)
        measurement, value, text = row
        print(f"{measurement}: {value:.3g}  ({text})", flush=True)
        if args.json:
            args.json.write_text(json.dumps({"device": device, "rows": rows}, indent=1), encoding="utf-8")

    def left() -> float:
        return args.deadline - (time.perf_counter() - started)

    steps, seeds, rates = (4, 2, 2) if args.quick else (200, 3, 3)
    for model in QUICK_MODELS if args.quick else STACK_MODELS:
        together, alone, mode = stack.cell(model, steps, seeds, rates, accelerator, 1)
        emit((f"replicas together / one by one, {model}, {stack.TASK} ({device})", together / alone,
              f"{seeds} seeds x {rates} rates, {steps} steps of batch 64, fresh data, step: {mode}; "
              f"one by one {alone:.1f} s, together {together:.1f} s"))

    plan, chosen, cell = _plan(QUICK_MODELS if args.quick else None)
    short, long = (2, 4) if args.quick else (10, 40)
    cpu_short, cpu_long = (2, 4) if args.quick else (5, 20)
    reserve = 0.0 if args.quick else OVERHEAD_RESERVE
    measured, left_out, ratios = {}, [], []
    for name, _ in plan.most_common():
        if left() < reserve:
            left_out.append(name)
            continue
        pairing = chosen[name]
        cpu = step_cost(pairing, 1, "cpu", cpu_short, cpu_long)
        single = step_cost(pairing, 1, accelerator, short, long)
        size = min(cell[name], 2) if args.quick else cell[name]
        stacked = step_cost(pairing, size, accelerator, short, long)
        measured[name] = (cpu, single, stacked)
        if cpu > 0:
            ratios.append(single / cpu)
        where = f"{pairing.task_spec.name} " + ", ".join(f"{k}={v}" for k, v in (
            pairing.variant.rung.axes.items() if pairing.variant.rung else ()))
        emit((f"GPU / CPU per step, {name}", single / cpu if cpu else float("nan"),
              f"{where}; CPU {cpu * 1e3:.1f} ms, GPU {single * 1e3:.2f} ms alone, "
              f"{stacked * 1e3:.2f} ms per replica in a stack of {size}"))
    if ratios:
        emit(("GPU / CPU per step, median over models", statistics.median(ratios), f"{len(ratios)} models"))
    gpu_seconds = sum(plan[name] * measured[name][2] for name in measured)
    cpu_seconds = sum(plan[name] * measured[name][0] for name in measured)
    covered = sum(plan[name] for name in measured) / sum(plan.values())
    note = f"{sum(plan[n] for n in measured):,} replica-steps at their caps ({covered:.0%} of the plan)"
    if left_out:
        kept = f" less the {reserve:.0f} s kept for the step-overhead section" if reserve else ""
        note += f"; not measured before the deadline{kept}: {', '.join(left_out)}"
    emit((f"projected {SUITE} suite on one GPU, stacked cells (minutes)", gpu_seconds / 60, note))
    emit((f"projected {SUITE} suite on one CPU core, one replica at a time (hours)", cpu_seconds / 3600,
          "the same plan at the CPU's cost per step"))
    emit(("projected CPU / GPU time", cpu_seconds / gpu_seconds if gpu_seconds else float("nan"), device))

    parts_left_out = overhead.run(chosen[OVERHEAD_MODEL], torch.device("cuda" if gpu else "cpu"), args.quick, left,
                                  emit)
    if parts_left_out:
        emit(("step overhead: parts not measured before the deadline", len(parts_left_out), "; ".join(parts_left_out)))

    print(f"gpu.py took {time.perf_counter() - started:.0f} s on {device}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
