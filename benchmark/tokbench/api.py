"""Run pairings from Python (a notebook, a script) and get their run records back.

    from tokbench.api import run

    records = run(tasks=["random-walk"], models=["attn-rope", "uniform"], seeds=3,
                  settings=["train.steps=100"])
    [(r["model"], r["seed"], r["metrics"]["accuracy"]) for r in records]

It is `tokbench run` without the command line: the same planning (suites, patterns,
``--set`` routing, not-applicable pairings), the same isolated workers and the same
records, written to ``out`` (a fresh temporary folder by default), so a rerun into the
same folder skips what is finished. Usage errors raise :class:`tokbench.errors.UsageError`.
Lightning loggers, your own Lightning callbacks and per-sample outputs are arguments
(``docs/api.md``).
"""
from __future__ import annotations

import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from tokbench.grid import expand, implied_suite, parse_settings
from tokbench.isolation import start_server
from tokbench.locks import PairingLocks
from tokbench.outputs import RunOutputs, check_loggers
from tokbench.plugins import registry
from tokbench.progress import PlainProgress
from tokbench.results import git_commit, load_records
from tokbench.runner import DEFAULT_THREADS, make_executor, plan, run_grid
from tokbench.suites import load_suite


def run(tasks: Sequence[str] = (), models: Sequence[str] = (), *, suite: str | None = None, seeds: int | None = None,
        settings: Sequence[str] = (), out: str | Path | None = None, jobs: int = 1, threads: int = DEFAULT_THREADS,
        rerun: str = "missing", verbose: bool = False, loggers: Sequence[str] = (), log_samples: bool = False,
        callbacks: Sequence[Any] = ()) -> list[dict[str, Any]]:
    """Run the pairings of ``suite`` narrowed to ``tasks`` and ``models`` (names or glob patterns), and return
    one record per pairing, in the suite's order (see ``docs/run-records.md`` for the fields).

    ``suite`` defaults as in ``tokbench run``: the default suite, or the survey suite where ``tasks`` or
    ``models`` name one that the default leaves out. ``settings`` are ``--set`` assignments (``"p=0.8"``,
    ``"train.lr=0.01"``); ``seeds`` replaces the suite's seeds with ``0..seeds-1``; ``jobs`` worker processes of
    ``threads`` torch threads each; ``verbose`` prints one line per finished pairing. ``loggers`` (``"csv"``,
    ``"tensorboard"``, ``"wandb"``; default: the suite's ``[outputs]``) log each pairing's training under
    ``out/logs/``, at optimiser steps; ``callbacks`` are Lightning callbacks added to every Trainer (picklable:
    they run in the worker processes); ``log_samples`` writes each evaluation sequence's outputs beside its
    record (:mod:`tokbench.outputs`). A plugin of an older contract gets one :class:`tokbench.compat.ContractWarning`
    per change its author should make, issued on every call (Python's default filter shows each once per process).
    """
    start_server()
    reg = registry()
    chosen = load_suite(suite) if suite is not None else implied_suite(reg, tasks, models)[0]
    folder = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="tokbench-run-"))
    outputs = RunOutputs(folder, check_loggers(loggers or chosen.outputs.get("loggers", [])),
                         log_samples or chosen.outputs.get("log_samples", False), tuple(callbacks))
    grid = expand(chosen, reg, tasks, models, seeds, parse_settings(list(settings)), outputs=outputs)
    existing = load_records(folder).records
    todo = plan(grid, existing, rerun)
    if todo:
        from tokbench.compat import ContractWarning, contract_notes

        for line in contract_notes(todo):  # by this process, once per run: the workers say nothing
            warnings.warn(line, ContractWarning, stacklevel=2)
        folder.mkdir(parents=True, exist_ok=True)
        executor = make_executor("local", folder, git_commit(), jobs, len(todo), threads)
        console = Console(quiet=not verbose)
        run_grid(todo, executor, PlainProgress(todo, console), PairingLocks(folder, existing))
    records = load_records(folder).records
    return [records[pairing.config_hash] for pairing in grid]
