"""torch.compile / eager on the CPU: would compiling the training step speed up the CPU plan?

The tokbench suite's architecture block runs on CPUs while no GPU is lent (benchmark/budget/README.md, "The CPU
plan"), one replica after another on one thread, so a compiled forward and backward would shorten every run by
its ratio. This times one model's training loss and its backward (``harness._step_loss``, what a replica's step
computes before clipping and the optimiser) eager against ``torch.compile`` (inductor, default mode), on the
tokbench suite's selective-copy middle rung at its batch of 64, for every architecture of its ranking: the
two sides alternate and their medians are kept (``timing.compare``), and the compiled loss and gradients are
compared with eager's. Quick: the ``aot_eager`` backend at batch 8, which measures nothing about speed.
"""
from __future__ import annotations

import math

import torch

from timing import compare
from tokbench.compat import adapt_model, adapt_task
from tokbench.grid import expand
from tokbench.harness import _FreshBlocks, _step_loss
from tokbench.plugins import registry
from tokbench.seeding import derive_seed
from tokbench.suites import load_suite

MODELS = ("transformer", "transformer-2l", "transformer-4l", "linear-attention", "gla", "h3", "gru", "lstm", "mlp",
          "mamba")
TASK, RUNG = "selective-copy", 1
STEPS = 10  # forward and backward passes per timing


def _pairings() -> dict[str, object]:
    """Seed 0's pairing of each of :data:`MODELS` on the task's rung, as the tokbench suite plans it."""
    return {p.model_spec.name: p for p in expand(load_suite("tokbench"), registry())
            if p.task_spec.name == TASK and p.model_spec.name in MODELS and p.seed == 0
            and p.variant.rung is not None and p.variant.rung.index == RUNG}


def _model_and_batch(pairing, batch: int) -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    """Seed 0's model as the harness initialises it, and the first fresh batch of its stream."""
    task = adapt_task(pairing.task_spec.create(pairing.task_params))
    torch.manual_seed(derive_seed(0, "init"))
    model = adapt_model(pairing.model_spec.build(pairing.model_params, task), pairing.model_spec).train()
    block = next(iter(_FreshBlocks(task, batch, [1], 0)))  # one step of seed 0's stream, as overhead.build draws it
    return model, block[0][0], block[1][0]


def _backward(model: torch.nn.Module, loss_of, tokens: torch.Tensor, labels: torch.Tensor) -> list[torch.Tensor]:
    for parameter in model.parameters():
        parameter.grad = None
    loss, _ = loss_of(model, tokens, labels)
    loss.backward()
    return [loss.detach(), *(p.grad for p in model.parameters() if p.grad is not None)]


def run(quick: bool) -> list[tuple[str, float, str]]:
    backend, batch, repeats = ("aot_eager", 8, 2) if quick else ("inductor", 64, 5)
    rows, pairings = [], _pairings()
    for name in MODELS:
        model, tokens, labels = _model_and_batch(pairings[name], batch)
        torch._dynamo.reset()
        compiled = torch.compile(_step_loss, backend=backend)
        label = f"torch.compile ({backend}) / eager, the training loss's forward and backward of {name} on the " \
                f"CPU, {TASK} middle rung, batch {batch}"
        eager_out = _backward(model, _step_loss, tokens, labels)
        try:
            compiled_out = _backward(model, compiled, tokens, labels)  # the compile, outside the timing
        except Exception as exc:  # noqa: BLE001 - a compile that fails is a finding, not the end of the benchmark
            rows.append((label, math.nan, f"torch.compile raised {type(exc).__name__}: {str(exc).splitlines()[0]}"))
            torch._dynamo.reset()
            continue
        worst = max(float((a - b).abs().max()) for a, b in zip(eager_out, compiled_out))

        def timed(loss_of):
            return lambda: [_backward(model, loss_of, tokens, labels) for _ in range(STEPS)]

        eager, fast = compare(timed(_step_loss), timed(compiled), repeats)
        rows.append((label, fast / eager if eager else math.nan,
                     f"per step eager {eager / STEPS * 1e3:.1f} ms, compiled {fast / STEPS * 1e3:.1f} ms; loss and "
                     f"gradients differ from eager's by at most {worst:.2g}"))
        torch._dynamo.reset()
    return rows
