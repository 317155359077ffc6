"""The protocol and the findings of a leaderboard, written by rules from its numbers.

No number here is typed: each sentence is built from the aggregated records.
Two verdicts drive the findings:

- *reaches the Bayes optimum*: the upper end of the 95% interval of the
  normalised accuracy (accuracy / Bayes-optimal accuracy) is at least 1; it
  *exceeds* it when the lower end is above 1 (on a training split a model can fit
  the sample beyond the optimum of the distribution);
- *stays at chance*: on average over seeds, the model closes less than
  ``CHANCE_GAP`` of the gap from its untrained accuracy (the training accuracy at
  step 0) to the Bayes optimum. The mean, not the interval: with a few seeds the
  interval of that ratio is too wide to say anything, while the mean of a model
  that never moved stays near 0.

With one seed there is no interval and the single value is judged.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

from tokbench.leaderboard.aggregate import DIGITS, INTERVAL, Cell, Leaderboard, Stat, format_value, summarise
from tokbench.leaderboard.views import Measure, column_header, measure_text, seeds_text

CHANCE_GAP = 0.1


def reaches_bayes(cell: Cell) -> bool:
    """True when the upper end of the 95% interval of the normalised accuracy is at least 1."""
    stat = cell.metrics.get("normalized_accuracy")
    return stat is not None and stat.high >= 1.0


def exceeds_bayes(cell: Cell) -> bool:
    """True when even the lower end of the 95% interval of the normalised accuracy is above 1."""
    stat = cell.metrics.get("normalized_accuracy")
    return stat is not None and stat.low > 1.0


def gap_closed(cell: Cell) -> Stat | None:
    """Per seed, (accuracy - untrained) / (Bayes - untrained), across seeds; None where undefined."""
    fractions = []
    for rec in cell.ok:
        start = (rec.get("curve") or {}).get("accuracy") or [None]
        bayes = rec["metrics"].get("bayes_accuracy")
        if start[0] is None or bayes is None or bayes <= start[0]:
            return None
        fractions.append((rec["metrics"]["accuracy"] - start[0]) / (bayes - start[0]))
    return summarise(fractions) if fractions else None


def at_chance(cell: Cell) -> bool:
    """True when the model closes, on average over seeds, less than ``CHANCE_GAP`` of the gap to the optimum."""
    closed = gap_closed(cell)
    return closed is not None and closed.mean < CHANCE_GAP


def _verdict(cell: Cell) -> str:
    accuracy = measure_text(Measure(cell.accuracy))
    if reaches_bayes(cell):
        return f"reaches the Bayes optimum ({accuracy})"
    if at_chance(cell):
        return f"stays at chance ({accuracy})"
    normalized = cell.metrics.get("normalized_accuracy")  # optional in a valid record
    return f"reaches {accuracy}" + (f", {normalized.mean:.0%} of the optimum" if normalized else "")


def _names(labels: list[str]) -> str:
    return labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1]


def _with_accuracy(cell: Cell) -> str:
    return f"{cell.row.label} ({measure_text(Measure(cell.accuracy))})"


def _who(chosen: list[Cell], cells: list[Cell]) -> tuple[str, bool]:
    """Name ``chosen`` among ``cells`` as briefly as is exact; the flag says whether the verb is plural."""
    if len(cells) > 1 and len(chosen) == len(cells):
        return "every model", False
    if len(cells) > 3 and len(chosen) > len(cells) / 2:
        rest = [c for c in cells if c not in chosen]
        return f"every model except {_names([_with_accuracy(c) for c in rest])}", False
    return _names([_with_accuracy(c) for c in chosen]), len(chosen) > 1


def _sentence(subject: tuple[str, bool], singular: str, plural: str, rest: str) -> str:
    who, many = subject
    return f"{who} {plural if many else singular} {rest}"


def findings(board: Leaderboard) -> list[str]:
    """Short statements of what the numbers show, per task and rule."""
    lines: list[str] = []
    for column in board.columns:
        cells = [c for c in board.column_cells(column) if c.accuracy is not None]
        if not cells or column.bayes is None:
            continue
        name = column_header(column)
        bayes = f"{column.bayes.mean:.{DIGITS}f}"
        exceeded = [c for c in cells if exceeds_bayes(c)]
        reached = [c for c in cells if reaches_bayes(c) and c not in exceeded]
        if reached:
            lines.append(f"{name}: " + _sentence(_who(reached, cells), "reaches", "reach",
                                                 f"the Bayes-optimal accuracy {bayes} within the 95% interval."))
        if exceeded:
            why = (f": on its {column.eval_split} split a model can fit the sample beyond the optimum of the "
                   "distribution" if column.eval_split != "test" else ", beyond the 95% interval")
            lines.append(f"{name}: " + _sentence(_who(exceeded, cells), "exceeds", "exceed",
                                                 f"the Bayes-optimal accuracy {bayes}{why}."))
        if not reached and not exceeded:
            best = max(cells, key=lambda c: c.accuracy.mean)
            lines.append(f"{name}: no model reaches the Bayes-optimal accuracy {bayes}; the best, {best.row.label}, "
                         f"{_verdict(best).removeprefix('reaches ')}.")
        stuck = [c for c in cells if at_chance(c)]
        if stuck:
            lines.append(f"{name}: " + _sentence(_who(stuck, cells), "stays", "stay",
                                                 f"at chance, closing on average less than {CHANCE_GAP:.0%} of the "
                                                 "gap from the untrained accuracy to the optimum."))
        lines.extend(_variant_contrasts(name, cells))
        largest = [_largest(cells, diagnostic) for diagnostic in board.diagnostics(column)]
        if largest:
            lines.append(f"{name}: " + "; ".join(largest) + ".")
    return lines


def _largest(cells: list[Cell], diagnostic: str) -> str:
    top = max((c for c in cells if diagnostic in c.metrics), key=lambda c: c.metrics[diagnostic].mean)
    return f"largest mean {diagnostic}: {top.row.label} ({measure_text(Measure(top.metrics[diagnostic]))})"


def _variant_contrasts(name: str, cells: list[Cell]) -> list[str]:
    """Where a parameter variant of a model gets another verdict than the model's base configuration."""
    by_model: dict[str, list[Cell]] = defaultdict(list)
    for cell in cells:
        by_model[cell.row.model].append(cell)
    lines = []
    for model, group in by_model.items():
        base = next((c for c in group if c.row.label == model), None)
        if base is None:
            continue
        for variant in group:
            if variant is base:
                continue
            if (reaches_bayes(variant), at_chance(variant)) != (reaches_bayes(base), at_chance(base)):
                lines.append(f"{name}: {variant.row.label} {_verdict(variant)}, while {base.row.label} "
                             f"{_verdict(base)}.")
    return lines


def protocol(board: Leaderboard) -> list[str]:
    """How the numbers were made: metric, interval, seeds, splits, recipes, lr selection, provenance."""
    lines = [
        "Each cell is the mean of metrics.accuracy over seeds on the task's evaluation split (the test split "
        f"unless the column names another); ± is the half-width of the {INTERVAL}. "
        "A cell with one seed shows n=1 and no interval. The bayes-optimal row is the optimum each task reports "
        "for its data (mean over seeds).",
        "Every task draws separate train, validation and test splits from each seed (their sizes are task "
        "parameters); models are trained on the train split only.",
    ]
    seed_sets = {tuple(c.seeds) for c in board.cells.values() if c.ok}
    if len(seed_sets) == 1:
        lines.append(f"Seeds: {seeds_text(list(next(iter(seed_sets))))} in every cell.")
    else:
        lines.append("Seeds differ between cells; the detail tables list them.")
    for column in board.columns:
        if column.eval_split != "test":
            lines.append(f"{column.label} is scored on its {column.eval_split} split: it measures what training "
                         "finds, not generalisation.")
    for row in board.rows:
        lines.append(f"Recipe of {row.label}: {row.recipe}.")
        grid = row.train.get("lr_grid")
        if grid:
            chosen = sorted({lr for c in board.cells.values() if c.row is row for lr in c.chosen_lrs})
            lines.append(f"{row.label} picks its learning rate per run from {format_value(grid)} by validation "
                         f"accuracy; the test split is not seen during the choice (chosen: {format_value(chosen)}).")
    lines.append(_provenance(board))
    failed = board.failed()
    if failed:
        lines.append(f"{len(failed)} of {board.record_count()} runs failed; they are counted in their cells and "
                     "listed under failed runs, never averaged.")
    return lines


def _provenance(board: Leaderboard) -> str:
    values: dict[str, set[str]] = defaultdict(set)
    for cell in board.cells.values():
        for rec in cell.ok + cell.failed:
            for key in ("tokbench_version", "git_commit", "torch", "lightning", "python", "device"):
                values[key].add(str(rec["provenance"].get(key) or "unknown"))

    def joined(key: str) -> str:
        return "/".join(sorted(values[key]))

    return (f"Produced by {board.record_count()} run records: tokbench {joined('tokbench_version')} "
            f"(git {joined('git_commit')}), torch {joined('torch')}, Lightning {joined('lightning')}, "
            f"Python {joined('python')}, on {joined('device')}.")


def verdicts(cell: Cell) -> dict[str, Any]:
    """The machine-readable form of the verdicts, for the JSON output."""
    closed = gap_closed(cell)
    return {"reaches_bayes": reaches_bayes(cell) if cell.ok else None,
            "exceeds_bayes": exceeds_bayes(cell) if cell.ok else None,
            "at_chance": at_chance(cell) if closed is not None else None,
            "gap_closed": None if closed is None else {"mean": closed.mean, "ci95": closed.half_width}}
