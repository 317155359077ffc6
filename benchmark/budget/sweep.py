"""The sweep-range check: does a learning-rate sweep bracket its optimum, or does it pick an end of its grid?

    python benchmark/budget/sweep.py FOLDER... [--suite FILE ...] [--tolerance 0.01] [--markdown]

Reads the records in each FOLDER (a suite's or ``benchmark/budget/sweep.toml``'s; with ``--suite``, only those of
these suites' plans, e.g. the pruning check's sweeps among the republish's records) that chose their learning rate on
validation, and prints per record the validation accuracy of every candidate, then per (schedule, grid width) how the
choices fall: at the lowest or the highest rate of the grid (an edge: the optimum may lie outside), inside it, or
tied between several candidates (usually all of them solved the task). An edge choice is counted as clear when it
beats the next candidate by more than ``tolerance`` (about one standard error of an accuracy on 1000 validation
sequences is 0.013 at 0.8), since a smaller margin is validation noise. Grids with weight decay are read by their
learning rate: the edge is that of the rates.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tabulate import tabulate

from stopping import plan_hashes
from tokbench.results import load_records

PLACES = ("low", "high", "inside", "tie")


@dataclass(frozen=True)
class Choice:
    """One record's sweep: its candidates' rates and validation accuracies, in grid order."""

    task: str
    rung: str
    model: str
    seed: int
    schedule: str
    rates: tuple[float, ...]
    accuracies: tuple[float, ...]
    stopped_because: str

    @property
    def place(self) -> str:
        """Where the best rate lies: ``tie`` if several rates share the best accuracy (weight decays at one rate
        count as one), else ``low``, ``high`` (the lowest or highest rate of the grid) or ``inside``."""
        best = max(self.accuracies)
        winners = {rate for rate, accuracy in zip(self.rates, self.accuracies) if accuracy == best}
        if len(winners) > 1:
            return "tie"
        (winner,) = winners
        if winner == min(self.rates):
            return "low"
        return "high" if winner == max(self.rates) else "inside"

    @property
    def margin(self) -> float:
        """How far the best candidate is ahead of the best one at any other rate (0 on a tie)."""
        best = max(self.accuracies)
        kept = self.rates[self.accuracies.index(best)]
        others = [accuracy for rate, accuracy in zip(self.rates, self.accuracies) if rate != kept]
        return best - max(others) if others else 0.0


def _rate(key: str) -> float:
    """The learning rate of a candidate key: ``"0.01"`` or ``"lr=0.01,wd=0.1"``."""
    return float(key.split(",")[0].removeprefix("lr="))


def choices(records: Iterable[Mapping[str, Any]]) -> list[Choice]:
    """The sweeps of the ok records that chose among several learning rates, sorted by task, model, rung, seed.

    Records of one configuration and seed that differ only in their grids (``lr_grid``, ``wd_grid``: a sweep, and
    a run at a rate beyond its edge, ``edges.toml``) are one sweep over all their candidates: they share the
    initialisation, the batches and the validation sequences, so their validation accuracies compare."""
    sweeps: dict[tuple, tuple[dict[str, float], dict[str, str]]] = {}  # per sweep: accuracy and stop by candidate
    for record in records:
        train = record.get("train") or {}
        selection = train.get("lr_selection_val_accuracy")
        if record.get("status") != "ok" or not selection:
            continue
        rung = ",".join(f"{k}={v}" for k, v in (record.get("ladder") or {}).get("axes", {}).items())
        params = dict(record.get("params") or {})
        params["train"] = {k: v for k, v in (params.get("train") or {}).items() if k not in ("lr_grid", "wd_grid")}
        key = (record["task"], rung, record["model"], record["seed"], train.get("schedule", "constant"),
               json.dumps([record.get("task_version"), record.get("model_version"), params], sort_keys=True))
        merged, stops = sweeps.setdefault(key, ({}, {}))
        merged.update(selection)
        stops.update(dict.fromkeys(selection, train.get("stopped_because", "")))
    found = []
    for (task, rung, model, seed, schedule, _), (merged, stops) in sweeps.items():
        ordered = sorted(merged, key=_rate)  # stable: a rate's weight decays keep their order
        if len({_rate(k) for k in ordered}) < 2:
            continue
        best = max(ordered, key=lambda k: merged[k])
        found.append(Choice(task, rung, model, seed, schedule, tuple(_rate(k) for k in ordered),
                            tuple(merged[k] for k in ordered), stops[best]))
    found.sort(key=lambda c: (c.task, c.model, c.rung, c.schedule, len(c.rates), c.seed))
    return found


def summary(found: list[Choice], tolerance: float) -> list[list[Any]]:
    """Rows ``[schedule, rates in the grid, records, low, high, inside, tie, clear edge choices]``, where a clear edge
    choice beats the next rate by more than ``tolerance``."""
    rows = []
    for group in sorted({(c.schedule, len(c.rates)) for c in found}):
        members = [c for c in found if (c.schedule, len(c.rates)) == group]
        places = Counter(c.place for c in members)
        clear = sum(c.place in ("low", "high") and c.margin > tolerance for c in members)
        rows.append([*group, len(members), *(places[p] for p in PLACES), clear])
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", type=Path, nargs="+", help="folders of records")
    parser.add_argument("--tolerance", type=float, default=0.01,
                        help="an edge choice ahead of the next rate by at most this is counted as noise")
    parser.add_argument("--suite", type=Path, nargs="+", default=(), metavar="FILE",
                        help="only the records of these suites' plans (default: every record)")
    parser.add_argument("--markdown", action="store_true", help="GitHub tables instead of plain text")
    args = parser.parse_args(argv)
    plan = set().union(*(plan_hashes(suite) for suite in args.suite)) if args.suite else None
    found = choices(r for folder in args.folders for r in load_records(folder).records.values()
                    if plan is None or r["config_hash"] in plan)
    fmt = "github" if args.markdown else "simple"
    print(tabulate([[c.task, c.rung, c.model, c.seed, c.schedule, " ".join(f"{r:g}" for r in c.rates),
                     " ".join(f"{a:.3f}" for a in c.accuracies), c.place, c.margin, c.stopped_because] for c in found],
                   headers=["task", "rung", "model", "seed", "schedule", "rates", "validation accuracy", "choice",
                            "margin", "stop"], tablefmt=fmt, floatfmt=".3f"))
    print()
    print(tabulate(summary(found, args.tolerance),
                   headers=["schedule", "rates", "records", *PLACES, f"edge by > {args.tolerance:g}"], tablefmt=fmt))
    return 0


if __name__ == "__main__":
    sys.exit(main())
