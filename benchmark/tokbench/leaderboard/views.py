"""Format-neutral tables of a leaderboard: the main table and one detail table per task.

A table cell is a plain string (a name or parameter value from a record: every
renderer escapes it), a :class:`Measure` (a statistic across seeds) or a
:class:`Number` (a plain number). Renderers decide how each looks.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from tokbench.leaderboard.aggregate import DIGITS, Cell, Column, Leaderboard, Row, format_params
from tokbench.leaderboard.scores import OVERALL, Scores
from tokbench.leaderboard.stats import Stat

BAYES_ROW = "Bayes optimum (analytic)"
ORACLE_MARK = " (oracle)"


@dataclass(frozen=True)
class Measure:
    """A statistic across seeds; ``stat`` is None when every run of the cell failed."""

    stat: Stat | None
    best: bool = False
    failed: int = 0
    not_applicable: bool = False


@dataclass(frozen=True)
class Number:
    """A plain number with its format spec, e.g. ``.1f``; None shows as empty."""

    value: float | None
    spec: str


Value = Union[str, Measure, Number]


@dataclass(frozen=True)
class Table:
    title: str
    headers: list[str]
    rows: list[list[Value]]
    notes: list[str] = field(default_factory=list)  # lines shown above the table
    footer: list[Value] | None = None  # a reference row kept last, e.g. the Bayes optimum

    def all_rows(self) -> list[list[Value]]:
        return self.rows + ([self.footer] if self.footer else [])


def measure_text(measure: Measure, dash: str = "–") -> str:
    """``0.498 (0.494–0.502)``, ``0.498 (n=1)``, ``0.498 (0.494–0.502) [1 failed]``, ``failed (3)`` or ``n/a``."""
    stat = measure.stat
    if stat is None:
        return f"failed ({measure.failed})" if measure.failed else ("n/a" if measure.not_applicable else "")
    text = f"{stat.mean:.{DIGITS}f}"
    interval = stat.interval
    text += f" ({interval[0]:.{DIGITS}f}{dash}{interval[1]:.{DIGITS}f})" if interval else f" (n={stat.n})"
    return text + (f" [{measure.failed} failed]" if measure.failed else "")


def number_text(number: Number) -> str:
    return "" if number.value is None else format(number.value, number.spec)


def column_header(column: Column) -> str:
    """The column's label, naming its eval split unless it is the test split."""
    return column.label if column.eval_split == "test" else f"{column.label} ({column.eval_split} split)"


def seeds_text(seeds: list[int]) -> str:
    """``0-4`` for a run of consecutive seeds, else ``0,2,7``."""
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ",".join(str(s) for s in seeds)


def row_header(row: Row) -> str:
    """The row's label, marking an oracle (a model that reads the task's answer)."""
    return row.label + (ORACLE_MARK if row.oracle else "")


def _accuracy(cell: Cell | None) -> Value:
    """The main-table cell: accuracy, best mark, failed runs, ``n/a``; empty when the pairing was not run."""
    if cell is None:
        return ""
    return Measure(cell.accuracy, cell.best, len(cell.failed), bool(cell.not_applicable) and not cell.ok)


def _metric(cell: Cell, metric: str) -> Value:
    """A detail-table cell; empty where the metric does not apply or every run failed."""
    stat = cell.metrics.get(metric)
    best = cell.best and metric == "accuracy" and not cell.column.on_training_split
    return "" if stat is None else Measure(stat, best)


def _ordered_rows(board: Leaderboard, columns: list[Column]) -> list[Row]:
    """The rows with a cell in ``columns``, learned models first, oracles last."""
    present = [r for r in board.rows if any(board.cell(c, r) is not None for c in columns)]
    return sorted(present, key=lambda r: r.oracle)


def main_table(board: Leaderboard) -> Table | None:
    """Models x held-out tasks: accuracy and interval, the best per column marked, then the Bayes optimum."""
    columns = board.test_columns
    if not columns:
        return None
    rows: list[list[Value]] = [[row_header(row), *(_accuracy(board.cell(c, row)) for c in columns)]
                               for row in _ordered_rows(board, columns)]
    footer: list[Value] = [BAYES_ROW, *(Measure(c.bayes) for c in columns)]
    notes = [f"{column_header(c)}: {format_params(c.params)}" for c in columns]
    return Table("Accuracy", ["model", *(column_header(c) for c in columns)], rows, notes, footer)


def training_table(board: Leaderboard) -> Table | None:
    """Models x tasks scored on their training split: training accuracy and each task's own diagnostics.

    No Bayes optimum and no normalised accuracy: fitting the sample can exceed the
    distribution's optimum, so neither says anything here.
    """
    columns = board.training_columns
    if not columns:
        return None
    metrics = [(c, m) for c in columns for m in ("accuracy", *board.diagnostics(c))]
    rows: list[list[Value]] = []
    for row in _ordered_rows(board, columns):
        rows.append([row_header(row), *(_metric(cell, m) if (cell := board.cell(c, row)) else ""
                                        for c, m in metrics)])
    headers = ["model", *(f"{c.label}: {'training accuracy' if m == 'accuracy' else m}" for c, m in metrics)]
    notes = [f"{c.label}: {format_params(c.params)}" for c in columns]
    return Table("Scored on the training split", headers, rows, notes)


def detail_table(board: Leaderboard, column: Column) -> Table:
    """Every metric of every model on one task, with seeds, steps and time."""
    cells = board.column_cells(column)
    present = {m for cell in cells for m in cell.metrics}
    other_splits = [f"{s}_accuracy" for s in ("train", "val", "test") if s != column.eval_split]
    # The optimum is the main table's last row, and accuracy / optimum is the heatmap.
    metrics = ["accuracy", *(m for m in other_splits if m in present), *board.diagnostics(column)]
    with_lr = any(cell.chosen_lrs for cell in cells)
    with_stop = any(cell.adaptive for cell in cells)
    headers = ["model", "seeds", *(["seeds stopped"] if with_stop else []), "failed", f"accuracy ({column.eval_split})",
               *metrics[1:], "untrained_accuracy",
               *(["lr (chosen on val)"] if with_lr else []), "steps", "final_loss", "seconds"]
    rows: list[list[Value]] = []
    for cell in cells:
        lrs = ["/".join(f"{lr:g}" for lr in cell.chosen_lrs)] if with_lr else []
        stop = [(cell.adaptive or {}).get("stopped", "")] if with_stop else []
        rows.append([row_header(cell.row), seeds_text(cell.seeds), *stop, Number(len(cell.failed), "d"),
                     *(_metric(cell, m) for m in metrics), Measure(cell.untrained), *lrs,
                     *(Number(s.mean if s else None, spec) for s, spec in
                       ((cell.steps, ".0f"), (cell.final_loss, ".4g"), (cell.wall_seconds, ".1f")))])
    notes = [f"parameters: {format_params(column.params)}"]
    return Table(column_header(column), headers, rows, notes)


def score_table(scores: Scores) -> Table:
    """Models x task families: each family's score, Overall, then each pitfall family apart (never in Overall).

    Rows are in :class:`Scores`' order (Overall, highest first; oracles last); bold marks
    the best learned score per column and those shown equivalent to it.
    """
    rows: list[list[Value]] = []
    for row in scores.rows:
        cells = [scores.score(column, row) for column in scores.columns]
        rows.append([row_header(row), scores.family[row.key],
                     *(Measure(s.stat, s.best, not_applicable=s.not_applicable) for s in cells)])
    notes = [f"{ladder.title}: rungs {' | '.join(r.label for r in ladder.rungs)} ({' / '.join(ladder.axes)})"
             + (f"; pitfall: {ladder.pitfall}" if ladder.pitfall else "") for ladder in scores.ladders]
    without: dict[str, list[str]] = {}  # one note per reason, naming every model it applies to
    for row in scores.rows:
        missing = scores.score(OVERALL, row).missing
        na = [t for t in missing if scores.score(t, row).not_applicable]
        why = [*([f"n/a on {', '.join(na)}"] if na else []),
               *([f"no score on {', '.join(t for t in missing if t not in na)}"] if len(na) < len(missing) else [])]
        if why:
            without.setdefault("; ".join(why), []).append(row_header(row))
    notes += [f"{OVERALL}: none for {', '.join(models)} ({why})" for why, models in without.items()]
    return Table("Scores", ["model", "family", *(scores.title(c) for c in scores.columns)], rows, notes)


def failures_table(board: Leaderboard) -> Table:
    """Every failed run with its error and where it was raised: failures are shown, never dropped."""
    rows: list[list[Value]] = [[cell.column.label, cell.row.label, str(rec["seed"]), rec["error"] or "", _where(rec)]
                               for cell, rec in sorted(board.failed(), key=_failure_order)]
    return Table("Failed runs", ["task", "model", "seed", "error", "where"], rows)


def _where(rec: dict) -> str:
    """The phase a failed run stopped in and, for an exception, its innermost plugin frame (``file:line in f``)."""
    failure = rec.get("failure") or {}
    frames = failure.get("frames") or []
    frame = frames[-1].split(": ", 1)[0] if frames else ""
    return ", ".join(filter(None, [failure.get("phase"), frame]))


def _failure_order(item: tuple[Cell, dict]) -> tuple[str, str, int]:
    cell, rec = item
    return cell.column.label, cell.row.label, rec["seed"]
