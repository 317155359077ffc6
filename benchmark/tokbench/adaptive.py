"""Adaptive seeds: add seeds to a cell until its accuracy interval is narrow enough, or a cap is hit.

A cell is one pairing without its seed (task and model configurations and
recipe). After each round, every cell's accuracy interval is computed exactly as
the leaderboard computes it (:mod:`tokbench.leaderboard.stats`); a cell whose
half-width is above the target gets more seeds, as many as its current spread
predicts it needs (:func:`~tokbench.leaderboard.stats.seeds_needed`), never beyond
``max_seeds`` runs in all. When a cell stops, each of its records says why under
``"adaptive"``: ``{"target_ci", "max_seeds", "half_width", "seeds", "stopped"}``
with ``stopped`` one of ``"target reached"``, ``"max seeds"`` or ``"all runs failed"``.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokbench.errors import UsageError
from tokbench.grid import Pairing

Record = dict[str, Any]
REACHED, CAPPED, FAILED = "target reached", "max seeds", "all runs failed"
UNSIZED = "no interval: evaluation set of unknown size"  # more seeds cannot narrow what cannot be computed
DEFAULT_MAX_SEEDS = 20


@dataclass(frozen=True)
class Target:
    """Stop a cell when its interval's half-width is at most ``half_width``, or at ``max_seeds`` runs."""

    half_width: float
    max_seeds: int

    def __post_init__(self) -> None:
        if not (self.half_width > 0 and math.isfinite(self.half_width)):
            raise UsageError(f"--target-ci expects a half-width > 0, e.g. 0.02, got {self.half_width!r}")
        if self.max_seeds < 2:
            raise UsageError(f"--max-seeds expects an integer >= 2 (an interval needs two seeds), got {self.max_seeds}")


def target(half_width: float | None, max_seeds: int | None) -> Target | None:
    """The target from ``--target-ci``/``--max-seeds`` (or the suite's keys); None when no target is set."""
    if half_width is None:
        if max_seeds is not None:
            raise UsageError("--max-seeds caps adaptive seeds: give --target-ci as well")
        return None
    cap = DEFAULT_MAX_SEEDS if max_seeds is None else max_seeds
    if not _number(half_width) or not _number(cap) or cap != int(cap):
        raise UsageError(f"target_ci must be a number > 0 and max_seeds an integer >= 2, got {half_width!r} and "
                         f"{cap!r}")
    return Target(float(half_width), int(cap))


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class Decision:
    """What one cell needs next: ``more`` new pairings, or the reason it stopped."""

    pairings: tuple[Pairing, ...]
    more: int
    stopped: str | None
    half_width: float | None


def decide(pairings: Sequence[Pairing], records: Mapping[str, Record], goal: Target) -> list[Decision]:
    """One decision per cell of ``pairings`` (all of which have a record in ``records``, by config hash)."""
    from tokbench.leaderboard.aggregate import build
    from tokbench.leaderboard.stats import seeds_needed

    board = build([records[p.config_hash] for p in pairings])
    by_hash = {p.config_hash: p for p in pairings}
    decisions = []
    for cell in board.cells.values():
        runs = cell.ok + cell.failed + cell.not_applicable
        cell_pairings = tuple(by_hash[r["config_hash"]] for r in runs)
        stat = cell.accuracy
        half = None if stat is None or stat.width is None else stat.width / 2
        if cell.not_applicable:
            continue
        if not cell.ok:
            decisions.append(Decision(cell_pairings, 0, FAILED, None))
        elif cell.eval_floor("accuracy") is None:  # the task declares no size for the split it is scored on
            decisions.append(Decision(cell_pairings, 0, UNSIZED, None))
        elif half is not None and half <= goal.half_width:
            decisions.append(Decision(cell_pairings, 0, REACHED, half))
        elif len(runs) >= goal.max_seeds:
            decisions.append(Decision(cell_pairings, 0, CAPPED, half))
        else:
            # Ask for the seeds the current spread predicts (failed runs count towards the cap, not the interval).
            wanted = seeds_needed(cell.values("accuracy"), cell.eval_var("accuracy"), goal.half_width,
                                  goal.max_seeds - len(runs) + len(cell.ok))
            decisions.append(Decision(cell_pairings, max(wanted - len(cell.ok), 1), None, half))
    return decisions


def more_seeds(decision: Decision) -> list[Pairing]:
    """The cell's next pairings: the same configuration at the next unused seeds."""
    template = decision.pairings[0]
    used = {p.seed for p in decision.pairings}
    seeds, seed = [], 0
    while len(seeds) < decision.more:
        if seed not in used:
            seeds.append(seed)
        seed += 1
    return [Pairing(template.variant, s) for s in seeds]


def mark_stopped(decisions: Sequence[Decision], records: Mapping[str, Record], goal: Target, out: Path) -> None:
    """Write into every record of each stopped cell why it stopped (the records are rewritten atomically)."""
    from tokbench.results import write_record

    for decision in decisions:
        if decision.stopped is None:
            continue
        note = {"target_ci": goal.half_width, "max_seeds": goal.max_seeds, "half_width": decision.half_width,
                "seeds": len(decision.pairings), "stopped": decision.stopped}
        for pairing in decision.pairings:
            record = records[pairing.config_hash]
            if record.get("adaptive") != note:
                record["adaptive"] = note
                write_record(out, record)


def run_until(pairings: Sequence[Pairing], records: dict[str, Record], existing: Mapping[str, Record], goal: Target,
              train: Callable[[list[Pairing]], Mapping[str, Record]], out: Path, rerun: str = "missing"
              ) -> list[Pairing]:
    """Add seeds round by round until every cell stops; returns every pairing run (the grid's and the added ones).

    ``records`` holds the grid's records by config hash and gains the new ones;
    ``existing`` (the records already in the folder) spares pairings a resumed run has
    already trained, under the same ``rerun`` policy as the grid's own pairings
    (:func:`tokbench.runner.plan`); ``train`` runs a list of pairings and returns their records.
    """
    from tokbench.runner import plan

    pairings = list(pairings)
    while True:
        decisions = decide(pairings, records, goal)
        extra = [p for decision in decisions for p in more_seeds(decision)]
        if not extra:
            mark_stopped(decisions, records, goal, out)
            return pairings
        todo = plan(extra, existing, rerun)
        again = {p.config_hash for p in todo}
        records.update({p.config_hash: existing[p.config_hash] for p in extra
                        if p.config_hash in existing and p.config_hash not in again})
        if todo:
            records.update(train(todo))
        pairings += extra
