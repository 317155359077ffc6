"""The pruning check: what would a sweep that chooses at step S lose against the full sweep's choice?

    python benchmark/budget/pruning.py RECORDS [RECORDS ...] [--at 500 1000 2000 3000]
                                       [--tolerance 0.01] [--keep-within 0.01] [--markdown]

Reads full sweeps (``benchmark/budget/pruning.toml``: every candidate trained to its target or the cap, kept on
validation at the end) whose records keep each candidate's validation accuracy at every check
(``train.lr_selection_val_curve``). For each step S it replays the choice a pruning sweep (``train.sweep_steps =
S``) makes: the first candidate to reach its target, if one does by S, else the best validation accuracy at S,
ties to the earlier candidate. A pruning sweep's kept run is that candidate's full run, so what it loses is the
final validation accuracy of the full sweep's choice minus that of its own (0 when both choose alike, never
negative). Validation, not test: both choices are made on it, and the test split stays unread for choices.
Also per S: the replica-steps the pruning sweep would have trained, over the full sweep's. With ``--keep-within M``
it replays the rule of ``train.sweep_margin = M``: at S every candidate within M of the best on validation trains
on, not only the best, and the choice among them is made at the end (a flat start, where every candidate is at the
same level, prunes nothing).
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tabulate import tabulate

from stopping import plan_hashes
from tokbench.results import load_records

STEPS = (500, 1000, 2000, 3000)


@dataclass(frozen=True)
class Sweep:
    """One full sweep: per candidate (in grid order) its validation checks and final validation accuracy."""

    task: str
    model: str
    rung: str
    seed: int
    cap: int
    eval_every: int
    curves: Mapping[str, Mapping[str, list[float]]]
    final: Mapping[str, float]
    stops: Mapping[str, str] | None = None  # why each candidate ended (records from 2026-12-07 on)

    def chosen(self) -> str:
        """The full sweep's choice: the best final validation accuracy, ties to the earlier candidate."""
        return _first_best(self.final)

    def chosen_at(self, step: int, margin: float = 0.0) -> str:
        """A pruning sweep's choice at ``step``: of the candidates it keeps there, the best at the end."""
        return _first_best({c: self.final[c] for c in self._decision(step, margin)[0]})

    def loss_at(self, step: int, margin: float = 0.0) -> float:
        return self.final[self.chosen()] - self.final[self.chosen_at(step, margin)]

    def replica_steps(self, step: int | None = None, margin: float = 0.0) -> int:
        """Steps trained by every candidate (``step`` None: the full sweep), or by a sweep pruned at ``step``."""
        taken = {c: self._steps_taken(c) for c in self.final}
        if step is None:
            return sum(taken.values())
        kept, at = self._decision(step, margin)
        return sum(min(t, at) for t in taken.values()) + sum(max(0, taken[c] - at) for c in kept)

    def _decision(self, step: int, margin: float) -> tuple[list[str], int]:
        """The candidates a pruning sweep keeps and the step it decides at: the first to reach its target, if one
        does by ``step`` (of several at that check, the best), else the best at ``step`` (ties to the earlier) and,
        with ``margin``, every other candidate within ``margin`` of it."""
        solved = {c: t for c in self.final if (t := self._steps_taken(c)) < self.cap and t <= step}
        if solved:
            first = min(solved.values())
            return [_first_best({c: self.final[c] for c, t in solved.items() if t == first})], first
        there = {c: _at(self.curves[c], step) for c in self.final}
        best = _first_best(there)
        near = [c for c in there if c != best and margin > 0 and there[c] >= there[best] - margin]
        return [best, *near], step

    def _steps_taken(self, candidate: str) -> int:
        last = int(self.curves[candidate]["step"][-1])
        if self.stops is not None:  # the record says: a target stop ends at its last check, anything else at the cap
            return last if self.stops[candidate] == "target" else self.cap
        # older records: no check is taken at the cap, so a curve that ends one check before it ran to the cap (or
        # reached its target right there, which reads the same), else it stopped at its last check
        return self.cap if last >= self.cap - self.eval_every else last


def _at(curve: Mapping[str, list[float]], step: int) -> float:
    """The validation accuracy at ``step``, or at the candidate's stop if it stopped before."""
    known = [a for s, a in zip(curve["step"], curve["accuracy"]) if s <= step]
    return known[-1] if known else float("-inf")


def _first_best(values: Mapping[str, float]) -> str:
    best = max(values.values())
    return next(key for key, value in values.items() if value == best)


def sweeps(records: Sequence[Mapping[str, Any]], plan: set[str] | None = None) -> list[Sweep]:
    """The full sweeps among ``records`` (ok, every candidate's curve kept, not pruned), sorted; with ``plan`` (the
    config hashes of pruning.toml's pairings) only those of the plan: a record of a protocol the suite has left
    (another stop, say) replays another sweep's choices."""
    found = []
    for record in records:
        train = record.get("train") or {}
        if record.get("status") != "ok" or "lr_selection_val_curve" not in train or "selected_at" in train:
            continue
        if plan is not None and record["config_hash"] not in plan:
            continue
        ladder = record.get("ladder") or {}
        rung = ", ".join(f"{k}={v}" for k, v in ladder.get("axes", {}).items())
        found.append(Sweep(record["task"], record["model"], rung, record["seed"], train["max_steps"],
                           train["eval_every"], train["lr_selection_val_curve"], train["lr_selection_val_accuracy"],
                           train.get("lr_selection_stopped_because")))
    return sorted(found, key=lambda s: (s.task, s.model, s.rung, s.seed))


def tables(found: Sequence[Sweep], at: Sequence[int], tolerance: float,
           margin: float = 0.0) -> tuple[list, list, list, list]:
    """Per sweep: the full choice and, per S, the pruned choice and its loss; per S: how many are within
    ``tolerance``, the largest loss and the share of replica-steps trained (``margin``: see ``--keep-within``)."""
    head = ["task", "model", "seed", "choice", *[f"at {s}: choice, loss" for s in at]]
    body = [[s.task, s.model, s.seed, s.chosen(),
             *[f"{s.chosen_at(step, margin)}, {s.loss_at(step, margin):.3f}" for step in at]] for s in found]
    summary_head = ["S", "sweeps", "same choice", f"within {tolerance:g}", "share", "largest loss",
                    "replica-steps / full sweep"]
    full_steps = sum(s.replica_steps() for s in found)
    summary = []
    for step in at:
        losses = [s.loss_at(step, margin) for s in found]
        within = sum(loss <= tolerance for loss in losses)
        summary.append([step, len(found), sum(s.chosen_at(step, margin) == s.chosen() for s in found), within,
                        f"{within / len(found):.3f}", f"{max(losses):.3f}",
                        f"{sum(s.replica_steps(step, margin) for s in found) / full_steps:.2f}"])
    return head, body, summary_head, summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", type=Path, nargs="+", help="folders of records holding pruning.toml's full sweeps "
                                                               "(read as one)")
    parser.add_argument("--suite", type=Path, default=Path(__file__).with_name("pruning.toml"),
                        help="the suite whose pairings are the sweeps to replay (default: pruning.toml beside this)")
    parser.add_argument("--at", type=int, nargs="+", default=STEPS, help="steps at which to replay a choice")
    parser.add_argument("--tolerance", type=float, default=0.01, help="a loss counted as none (default 0.01)")
    parser.add_argument("--keep-within", type=float, default=0.0, metavar="M",
                        help="at S keep every candidate within M of the best on validation, not only the best, and "
                             "choose among them at the end (default 0: the harness's rule, the best only)")
    parser.add_argument("--markdown", action="store_true", help="GitHub markdown tables instead of plain text")
    args = parser.parse_args()
    if args.keep_within < 0:
        parser.error(f"--keep-within must be 0 or more, not {args.keep_within:g}")
    records = [record for folder in args.records for record in load_records(folder).records.values()]
    plan = plan_hashes(args.suite)
    found = sweeps(records, plan)
    others = len(sweeps(records)) - len(found)
    if others:  # the suite's other records in the folder (other rungs and seeds), or a protocol the check has left
        print(f"{others} full sweeps not in {args.suite.name}'s plan, left out", file=sys.stderr)
    if not found:
        print(f"error: no full sweep with every candidate's validation curve in {' '.join(map(str, args.records))}",
              file=sys.stderr)
        return 2
    head, body, summary_head, summary = tables(found, args.at, args.tolerance, args.keep_within)
    fmt = "github" if args.markdown else "simple"
    print(tabulate(body, headers=head, tablefmt=fmt, disable_numparse=True))
    print()
    print(tabulate(summary, headers=summary_head, tablefmt=fmt, disable_numparse=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
