"""Benchmark section for the model families: the harness against a plain PyTorch loop for transformer-2l, and
Mamba's CPU scan against mambapy's parallel scan.

    python benchmark/bench/run.py --only models [--quick]

The task is scored at many positions (mqar), so the harness's label alignment, ignored
positions and curve logging are all in play; the plain loop does the same maths (the model's
own loss, AdamW, warm-up then cosine decay, clipping, mini-batches) with nothing around it.
The Mamba row times a forward and backward of the model at the tokbench suite's middle mqar rung (width 64,
T = 64, V = 1024, batch 64), the same model with the scan of :mod:`tokbench_models.scan` and with mambapy's.
"""
from __future__ import annotations

from unittest import mock

import torch
from torch.optim import lr_scheduler

from timing import compare
from tokbench.harness import train_model
from tokbench.plugins import registry
from tokbench.seeding import derive_seed

MODEL, TASK = "transformer-2l", "mqar"


def _plain_loop(task, spec, params, recipe, seed, train) -> None:
    torch.manual_seed(derive_seed(seed, "init"))
    model = spec.build(params, task)
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.lr, betas=tuple(recipe.betas),
                                  weight_decay=recipe.weight_decay)
    warmup = lr_scheduler.LinearLR(optimizer, 1.0 / recipe.warmup_steps, 1.0, total_iters=recipe.warmup_steps)
    cosine = lr_scheduler.CosineAnnealingLR(optimizer, T_max=recipe.steps - recipe.warmup_steps)
    schedule = lr_scheduler.SequentialLR(optimizer, [warmup, cosine], milestones=[recipe.warmup_steps])
    generator = torch.Generator().manual_seed(derive_seed(seed, "batches"))
    n = len(train.tokens)
    for _ in range(recipe.steps):
        idx = torch.randint(0, n, (recipe.batch_size,), generator=generator)
        loss = model.loss(model(train.tokens[idx]), train.labels[idx])
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), recipe.grad_clip)
        optimizer.step()
        schedule.step()


def run(quick: bool) -> list[tuple[str, float, str]]:
    reg = registry()
    task = reg.task(TASK).create({})
    spec = reg.model(MODEL)
    params = spec.resolve({})
    steps = 200 if quick else 1000
    recipe = spec.recipe.override({"steps": steps})
    train = task.make_split("train", 0)
    t_harness, t_plain = compare(
        lambda: train_model(task, spec, params, recipe, 0, train, None, "cpu"),
        lambda: _plain_loop(task, spec, params, recipe, 0, train),
        3 if quick else 5,
    )
    return [(f"harness / plain loop, {MODEL}, {TASK}", t_harness / t_plain,
             f"{steps} AdamW steps, batch {recipe.batch_size}, T={task.context_length}, scored at many positions "
             f"(target <= 1.10); plain {t_plain:.2f}s"), _mamba_scan(quick)]


def _mamba_scan(quick: bool) -> tuple[str, float, str]:
    task = registry().task(TASK).create({"vocab_size": 1024, "context_length": 64, "num_kv_pairs": 8,
                                         "num_queries": 8})
    spec = registry().model("mamba")
    torch.manual_seed(0)
    model = spec.build(spec.resolve({"d": 64}), task)
    split = task.make_split("train", 0)
    batch = 16 if quick else 64
    tokens, labels = split.tokens[:batch], split.labels[:batch]

    def step() -> None:
        model.zero_grad()
        model.loss(model(tokens), labels).backward()

    def parallel() -> None:
        with mock.patch("tokbench_models.mamba.usable", lambda x: False):
            step()
    t_ours, t_parallel = compare(step, parallel, 3 if quick else 7)
    return ("mamba step, CPU scan / mambapy's parallel scan", t_ours / t_parallel,
            f"forward and backward, width 64, 2 layers, T=64, V=1024, batch {batch} (target < 1); "
            f"parallel scan {t_parallel * 1e3:.0f} ms")
