"""The CPU cost of a suite's plan, per model and task family, from step costs measured on this machine.

    python benchmark/budget/cpu_plan.py [--suite tokbench] [--task T ...] [--model M ...] [--set KEY=VALUE ...]
                                        [--rung I] [--costs FILE] [--no-measure] [--records FOLDER ...] [--markdown]

For every trained, applicable variant of the suite (a task setting and a model, all seeds) it measures the
marginal cost of one training step on one torch thread, as a `tokbench run` worker trains (the difference of
two runs of different lengths over their difference in steps, so start-up is not counted; fresh data, batch of
the recipe, no stop), and projects the suite's core-hours at the cap: seeds x replica-steps per seed (every
sweep candidate to the cap, or what a pruned sweep trains: ``Recipe.replica_steps``) x that cost. It is an
upper bound on training: a run that reaches its target stops earlier; evaluation (every ``eval_every`` steps on
the validation split, the test budgets and the longer-context settings) is not counted: a few percent for the
architectures at width 64, more for the MLP, and most of the cost of the tiny single-layer models (the budget
README calibrates it on records). Adaptive seeds
beyond the suite's ``seeds`` are not counted. With ``--records``, a variant that has records of the plan is
projected from the time they took instead (``train.wall_seconds``, mean per seed: stops and evaluation included,
under the load they ran at).

Measured costs are kept in ``--costs`` (JSON) and only missing variants are measured, so other plans over the
same settings (fewer rungs, another sweep) are projected without measuring again. The seconds are this
machine's, under its load at the time; the file says when and where they were taken.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tabulate import tabulate

SHORT, LONG = 5, 25  # steps of the two timed runs whose difference gives the marginal cost


def _key(variant) -> str:
    """What a step's cost depends on: the model and task at their versions and parameters, and the batch."""
    return json.dumps([variant.model_spec.name, variant.model_spec.version, variant.task_spec.name,
                       variant.task_spec.version, variant.task_params, variant.model_params, variant.recipe.batch_size],
                      sort_keys=True)


def trained_pairings(suite: str, tasks: tuple[str, ...] = (), models: tuple[str, ...] = (),
                     settings: tuple[str, ...] = (), rung: int | None = None) -> list:
    """Every trained, applicable pairing of ``suite`` (narrowed and set as ``tokbench run --task/--model/--set``
    would; with ``rung``, only that rung of each ladder, 0 the first)."""
    from tokbench.grid import expand, parse_settings
    from tokbench.plugins import registry
    from tokbench.suites import load_suite

    return [pairing for pairing in expand(load_suite(suite), registry(), tasks, models,
                                          settings=parse_settings(settings))
            if pairing.not_applicable is None and pairing.model_spec.trained
            and (rung is None or pairing.variant.rung is None or pairing.variant.rung.index == rung)]


def trained_variants(suite: str, tasks: tuple[str, ...] = (), models: tuple[str, ...] = (),
                     settings: tuple[str, ...] = (), rung: int | None = None) -> dict[str, tuple[object, int]]:
    """``{key: (variant, seeds)}`` for every variant of :func:`trained_pairings`."""
    return variants_of(trained_pairings(suite, tasks, models, settings, rung))


def variants_of(pairings: Iterable) -> dict[str, tuple[object, int]]:
    """``{key: (variant, seeds)}``: the pairings by the key of their step cost, with how many seeds each has."""
    found: dict[str, tuple[object, int]] = {}
    for pairing in pairings:
        key = _key(pairing.variant)
        variant, seeds = found.get(key, (pairing.variant, 0))
        found[key] = (variant, seeds + 1)
    return found


def recorded_seconds(pairings: list, records: Iterable[Mapping[str, Any]]) -> dict[str, list[float]]:
    """``{key: [wall seconds]}``: what the pairings that have an ok record among ``records`` took to train and
    evaluate (``train.wall_seconds``), by the key of their variant's step cost."""
    by_hash = {record["config_hash"]: record for record in records}
    found: dict[str, list[float]] = defaultdict(list)
    for pairing in pairings:
        record = by_hash.get(pairing.config_hash)
        if record is not None and record.get("status") == "ok":
            found[_key(pairing.variant)].append(record["train"]["wall_seconds"])
    return found


def measure(variants: dict[str, tuple[object, int]], costs: dict[str, float | None], save) -> None:
    """Fill ``costs`` (seconds per step; None where the model turns out not applicable) for every variant not
    in it, calling ``save`` after each."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import torch
    from gpu import step_cost

    from tokbench.errors import NotApplicable
    from tokbench.grid import Pairing

    torch.set_num_threads(1)  # as each `tokbench run` worker
    missing = [key for key in variants if key not in costs]
    for done, key in enumerate(missing, 1):
        variant, _ = variants[key]
        try:
            costs[key] = step_cost(Pairing(variant, 0), 1, "cpu", SHORT, LONG)
            cost = f"{costs[key] * 1e3:.1f} ms/step"
        except NotApplicable as reason:  # found only when the model is built (the MLP's first layer, say)
            costs[key], cost = None, f"not applicable ({reason})"
        print(f"[{done}/{len(missing)}] {variant.model_spec.name} on {variant.task_spec.name} "
              f"{_setting(variant)}: {cost}", file=sys.stderr, flush=True)
        save()


def _setting(variant) -> str:
    return ", ".join(f"{k}={v}" for k, v in variant.rung.axes.items()) if variant.rung else ""


def project(variants: dict[str, tuple[object, int]], costs: dict[str, float | None],
            recorded: dict[str, list[float]] | None = None) -> dict[str, dict[str, float]]:
    """``{model: {task: core-hours}}`` over the variants that apply: at the cap, or, for a variant with records in
    ``recorded``, its seeds x the mean time its records took (their stops and their evaluation included)."""
    hours: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for key, (variant, seeds) in variants.items():
        if recorded and recorded.get(key):
            seconds = sum(recorded[key]) / len(recorded[key])
        elif costs[key] is None:
            continue
        else:
            seconds = variant.recipe.replica_steps() * costs[key]
        hours[variant.model_spec.name][variant.task_spec.name] += seeds * seconds / 3600
    return hours


def table(hours: dict[str, dict[str, float]]) -> tuple[list[str], list[list[str]]]:
    tasks = sorted({task for per_task in hours.values() for task in per_task})
    body = []
    for model in sorted(hours, key=lambda m: -sum(hours[m].values())):
        row = [hours[model].get(task) for task in tasks]
        body.append([model, *["" if h is None else f"{h:.1f}" for h in row], f"{sum(hours[model].values()):.1f}"])
    totals = [sum(hours[m].get(task, 0.0) for m in hours) for task in tasks]
    body.append(["all", *[f"{t:.1f}" for t in totals], f"{sum(totals):.1f}"])
    return ["model", *tasks, "all"], body


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="tokbench", help="a suite name or file (default tokbench)")
    parser.add_argument("--task", nargs="+", default=(), help="only these tasks (glob patterns allowed)")
    parser.add_argument("--model", nargs="+", default=(), help="only these models (glob patterns allowed)")
    parser.add_argument("--set", dest="settings", nargs="+", default=(), metavar="KEY=VALUE",
                        help="as tokbench run --set: another plan over the same settings (train.sweep_steps=3000)")
    parser.add_argument("--rung", type=int, metavar="I",
                        help="only rung I of each ladder (0 the first; a task without a ladder is kept)")
    parser.add_argument("--costs", type=Path, default=Path(__file__).with_name("cpu-costs.json"),
                        help="measured seconds per step, read and extended (default cpu-costs.json beside this)")
    parser.add_argument("--no-measure", action="store_true", help="project from --costs only; fail if one is missing")
    parser.add_argument("--records", type=Path, nargs="+", default=(), metavar="FOLDER",
                        help="records of the plan's pairings: a variant with records is projected from the time "
                             "they took (mean per seed) instead of at the cap")
    parser.add_argument("--markdown", action="store_true", help="a GitHub markdown table instead of plain text")
    args = parser.parse_args()
    from tokbench.errors import TokbenchError

    try:
        pairings = trained_pairings(args.suite, tuple(args.task), tuple(args.model), tuple(args.settings), args.rung)
    except TokbenchError as error:  # an unknown suite, name or key: one line, as tokbench run says it
        print(f"error: {error}", file=sys.stderr)
        return 2
    variants = variants_of(pairings)
    stored = json.loads(args.costs.read_text(encoding="utf-8")) if args.costs.exists() else {}
    costs: dict[str, float | None] = stored.get("seconds_per_step", {})

    def save() -> None:
        where = {"machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
                 "measured": time.strftime("%Y-%m-%d"), "threads": 1, "steps": [SHORT, LONG]}
        args.costs.write_text(json.dumps({**stored, **where, "seconds_per_step": costs}, indent=1, sort_keys=True),
                              encoding="utf-8")

    missing = [key for key in variants if key not in costs]
    if missing and args.no_measure:
        print(f"error: {len(missing)} variants of {args.suite} have no measured cost in {args.costs}", file=sys.stderr)
        return 2
    measure(variants, costs, save)
    from tokbench.results import load_records

    recorded = recorded_seconds(pairings, (r for folder in args.records for r in load_records(folder).records.values()))
    header, body = table(project(variants, costs, recorded))
    narrowed = " ".join([*(["--rung", str(args.rung)] if args.rung is not None else []),
                         *(["--set", *args.settings] if args.settings else [])])
    source = (f"at the cap, or for {len(recorded)} of {len(variants)} variants from the time their "
              f"{sum(map(len, recorded.values()))} records took" if args.records else "at the cap")
    print(f"{args.suite} {narrowed}".rstrip() + f": core-hours {source} (one thread per run), by model and family")
    print(tabulate(body, headers=header, tablefmt="github" if args.markdown else "simple", disable_numparse=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
