"""Scores of a suite's ladders: one number per model and task family, and one overall.

A record from a ladder block of a suite carries ``ladder = {rung, rungs, axes}``; a
task's ladder is the set of its columns whose records carry it, rung 0 the easiest.
A model configuration (a row) has a family score on a ladder when it has at least one
successful seed at every rung (a rung no record reached leaves every row without one):
the mean over rungs of its mean normalised accuracy (accuracy / Bayes optimum), rungs
weighted equally. Its overall score is the mean of
its family scores over the non-pitfall families, each weighted equally, and exists
only when it has a score in every one of them. A pitfall family (a record's
``meta.task_pitfall``) is scored on its own and never enters the overall score.

Every interval and test comes from :mod:`tokbench.leaderboard.stats`
(:func:`~tokbench.leaderboard.stats.weighted_sum`,
:func:`~tokbench.leaderboard.stats.compare_scores`); the method is in docs/scores.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from tokbench.leaderboard.aggregate import Cell, Column, Leaderboard, Row, format_value
from tokbench.leaderboard.stats import (MATCHES, Estimate, Part, Stat, compare_scores, metric_range, summarise,
                                        weighted_sum)

METRIC = "normalized_accuracy"
OVERALL = "Overall"


@dataclass
class Rung:
    """One setting of a ladder: the values of its axes and the columns (task configurations) run at it."""

    index: int
    axes: dict[str, Any]
    columns: list[Column] = field(default_factory=list)

    @property
    def label(self) -> str:
        """The axes' values, e.g. ``4 / 32``."""
        return " / ".join(format_value(v) for v in self.axes.values())


@dataclass
class Ladder:
    """A task's rungs in order, and its pitfall sentence ("" when it is no pitfall)."""

    task: str
    rungs: list[Rung]
    pitfall: str = ""

    @property
    def axes(self) -> list[str]:
        return next((list(rung.axes) for rung in self.rungs if rung.axes), [])

    @property
    def title(self) -> str:
        return f"{self.task} (pitfall)" if self.pitfall else self.task


@dataclass(frozen=True)
class Score:
    """A model's score on one column of the score table; ``estimate`` None when it has none."""

    estimate: Estimate | None = None
    stat: Stat | None = None
    not_applicable: bool = False
    best: bool = False
    missing: tuple[str, ...] = ()  # Overall only: the families where the model has no score


@dataclass
class Scores:
    """The score table's content: ladders (non-pitfall first), rows, and each (column name, row key) score."""

    families: list[Ladder]
    pitfalls: list[Ladder]
    rows: list[Row]
    cells: dict[tuple[str, str], Score]
    family: dict[str, str]  # each row's model family, by row key

    @property
    def ladders(self) -> list[Ladder]:
        return self.families + self.pitfalls

    @property
    def columns(self) -> list[str]:
        """The score table's columns, in order: families, ``Overall``, pitfalls."""
        return [*(f.task for f in self.families), *([OVERALL] if self.families else []),
                *(p.task for p in self.pitfalls)]

    def title(self, column: str) -> str:
        """A column's header: the task, marked when it is a pitfall."""
        return next((lad.title for lad in self.ladders if lad.task == column), column)

    def score(self, column: str, row: Row) -> Score:
        return self.cells.get((column, row.key), Score())


def family(row: Row, board: Leaderboard) -> str:
    """The row's model family, as its records name it (older records: the model's name)."""
    for cell in board.cells.values():
        if cell.row is row:
            for rec in cell.ok + cell.failed + cell.not_applicable:
                if name := (rec.get("meta") or {}).get("model_family"):
                    return name
    return row.model


def find_ladders(board: Leaderboard) -> list[Ladder]:
    """Every task's ladder in the board, by task name; empty when no record carries ``ladder``.

    Columns scored on the training split are left out: there the Bayes optimum says nothing
    (see :func:`views.training_table`), so neither does a normalised accuracy.
    """
    found: dict[str, Ladder] = {}
    for column in board.test_columns:
        for cell in board.column_cells(column):
            for rec in cell.ok + cell.failed + cell.not_applicable:
                if not (step := rec.get("ladder")):
                    continue
                ladder = found.setdefault(column.task, Ladder(column.task, []))
                while len(ladder.rungs) < max(step["rungs"], step["rung"] + 1):
                    ladder.rungs.append(Rung(len(ladder.rungs), {}))
                rung = ladder.rungs[step["rung"]]
                rung.axes = rung.axes or dict(step["axes"])
                if column not in rung.columns:
                    rung.columns.append(column)
                ladder.pitfall = ladder.pitfall or (rec.get("meta") or {}).get("task_pitfall") or ""
    return [found[task] for task in sorted(found)]


def rung_cell(board: Leaderboard, rung: Rung, row: Row) -> Cell | None:
    return next((cell for column in rung.columns if (cell := board.cell(column, row)) is not None), None)


def eval_var(cell: Cell) -> float:
    """The evaluation-set variance of one seed's normalised accuracy: the accuracy's, over the squared optimum."""
    optimum = cell.values("bayes_accuracy")
    centre = math.fsum(optimum) / len(optimum) if optimum else 0.0
    return cell.eval_var("accuracy") / centre**2 if centre > 0 else 0.0


def ceiling(cell: Cell) -> float:
    """The highest mean normalised accuracy the cell can have: a perfect accuracy on every seed, 1 / optimum."""
    optima = cell.values("bayes_accuracy")
    if not optima or min(optima) <= 0:
        return metric_range(METRIC)[1]
    return math.fsum(1 / b for b in optima) / len(optima)


def rung_stat(cell: Cell | None) -> Stat | None:
    """The cell's mean normalised accuracy with the cell interval (t over seeds, floored, cut to its range)."""
    values = cell.values(METRIC) if cell is not None else []
    return summarise(values, eval_var(cell), (0.0, ceiling(cell))) if values else None


Share = tuple[Part, float]  # a cell's part of a score, and the cell's ceiling


def _shares(board: Leaderboard, ladder: Ladder, row: Row) -> list[Share] | None | bool:
    """The row's cells on ``ladder`` as score parts; False where a rung does not apply, None where one is missing."""
    shares = []
    for rung in ladder.rungs:
        cell = rung_cell(board, rung, row)
        if cell is not None and cell.not_applicable and not cell.ok:
            return False
        values = cell.values(METRIC) if cell is not None else []
        if not values:
            return None
        shares.append((Part(1 / len(ladder.rungs), values, eval_var(cell)), ceiling(cell)))
    return shares


def _score(shares: list[Share]) -> Score:
    """The weighted sum of the shares, its interval cut to [0, the weighted sum of the ceilings]."""
    estimate = weighted_sum([part for part, _ in shares])
    return Score(estimate, estimate.stat((0.0, math.fsum(part.weight * high for part, high in shares))))


def build_scores(board: Leaderboard) -> Scores | None:
    """The scores of every row with a cell on a ladder; None when the board has no ladder."""
    ladders = find_ladders(board)
    if not ladders:
        return None
    families = [lad for lad in ladders if not lad.pitfall]
    pitfalls = [lad for lad in ladders if lad.pitfall]
    ladder_columns = [c for lad in ladders for rung in lad.rungs for c in rung.columns]
    rows = [r for r in board.rows if any(board.cell(c, r) is not None for c in ladder_columns)]
    cells: dict[tuple[str, str], Score] = {}
    for row in rows:
        overall: list[Share] = []
        missing = []
        for ladder in ladders:
            shares = _shares(board, ladder, row)
            if shares is False:
                cells[ladder.task, row.key] = Score(not_applicable=True)
            elif shares:
                cells[ladder.task, row.key] = _score(shares)
            if ladder.pitfall:
                continue
            if shares:
                overall += [(Part(p.weight / len(families), p.values, p.eval_var), high) for p, high in shares]
            else:
                missing.append(ladder.task)
        if families:
            cells[OVERALL, row.key] = _score(overall) if not missing else Score(missing=tuple(missing))
    scores = Scores(families, pitfalls, _ordered(rows, cells), cells, {r.key: family(r, board) for r in rows})
    for column in scores.columns:
        _mark_best(scores, column)
    return scores


def _ordered(rows: list[Row], cells: dict[tuple[str, str], Score]) -> list[Row]:
    """Learned models by overall score, highest first, those without one last; oracles after them."""
    def key(row: Row) -> tuple[bool, bool, float]:
        stat = cells.get((OVERALL, row.key), Score()).stat
        return row.oracle, stat is None, -stat.mean if stat else 0.0

    return sorted(rows, key=key)  # stable: ties keep the board's order


def learned(scores: Scores, column: str) -> list[tuple[Row, Score]]:
    """The learned models with a score on ``column``, highest first."""
    ranked = [(row, s) for row in scores.rows if not row.oracle and (s := scores.score(column, row)).estimate]
    return sorted(ranked, key=lambda item: -item[1].estimate.value)


def _mark_best(scores: Scores, column: str) -> None:
    """Bold, as the accuracy table's rule: the highest learned score and every score shown equivalent to it.

    Equivalent: :func:`stats.compare_scores` finds the difference within +-``MARGIN`` (TOST,
    every cell with at least ``MIN_SEEDS`` seeds). Oracles are never best.
    """
    ranked = learned(scores, column)
    if not ranked:
        return
    top = ranked[0][1].estimate
    for row, score in ranked:
        if score.estimate.value == top.value or compare_scores(score.estimate, top).verdict == MATCHES:
            scores.cells[column, row.key] = Score(score.estimate, score.stat, best=True)
