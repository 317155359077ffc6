"""Benchmark section for the model families: the harness against a plain PyTorch loop for transformer-2l,
Mamba's CPU scan against mambapy's parallel scan, H3's CPU shift SSM (a Toeplitz matmul) against its
depthwise conv1d, the loss on the scored rows only (TokenModel.loss on a CPU) against cross-entropy over every
row with ignore_index (mqar scores 1 row in 8), and the step of each recurrent, gated and state-space model
against transformer-2l's (the table "Cost of a step" in docs/models.md).

    python benchmark/bench/run.py --only models [--quick]

The task is scored at many positions (mqar), so the harness's label alignment, ignored
positions and curve logging are all in play; the plain loop does the same maths (the model's
own loss, AdamW, warm-up then cosine decay, clipping, mini-batches) with nothing around it.
The Mamba, H3 and loss rows time a forward and backward of the model at the tokbench suite's middle mqar rung
(width 64, T = 64, V = 1024, batch 64): the same model with the CPU's form (the scan of
:mod:`tokbench_models.scan`; the shift SSM's Toeplitz matmul; the scored rows) and with the other (mambapy's
parallel scan; ``conv1d``; every row).
"""
from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from unittest import mock

import torch
from torch.optim import lr_scheduler

from timing import compare
from tokbench.harness import train_model
from tokbench.plugins import registry
from tokbench.seeding import derive_seed
from tokbench_models.h3 import ShiftSSM

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
             f"(target <= 1.10); plain {t_plain:.2f}s"),
            _cpu_form(quick, "mamba", mock.patch("tokbench_models.mamba.usable", lambda x: False),
                      "mamba step, CPU scan / mambapy's parallel scan", "parallel scan"),
            _cpu_form(quick, "h3", mock.patch("tokbench_models.h3.ShiftSSM.toeplitz", ShiftSSM.convolution),
                      "h3 step, shift SSM as a Toeplitz matmul / as conv1d", "conv1d"),
            _cpu_form(quick, "transformer-2l", mock.patch("tokbench.model._eager_on_cpu", lambda x: False),
                      "transformer-2l step, loss on the scored rows / cross-entropy over every row", "every row"),
            *_step_costs(quick)]


def _training_step(name: str, context_length: int, batch: int) -> Callable[[], None]:
    """A forward and backward of ``name`` (width 64, its other defaults) on a batch of mqar (V = 1024, 8 pairs)."""
    task = registry().task(TASK).create({"vocab_size": 1024, "context_length": context_length, "num_kv_pairs": 8,
                                         "num_queries": 8, "train_size": batch})
    spec = registry().model(name)
    torch.manual_seed(0)
    model = spec.build(spec.resolve({"d": 64}), task)
    split = task.make_split("train", 0)

    def step() -> None:
        model.zero_grad()
        model.loss(model(split.tokens), split.labels).backward()
    return step


def _cpu_form(quick: bool, name: str, other: AbstractContextManager, label: str,
              other_label: str) -> tuple[str, float, str]:
    """A model's training step with its CPU form against the same step under ``other`` (the form it replaces)."""
    batch = 16 if quick else 64
    step = _training_step(name, 64, batch)

    def replaced() -> None:
        with other:
            step()
    t_ours, t_other = compare(step, replaced, 3 if quick else 7)
    return (label, t_ours / t_other, f"forward and backward, width 64, 2 layers, T=64, V=1024, batch {batch} "
            f"(target < 1); {other_label} {t_other * 1e3:.0f} ms")


def _step_costs(quick: bool) -> list[tuple[str, float, str]]:
    """The recurrent, gated and state-space models' training step against transformer-2l's (docs/models.md)."""
    batch, rows = 16 if quick else 64, []
    for T in (64, 256):
        reference = _training_step("transformer-2l", T, batch)
        for name in ("gru", "gla", "h3", "mamba"):
            t_model, t_reference = compare(_training_step(name, T, batch), reference, 3 if quick else 5)
            rows.append((f"{name} step / transformer-2l step, T={T}", t_model / t_reference,
                         f"forward and backward, width 64, mqar V=1024, batch {batch}; "
                         f"transformer-2l {t_reference * 1e3:.0f} ms"))
    return rows
