"""Scores at each training budget, the ranking's stability between the last two, and the budget in words.

A v3 record's ``budget_curve`` holds its test accuracy at the recipe's budgets that training
reached and at its final step. The score table at budget b scores every run by its accuracy
after b steps, a run that stopped earlier by its final accuracy (training had ended), on the
same scale and with the same counted families as the main table (:func:`scores.build_scores`).
"""
from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tokbench.leaderboard import scale
from tokbench.leaderboard.aggregate import Cell, Leaderboard
from tokbench.leaderboard.scores import Scores, build_scores


@dataclass(frozen=True)
class Stability:
    """Kendall's tau between the rankings of one score column at two budgets, over the ``n`` learned models scored
    at both; ``tau`` None where it is undefined (fewer than two models, or a ranking all ties). A description, with
    no p-value: the two budgets score largely the same runs (a run that stopped before the later one keeps its final
    accuracy at both), so "no association" is no hypothesis worth testing."""

    column: str
    between: tuple[str, str]
    tau: float | None
    n: int


@dataclass
class Budgets:
    """Score tables by budget (``"100"`` ... and ``"final"``), in order, and the stability of each column."""

    tables: dict[str, Scores]
    stability: list[Stability]

    @property
    def labels(self) -> list[str]:
        return list(self.tables)


def build_budgets(board: Leaderboard, main: Scores) -> Budgets | None:
    """The score tables at every budget the records' curves reached; None when no record has a curve."""
    steps = scale.budgets([rec for cell in board.cells.values() for rec in cell.ok])
    if not steps:
        return None
    tables = {str(step): table for step in steps
              if (table := build_scores(board, scale.at_budget(step), main.counted, main.rows)) is not None}
    tables[scale.FINAL] = main
    labels = list(tables)
    stability = [rank_stability(tables[labels[-2]], main, column, (labels[-2], labels[-1]))
                 for column in main.columns] if len(labels) > 1 else []
    return Budgets(tables, stability)


def rank_stability(before: Scores, after: Scores, column: str, between: tuple[str, str]) -> Stability:
    """Kendall's tau (scipy.stats.kendalltau, tau-b) of the learned models' score means on ``column``."""
    from scipy.stats import kendalltau

    pairs = [(a.stat.mean, b.stat.mean) for row in after.ranked
             if (a := before.score(column, row)).stat is not None and (b := after.score(column, row)).stat is not None]
    if len(pairs) < 2:
        return Stability(column, between, None, len(pairs))
    tau = float(kendalltau(*zip(*pairs)).statistic)
    return Stability(column, between, None if math.isnan(tau) else tau, len(pairs))


# Mean accuracy gained between the last budget below the cap and the cap, above which a cell is still learning.
RISING = 0.02


@dataclass(frozen=True)
class StillRising:
    """A cell with a run stopped at its step cap that may still be learning there: its mean test accuracy still
    climbed by more than :data:`RISING` from the budget before (``before`` steps) to the cap (``cap`` steps), or
    its seeds split, ``split = (reached, seeds)`` of them stopping at their target and the others at the cap (a
    flat start longer than the cap leaves the mean flat). Its score may be a lower bound of what the model reaches
    with more training (rules on the means and the stops, no test)."""

    cell: Cell
    before: int
    cap: int
    accuracy_before: float
    accuracy_at_cap: float
    split: tuple[int, int] | None = None


def rising_at_cap(stop_reasons: Iterable[str | None], accuracy_before: float, accuracy_at_cap: float) -> bool:
    """The rule on the mean for "still learning at the cap", shared by the page and the budget study: some run of
    the cell stopped at its step cap, and the cell's mean test accuracy gained more than :data:`RISING` over the
    last budget before it (the page's other sign is :func:`split_at_cap`)."""
    return "cap" in stop_reasons and accuracy_at_cap - accuracy_before > RISING


def split_at_cap(stop_reasons: Sequence[str | None]) -> tuple[int, int] | None:
    """``(reached, seeds)`` where a cell's seeds split, some stopping at their target and some at the step cap:
    the model can solve the task under this recipe, and the seeds at the cap may be in a flat start that outlasts
    it, which no rule on the mean can see (the page's second sign of a cell still learning at the cap)."""
    reached = sum(reason == "target" for reason in stop_reasons)
    return (reached, len(stop_reasons)) if reached and "cap" in stop_reasons else None


def still_rising(board: Leaderboard) -> list[StillRising]:
    """The trained cells with a run stopped at its cap that may still be learning there: a mean accuracy still
    rising at the cap (runs that stopped earlier keep their final accuracy, as in the budget tables), or seeds
    split between the target and the cap; in board order."""
    found = []
    for cell in board.cells.values():
        reasons = [rec["train"].get("stopped_because") for rec in cell.ok]
        if not cell.row.trained or "cap" not in reasons:
            continue
        cap = _cap(cell.ok[reasons.index("cap")])
        before = max((step for step in scale.budgets(cell.ok) if step < cap), default=None)
        if before is None:
            continue
        means = [_mean_accuracy(cell, step) for step in (before, cap)]
        if None in means:
            continue
        split = split_at_cap(reasons)
        if split or rising_at_cap(reasons, *means):
            found.append(StillRising(cell, before, cap, means[0], means[1], split))
    return found


def _mean_accuracy(cell: Cell, step: int) -> float | None:
    picked = [scale.at_budget(step)(rec) for rec in cell.ok]
    values = [p["accuracy"] for p in picked if isinstance(p, dict) and p.get("accuracy") is not None]
    return statistics.fmean(values) if len(values) == len(picked) else None


def rising_text(found: list[StillRising]) -> str:
    """The cells still learning at the cap in one sentence ("" when none): their scores may be lower bounds (the
    rule compares two means, with no test, so it says "may")."""
    if not found:
        return ""
    cells = "; ".join(f"{item.cell.row.label or item.cell.row.model} on {item.cell.column.label or item.cell.column.task}"
                      f" ({item.accuracy_before:.3f} at {item.before:,} steps, {item.accuracy_at_cap:.3f} at "
                      f"{item.cap:,}" + (f"; {item.split[0]} of {item.split[1]} seeds reached the target"
                                         if item.split else "") + ")" for item in found)
    return (f"Still learning at the cap ({len(found)} cell{'s' if len(found) > 1 else ''}; mean test accuracy rose by "
            f"more than {RISING} over the last budget, or some seeds reached the target while others stopped at the "
            f"cap, rules with no test): {cells}. These scores may be "
            "lower bounds of what more training reaches; the cap is not shown to be past their plateau.")


#: why a run stopped (``train.stopped_because``) as the budget sentence words it; only the reasons its records give
STOPS = {"target": "at the target", "plateau": "on a plateau", "cap": "at the cap"}


def budget_text(board: Leaderboard) -> str:
    """The training budget in one sentence, from the records: the step cap, why runs stopped, the steps taken, and
    how many cells were still learning at the cap (:func:`rising_text` names them)."""
    trained = [rec for cell in board.cells.values() if cell.row.trained for rec in cell.ok]
    if not trained:
        return "No model in this section trains (0 steps)."
    caps = sorted({_cap(rec) for rec in trained})
    cap = f"{caps[0]:,} optimiser steps per run" if len(caps) == 1 else \
        f"{caps[0]:,} to {caps[-1]:,} optimiser steps per run (the cap differs by recipe or task)"
    reasons = Counter(rec["train"].get("stopped_because") for rec in trained)
    steps = [rec["train"]["steps"] for rec in trained if isinstance(rec["train"].get("steps"), int)]
    if set(reasons) == {None}:
        return f"Training budget: {cap}, every run trained for all of them; scores are taken " \
               "at the last step."
    # Older records (no stopping rule) trained for the whole count: "all steps".
    why = ", ".join(f"{reason or 'all steps (older records)'} {count}"
                    for reason, count in sorted(reasons.items(), key=lambda i: str(i[0])))
    rules = [phrase for reason, phrase in STOPS.items() if reason in reasons] + \
        sorted(str(reason) for reason in reasons if reason not in STOPS and reason is not None)
    stop = rules[0] if len(rules) == 1 else f"{', '.join(rules[:-1])} or {rules[-1]}"
    text = (f"Training budget: at most {cap}; runs stop {stop} ({why} of {len(trained)} runs; "
            f"median {statistics.median(steps):,.0f} steps taken); scores are taken at the final step.")
    rising = len(still_rising(board))
    return (f"{text} {rising} cell{'s were' if rising > 1 else ' was'} still learning at the cap (may be lower "
            "bounds), named under the tables." if rising else text)


def _cap(rec: dict[str, Any]) -> int:
    train = rec["train"]
    return int(train.get("max_steps") or rec["params"]["train"].get("steps") or train.get("steps") or 0)
