"""Cells: the pairings of a grid that differ only in their seed, trained together in one worker.

With ``tokbench run --cells seeds`` (or ``auto`` on a GPU) a worker takes a whole cell and trains every seed,
with every candidate of the recipe's sweep, as one stack of replicas (:func:`tokbench.harness.run_cell`). Each
pairing still gets its own record, the one it gets alone: the same fields and config hash, on a CPU the same
metrics bit for bit (the replicas step one after another there), on a GPU equal within float tolerance (they
share one vectorised step where the model allows it), and ``train.replicas`` says how many trained together.

On CPUs a stack steps its replicas one after another, so a cell saves only the per-pairing overhead (worker
hand-off, task and split set-up), while it holds one ``--jobs`` slot for all its seeds; ``auto`` therefore
groups seeds only where torch sees a GPU.
"""
from __future__ import annotations

import importlib.metadata
import math
import time
from collections.abc import Iterator, Sequence

from tokbench.grid import Pairing
from tokbench.outcome import Failure, Outcome, attempt, error_line, exception_failure, raised
from tokbench.results import utc_now

MODES = ("auto", "seeds", "off")


def gpu_visible() -> bool:
    """Whether torch sees a GPU in this process. A CPU build of torch (its version ends in ``+cpu``) is answered
    without importing it, which costs about 2 s of a processor; any other build is asked."""
    try:
        if importlib.metadata.version("torch").endswith("+cpu"):
            return False
    except importlib.metadata.PackageNotFoundError:
        return False
    import torch

    return torch.cuda.is_available()


def seeds_together(mode: str) -> bool:
    """Whether ``--cells MODE`` trains the seeds of a cell together: ``seeds`` always, ``off`` never, ``auto``
    where torch sees a GPU."""
    return mode == "seeds" or (mode == "auto" and gpu_visible())


def group(pairings: Sequence[Pairing], together: bool) -> list[list[Pairing]]:
    """``pairings`` as the cells one worker each trains, in the order of each cell's first pairing.

    With ``together``, the pairings with one :attr:`~tokbench.grid.Pairing.cell` key form one cell; else, and
    for pairings whose training logs (``--logger``) are written under their own record's name, each is a cell
    of one.
    """
    cells: dict[object, list[Pairing]] = {}
    for pairing in pairings:
        key = pairing.cell if together and not pairing.variant.outputs.loggers else pairing.config_hash
        cells.setdefault(key, []).append(pairing)
    return list(cells.values())


def time_limit(timeout: float, size: int) -> tuple[float, str]:
    """The time limit of a cell of ``size`` pairings, ``--timeout`` per pairing times its pairings (they train
    together and finish together), and the error a pairing of a cell that overran it records."""
    if size == 1:
        return timeout, f"timed out after {timeout:g} s"
    limit = timeout * size
    return limit, f"timed out after {limit:g} s (--timeout {timeout:g} s x {size} pairings trained together)"


def attempt_cell(pairings: Sequence[Pairing]) -> Iterator[Outcome]:
    """The outcome of each of ``pairings`` (one cell), in order, each yielded as soon as it is known.

    The cell trains as one stack; a seed whose loss became non-finite, or whose evaluation raised, fails
    alone. An error of the whole stack (a model that raises while training stops every replica; a
    constructor that raises) sends the cell pairing by pairing through :func:`tokbench.outcome.attempt`, so
    that it fails only the pairings it belongs to; so goes a cell of one.
    """
    outcomes = _trained_together(pairings) if len(pairings) > 1 else None
    if outcomes is not None:
        yield from outcomes
        return
    for pairing in pairings:
        yield attempt(pairing)


def _trained_together(pairings: Sequence[Pairing]) -> Iterator[Outcome] | None:
    """The outcomes of the cell trained as one stack (:func:`tokbench.harness.run_cell`), or None if it raised."""
    from tokbench.harness import run_cell

    first = pairings[0]
    started_at, clock = utc_now(), time.perf_counter()
    try:
        task = first.task_spec.create(first.task_params)
        outputs = first.variant.outputs.named(first.filename.removesuffix(".json") + ".cell")  # its checkpoint's name
        results = run_cell(task, first.model_spec, first.model_params, first.recipe, [p.seed for p in pairings],
                           outputs, evaluate_at=first.variant.evaluate)
    except BaseException:  # noqa: BLE001 - retried one by one, where the error fails only its own pairings
        return None
    seconds = time.perf_counter() - clock

    def failed(exc: BaseException) -> Outcome:
        exc = raised(exc)
        return Outcome(started_at, seconds, eval_split=task.eval_split, error=error_line(exc),
                       failure=exception_failure(exc))

    def outcomes() -> Iterator[Outcome]:
        for pairing, result in zip(pairings, results):
            if isinstance(result, Exception):  # this seed's failure, not its cell-mates'
                yield failed(result)
                continue
            accuracy = result.metrics.get("accuracy")
            if not (isinstance(accuracy, float) and math.isfinite(accuracy)):
                yield Outcome(started_at, seconds, eval_split=task.eval_split, failure=Failure("evaluate"),
                              error=f"ValueError: accuracy is not finite: {accuracy}")
                continue
            try:
                if result.samples is not None:
                    outputs = pairing.variant.outputs.named(pairing.filename.removesuffix(".json"))
                    outputs.write_samples(task, task.make_split(task.eval_split, pairing.seed), result.samples)
            except BaseException as exc:  # noqa: BLE001 - as attempt() records it
                yield failed(exc)
                continue
            yield Outcome(started_at, seconds, result=result, eval_split=task.eval_split)

    return outcomes()
