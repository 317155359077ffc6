"""What one attempt at a pairing produced, and the one function that turns it into a run record.

Every way a pairing can end (trained and evaluated, an exception in some phase, a
worker process that died, a timeout, not applicable) is an :class:`Outcome`;
:func:`record_of` is the only place a record is built, in the worker or in the
parent, so every record of every executor has the same shape.
"""
from __future__ import annotations

import math
import os
import sys
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokbench.results import SCHEMA_VERSION, clean, round_floats, utc_now

if TYPE_CHECKING:
    from tokbench.grid import Pairing
    from tokbench.harness import PairingResult

Record = dict[str, Any]
PHASES = ("build", "train", "evaluate", "worker", "timeout", "environment")


MESSAGE_LIMIT = 2000  # characters of an exception's message kept in a record
FRAME_LIMIT = 8  # innermost plugin frames kept in a record


@dataclass(frozen=True)
class Failure:
    """Where a failed attempt stopped: its phase, and the worker's exit status or signal when it died; for an
    exception, its type, message and the plugin frames of its traceback (innermost last)."""

    phase: str
    exit_status: int | None = None
    signal: str | None = None
    exception: str | None = None
    message: str | None = None
    frames: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {"phase": self.phase, "exit_status": self.exit_status, "signal": self.signal}
        if self.exception is not None:
            record.update(exception=self.exception, message=self.message, frames=list(self.frames))
        return record


@dataclass(frozen=True)
class Outcome:
    """One attempt: a result, or an error with its :class:`Failure`, or the reason it is not applicable."""

    started_at: str
    seconds: float
    result: PairingResult | None = None
    eval_split: str = "test"
    error: str | None = None
    failure: Failure | None = None
    not_applicable: str | None = None

    @property
    def status(self) -> str:
        if self.not_applicable is not None:
            return "not_applicable"
        return "failed" if self.error is not None else "ok"


def error_line(exc: BaseException) -> str:
    """``Type: first line of the message``."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _stages() -> dict[Any, str]:
    """The harness and spec functions that mark a phase, by code object."""
    from tokbench import harness
    from tokbench.specs import ModelSpec, TaskSpec

    return {TaskSpec.create.__code__: "build", ModelSpec.build.__code__: "build",
            harness.train_model.__code__: "train", harness.evaluate.__code__: "evaluate",
            harness.evaluate_accuracy.__code__: "evaluate"}


def phase_of(exc: BaseException) -> str:
    """The phase an exception escaped from: the innermost phase-marking function on its traceback.

    An import error while building is the environment's (a missing package), so
    ``--rerun missing`` retries it after a ``pip install``.
    """
    stages, phase = _stages(), "train"
    for frame, _ in traceback.walk_tb(exc.__traceback__):
        phase = stages.get(frame.f_code, phase)
    return "environment" if phase == "build" and isinstance(exc, ImportError) else phase


def _host_folders() -> tuple[str, ...]:
    """Folders whose code is not a plugin's: tokbench itself, the standard library and the libraries it runs on."""
    import sysconfig

    import tokbench

    folders = [Path(tokbench.__file__).parent, Path(sysconfig.get_paths()["stdlib"])]
    for name in ("torch", "pytorch_lightning", "lightning_fabric", "pluggy"):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__file__", None):
            folders.append(Path(module.__file__).parent)
    return tuple(str(folder.resolve()) + os.sep for folder in folders)


def _module_path(filename: str) -> str:
    """``filename`` relative to the import path it was found on (``tokbench_walks/walks.py``): the same on every
    machine, and no local folder in a published record."""
    for root in sorted((p for p in sys.path if p), key=len, reverse=True):
        prefix = str(Path(root).resolve()) + os.sep
        if str(Path(filename).resolve()).startswith(prefix):
            return str(Path(filename).resolve())[len(prefix):]
    return filename


def plugin_frames(exc: BaseException) -> tuple[str, ...]:
    """The traceback's frames in plugin code (not tokbench's, torch's or the standard library's), innermost
    last, as ``file:line in function: code`` (the file relative to its import path); at most :data:`FRAME_LIMIT`."""
    host = _host_folders()
    frames = [f"{_module_path(frame.filename)}:{frame.lineno} in {frame.name}: {(frame.line or '').strip()}"
              for frame in traceback.extract_tb(exc.__traceback__)
              if not str(Path(frame.filename).resolve()).startswith(host)]
    return tuple(frames[-FRAME_LIMIT:])


def raised(exc: BaseException) -> BaseException:
    """The exception the pairing raised: Lightning's ``fit`` turns a ``KeyboardInterrupt`` into ``sys.exit(1)``
    (its graceful shutdown), which would record a plugin's interrupt as ``SystemExit: 1``. A worker ignores
    Ctrl+C, so such an interrupt came from the plugin itself."""
    if isinstance(exc, SystemExit) and isinstance(exc.__context__, KeyboardInterrupt):
        return exc.__context__
    return exc


def exception_failure(exc: BaseException) -> Failure:
    """The failure of an attempt that raised, with the exception's type, message and plugin frames;
    ``sys.exit(n)`` keeps ``n`` as its exit status."""
    status = None
    if isinstance(exc, SystemExit):
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return Failure(phase_of(exc), exit_status=status, exception=type(exc).__name__,
                   message=str(exc)[:MESSAGE_LIMIT], frames=plugin_frames(exc))


def record_of(pairing: Pairing, outcome: Outcome, provenance: Mapping[str, Any]) -> Record:
    """The schema-v3 run record of ``outcome``; ``provenance`` is the trainer's (``started_at`` comes from
    the outcome). A model that is not trained by gradient descent records 0 steps whatever happened."""
    task, model = pairing.task_spec, pairing.model_spec
    result = outcome.result
    if result is not None:
        train = dict(result.train)
    else:
        train = {**pairing.recipe.to_json(), "wall_seconds": outcome.seconds}
    if not model.trained:
        train["steps"] = 0
    record: Record = {
        "schema_version": SCHEMA_VERSION,
        **clean(pairing.header),
        "status": outcome.status,
        "error": outcome.not_applicable if outcome.not_applicable is not None else outcome.error,
        "eval_split": outcome.eval_split,
        "metrics": clean(dict(result.metrics)) if result else {},
        "train": clean(train),
        "curve": {k: round_floats(list(v)) for k, v in (result.curve if result else {}).items()},
        "attention_profile": round_floats(result.attention_profile) if result and result.attention_profile
        is not None else None,
        "diagnostics": clean(dict(result.diagnostics)) if result else {},
        "meta": {"task_description": task.description, "task_citation": task.citation,
                 "model_description": model.description, "model_citation": model.citation,
                 "recipe": pairing.recipe.describe(),
                 "task_difficulty": list(task.difficulty), "task_pitfall": task.pitfall,
                 "model_family": model.family_name, "model_oracle": model.oracle,
                 # the specs' defaults, so the leaderboard names each variant by what it changes
                 "defaults": clean({"task": task.resolve(), "model": model.resolve(),
                                    "train": model.recipe.to_json()})},
        "provenance": {**provenance, "started_at": outcome.started_at},
    }
    if result is not None:
        record["budget_curve"] = clean(result.budget_curve)
        if result.size is not None:
            record["size"] = dict(result.size)
        if result.evaluations:
            record["evaluations"] = clean(result.evaluations)
    if pairing.variant.rung is not None:
        record["ladder"] = pairing.variant.rung.to_json()
    if outcome.status == "failed":
        record["failure"] = (outcome.failure or Failure("train")).to_json()
    return record


def attempt(pairing: Pairing) -> Outcome:
    """Train and evaluate ``pairing`` in this process.

    Whatever the task or model raises, ``sys.exit`` included, becomes the outcome;
    ``NotApplicable`` from a constructor makes the pairing not applicable.
    """
    from tokbench.errors import NotApplicable
    from tokbench.harness import run_pairing

    started_at, clock, eval_split = utc_now(), time.perf_counter(), "test"
    try:
        task = pairing.task_spec.create(pairing.task_params)
        eval_split = task.eval_split
        outputs = pairing.variant.outputs.named(pairing.filename.removesuffix(".json"))  # logs, samples: its name
        result = run_pairing(task, pairing.model_spec, pairing.model_params, pairing.recipe, pairing.seed,
                             outputs, evaluate_at=pairing.variant.evaluate)
        if result.samples is not None:
            outputs.write_samples(task, task.make_split(eval_split, pairing.seed), result.samples)
    except NotApplicable as exc:
        return Outcome(started_at, time.perf_counter() - clock, eval_split=eval_split, not_applicable=str(exc))
    except BaseException as exc:  # noqa: BLE001 - nothing one pairing does may sink the grid
        exc = raised(exc)
        return Outcome(started_at, time.perf_counter() - clock, eval_split=eval_split, error=error_line(exc),
                       failure=exception_failure(exc))
    seconds, accuracy = time.perf_counter() - clock, result.metrics.get("accuracy")
    if not (isinstance(accuracy, float) and math.isfinite(accuracy)):
        return Outcome(started_at, seconds, eval_split=eval_split, failure=Failure("evaluate"),
                       error=f"ValueError: accuracy is not finite: {accuracy}")
    return Outcome(started_at, seconds, result=result, eval_split=eval_split)
