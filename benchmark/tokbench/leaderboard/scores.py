"""Scores of a suite's ladders: one number per model and task family, and one overall.

A record from a ladder block of a suite carries ``ladder = {rung, rungs, axes}``; a
task's ladder is the set of its columns whose records carry it, rung 0 the easiest.
Each run is scored on its scale (:mod:`tokbench.leaderboard.scale`: chance 0, optimum 1 on
the same test sequences; older records accuracy / Bayes optimum). A model configuration (a
row) has a family score on a ladder when it has at least one scored seed at every rung (a
rung no record reached leaves every row without one): the mean over rungs of its mean
score, rungs weighted equally. Its overall score is the mean of its family scores over the
*counted* families, each weighted equally, and exists only when it has a score in every one
of them. A family counts unless the ``last-token`` baseline is as good as every learned
model there (:func:`far_from_last_token`) or most learned models tie the optimum or a baseline
there (:func:`ranks_little`); a pitfall family (a record's
``meta.task_pitfall``) is scored on its own and never counts. A secondary table (a budget, a
longer context) counts the main table's families less those where no model has a score under
its pick (every model n/a at a length the task cannot take).

The same construction scores any *pick* of a record (:mod:`~tokbench.leaderboard.scale`):
its final accuracy, its accuracy at a training budget, or an extra evaluation at a longer
context; :func:`build_scores` takes the pick and, for the secondary tables, the counted
families of the main one.

Every interval and test comes from :mod:`tokbench.leaderboard.stats`
(:func:`~tokbench.leaderboard.stats.weighted_sum`,
:func:`~tokbench.leaderboard.stats.compare_scores`); the method is in docs/scores.md.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tokbench.leaderboard import scale
from tokbench.leaderboard.aggregate import LAST_TOKEN, Cell, Column, Leaderboard, Row, format_value
from tokbench.leaderboard.scale import BAYES_SCALE, CHANCE_SCALE, NotApplicable, Pick
from tokbench.leaderboard.stats import (ABOVE, CONFIDENCE, MARGIN, MATCHES, MIN_SEEDS, Estimate, Part, Stat,
                                        compare_scores, summarise, weighted_sum)

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
    reason: str = ""  # why it does not apply, as the records say
    scale: str = CHANCE_SCALE


@dataclass
class Scores:
    """The score table's content: ladders (non-pitfall first), rows, and each (column name, row key) score.

    ``counted`` names the families in Overall; ``dropped`` says, per family left out, why.
    """

    families: list[Ladder]
    pitfalls: list[Ladder]
    rows: list[Row]
    cells: dict[tuple[str, str], Score]
    family: dict[str, str]  # each row's model family, by row key
    counted: list[str] = field(default_factory=list)
    dropped: dict[str, str] = field(default_factory=dict)
    unfloored: list[str] = field(default_factory=list)  # columns with no floor to test bold against: none bold

    @property
    def ladders(self) -> list[Ladder]:
        return self.families + self.pitfalls

    @property
    def columns(self) -> list[str]:
        """The score table's columns, in order: ``Overall``, the families, then the pitfalls."""
        return [*([OVERALL] if self.counted else []), *(f.task for f in self.families),
                *(p.task for p in self.pitfalls)]

    @property
    def ranked(self) -> list[Row]:
        """The learned models, by Overall (highest first)."""
        return [r for r in self.rows if not r.pinned]

    @property
    def pinned(self) -> list[Row]:
        """Baselines, then oracles: shown apart from the ranking."""
        return [r for r in self.rows if r.pinned]

    @property
    def scales(self) -> list[str]:
        """The scales the scores are on (older records keep accuracy / Bayes optimum)."""
        return sorted({s.scale for s in self.cells.values() if s.stat is not None})

    def title(self, column: str) -> str:
        """A column's header: the task, marked when it is a pitfall or left out of Overall."""
        name = next((lad.title for lad in self.ladders if lad.task == column), column)
        return name + (" (not in Overall)" if column in self.dropped else "")

    def score(self, column: str, row: Row) -> Score:
        return self.cells.get((column, row.key), Score())


def family(row: Row, board: Leaderboard) -> str:
    """The row's model family, as its records name it (older records: the model's name)."""
    return row.family or row.model


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


@dataclass(frozen=True)
class RungValues:
    """One cell's per-seed scores under a pick, one score's evaluation variance, its bounds and its scale."""

    values: list[float]
    eval_var: float | None  # None: the test set's size is unknown
    low: float
    high: float
    scale: str


def rung_values(cell: Cell | None, pick: Pick = scale.final) -> RungValues | NotApplicable | None:
    """The cell's scored seeds under ``pick``; why it does not apply; or None where no seed has a score."""
    if cell is None:
        return None
    picked = [pick(rec) for rec in cell.ok]
    metrics = [m for m in picked if isinstance(m, dict) and scale.score(m) is not None]
    if not metrics:
        reasons = [m.reason for m in picked if isinstance(m, NotApplicable)]
        reasons += [rec.get("error") or "" for rec in cell.not_applicable] if not cell.ok else []
        return NotApplicable(reasons[0] or "not applicable") if reasons or (cell.not_applicable and not cell.ok) \
            else None
    n = len(metrics)
    examples = cell.column.examples(cell.column.eval_split)
    scales = {scale.scale(m) for m in metrics}
    values = [scale.score(m) for m in metrics]
    if cell.row.oracle and scales == {CHANCE_SCALE} and all(v == 1.0 for v in values):
        floor: float | None = 0.0  # the oracle's own accuracy on every seed: exactly 1 by construction, no error
    elif examples is None:
        floor = None  # a test set of unknown size: no floor can be computed, so no interval and no claim
    else:
        floor = math.fsum(scale.eval_var(m, examples, n) for m in metrics) / n
    return RungValues(values, floor,
                      math.fsum(scale.lower_bound(m) for m in metrics) / n,
                      math.fsum(scale.upper_bound(m) for m in metrics) / n,
                      CHANCE_SCALE if scales == {CHANCE_SCALE} else BAYES_SCALE)


def ceiling(cell: Cell) -> float:
    """The highest mean score the cell can have in expectation (1 on the chance scale, 1 / optimum before)."""
    values = rung_values(cell)
    return values.high if isinstance(values, RungValues) else math.inf


def rung_stat(cell: Cell | None, pick: Pick = scale.final) -> Stat | None:
    """The cell's mean score with the cell interval (t over seeds, floored, cut to its bound)."""
    values = rung_values(cell, pick)
    if not isinstance(values, RungValues):
        return None
    return summarise(values.values, values.eval_var, (values.low, values.high))


Share = tuple[Part, RungValues]


def _shares(board: Leaderboard, ladder: Ladder, row: Row, pick: Pick) -> list[Share] | NotApplicable | None:
    """The row's cells on ``ladder`` as score parts; why a rung does not apply; None where one is missing."""
    shares = []
    for rung in ladder.rungs:
        values = rung_values(rung_cell(board, rung, row), pick)
        if values is None or isinstance(values, NotApplicable):
            return values
        shares.append((Part(1 / len(ladder.rungs), values.values, values.eval_var), values))
    return shares


def _score(shares: list[Share]) -> Score:
    """The weighted sum of the shares, its interval cut to the weighted sums of the cells' bounds."""
    estimate = weighted_sum([part for part, _ in shares])
    bounds = tuple(math.fsum(part.weight * getattr(values, side) for part, values in shares) for side in ("low", "high"))
    scales = {values.scale for _, values in shares}
    return Score(estimate, estimate.stat(bounds),
                 scale=CHANCE_SCALE if scales == {CHANCE_SCALE} else BAYES_SCALE)


def build_scores(board: Leaderboard, pick: Pick = scale.final, counted: Sequence[str] | None = None,
                 among: Sequence[Row] | None = None) -> Scores | None:
    """The scores of every row with a cell on a ladder under ``pick``; None when the board has no ladder.

    ``counted`` fixes the families of Overall (a secondary table uses its main table's; empty: no Overall, and
    no family is left out of one); by default they are the families :func:`far_from_last_token` and
    :func:`ranks_little` keep among the rows. ``among`` restricts the rows (a ranking: its learned models and the
    reference rows), and the ladders to the rungs its learned rows were run on: a ranking cut in breadth (a plan
    of one rung, `tokbench run --rung`) is scored on its rungs, whatever rungs the shared baselines ran.
    """
    ladders = find_ladders(board)
    candidates = board.rows if among is None else list(among)
    if among is not None:
        learned_rows = [r for r in candidates if not r.pinned]
        ladders = [Ladder(lad.task, rungs, lad.pitfall) for lad in ladders
                   if (rungs := [rung for rung in lad.rungs if any(board.cell(c, r) is not None
                                                                   for r in learned_rows for c in rung.columns)])]
    if not ladders:
        return None
    families = [lad for lad in ladders if not lad.pitfall]
    pitfalls = [lad for lad in ladders if lad.pitfall]
    ladder_columns = [c for lad in ladders for rung in lad.rungs for c in rung.columns]
    rows = [r for r in candidates if any(board.cell(c, r) is not None for c in ladder_columns)]
    cells: dict[tuple[str, str], Score] = {}
    shares: dict[tuple[str, str], list[Share]] = {}
    for row in rows:
        for ladder in ladders:
            found = _shares(board, ladder, row, pick)
            if isinstance(found, NotApplicable):
                cells[ladder.task, row.key] = Score(not_applicable=True, reason=found.reason)
            elif found:
                shares[ladder.task, row.key] = found
                cells[ladder.task, row.key] = _score(found)
    scores = Scores(families, pitfalls, rows, cells, {r.key: family(r, board) for r in rows})
    if counted is None:
        scores.dropped = {lad.task: why for lad in families
                          if (why := far_from_last_token(scores, lad.task) or ranks_little(scores, lad.task))}
        scores.counted = [lad.task for lad in families if lad.task not in scores.dropped]
    elif counted:  # the main table's families, less those no row has a score in under this pick (n/a for all)
        unscored = {lad.task for lad in families if not any((lad.task, row.key) in shares for row in rows)}
        scores.counted = [lad.task for lad in families if lad.task in counted and lad.task not in unscored]
        scores.dropped = {lad.task: "no model has a score there" if lad.task in unscored
                          else "left out of the main table's Overall" for lad in families
                          if lad.task not in scores.counted}
    for row in rows:
        missing = tuple(task for task in scores.counted if (task, row.key) not in shares)
        if scores.counted:
            overall = [(Part(p.weight / len(scores.counted), p.values, p.eval_var), values)
                       for task in scores.counted for p, values in shares.get((task, row.key), [])]
            reasons = [cells[t, row.key].reason for t in missing if (t, row.key) in cells]
            if not missing:
                cells[OVERALL, row.key] = _score(overall)
            else:  # n/a where every missing family is n/a (with the first reason), else blank
                cells[OVERALL, row.key] = Score(not_applicable=len(reasons) == len(missing), missing=missing,
                                                reason=next((r for r in reasons if r), ""))
    scores.rows = _ordered(rows, cells)
    for column in scores.columns:
        _mark_best(scores, column)
    return scores


def far_from_last_token(scores: Scores, task: str) -> str:
    """Why family ``task`` stays out of Overall ("" when it counts).

    It counts when some learned model's family score is *far* from the ``last-token``
    baseline's: the 95% Welch interval of the difference (:func:`stats.compare_scores`)
    lies above +``MARGIN``. Where the baseline has no score on the family there is
    nothing to compare, and the family counts.
    """
    last = next((s.estimate for r in scores.rows if r.model == LAST_TOKEN
                 and (s := scores.score(task, r)).estimate is not None), None)
    if last is None:
        return ""
    for row in scores.ranked:
        estimate = scores.score(task, row).estimate
        if estimate is not None and (test := compare_scores(estimate, last)).verdict is not None \
                and test.low > MARGIN:
            return ""
    return f"no learned model is shown above the last-token baseline by more than {MARGIN:g}"


# The optimum's score on the chance scale: exactly 1 for every run, so it adds no variance to a comparison (on the
# older accuracy / Bayes scale 1 is the Bayes optimum, which the oracle row reaches in expectation).
OPTIMUM = Estimate(1.0, 0.0, (), MIN_SEEDS)


def ranks_little(scores: Scores, task: str) -> str:
    """Why family ``task`` stays out of Overall because it ranks little ("" when it counts).

    It ranks little when more than half of the learned models with a score there are shown equivalent
    (:func:`stats.compare_scores`: the 90% interval of the difference inside +-``MARGIN``) to the optimum's
    score of 1, or more than half to a baseline's family score: most models solve it, or most do no better
    than a floor, and the family tells them little apart. "Equivalent to some baseline" is a claim about any of
    k baselines, so each of its tests runs at 5%/k (Bonferroni), which keeps the claim's level at 5%. A family
    score is the mean over the rungs, so a harder rung that separates the models keeps the family counted. With
    one learned model there is nothing to tell apart, and the family counts.
    """
    learned = [e for row in scores.ranked if (e := scores.score(task, row).estimate) is not None]
    if len(learned) < 2:
        return ""
    floors = [e for row in scores.rows if row.baseline and (e := scores.score(task, row).estimate) is not None]
    solved = sum(compare_scores(e, OPTIMUM).verdict == MATCHES for e in learned)
    per_floor = (1 - CONFIDENCE) / max(1, len(floors))
    floored = sum(any(compare_scores(e, floor, equivalence_alpha=per_floor).verdict == MATCHES for floor in floors)
                  for e in learned)
    for tied, what in ((solved, "the optimum"), (floored, "a baseline")):
        if 2 * tied > len(learned):
            return f"it ranks little: {tied} of {len(learned)} learned models are shown within {MARGIN:g} of {what}"
    return ""


def _ordered(rows: list[Row], cells: dict[tuple[str, str], Score]) -> list[Row]:
    """Learned models by overall score, highest first, those without one last; then baselines, then oracles."""
    def key(row: Row) -> tuple[bool, bool, bool, float]:
        stat = cells.get((OVERALL, row.key), Score()).stat
        return row.pinned, row.oracle, stat is None, -stat.mean if stat else 0.0

    return sorted(rows, key=key)  # stable: ties keep the board's order


def learned(scores: Scores, column: str) -> list[tuple[Row, Score]]:
    """The learned models with a score on ``column``, highest first."""
    ranked = [(row, s) for row in scores.ranked if (s := scores.score(column, row)).estimate]
    return sorted(ranked, key=lambda item: -item[1].estimate.value)


# The chance accuracy's score on the chance scale: exactly 0 for every run (the floor bold is tested against where a
# column has no baseline's score).
CHANCE = Estimate(0.0, 0.0, (), MIN_SEEDS)


def _mark_best(scores: Scores, column: str) -> None:
    """Bold, by :func:`aggregate.bold_rule`: the highest learned score and every score shown equivalent to it, where
    the score is also shown above every baseline's score on the column (``last-token``, ``uniform`` and any floor a
    task's baseline gives, e.g. naming a value seen in the context), or, where no baseline has a score there, above
    chance, a score of 0 (every run on the chance scale: its records carry their chance accuracy); a column with
    neither has no floor: nothing is bold, and ``scores.unfloored`` names it for the table's notes.

    Equivalent: :func:`stats.compare_scores` finds the difference within +-``MARGIN`` (TOST,
    every cell with at least ``MIN_SEEDS`` seeds); above a floor: its verdict is
    ``above`` (a baseline without a score on the column asks nothing). Oracles and
    baselines are never best.
    """
    ranked = learned(scores, column)
    if not ranked:
        return
    references = [s.estimate for row in scores.pinned if row.baseline and not row.oracle
                  and (s := scores.score(column, row)).estimate is not None]
    if not references:
        if any(score.scale != CHANCE_SCALE for _, score in ranked):
            scores.unfloored.append(column)
            return
        references = [CHANCE]
    top = ranked[0][1].estimate
    for row, score in ranked:
        best = score.estimate.value == top.value or compare_scores(score.estimate, top).verdict == MATCHES
        if best and all(compare_scores(score.estimate, ref).verdict == ABOVE for ref in references):
            scores.cells[column, row.key] = Score(score.estimate, score.stat, best=True, scale=score.scale)
