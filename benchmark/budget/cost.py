"""Seconds per training step of every model, side by side, relative to one reference model on the same task.

    python benchmark/budget/cost.py benchmark/budget/cost-records [--reference transformer-2l] [--markdown]

Reads run records of models trained for a fixed number of steps (``cost.toml``: no early stop) and reports,
per model and task, the milliseconds per step (the run's ``train.wall_seconds`` over its ``steps``: data,
training and the final evaluations, so a short run overstates a cheap model's step) and the ratio to the
reference model's on the same task. The records of one run share the machine and its load, so the ratios
carry over to other machines where the seconds do not.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tabulate import tabulate

from tokbench.results import load_records


def milliseconds_per_step(folder: Path) -> dict[str, dict[str, float]]:
    """``{model: {task: ms per step}}`` over the trained ok records (baselines take no step and are left out)."""
    table: dict[str, dict[str, float]] = {}
    for record in load_records(folder).records.values():
        steps = record["train"].get("steps") if record.get("status") == "ok" else None
        if steps:
            table.setdefault(record["model"], {})[record["task"]] = 1000 * record["train"]["wall_seconds"] / steps
    return table


def rows(table: dict[str, dict[str, float]], reference: str) -> tuple[list[str], list[list]]:
    """One row per model, most expensive first (by its mean ratio): ms per step and the ratio, per task."""
    if reference not in table:
        raise KeyError(f"no timed record of the reference model {reference!r}")
    tasks = sorted(table[reference])
    ratios = {model: [per_task[t] / table[reference][t] for t in tasks if t in per_task]
              for model, per_task in table.items()}
    header = ["model", *[f"{t} ms/step" for t in tasks], *[f"{t} x {reference}" for t in tasks]]
    body = [[model, *[_fmt(table[model].get(t), ".1f") for t in tasks],
             *[_fmt(table[model][t] / table[reference][t] if t in table[model] else None, ".2f") for t in tasks]]
            for model in sorted(table, key=lambda m: -sum(ratios[m]) / max(1, len(ratios[m])))]
    return header, body


def _fmt(value: float | None, spec: str) -> str:
    return "" if value is None else format(value, spec)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", type=Path, help="a folder of run records trained for a fixed number of steps")
    parser.add_argument("--reference", default="transformer-2l", help="the model every ratio is relative to")
    parser.add_argument("--markdown", action="store_true", help="a GitHub markdown table instead of plain text")
    args = parser.parse_args()
    try:
        header, body = rows(milliseconds_per_step(args.records), args.reference)
    except KeyError as error:
        print(f"error: {error.args[0]} in {args.records}", file=sys.stderr)
        return 2
    print(tabulate(body, headers=header, tablefmt="github" if args.markdown else "simple", disable_numparse=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
