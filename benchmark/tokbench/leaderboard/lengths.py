"""Length generalisation: each run's extra evaluations (``evaluations``, e.g. at 2x the training context), scored.

A setting is named relative to the training value (``context_length x2``, see
:func:`scale.setting`), so the rungs of a ladder, trained at different lengths, share it. Per
setting the score table is built as the main one (same scale, same counted families), from
the evaluation's own chance and oracle accuracies. An evaluation that does not apply (a
model whose positions cannot extend) is n/a with the record's reason, never a number.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from tokbench.leaderboard import scale
from tokbench.leaderboard.aggregate import Cell, Leaderboard, Row
from tokbench.leaderboard.scores import Ladder, Scores, build_scores, rung_cell


@dataclass
class Lengths:
    """Score tables by evaluation setting, in the order the records declare them."""

    tables: dict[str, Scores]

    @property
    def settings(self) -> list[str]:
        return list(self.tables)


def build_lengths(board: Leaderboard, main: Scores) -> Lengths | None:
    """The score table of every evaluation setting that records of ``main``'s learned rows carry; None when none
    carries one. A setting only reference rows were evaluated at (a baseline a ranking shares with another that has
    a length table) gives this one no column."""
    learned = {row.key for row in main.ranked}
    names = scale.settings([rec for (_, row), cell in board.cells.items() if row in learned for rec in cell.ok])
    tables = {name: table for name in names
              if (table := build_scores(board, scale.at_evaluation(name), main.counted, main.rows)) is not None}
    return Lengths(tables) if tables else None


def ladder_mean(board: Leaderboard, ladder: Ladder, row: Row, name: str | None, metric: str) -> float | None:
    """The mean over rungs of the mean over seeds of ``metric`` at setting ``name`` (None: the training length);
    None where a rung has no value."""
    means = []
    for rung in ladder.rungs:
        values = _values(rung_cell(board, rung, row), name, metric)
        if not values:
            return None
        means.append(math.fsum(values) / len(values))
    return math.fsum(means) / len(means) if means else None


def _values(cell: Cell | None, name: str | None, metric: str) -> list[float]:
    if cell is None:
        return []
    pick = scale.final if name is None else scale.at_evaluation(name)
    picked = [pick(rec) for rec in cell.ok]
    return [m[metric] for m in picked if isinstance(m, dict) and m.get(metric) is not None]


def diagnostics(board: Leaderboard, ladder: Ladder, name: str) -> list[str]:
    """The attention diagnostics (the metrics a record's ``diagnostics`` says how it measured: does the layer
    still attend to the parent, the value ...) that the evaluations at ``name`` report on ``ladder``; losses and
    the other metrics stay in the per-task tables."""
    found: set[str] = set()
    for rung in ladder.rungs:
        for column in rung.columns:
            for cell in board.column_cells(column):
                for rec in cell.ok:
                    metrics = scale.at_evaluation(name)(rec)
                    if isinstance(metrics, dict):
                        found |= {k for k in rec.get("diagnostics") or {} if isinstance(metrics.get(k), (int, float))}
    return sorted(found)
