"""``tokbench run``: train and evaluate every pairing of a suite, one run record each.

Exit codes: 0 when every pairing of the (sharded) grid has an ok or not-applicable
record, 1 when any has a failed one, 2 for usage errors (a bad name, parameter or
suite file), 3 when the records cannot be written, 130 when interrupted.
"""
from __future__ import annotations

import argparse
import math
import shlex
import sys
import tempfile
from itertools import islice
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from tokbench import adaptive, cells
from tokbench.commands import loaded_registry, nonnegative_int, output_console, positive_int, thread_count
from tokbench.errors import StorageError, UsageError
from tokbench.grid import (DEFAULT_SUITE, WIDEST_SUITE, Pairing, expand, implied_suite, left_out, limit_line,
                           on_rungs, parse_evaluations, parse_settings, parse_shard, shard)
from tokbench.plugins import origin
from tokbench.outputs import DEFAULT_CHECKPOINT_EVERY, LOGGERS, SAMPLES_SUFFIX, RunOutputs, check_loggers
from tokbench.progress import make_progress, outcome, pairing_label, variant_labels
from tokbench.results import git_commit, load_records
from tokbench.isolation import start_server
from tokbench.locks import PairingLocks
from tokbench.specs import RECIPE_PARAMS
from tokbench.runner import (DEFAULT_THREADS, EXECUTORS, RERUN_MODES, check_ray_address, make_executor,
                             place_on_ladders, plan, run_grid, usable_cores)
from tokbench.suites import builtin_suites, load_suite

EXIT_INTERRUPTED = 130


def seconds(text: str) -> float:
    """An argparse type: a finite number of seconds > 0."""
    return _seconds(text, zero=False)


def seconds_or_zero(text: str) -> float:
    """An argparse type: a finite number of seconds >= 0 (0: never)."""
    return _seconds(text, zero=True)


def _seconds(text: str, zero: bool) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (0 <= value if zero else 0 < value) or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds {'>=' if zero else '>'} 0, got {text!r}")
    return value


def register(subparsers: argparse._SubParsersAction) -> None:
    run = subparsers.add_parser(
        "run", help="train and evaluate every pairing of a suite (default: the default suite)",
        description="Train and evaluate every pairing of a suite and write one run record per pairing and seed. "
        "A rerun skips finished records, so it resumes after a crash and runs only what new plugins add.",
        epilog="Records merge by copying folders together, e.g. the --out folders of --shard jobs.")
    run.add_argument("--suite", metavar="NAME|FILE",
                     help=f"a built-in suite ({', '.join(builtin_suites())}) or a suite TOML file (default: "
                     f"{DEFAULT_SUITE}, or {WIDEST_SUITE} where --task or --model names a task or model that "
                     f"{DEFAULT_SUITE} leaves out, so that any registered pairing runs by name)")
    run.add_argument("--task", dest="tasks", action="extend", nargs="+", default=[], metavar="NAME",
                     help="only these tasks of the suite (names or patterns)")
    run.add_argument("--model", dest="models", action="extend", nargs="+", default=[], metavar="NAME",
                     help="only these models of the suite (names or patterns)")
    run.add_argument("--seeds", type=positive_int, metavar="N", help="seeds 0..N-1 instead of the suite's")
    run.add_argument("--rung", dest="rungs", action="extend", nargs="+", type=nonnegative_int, default=[],
                     metavar="I", help="only these rungs of each ladder (0 the easiest; tasks without a ladder are "
                     "kept): a plan cut in breadth, each record still placed on its ladder")
    run.add_argument("--set", dest="settings", action="extend", nargs="+", default=[], metavar="KEY=VALUE",
                     help="parameter overrides: task.KEY, model.KEY, train.KEY (the recipe: "
                     f"{', '.join(p.name for p in RECIPE_PARAMS)}), or a bare KEY for every task, "
                     "model or recipe that declares it")
    run.add_argument("--evaluate", action="append", default=[], metavar="AXIS=VALUES",
                     help="also evaluate each trained model at these values of a task's evaluation axis, e.g. "
                     "context_length=x2,x4 (multiples of the training value) or context_length=64,128; replaces "
                     "the suite's [grid.evaluate]; part of each pairing's identity")
    run.add_argument("--out", type=Path, default=Path("runs"), metavar="DIR", help="records folder (default: runs)")
    run.add_argument("--logger", dest="loggers", action="extend", nargs="+", default=[], choices=tuple(LOGGERS),
                     help="Lightning loggers of the training curves, under OUT/logs/RECORD/, stepped in optimiser "
                     "steps: csv, tensorboard (pip install tensorboard), wandb (pip install wandb) (suite key: "
                     "[outputs] loggers)")
    run.add_argument("--log-samples", action="store_true",
                     help="write each evaluation sequence's tokens, label, prediction and Bayes probabilities to "
                     f"OUT/RECORD{SAMPLES_SUFFIX} beside its record (format: docs/api.md; suite key: [outputs] "
                     "log_samples)")
    run.add_argument("--target-ci", type=float, metavar="HALF_WIDTH",
                     help="adaptive seeds: add seeds to each cell until the half-width of its accuracy interval "
                     "is at most this (e.g. 0.02) or --max-seeds is reached; records say why each cell stopped "
                     "(suite key: [adaptive] target_ci)")
    run.add_argument("--max-seeds", type=positive_int, metavar="N",
                     help="with --target-ci: at most N seeds per cell (default 20; suite key: [adaptive] max_seeds)")
    run.add_argument("--dry-run", action="store_true", help="list the pairings and which are done; train nothing")
    run.add_argument("--rerun", choices=RERUN_MODES, default="missing",
                     help="which pairings with a record run again: none (missing, the default), failed ones, or all")
    run.add_argument("--jobs", "-j", type=positive_int, metavar="N",
                     help=f"local worker processes (default and cap: the usable cores, here {usable_cores()}, "
                     "divided by --threads); every pairing runs in a worker process, also at --jobs 1")
    run.add_argument("--threads", type=thread_count, default=DEFAULT_THREADS, metavar="N",
                     help="torch intra-op threads per pairing, recorded in each record's provenance (default: "
                     "%(default)s, so numbers do not depend on --jobs, resuming or the machine's cores)")
    run.add_argument("--timeout", type=seconds, metavar="SECONDS",
                     help="stop a pairing that runs longer and record it as failed (default: no limit); a cell of "
                     "N pairings trained together (--cells) gets N times this")
    run.add_argument("--checkpoint-every", type=seconds_or_zero, default=DEFAULT_CHECKPOINT_EVERY, metavar="SECONDS",
                     help="write a training's state to OUT/.checkpoints/ every SECONDS of training (default: "
                     "%(default)g; 0: never), so that a rerun after a kill resumes it there, with the numbers of an "
                     "uninterrupted run (bit for bit on a CPU); the file goes once the record is written")
    run.add_argument("--cells", choices=cells.MODES, default="auto",
                     help="train the pairings that differ only in the seed together, in one worker, as one stack of "
                     "replicas: always (seeds), never (off), or where torch sees a GPU (auto, the default: on CPUs "
                     "a stack saves only per-pairing overhead and holds one --jobs slot for all its seeds); each "
                     "pairing still gets its own record, the one it gets alone")
    run.add_argument("--executor", choices=EXECUTORS, default="local",
                     help="local worker processes, or Ray tasks of one CPU and one torch thread each (pip install "
                     "'tokbench[ray]')")
    run.add_argument("--ray-address", metavar="ADDR",
                     help="Ray cluster to join, HOST:PORT, ray://HOST:PORT or auto (default: start a local Ray)")
    run.add_argument("--shard", metavar="I/N", help="run only shard I of N (0 <= I < N), e.g. in a SLURM job array")
    run.add_argument("-q", "--quiet", action="store_true", help="plain lines instead of the live display")
    run.add_argument("--strict", action="store_true",
                     help="fail on a corrupt or foreign file in --out instead of skipping it")
    run.set_defaults(handler=_run)


def print_summary(records: list[Mapping[str, Any]], console: Console) -> None:
    """The leaderboard of the records of this grid, in brief."""
    from tokbench.leaderboard.aggregate import Section, build
    from tokbench.leaderboard.publish import show

    show([Section("", build(records), list(records), [])], console)


def _print_plan(pairings: list[Pairing], existing: Mapping[str, Mapping[str, Any]], todo: list[Pairing]) -> None:
    """One line per pairing: whether it will run, its current record, its label and config hash."""
    variants = variant_labels(p.header for p in pairings)
    will_run = {p.config_hash for p in todo}

    def line(p: Pairing) -> str:
        record = existing.get(p.config_hash)
        action = "skip" if p.config_hash not in will_run else "n/a " if p.not_applicable is not None else "run "
        state = "missing" if record is None else record["status"]
        return f"{action}  {state:7}  {p.config_hash}  {pairing_label(p.header, variants)}\n"

    lines = map(line, pairings)
    while chunk := "".join(islice(lines, 65536)):  # a grid may have a million lines: write them in large blocks
        sys.stdout.write(chunk)
    for line in [*_ladder_lines(pairings), *_evaluation_lines(pairings), limit_line(pairings)]:
        print(line)
    inapplicable = sum(p.not_applicable is not None for p in todo)  # recorded as not applicable, without training
    print(f"{len(pairings)} pairings: {len(todo) - inapplicable} to run, {inapplicable} not applicable (recorded "
          f"without training), {len(pairings) - len(todo)} to skip")


def _ladder_lines(pairings: list[Pairing]) -> list[str]:
    """One line per laddered task: each axis's values from the easiest rung up, and how many models climb it."""
    rungs: dict[str, dict[int, Mapping[str, Any]]] = {}
    counts: dict[str, int] = {}
    models: dict[str, set[str]] = {}
    for pairing in pairings:
        rung = pairing.variant.rung
        if rung is not None:
            rungs.setdefault(pairing.task_spec.name, {})[rung.index] = rung.axes
            counts[pairing.task_spec.name] = rung.count
            models.setdefault(pairing.task_spec.name, set()).add(pairing.model_spec.name)
    lines = []
    for task, by_index in rungs.items():
        ordered = [by_index[i] for i in sorted(by_index)]
        axes = "; ".join(f"{key} {' -> '.join(str(r[key]) for r in ordered)}" for key in ordered[0])
        climbed = (f"{len(ordered)} rungs" if len(ordered) == counts[task] else  # --rung: which of how many
                   f"rung {', '.join(map(str, sorted(by_index)))} of {counts[task]}")
        lines.append(f"ladder  {task}: {axes}  ({climbed} x {len(models[task])} models)")
    return lines


def _evaluation_lines(pairings: list[Pairing]) -> list[str]:
    """One line per task with extra evaluation settings: the settings (of its first variant), and where they
    will not be applicable (the task lacks the axis, or a model has a fixed length)."""
    first: dict[str, Pairing] = {}
    fixed: dict[str, set[str]] = {}
    for pairing in pairings:
        if pairing.variant.evaluate:
            task = pairing.task_spec.name
            first.setdefault(task, pairing)
            if pairing.model_spec.fixed_length:
                fixed.setdefault(task, set()).add(pairing.model_spec.name)
    lines = []
    for task, pairing in first.items():
        evaluations = pairing.variant.evaluate
        shown = ", ".join(" ".join(f"{k}={v}" for k, v in e.items()) for e in evaluations)
        if any(k not in pairing.task_spec.evaluation_axes for e in evaluations for k in e):
            shown += f"; not applicable: {pairing.task_spec.evaluation_note or 'not among its evaluation axes'}"
        elif task in fixed and any("context_length" in e for e in evaluations):
            shown += f"; not applicable for {', '.join(sorted(fixed[task]))} (fixed length)"
        lines.append(f"evaluate  {task}: {shown}")
    return lines


def _check_writable(out: Path) -> None:
    """Fail before any training when the records folder cannot be created or written."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".tokbench-probe-"):
            pass
    except OSError as exc:
        raise StorageError(out, f"cannot write records there: {exc.strerror or exc}") from None


def _jobs(args: argparse.Namespace) -> int:
    """``--jobs``, capped so that the workers' threads fit the usable cores (more only wait and take memory)."""
    cap = max(1, usable_cores() // args.threads)
    if args.jobs is None:
        return cap
    if args.executor == "local" and args.jobs > cap:
        print(f"tokbench: note: --jobs {args.jobs} capped at {cap} ({usable_cores()} usable cores, "
              f"{args.threads} torch thread(s) per pairing)", file=sys.stderr)
        return cap
    return args.jobs


def _train(args: argparse.Namespace, todo: list[Pairing], existing: Mapping[str, Mapping[str, Any]],
           headline: str, console: Console) -> dict[str, Any]:
    """Run ``todo`` with the chosen executor and progress display; the new records by config hash."""
    if args.executor == "ray" and args.ray_address:
        check_ray_address(args.ray_address)  # before anything is written into --out (its .locks, say)
    _check_writable(args.out)
    if args.executor == "local":
        # Only now, with every argument and file checked: the server inherits stdout and stderr, and a
        # reader of a pipe would wait for it to notice that the parent left (20-55 s under load).
        start_server()
    locks = PairingLocks(args.out, existing)
    together = cells.seeds_together(args.cells)
    if together and (count := len(cells.group(todo, together))) < len(todo):
        headline += f", as {count} cells of seeds trained together,"
    print(f"tokbench: {headline} into {args.out}/", file=sys.stderr)
    executor = make_executor(args.executor, args.out, git_commit(), _jobs(args), len(todo), args.threads,
                             args.timeout, args.ray_address)
    with make_progress(todo, console, args.quiet) as progress:
        return {record["config_hash"]: record for record in run_grid(todo, executor, progress, locks, together)}


def _plugins_note(args: argparse.Namespace, suite: Any, grid: list[Pairing]) -> str:
    """On the first line of an unfiltered first look: how many pairings installed plugins add, and how to narrow
    it (with plugins the default grid grows past its 3 minutes, e.g. 216 to 405 pairings with three)."""
    if args.tasks or args.models or suite.origin != load_suite(DEFAULT_SUITE).origin:
        return ""
    added = sum("plugin" in (origin(p.task_spec), origin(p.model_spec)) for p in grid)
    return (f" ({added} of them from installed plugins, so this first look takes longer than its 3 minutes: "
            "narrow it with --task/--model, or TOKBENCH_DISABLE_PLUGINS=NAME; see tokbench plugins)" if added else "")


def _run(args: argparse.Namespace) -> int:
    console = output_console()
    err = Console(stderr=True)
    registry = loaded_registry()
    if args.suite is None:
        suite, why = implied_suite(registry, args.tasks, args.models)
        if why is not None:
            print(f"tokbench: running from {suite.origin}: {why}", file=sys.stderr)
    else:
        suite = load_suite(args.suite)
        if missing := left_out(suite, registry, args.tasks, args.models):  # silently dropped, before
            raise UsageError(f"{suite.origin} has no {', '.join(missing)}: name only what it selects, or leave out "
                             "--suite to run any registered pairing by name")
    outputs = RunOutputs(args.out, check_loggers(args.loggers or suite.outputs.get("loggers", [])),
                         args.log_samples or suite.outputs.get("log_samples", False),
                         checkpoint_every=args.checkpoint_every)
    grid = expand(suite, registry, args.tasks, args.models, args.seeds, parse_settings(args.settings),
                  parse_evaluations(args.evaluate) if args.evaluate else None, outputs)
    if args.rungs:
        grid = on_rungs(grid, args.rungs)
    if args.shard:
        grid = shard(grid, *parse_shard(args.shard))
        if not grid:  # more array jobs than pairings: the spare ones have nothing to do, which is no error
            print(f"tokbench: shard {args.shard} of this grid is empty; nothing to run", file=sys.stderr)
            return 0
    if args.ray_address and args.executor != "ray":
        raise UsageError("--ray-address needs --executor ray")
    if args.executor == "ray" and args.threads != DEFAULT_THREADS:
        raise UsageError(f"--threads {args.threads} needs --executor local: a Ray task holds one CPU and trains on "
                         f"{DEFAULT_THREADS} thread")
    goal = adaptive.target(args.target_ci if args.target_ci is not None else suite.adaptive.get("target_ci"),
                           args.max_seeds if args.max_seeds is not None else suite.adaptive.get("max_seeds"))

    loaded = load_records(args.out, strict=args.strict)
    for problem in loaded.problems:
        print(f"tokbench: warning: skipped {problem}", file=sys.stderr)
    for duplicate in loaded.duplicates:
        print(f"tokbench: warning: {duplicate} (this run uses the finished or later one)", file=sys.stderr)
    newer = [p for p in grid if p.config_hash in loaded.newer]
    if newer:  # never overwrite what a newer tokbench wrote, whatever --rerun says
        print(f"tokbench: warning: {len(newer)} pairing(s) have records written by a newer tokbench (e.g. "
              f"{next(iter(loaded.newer.values())).path}); they are kept as they are and not run", file=sys.stderr)
        grid = [p for p in grid if p.config_hash not in loaded.newer]
        if not grid:
            return 0
    todo = plan(grid, loaded.records, args.rerun)
    if args.dry_run:
        _print_plan(grid, loaded.records, todo)
        return 0

    finished = {p.config_hash: loaded.records[p.config_hash] for p in grid if p.config_hash in loaded.records}
    again = {p.config_hash for p in todo}
    placed = place_on_ladders([p for p in grid if p.config_hash not in again], finished, args.out)
    if placed:
        print(f"tokbench: {placed} records in {args.out}/ trained under another plan placed on this suite's ladder "
              "rungs", file=sys.stderr)
    said: set[str] = set()

    def train(pairings: list[Pairing], headline: str) -> dict[str, Any]:
        from tokbench.compat import contract_notes  # torch: imported by the plan already

        for line in contract_notes(pairings):  # by this process, once per run; the workers say nothing
            if line not in said:
                said.add(line)
                print(f"tokbench: warning: {line}", file=sys.stderr)
        return _train(args, pairings, loaded.records, headline, console)

    if todo:
        headline = f"{len(todo)} of {len(grid)} pairings to run from {suite.origin}{_plugins_note(args, suite, grid)}"
        try:
            finished.update(train(todo, headline))
        except KeyboardInterrupt:
            print(f"tokbench: interrupted; every pairing that finished has its record in {args.out}/; "
                  "run the same command again to resume", file=sys.stderr)
            return EXIT_INTERRUPTED
    else:
        print(f"tokbench: all {len(grid)} pairings already have records in {args.out}/ (see --rerun)", file=sys.stderr)
    if goal is not None:
        grid = adaptive.run_until(grid, finished, loaded.records, goal, lambda more: train(
            more, f"{len(more)} more seeds for cells wider than ±{goal.half_width:g}"), args.out, args.rerun)

    records = [finished[p.config_hash] for p in grid]
    print_summary(records, console)
    board = shlex.quote(f"{args.out.as_posix().rstrip('/')}-leaderboard")
    print(f"tokbench: records in {args.out}/; tables, HTML and plots: tokbench leaderboard --records "
          f"{shlex.quote(args.out.as_posix())} --format all --out {board}", file=sys.stderr)
    if suite.origin == load_suite(DEFAULT_SUITE).origin:
        what = (f"the default suite, a first look ({suite.description.partition(': ')[0]})"
                if not (args.tasks or args.models) else
                "the default suite's first-look sizes (small splits, at most its step cap) for the tasks and "
                "models named")
        print(f"tokbench: that was {what}; the full comparisons: tokbench run --suite tokbench (the benchmark's "
              "protocol), --suite survey (every task x every model) or --suite paper (docs/suites.md)", file=sys.stderr)
    failed = [r for r in records if r["status"] == "failed"]
    if failed:
        variants = variant_labels(records)
        err.print(f"[red]{len(failed)} of {len(records)} pairings failed[/] (rerun them with --rerun failed):",
                  soft_wrap=True)
        for record in failed:
            earlier = loaded.records.get(record["config_hash"])
            kept = " (the earlier finished record is kept)" if earlier and earlier["status"] != "failed" else ""
            err.print(f"  {escape(pairing_label(record, variants))}: {escape(outcome(record))}{kept}",
                      highlight=False, soft_wrap=True)
        return 1
    return 0
