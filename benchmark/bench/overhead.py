"""Overhead per step of a stack of replicas on the device (issue 31 item 2), measured for benchmark/bench/gpu.py.

A stack of one cell's replicas as the suite trains it (every seed x every sweep candidate of the pairing's recipe:
for ``transformer-2l`` in ``tokbench``, 3 seeds x 3 rates x 2 weight decays = 18; replicas of a seed share its
initialisation and its stream of fresh batches, as in ``harness.train_replicas``) is timed three ways, each against
what the harness does now, the two sides alternating and their medians kept (``timing.compare``):

- ``data``: one block of fresh batches (``FRESH_DRAW_STEPS`` steps of every seed's stream, drawn on the CPU by
  ``harness._FreshBlocks`` as training draws them, then moved to the device as Lightning moves a block) against as
  many training steps of the stack (vmapped forward and backward, then per replica clipping, optimiser and schedule,
  as ``StackModule.training_step`` without its logging): the share of a step that drawing data costs, which is what
  drawing it on the device could save at most.
- ``evaluation``: every replica's validation accuracy one model after another (``harness.evaluate_accuracy`` with the
  validation law, as ``Convergence`` and ``select_recipe`` take it) against one vmapped forward over the stack on the
  same splits (``replicas._vmapped``, argmax on the device): the ratio, and whether the accuracies are the same.
- ``compile``: the stack's forward and backward (``replicas._vmapped`` then the summed losses' backward, what
  ``StackStep`` does with ``vmapped=True``) under ``torch.compile``, per mode, against eager: the ratio of seconds per
  step, the compile and warm-up seconds apart, graph breaks and skipped CUDA graphs, and whether the losses, logits
  and gradients equal eager's within :data:`TOLERANCE`. A compile that raises gives a row saying so.

Measurement only: nothing here changes how the harness trains.
"""
from __future__ import annotations

import logging
import math
import re
import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from pytorch_lightning.utilities import move_data_to_device

from timing import compare
from tokbench.compat import adapt_model, adapt_task
from tokbench.harness import FRESH_DRAW_STEPS, _FreshBlocks, _logit_chunk, _step_loss, align, evaluate_accuracy, \
    validation_law
from tokbench.metrics import argmax_predictions, prediction_accuracy
from tokbench.optim import make_optimizer, make_schedule
from tokbench.replicas import PROBE_TOLERANCE, _vmapped
from tokbench.seeding import derive_seed

TOLERANCE = PROBE_TOLERANCE  # 1e-4, relative and absolute: the tolerance a stack's vmapped step is held to
WARMUP_CALLS = 3  # compiled calls before timing: the compile, then CUDA graphs' warm-up run and recording
Row = tuple[str, float, str]


@dataclass
class Stack:
    """A stack's models on the device, each with its optimiser and schedule, one batch of its seed's stream, and the
    validation split and law of each seed."""

    name: str
    task: Any
    recipe: Any
    models: list[torch.nn.Module]
    seeds: list[int]  # per replica
    optimizers: list[torch.optim.Optimizer]
    schedules: list[Any]
    tokens: torch.Tensor  # (R, batch, T) on the device
    labels: torch.Tensor
    vals: dict[int, Any]
    laws: dict[int, Any]
    device: torch.device
    unbatched: list[str] = field(default_factory=list)  # ops vmap ran as a per-replica loop (no batching rule)

    @property
    def replicas(self) -> int:
        return len(self.models)

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def build(pairing, seeds: int, candidates: int | None, batch: int, device: torch.device,
          val_size: int | None = None) -> Stack:
    """``seeds`` x the first ``candidates`` (all: None) of the sweep candidates of ``pairing``'s recipe, at ``batch``
    sequences a step, built as ``train_replicas`` builds them, on ``device``."""
    params = dict(pairing.task_params, **({"val_size": val_size} if val_size else {}))
    task = adapt_task(pairing.task_spec.create(params))
    recipe = replace(pairing.recipe, batch_size=batch)
    plan = [(own, seed) for seed in range(seeds) for own in recipe.candidates()[:candidates]]
    recipe = replace(recipe, lr_grid=(), wd_grid=())
    models, optimizers, schedules = [], [], []
    for own, seed in plan:
        torch.manual_seed(derive_seed(seed, "init"))
        model = adapt_model(pairing.model_spec.build(pairing.model_params, task), pairing.model_spec).to(device).train()
        models.append(model)
        optimizers.append(make_optimizer(own, model.parameters()))
        schedules.append(make_schedule(own, optimizers[-1]))
    first = {seed: next(iter(_FreshBlocks(task, batch, [1], seed))) for seed in range(seeds)}  # each stream's step 0
    vals = {seed: task.make_split("val", seed) for seed in range(seeds)}
    stack = Stack(pairing.model_spec.name, task, recipe, models, [seed for _, seed in plan], optimizers, schedules,
                  torch.stack([first[seed][0][0] for _, seed in plan]).to(device),
                  torch.stack([first[seed][1][0] for _, seed in plan]).to(device),
                  vals, {seed: validation_law(task, val, recipe) for seed, val in vals.items()}, device)
    with warnings.catch_warnings(record=True) as caught:  # torch's "performance drop ... batching rule" for an op
        warnings.simplefilter("always")
        _forward_backward(stack, _eager(stack))
    stack.unbatched = sorted({op for w in caught if "batching rule" in str(w.message)
                              for op in re.findall(r"aten::\w+(?:\.[A-Za-z_]\w*)?", str(w.message))})
    return stack


def _eager(stack: Stack) -> Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    def forward(tokens: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return _vmapped(stack.models, _step_loss, tokens, labels)
    return forward


def _forward_backward(stack: Stack, forward: Callable) -> tuple[torch.Tensor, torch.Tensor]:
    """One forward and backward of the stack through ``forward``, gradients cleared first (``zero_grad``)."""
    for model in stack.models:
        for p in model.parameters():
            p.grad = None
    losses, logits = forward(stack.tokens, stack.labels)
    losses.sum().backward()
    return losses, logits


def _train_step(stack: Stack) -> None:
    """A training step of the stack as ``StackModule.training_step`` takes it (its logging aside)."""
    _forward_backward(stack, _eager(stack))
    for model, optimizer, schedule in zip(stack.models, stack.optimizers, stack.schedules):
        if stack.recipe.grad_clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), stack.recipe.grad_clip)
        optimizer.step()
        if schedule is not None:
            schedule.step()


def data(stack: Stack, repeats: int) -> tuple[Row, float]:
    """The data row, and the seconds of one training step of the stack (for the other rows' notes)."""
    seeds = sorted(set(stack.seeds))
    streams = [iter(_FreshBlocks(stack.task, stack.recipe.batch_size, [FRESH_DRAW_STEPS] * (repeats + 2), seed))
               for seed in seeds]
    copies = []

    def draw() -> None:  # one block of every stream, then onto the device as Lightning moves a block
        block = [next(stream) for stream in streams]
        start = time.perf_counter()
        move_data_to_device(block, stack.device)
        stack.sync()
        copies.append(time.perf_counter() - start)

    def train() -> None:
        for _ in range(FRESH_DRAW_STEPS):
            _train_step(stack)
        stack.sync()

    drawn, trained = compare(draw, train, repeats)
    step = trained / FRESH_DRAW_STEPS
    copy = statistics.median(copies) / FRESH_DRAW_STEPS
    row = (f"fresh data / training step, stack of {stack.replicas} {stack.name}", drawn / trained,
           f"per step: {len(seeds)} seeds' batches of {stack.recipe.batch_size} drawn on the CPU "
           f"({FRESH_DRAW_STEPS} steps at a draw, as _FreshBlocks) {(drawn / FRESH_DRAW_STEPS - copy) * 1e3:.2f} ms "
           f"+ copy to the device {copy * 1e3:.2f} ms, against one training step of the stack {step * 1e3:.2f} ms "
           f"(vmapped forward and backward, clipping, {stack.recipe.optimizer} and schedule per replica"
           + (f"; vmap loops over the replicas for {', '.join(stack.unbatched)}" if stack.unbatched else "")
           + "): the most that drawing data on the device could save")
    return row, step


def evaluation(stack: Stack, repeats: int, step_seconds: float | None) -> Row:
    """The evaluation row: every replica's validation accuracy in one vmapped pass over the stack against one by one as
    the harness takes it; in the note also one by one with the argmax on the device (the harness moves the logits to
    the CPU first), so that the two savings can be told apart."""
    seeds = sorted(set(stack.seeds))
    rows_of = torch.tensor([seeds.index(seed) for seed in stack.seeds])
    tokens = torch.stack([stack.vals[seed].tokens for seed in seeds])  # (seeds, n, T) on the CPU, as the splits are
    labels = torch.stack([stack.vals[seed].labels for seed in seeds])
    n, T = tokens.shape[1], tokens.shape[2]

    def logits_only(model: torch.nn.Module, t: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = align(model(t).logits, y)
        return logits.new_zeros(()), logits

    def harness() -> list[float]:
        return [evaluate_accuracy(model, stack.vals[seed], stack.laws[seed])
                for model, seed in zip(stack.models, stack.seeds)]

    @torch.no_grad()
    def on_device(replicas: list[int]) -> list[float]:
        """The accuracies of ``replicas`` from one pass over them (vmapped if more than one), argmax on the device."""
        models = [stack.models[r] for r in replicas]
        for model in models:
            model.eval()
        size = max(1, _logit_chunk(models[0], T) // len(models))  # the logits of the pass within one budget
        hits: list[list[torch.Tensor]] = [[] for _ in replicas]
        for start in range(0, n, size):
            t = tokens[rows_of[replicas], start:start + size].to(stack.device)
            y = labels[rows_of[replicas], start:start + size].to(stack.device)
            logits = (_vmapped(models, logits_only, t, y)[1] if len(models) > 1
                      else logits_only(models[0], t[0], y[0])[1][None])
            predictions = argmax_predictions(logits).cpu()
            for k, r in enumerate(replicas):
                law = stack.laws[stack.seeds[r]]
                hits[k].append(prediction_accuracy(predictions[k], labels[rows_of[r], start:start + size])
                               if law is None else law.expected(predictions[k], start))
        return [torch.cat(h).mean().item() for h in hits]

    def batched() -> list[float]:
        return on_device(list(range(stack.replicas)))

    def one_by_one() -> list[float]:
        return [accuracy for r in range(stack.replicas) for accuracy in on_device([r])]

    accuracies = harness(), one_by_one(), batched()
    alone, together = compare(harness, batched, repeats)
    alone_on_device, _ = compare(one_by_one, batched, repeats)
    for model in stack.models:
        model.train()
    worst = max(abs(a - b) for other in accuracies[1:] for a, b in zip(accuracies[0], other))
    note = (f"{stack.replicas} replicas x {n} validation sequences ({len(seeds)} seeds' splits"
            f"{', expected accuracy' if stack.laws[seeds[0]] is not None else ''}): one by one "
            f"{alone * 1e3:.1f} ms (harness.evaluate_accuracy), one by one with the argmax on the device "
            f"{alone_on_device * 1e3:.1f} ms, one vmapped pass {together * 1e3:.1f} ms; accuracies "
            + ("the same" if worst == 0 else f"differ by up to {worst:.2g}"))
    if step_seconds:
        every = stack.recipe.eval_every
        note += (f"; checked every {every} steps, one by one costs {alone / (every * step_seconds):.1%} of those "
                 f"steps' training, batched {together / (every * step_seconds):.1%}")
    return (f"evaluation batched / one by one, stack of {stack.replicas} {stack.name}", together / alone, note)


def _differences(first: list[torch.Tensor], second: list[torch.Tensor]) -> tuple[bool, float]:
    """Whether every pair is equal within :data:`TOLERANCE` (``allclose``), and the largest absolute difference."""
    equal = all(torch.allclose(a, b, rtol=TOLERANCE, atol=TOLERANCE) for a, b in zip(first, second))
    return equal, max(float((a - b).abs().max()) for a, b in zip(first, second))


def _outputs(stack: Stack, forward: Callable) -> list[torch.Tensor]:
    losses, logits = _forward_backward(stack, forward)
    out = [losses.detach().clone(), logits.detach().clone()]
    return out + [p.grad.clone() for model in stack.models for p in model.parameters() if p.grad is not None]


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0][:200] if lines else ""


def _counters() -> dict[str, Any]:
    try:
        from torch._dynamo.utils import counters
        return counters
    except Exception:  # noqa: BLE001 - an older or newer torch without them: no graph counts in the note
        return {}


class _Skips(logging.Handler):
    """Catches torch's messages that CUDA graphs were skipped, and why."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.reasons: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "skipping cudagraphs" in message.lower() and message not in self.reasons:
            self.reasons.append(message)


def _catch(handler: logging.Handler) -> list[tuple[logging.Logger, int]]:
    """``handler`` on torch's loggers that say why CUDA graphs were skipped (the ``cudagraphs`` or, in older torch,
    ``perf_hints`` artifact), at DEBUG, printing nothing more; returns each logger with its level, to restore."""
    import torch._inductor.cudagraph_utils  # noqa: F401 - registers those loggers

    caught = []
    for name in list(logging.Logger.manager.loggerDict):
        if name.startswith("torch._inductor") and name.endswith(("__cudagraphs", "__perf_hints")):
            logger = logging.getLogger(name)
            caught.append((logger, logger.level))
            logger.setLevel(logging.DEBUG)
            logger.addHandler(handler)
    return caught


def compiled(stack: Stack, mode: str | None, backend: str, repeats: int, steps: int) -> tuple[Row, float]:
    """The row of ``torch.compile(mode=mode, backend=backend)`` of the stack's forward and backward against eager, and
    the seconds its compile and warm-up took (NaN in the row, and the error in its note, if it raised)."""
    label = f"mode={mode or 'default'}, backend={backend}"
    name = f"torch.compile ({label}) / eager, forward and backward of a stack of {stack.replicas} {stack.name}"
    import torch._dynamo

    torch._dynamo.reset()
    counters = _counters()
    for key in ("graph_break", "stats", "inductor"):
        if key in counters:
            counters[key].clear()
    eager = _eager(stack)
    step = torch.compile(_eager(stack), mode=mode, backend=backend)

    def timed(forward: Callable) -> Callable[[], None]:
        def run() -> None:
            for _ in range(steps):
                _forward_backward(stack, forward)  # results dropped at once: CUDA graphs reuse their memory
            stack.sync()
        return run

    skips = _Skips()
    caught = _catch(skips) if mode == "reduce-overhead" else []
    start = time.perf_counter()
    try:
        for _ in range(WARMUP_CALLS):
            _forward_backward(stack, step)
        stack.sync()
        warm = time.perf_counter() - start
        equal, worst = _differences(_outputs(stack, eager), _outputs(stack, step))
        plain, fast = compare(timed(eager), timed(step), repeats)
    except Exception as exc:  # noqa: BLE001 - a compile that fails is a finding, not the end of the benchmark
        torch._dynamo.reset()
        return (name, math.nan, f"torch.compile raised {type(exc).__name__}: {_first_line(str(exc))}"), \
            time.perf_counter() - start
    finally:
        for logger, level in caught:
            logger.removeHandler(skips)
            logger.setLevel(level)
    breaks = sum(counters.get("graph_break", {}).values())
    graphs = counters.get("stats", {}).get("unique_graphs")
    skipped = counters.get("inductor", {}).get("cudagraph_skips", 0)
    torch._dynamo.reset()  # frees the compiled graphs (and CUDA graphs' memory) before what follows runs
    note = (f"per step eager {plain / steps * 1e3:.2f} ms, compiled {fast / steps * 1e3:.2f} ms; compile and warm-up "
            f"{warm:.1f} s ({WARMUP_CALLS} calls, not in the ratio); "
            + (f"{graphs} graph(s), " if graphs is not None else "")
            + (f"{breaks} graph break(s) ({_first_line(next(iter(counters['graph_break'])))}); " if breaks
               else "no graph break; ")
            + (f"CUDA graphs skipped {skipped or len(skips.reasons)} time(s) "
               f"({'; '.join(_first_line(r) for r in skips.reasons) or 'no reason caught'}); "
               if skipped or skips.reasons else "")
            + (f"eager vmap loops over the replicas for {', '.join(stack.unbatched)} (no batching rule); "
               if stack.unbatched else "")
            + ("losses, logits and gradients equal eager's" if equal else "losses, logits or gradients NOT equal to "
               "eager's") + f" within {TOLERANCE:g} (largest difference {worst:.2g})")
    return (name, fast / plain, note), warm


def run(pairing, device: torch.device, quick: bool, left: Callable[[], float],
        emit: Callable[[Row], None]) -> list[str]:
    """Measure the section, passing each row to ``emit`` as it is taken, the cheap parts first; returns the parts left
    out because ``left()`` gave fewer seconds than they need. Quick: a stack of 2 at batch 8 with a validation split of
    32, compiled with ``aot_eager`` on a CPU (the real run: the suite's whole cell at the recipe's batch, inductor)."""
    gpu = device.type == "cuda"
    seeds, candidates, batch, val = (2, 1, 8, 32) if quick else (3, None, pairing.recipe.batch_size, None)
    repeats, steps = (2, 2) if quick else (5, 20)
    backend = "aot_eager" if quick and not gpu else "inductor"
    modes = ("reduce-overhead", None) if gpu else (None,)  # reduce-overhead (CUDA graphs, on a GPU only) first
    need = 0.0 if quick else 60.0  # seconds left that a compile needs to be started (then 1.5 x the last one's)
    if left() < (0 if quick else 30):
        return ["the whole section (data, evaluation, torch.compile)"]
    stack = build(pairing, seeds, candidates, batch, device, val)
    data_row, step = data(stack, repeats)
    emit(data_row)
    left_out = []
    if left() < (0 if quick else 15):
        left_out.append("evaluation")
    else:
        emit(evaluation(stack, repeats if quick else 3, step))
    for mode in modes:
        remaining = left()
        if remaining < need:
            left_out.append(f"torch.compile mode={mode or 'default'} (needs about {need:.0f} s, "
                            f"{remaining:.0f} s left)")
            continue
        row, warm = compiled(stack, mode, backend, repeats, steps)
        emit(row)
        if not quick:
            need = max(need, 1.5 * warm + 10)
    return left_out
