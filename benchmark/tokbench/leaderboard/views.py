"""Format-neutral tables of a leaderboard: the main table and one detail table per task.

A table cell is a plain string (a name or parameter value from a record: every
renderer escapes it), a :class:`Measure` (a statistic across seeds) or a
:class:`Number` (a plain number). Renderers decide how each looks.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Union

from tokbench.leaderboard.aggregate import (DIGITS, NO_FLOOR, Cell, Column, Leaderboard, Row, column_floor, count_range,
                                            format_params)
from tokbench.leaderboard.scale import FINAL
from tokbench.leaderboard.scores import OVERALL, Ladder, Score, Scores

if TYPE_CHECKING:
    from tokbench.leaderboard.budgets import Budgets
    from tokbench.leaderboard.lengths import Lengths
    from tokbench.leaderboard.report import Report
from tokbench.leaderboard.stats import Stat

BAYES_ROW = "Bayes optimum (analytic)"
ORACLE_MARK = " (oracle)"
BASELINE_MARK = " (baseline)"


@dataclass(frozen=True)
class Measure:
    """A statistic across seeds; ``stat`` is None when every run of the cell failed.

    ``compact`` shows it as a score (two decimals and the seed count); ``reason`` says why
    it does not apply.
    """

    stat: Stat | None
    best: bool = False
    failed: int = 0
    not_applicable: bool = False
    compact: bool = False
    reason: str = ""
    seeds: bool = True  # compact: show n (False where a caption states one n for every score)


@dataclass(frozen=True)
class Number:
    """A plain number with its format spec, e.g. ``.1f``; None shows as empty. ``text``, where given, is shown
    instead (e.g. a range), the number still being what the column sorts by."""

    value: float | None
    spec: str
    text: str = ""


Value = Union[str, Measure, Number]


@dataclass(frozen=True)
class Table:
    title: str
    headers: list[str]
    rows: list[list[Value]]
    notes: list[str] = field(default_factory=list)  # lines shown under the table
    footer: list[Value] | None = None  # a reference row kept last, e.g. the Bayes optimum
    caption: str = ""  # what every number depends on, shown before the table
    pinned: list[list[Value]] = field(default_factory=list)  # reference rows kept apart from the sorted ones

    def all_rows(self) -> list[list[Value]]:
        return self.rows + self.pinned + ([self.footer] if self.footer else [])


def measure_text(measure: Measure, dash: str = "–") -> str:
    """``0.498 (0.494–0.502)``, ``0.498 (n=1)``, ``0.498 (0.494–0.502) [1 failed]``, ``failed (3)`` or ``n/a``;
    compact: ``0.91 (0.89–0.93) n=5``."""
    stat = measure.stat
    if stat is None:
        return f"failed ({measure.failed})" if measure.failed else ("n/a" if measure.not_applicable else "")
    if measure.compact:
        interval = f" ({stat.low:.2f}{dash}{stat.high:.2f})" if stat.interval else ""
        return f"{stat.mean:.2f}{interval}" + (f" n={stat.n}" if measure.seeds else "")
    text = f"{stat.mean:.{DIGITS}f}"
    interval = stat.interval
    text += f" ({interval[0]:.{DIGITS}f}{dash}{interval[1]:.{DIGITS}f})" if interval else f" (n={stat.n})"
    return text + (f" [{measure.failed} failed]" if measure.failed else "")


def number_text(number: Number) -> str:
    if number.text:
        return number.text
    return "" if number.value is None else format(number.value, number.spec)


def size_number(counts: list[int]) -> Number:
    """Parameter counts or state sizes as a range (:func:`count_range`), sorted by the largest."""
    return Number(max(counts) if counts else None, "d", count_range(counts))


def column_header(column: Column) -> str:
    """The column's label, naming its eval split unless it is the test split."""
    return column.label if column.eval_split == "test" else f"{column.label} ({column.eval_split} split)"


def seeds_text(seeds: list[int]) -> str:
    """``0-4`` for a run of consecutive seeds, else ``0,2,7``."""
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ",".join(str(s) for s in seeds)


def row_header(row: Row) -> str:
    """The row's label, marking an oracle (a model that reads the task's answer) and a baseline."""
    return row.label + (ORACLE_MARK if row.oracle else BASELINE_MARK if row.baseline else "")


def _accuracy(cell: Cell | None) -> Value:
    """The main-table cell: accuracy, best mark, failed runs, ``n/a``; empty when the pairing was not run."""
    if cell is None:
        return ""
    return Measure(cell.accuracy, cell.best, len(cell.failed), bool(cell.not_applicable) and not cell.ok)


def _metric(cell: Cell, metric: str) -> Value:
    """A detail-table cell; empty where the metric does not apply or every run failed, and for the losses of a
    reference row (an oracle's or baseline's logits are no probability model, so their loss means nothing)."""
    if cell.row.pinned and "loss" in metric:
        return ""
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
    notes += no_floor_notes([column_header(c) for c in columns if unfloored(board, c)])
    return Table("Accuracy", ["model", *(column_header(c) for c in columns)], rows, notes, footer)


def no_floor_notes(names: list[str]) -> list[str]:
    """The note naming the columns with no floor to test bold against (none: no note)."""
    if not names:
        return []
    return [f"No floor, so nothing bold, in {', '.join(names)}: no baseline has a score there and the records carry "
            "no chance accuracy."]


def unfloored(board: Leaderboard, column: Column) -> bool:
    """Whether the column has learned models but no floor for bold (:func:`aggregate.column_floor`)."""
    cells = board.column_cells(column)
    return any(c.accuracy is not None and not c.row.pinned for c in cells) and column_floor(cells) == NO_FLOOR


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


SIZE_HEADERS = ("parameters", "state")
SIZE_NOTE = ("parameters: the model's trainable parameters; state: the floats a recurrent or state-space model carries "
             "from one position to the next (none for attention, whose memory grows with the context).")


def detail_table(board: Leaderboard, column: Column) -> Table:
    """Every metric of every model on one task, with seeds, steps and time."""
    cells = board.column_cells(column)
    present = {m for cell in cells for m in cell.metrics}
    other_splits = [f"{s}_accuracy" for s in ("train", "val", "test") if s != column.eval_split]
    # The optimum is the main table's last row, and accuracy / optimum is the heatmap.
    metrics = ["accuracy", *(m for m in other_splits if m in present), *board.diagnostics(column)]
    with_lr = any(cell.chosen_lrs for cell in cells)
    with_stop = any(cell.adaptive for cell in cells)
    with_solved = any(cell.solved for cell in cells)
    size_parts = [i for i in (0, 1) if any(cell.sizes[i] for cell in cells)]
    headers = ["model", *(SIZE_HEADERS[i] for i in size_parts), "seeds", *(["seeds stopped"] if with_stop else []),
               *(["solved (stopped at the target)"] if with_solved else []), "failed",
               f"accuracy ({column.eval_split})", *metrics[1:], "untrained_accuracy",
               *(["lr (chosen on val)"] if with_lr else []), "steps", "final_loss", "seconds"]
    rows: list[list[Value]] = []
    for cell in cells:
        lrs = ["/".join(f"{lr:g}" for lr in cell.chosen_lrs)] if with_lr else []
        stop = [(cell.adaptive or {}).get("stopped", "")] if with_stop else []
        solved = ["{}/{}".format(*cell.solved) if cell.solved else ""] if with_solved else []
        rows.append([row_header(cell.row), *(size_number(cell.sizes[i]) for i in size_parts), seeds_text(cell.seeds),
                     *stop, *solved, Number(len(cell.failed), "d"),
                     *(_metric(cell, m) for m in metrics), Measure(cell.untrained), *lrs,
                     *(Number(s.mean if s else None, spec) for s, spec in
                       ((cell.steps, ".0f"), (cell.final_loss, ".4g"), (cell.wall_seconds, ".1f")))])
    notes = [f"task parameters: {format_params(column.params)}", *([SIZE_NOTE] if size_parts else [])]
    return Table(column_header(column), headers, rows, notes)


def _score_cell(score: Score, seeds: bool = True) -> Measure:
    return Measure(score.stat, score.best, not_applicable=score.not_applicable, compact=True, reason=score.reason,
                   seeds=seeds)


def common_seeds(scores: Scores) -> int | None:
    """The one ``n`` (fewest seeds behind a score) every score of ``scores`` shares, else None."""
    found = {score.stat.n for score in scores.cells.values() if score.stat is not None}
    return found.pop() if len(found) == 1 else None


_MULTIPLE = re.compile(r"^(\S+) (x[0-9.]+)$")


def setting_header(name: str) -> str:
    """``Overall at x2`` for the setting ``context_length x2`` (a note names the parameter), else in full."""
    match = _MULTIPLE.match(name)
    return f"{OVERALL} at {match.group(2) if match else name}"


def score_table(scores: Scores, caption: str = "", lengths: Lengths | None = None) -> Table:
    """Models x score columns: Overall, each family, each pitfall apart, then Overall at each length setting.

    Learned models are ranked by Overall; baselines and oracles are pinned apart. Bold follows
    :func:`aggregate.bold_rule` (see :func:`scores._mark_best`); a note names a column without a floor.
    Where every score has the same seed count, cells leave it out and the notes state it.
    """
    overall = scores.columns[:1] if OVERALL in scores.columns else []
    settings = lengths.settings if lengths and overall else []  # Overall at each length: none without an Overall
    n = common_seeds(scores)
    columns = scores.columns[len(overall):]
    def line(row: Row) -> list[Value]:
        return [row_header(row), *(_score_cell(scores.score(c, row), n is None) for c in overall),
                *(_score_cell(lengths.tables[name].score(OVERALL, row), n is None) for name in settings),
                *(_score_cell(scores.score(c, row), n is None) for c in columns)]

    headers = ["model", *overall, *(setting_header(name) for name in settings), *(scores.title(c) for c in columns)]
    notes = [f"n = {n} seeds behind every score." if n is not None else
             "n: the fewest seeds of any cell behind the score."]
    notes += [f"{setting_header(name)}: evaluated at {match.group(2)[1:]} times the training {match.group(1)}."
              for name in settings if (match := _MULTIPLE.match(name))]
    notes += [f"{ladder.title}: rungs {' | '.join(r.label for r in ladder.rungs)} ({' / '.join(ladder.axes)})"
              + (f"; pitfall: {ladder.pitfall}" if ladder.pitfall else "") for ladder in scores.ladders]
    notes += [f"{task}: not in {OVERALL} ({why})." for task, why in scores.dropped.items()]
    notes += no_floor_notes([scores.title(column) for column in scores.unfloored])
    for name in settings:
        table = lengths.tables[name]
        unscored = [task for task in table.dropped if task not in scores.dropped]
        if unscored:
            notes.append(f"{OVERALL} at {name} is over {', '.join(table.counted)}; not {', '.join(unscored)} "
                         "(no model has a score there).")
    without: dict[str, list[str]] = {}  # one note per reason, naming every model it applies to
    for row in scores.rows:
        missing = scores.score(OVERALL, row).missing
        na = [t for t in missing if scores.score(t, row).not_applicable]
        why = [*([f"n/a on {', '.join(na)}"] if na else []),
               *([f"no score on {', '.join(t for t in missing if t not in na)}"] if len(na) < len(missing) else [])]
        if why:
            without.setdefault("; ".join(why), []).append(row_header(row))
    notes += [f"{OVERALL}: none for {', '.join(models)} ({why})" for why, models in without.items()]
    notes += _reasons(scores, lengths, lengths_only=True)
    return Table("Scores", headers, [line(r) for r in scores.ranked], notes, caption=caption,
                 pinned=[line(r) for r in scores.pinned])


def _reasons(scores: Scores, lengths: Lengths | None, only: str | None = None, lengths_only: bool = False
             ) -> list[str]:
    """One note per reason a score is n/a, naming the models and columns it applies to (``only``: one column;
    ``lengths_only``: the evaluation settings alone, where the notes on Overall do not already say it). Models
    with the same places share one mention; all of the table's models read "every model"."""
    tables = [*([] if lengths_only else [("", scores)]),
              *((name, table) for name, table in (lengths.tables.items() if lengths else ()))]
    found: dict[str, dict[str, dict[str, list[str]]]] = {}  # reason -> model -> column -> settings
    for setting, table in tables:
        for row in table.rows:
            for column in table.columns:
                score = table.score(column, row)
                if score.not_applicable and score.reason and only in (None, column):
                    places = found.setdefault(score.reason, {}).setdefault(row.label, {})
                    places.setdefault(column, []).append(setting)
    everyone = {row.label for row in scores.rows}
    columns = {column for _, table in tables for column in table.columns if only in (None, column)}
    na: dict[str, set[str]] = {}  # model -> the columns where it is n/a, for any reason
    for by_model in found.values():
        for model, places in by_model.items():
            na.setdefault(model, set()).update(places)
    notes = []
    for reason, by_model in found.items():
        groups: dict[str, list[str]] = {}
        for model, places in by_model.items():
            settings = {tuple(named) for named in places.values()}
            # n/a in every column at the same settings (some for other reasons, which their own notes give)
            whole = na[model] == columns and len(settings) == 1 and len(places) > 2
            label = "every column" if set(places) == columns else "every other column"
            groups.setdefault(_places({label: list(next(iter(settings)))} if whole else places), []).append(model)
        where = "; ".join(f"{'every model' if set(models) == everyone else ', '.join(models)} on {places}"
                          for places, models in groups.items())
        notes.append(f"n/a for {where}: {reason}")
    return notes


def _places(places: dict[str, list[str]]) -> str:
    """``scc-automaton at context_length x2 and x4, mqar``: each column once, with its evaluation settings."""
    def one(column: str, settings: list[str]) -> str:
        named = [setting or "the trained length" for setting in settings]
        if len(named) > 1 and all(n.split()[0] == named[0].split()[0] for n in named) and " " in named[0]:
            named = [named[0], *(n.split(" ", 1)[1] for n in named[1:])]  # context_length x2 and x4
        return column if settings == [""] else f"{column} at {' and '.join(named)}"
    return ", ".join(one(column, settings) for column, settings in places.items())


def budget_table(budgets: Budgets) -> Table:
    """Each learned model's Overall at every budget (without an Overall, each family's score), baselines and oracles
    apart."""
    final = budgets.tables[FINAL]
    columns = final.columns[:1] if OVERALL in final.columns else final.columns
    def line(row: Row) -> list[Value]:
        return [row_header(row), *(_score_cell(table.score(column, row)) for column in columns
                                   for table in budgets.tables.values())]

    headers = ["model", *(f"{column} at {label if label == FINAL else f'{int(label):,}'}"
                          for column in columns for label in budgets.labels)]
    notes = ["A run that stopped before a budget keeps its final accuracy there (training had ended)."]
    return Table("Scores by training budget", headers, [line(r) for r in final.ranked], notes,
                 pinned=[line(r) for r in final.pinned])


def length_table(board: Leaderboard, scores: Scores, lengths: Lengths, ladder: Ladder) -> Table:
    """One family at every evaluation length: the score, the accuracy (training length first) and the attention
    diagnostics of the longer setting beside it, each a mean over rungs and seeds; n/a with its reason."""
    from tokbench.leaderboard.lengths import diagnostics, ladder_mean

    extra = {name: diagnostics(board, ladder, name) for name in lengths.settings}
    headers = ["model", "score (trained length)", "accuracy (trained length)"]
    for name in lengths.settings:
        headers += [f"score at {name}", f"accuracy at {name}", *(f"{d} at {name}" for d in extra[name])]

    def line(row: Row) -> list[Value]:
        cells: list[Value] = [row_header(row), _score_cell(scores.score(ladder.task, row)),
                              Number(ladder_mean(board, ladder, row, None, "accuracy"), f".{DIGITS}f")]
        for name in lengths.settings:
            score = lengths.tables[name].score(ladder.task, row)
            cells.append(_score_cell(score))
            for metric in ("accuracy", *extra[name]):
                cells.append("n/a" if score.not_applicable else
                             Number(ladder_mean(board, ladder, row, name, metric), f".{DIGITS}f"))
        return cells

    rows = [r for r in scores.rows if any(lengths.tables[n].score(ladder.task, r) != Score() for n in lengths.settings)]
    return Table(f"Length generalisation: {ladder.title}", headers, [line(r) for r in rows if not r.pinned],
                 _reasons(scores, lengths, ladder.task), pinned=[line(r) for r in rows if r.pinned])


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


# Characters of text one table row may take to fit an 800 px window without scrolling inside its box: about
# 768 px of text at 16 px (about 8.7 px a character), each cell's padding and border counted as two characters;
# a header is bold, about a tenth wider.
PAGE_CHARS = 88
BOLD = 1.1


def _text(value: Value) -> str:
    if isinstance(value, Measure):
        return measure_text(value)
    return number_text(value) if isinstance(value, Number) else value


def fit(table: Table, width: int = PAGE_CHARS, apart: Callable[[str], bool] | None = None) -> list[Table]:
    """``table`` as consecutive tables of at most ``width`` characters a row, each repeating the first column (the
    model): every column is then in view on a narrow screen. The caption goes with the first, the notes with the
    last. With ``apart``, the columns whose header it holds for and those it does not never share a table."""
    rows = table.all_rows()
    widths = [max([math.ceil(BOLD * len(header)), *(len(_text(row[i])) for row in rows)]) + 2  # rows may be none
              for i, header in enumerate(table.headers)]
    groups: list[list[int]] = [[]]
    used = widths[0]
    for i in range(1, len(widths)):
        if groups[-1] and (used + widths[i] > width or
                           apart is not None and apart(table.headers[i]) != apart(table.headers[i - 1])):
            groups.append([])
            used = widths[0]
        groups[-1].append(i)
        used += widths[i]
    if len(groups) == 1:
        return [table]

    def cut(row: list[Value], columns: list[int]) -> list[Value]:
        return [row[0], *(row[i] for i in columns)]

    last = len(groups) - 1
    return [Table(table.title if k == 0 else f"{table.title} ({k + 1} of {len(groups)})", cut(table.headers, group),
                  [cut(row, group) for row in table.rows], table.notes if k == last else [],
                  cut(table.footer, group) if table.footer else None, table.caption if k == 0 else "",
                  [cut(row, group) for row in table.pinned]) for k, group in enumerate(groups)]


@dataclass(frozen=True)
class RankingTables:
    """One ranking's tables: its score table (whole: a page cuts it with :func:`fit`), its claims, its scores by
    budget and its length-generalisation tables."""

    title: str
    about: str
    scores: Table
    claims: list[str]
    budget: Table | None
    lengths: list[Table]


@dataclass(frozen=True)
class Tables:
    """Every table of a report, built once (:attr:`Report.tables`); renderers only format them."""

    rankings: list[RankingTables]
    accuracy: Table | None
    training: Table | None
    details: list[Table]
    failures: Table | None


def scale_caption(scores: Scores) -> str:
    """The scale in one sentence, for a score table's caption."""
    scale = "; ".join(scores.scales)
    one = "1 = the oracle on the same test sequences, 0 = chance" if "chance" in scale else "1 = the Bayes optimum"
    return (f"Scale: {scale} ({one}); 95% intervals in parentheses. Baselines and the oracle are kept apart from "
            "the ranking.")


def build_tables(report: Report) -> Tables:
    """The report's tables, from the numbers it holds."""
    board = report.board
    rankings: list[RankingTables] = []
    for ranking in report.rankings:
        scores = ranking.scores
        caption = f"{report.budget} {scale_caption(scores)}"
        table = score_table(scores, caption, ranking.lengths)
        if rankings:  # a note the first ranking already shows (the rungs, an n/a for every model) is not repeated
            first = rankings[0]
            shown = [note for note in table.notes if note not in first.scores.notes]
            table = replace(table, notes=shown + ([f"Rungs and the other notes: as under {first.title}."]
                                                  if len(shown) < len(table.notes) else []))
        rankings.append(RankingTables(
            ranking.title, ranking.about, table, ranking.claims,
            budget_table(ranking.budgets) if ranking.budgets is not None else None,
            [length_table(board, scores, ranking.lengths, ladder) for ladder in scores.ladders]
            if ranking.lengths is not None else []))
    return Tables(rankings, main_table(board), training_table(board),
                  [detail_table(board, column) for column in board.columns],
                  failures_table(board) if board.failed() else None)
