"""Where each task family's learning curve flattens: the budget study behind the ``tokbench`` suite's caps.

    python benchmark/budget/plateau.py benchmark/budget/records [--tolerance 0.02] [--markdown] [--rising] [--families]

Reads run records that carry a ``budget_curve`` (test accuracy at log-spaced step budgets, recorded by the
harness and never used for any choice), averages each (task, model) curve over seeds, and reports per task
and model: the accuracy at every budget, the **plateau step** (the first budget from which the mean accuracy
stays within ``tolerance`` of its final value) and whether the curve was **still rising** at the cap, by the
published page's rule on the mean (``tokbench.leaderboard.budgets.rising_at_cap``: a run of the cell stopped at its
cap and the mean gained more than 0.02 over the last budget; the page also names cells whose seeds split between
the target and the cap, which a mean curve cannot show). A cap is past a family's plateau when no model of that
family is still rising at it.
"""
from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path
from statistics import fmean

from tabulate import tabulate

from tokbench.leaderboard.budgets import RISING, rising_at_cap
from tokbench.results import load_records
from tokbench.specs import Recipe


Cell = tuple[str, str, str]  # (task, ladder rung's settings or "", model)


def curves(folder: Path) -> tuple[dict[Cell, dict[int, list[float]]], dict[Cell, list[str | None]]]:
    """Test accuracy per budget step, one list entry per seed, keyed by (task, rung, model), the rung being the
    settings of the record's ladder rung, such as ``q=4`` (a suite's ladder climbs one task through several
    settings; "" for a record off any ladder); and per cell why each seed stopped (``"target"``, ``"plateau"``, ``"cap"``).

    A record that stopped before a budget (its target reached, or a plateau) keeps its final accuracy at
    every later budget: training had ended, so that is the model it would report there.
    """
    by_cell: dict[Cell, list[list[dict]]] = defaultdict(list)
    stops: dict[Cell, list[str | None]] = defaultdict(list)
    budgets: dict[Cell, set[int]] = defaultdict(set)  # each cell's own: families may train to different caps
    for record in load_records(folder).records.values():
        if record.get("status") == "ok" and record.get("budget_curve"):
            rung = ",".join(f"{axis}={value}" for axis, value in record.get("ladder", {}).get("axes", {}).items())
            cell = record["task"], str(rung), record["model"]
            by_cell[cell].append(record["budget_curve"])
            stops[cell].append(record["train"].get("stopped_because"))
            budgets[cell] |= set(record["params"]["train"].get("budgets", Recipe().budgets))
    table = {cell: {step: [_accuracy_at(run, step) for run in runs] for step in sorted(budgets[cell])}
             for cell, runs in by_cell.items()}
    return table, stops


def _accuracy_at(run: list[dict], step: int) -> float:
    reached = [point for point in run if point["step"] <= step]
    return max(reached, key=lambda point: point["step"])["accuracy"] if reached else float("nan")


def plateau(means: dict[int, float], tolerance: float, stops: list[str | None] = ()) -> tuple[int, bool]:
    """``(plateau step, still rising at the cap)`` of one mean curve whose seeds stopped for ``stops``; only a
    curve with a seed stopped at its cap can still be rising there."""
    steps = sorted(means)
    final = means[steps[-1]]
    first = next(step for step in steps if all(abs(means[later] - final) <= tolerance
                                               for later in steps if later >= step))
    rising = len(steps) > 1 and rising_at_cap(stops, means[steps[-2]], means[steps[-1]])
    return first, rising


def rows(table: dict[Cell, dict[int, list[float]]], stops: dict[Cell, list[str | None]],
         tolerance: float) -> tuple[list[str], list[list]]:
    steps = sorted({step for cell in table.values() for step in cell})
    header = ["task", "rung", "model", "seeds", *[f"acc@{step}" for step in steps], "plateau step", "solved", "still rising"]
    body = []
    for (task, rung, model), per_step in sorted(table.items()):
        means = {step: fmean(values) for step, values in per_step.items()}
        why = stops[task, rung, model]
        first, rising = plateau(means, tolerance, why)
        seeds = len(next(iter(per_step.values())))
        solved = all(reason == "target" for reason in why)  # every seed reached the optimum: nothing left to learn
        body.append([task, rung, model, seeds, *[f"{means[step]:.3f}" if step in means else "" for step in steps],
                     first,
                     "yes" if solved else "", "yes" if rising else ""])
    return header, body


def families(body: list[list]) -> tuple[list[str], list[list]]:
    """Per task family, over every rung and model: how many cells, how many were solved, the latest plateau step,
    and the cells still rising at their cap (model@rung): where the family's curves flatten, in one line."""
    by_task: dict[str, list[list]] = defaultdict(list)
    for row in body:
        by_task[row[0]].append(row)
    header = ["task", "cells", "solved", "latest plateau step", "still rising at the cap"]
    lines = [[task, len(cells), sum(bool(c[-2]) for c in cells), max(c[-3] for c in cells),
              ", ".join(f"{c[2]}@{c[1]}" for c in cells if c[-1]) or "none"] for task, cells in sorted(by_task.items())]
    return header, lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", type=Path, help="a folder of run records with budget curves")
    parser.add_argument("--tolerance", type=float, default=RISING,
                        help="accuracy within which a curve is flat (the plateau step; still rising uses the page's 0.02)")
    parser.add_argument("--markdown", action="store_true", help="a GitHub markdown table instead of plain text")
    parser.add_argument("--rising", action="store_true", help="only the cells still rising at their cap")
    parser.add_argument("--families", action="store_true", help="one line per task family instead of per cell")
    args = parser.parse_args()
    table, stops = curves(args.records)
    if not table:
        print(f"error: no ok records with a budget_curve in {args.records}", file=sys.stderr)
        return 2
    header, body = rows(table, stops, args.tolerance)
    if args.rising:
        body = [row for row in body if row[-1]]
    if args.families:
        header, body = families(body)
    print(tabulate(body, headers=header, tablefmt="github" if args.markdown else "simple"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
