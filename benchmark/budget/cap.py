"""The cap check: would a run the protocol ends at its cap end higher with twice the steps?

    python benchmark/budget/cap.py SUITE_RECORDS [SUITE_RECORDS ...] CAP_RECORDS [--suite FILE] [--tolerance 0.01]
                                   [--markdown]

``benchmark/budget/cap.toml`` retrains cells of the tokbench suite (the pruning check's sweeps, its middle rung at
seed 0, in the SUITE_RECORDS folders) with the candidate each sweep chose, one candidate, and every key of the
protocol but the cap: twice the steps, the schedule (warm-up and cosine decay) sized to them, the budgets extended to the new cap,
and a plateau rule that was off (patience = the cap) still off. The same seed gives the same initialisation and
batches. This prints, per cell, the suite record's test accuracy at its cap, the longer run's at its own, the
gain (``pending`` where the longer run has no record yet) and the validation gain (:func:`smoothed_gain`: the mean
of each run's last validation checks, which a constant rate's final iterate does not move), then how many cells
end within ``tolerance`` and how many gain at most ``tolerance`` on validation.

Each planned run is matched with the suite record it retrains by :func:`source_key`: the record's identity with
the cap's keys (:data:`CAP_KEYS`) left out and its sweep narrowed to its choice. A planned run without such a
record is an error (a block that retrains no cell, or another choice than the suite's): the check would measure
something else.
"""
from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tabulate import tabulate

from stopping import device_kind, planned_pairings
from tokbench.results import canonical_json, load_records
from tokbench.specs import candidate_key

#: the recipe keys a cap run changes: the cap, the schedule's warm-up (a share of the cap), its budgets, its plateau
#: rule (off either way) and its sweep, narrowed to the suite record's choice
CAP_KEYS = ("steps", "warmup_steps", "budgets", "patience", "lr", "lr_grid", "weight_decay", "wd_grid")


@dataclass(frozen=True)
class Cell:
    """One retrained cell: the suite's run at its cap and, once trained, the same run at a longer cap."""

    task: str
    rung: str  # the suite record's setting on its task's ladder ("k=16"), empty off a ladder
    model: str
    seed: int
    lr: float
    weight_decay: float
    cap: int
    accuracy: float
    longer_cap: int | None  # None: no run (paired() found none)
    longer: float | None  # None: not trained yet
    val_gain: float | None = None  # :func:`smoothed_gain`; None where a curve is missing

    @property
    def gain(self) -> float | None:
        return None if self.longer is None else self.longer - self.accuracy


def source_key(task: str, model: str, seed: int, params: Mapping[str, Any], lr: float, weight_decay: float) -> str:
    """What a suite record and the cap run that retrains it share: task, model, seed, their parameters, the recipe
    but for :data:`CAP_KEYS`, and the chosen rate and weight decay."""
    train = {key: value for key, value in params["train"].items() if key not in CAP_KEYS}
    return canonical_json([task, model, seed, params["task"], params["model"], train, lr, weight_decay])


def chosen_key(record: Mapping[str, Any]) -> str:
    """The :func:`source_key` of a suite record: what a cap run that retrains its choice shares with it."""
    train = record["train"]
    return source_key(record["task"], record["model"], record["seed"], record["params"],
                      train["lr"], train.get("weight_decay", 0.0))


def planned_key(params: Mapping[str, Any], task: str, model: str, seed: int) -> str:
    """The :func:`source_key` of a cap run (its sweep narrowed to one candidate): the suite record it retrains."""
    train = params["train"]
    (lr,) = train.get("lr_grid") or [train["lr"]]
    (weight_decay,) = train.get("wd_grid") or [train.get("weight_decay", 0.0)]
    return source_key(task, model, seed, params, lr, weight_decay)


def plan(suite: Path) -> list[tuple[str, str, str, int, Mapping[str, Any]]]:
    """The cap suite's runs: ``(config hash, task, model, seed, params)`` each."""
    return [(p.config_hash, p.task_spec.name, p.model_spec.name, p.seed, p.variant.params)
            for p in planned_pairings(suite)]


def _cap(record: Mapping[str, Any]) -> int:
    return record["params"]["train"]["steps"]


#: validation checks averaged at the end of a run by :func:`smoothed_gain` (1000 steps at the suite's eval_every)
WINDOW = 10


def val_curve(record: Mapping[str, Any]) -> tuple[list[int], list[float]] | None:
    """The validation checks of the candidate a record kept (its sweep's curve of the chosen rate and weight
    decay), or None where the record holds none (records before 2026-12-06 kept no curves)."""
    train = record.get("train", {})
    if "lr" not in train:
        return None
    key = candidate_key(train["lr"], train.get("weight_decay", 0.0), bool(record["params"]["train"].get("wd_grid")))
    curve = (train.get("lr_selection_val_curve") or {}).get(key)
    return None if curve is None else (curve["step"], curve["accuracy"])


def _continues(source: Mapping[str, Any], longer: Mapping[str, Any]) -> bool:
    """Under a constant rate with no warm-up the longer run is the shorter one continued, check for check."""
    return all(r["params"]["train"].get("schedule", "constant") == "constant"
               and not r["params"]["train"].get("warmup_steps") for r in (source, longer))


def smoothed_gain(source: Mapping[str, Any], longer: Mapping[str, Any]) -> float | None:
    """The mean validation accuracy of the longer run's last :data:`WINDOW` checks minus the shorter run's: whether
    the model still learns, without the final iterate's own motion (under a constant rate one test accuracy moves by
    about 0.01-0.02 between checks on a plateau). The shorter run's checks are its own curve, or, where it kept
    none and both runs follow a constant rate, the longer run's checks up to the shorter cap. None where neither
    is there."""
    after = val_curve(longer)
    before = val_curve(source)
    if before is None and after is not None and _continues(source, longer):
        cap = _cap(source)
        before = tuple(zip(*[(step, acc) for step, acc in zip(*after) if step <= cap])) or None
    if before is None or after is None:
        return None
    return sum(after[1][-WINDOW:]) / len(after[1][-WINDOW:]) - sum(before[1][-WINDOW:]) / len(before[1][-WINDOW:])


def _cell(source: Mapping[str, Any], longer_cap: int | None, longer: Mapping[str, Any] | None) -> Cell:
    axes = (source.get("ladder") or {}).get("axes", {})
    train = source["train"]
    return Cell(source["task"], ",".join(f"{k}={v}" for k, v in axes.items()), source["model"], source["seed"],
                train["lr"], train.get("weight_decay", 0.0), _cap(source), source["metrics"]["accuracy"], longer_cap,
                None if longer is None else longer["metrics"]["accuracy"],
                None if longer is None else smoothed_gain(source, longer))


def _ok(records: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [r for r in records if r.get("status") == "ok" and r.get("params", {}).get("train", {}).get("steps")]


def _one_candidate(run: Mapping[str, Any]) -> bool:
    """A cap run trains one candidate (a sweep's records are suite records, not cap runs)."""
    train = run["params"]["train"]
    return len(train.get("lr_grid") or [0]) == 1 and len(train.get("wd_grid") or [0]) == 1


def cells(planned: Sequence[tuple[str, str, str, int, Mapping[str, Any]]], suite_records: Iterable[Mapping[str, Any]],
          longer_records: Mapping[str, Mapping[str, Any]]) -> list[Cell]:
    """Each planned run with the suite record it retrains and its own record where it has one (by config hash),
    sorted by task, model, rung (in its ladder's order) and seed. A run retrains the record of its choice whose cap
    is the longest below its own (a record at the same cap is another run of the protocol, not a shorter one).

    Raises ValueError for a planned run that retrains no suite record: a choice the suite did not make."""
    sources: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for record in _ok(suite_records):
        sources[chosen_key(record)].append(record)
    found = []
    for config_hash, task, model, seed, params in planned:
        steps = params["train"]["steps"]
        source = max((r for r in sources[planned_key(params, task, model, seed)] if _cap(r) < steps), key=_cap,
                     default=None)
        if source is None:
            raise ValueError(f"{task} x {model} seed {seed}: no suite record chose this run's rate and weight decay "
                             "with the same task, model and protocol at a shorter cap")
        longer = longer_records.get(config_hash)
        if longer is not None and device_kind(longer) != device_kind(source):
            longer = None  # a pair across kinds of device measures both (the stopping check's rule): not this one
        found.append((source, _cell(source, steps, longer)))
    ranked = sorted(found, key=lambda pair: (pair[1].task, pair[1].model, (pair[0].get("ladder") or {}).get("rung", -1),
                                             pair[1].seed))
    return [cell for _, cell in ranked]  # a ladder's rungs in its order, not by their text


def paired(records: Iterable[Mapping[str, Any]], runs: Iterable[Mapping[str, Any]]) -> list[Cell]:
    """Each suite record (ok, with a cap) with the run of ``runs`` that retrains its choice at the shortest cap above
    its own on the same kind of device (the cell's ``longer`` is None where none does), in the order of ``records``.
    A tie between two runs or two records at one cap goes to the first."""
    longer: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for run in filter(_one_candidate, _ok(runs)):
        longer[planned_key(run["params"], run["task"], run["model"], run["seed"])].append(run)
    found = []
    for record in _ok(records):
        run = min((r for r in longer[chosen_key(record)]
                   if _cap(r) > _cap(record) and device_kind(r) == device_kind(record)), key=_cap, default=None)
        found.append(_cell(record, None if run is None else _cap(run), run))
    return found


def summary(found: Sequence[Cell], tolerance: float) -> list[Any]:
    """``[cells, trained, within tolerance, share, largest gain, validation gain at most tolerance]``; accuracies
    are counts over a test set, so a difference is rounded before it is compared (0.793 - 0.783 is
    0.010000000000000009 in floats). The last counts the trained cells whose :func:`smoothed_gain` is at most
    ``tolerance`` (a loss counts as no gain), of those with one."""
    gains = [c.gain for c in found if c.gain is not None]
    within = sum(round(abs(gain), 9) <= tolerance for gain in gains)
    smoothed = [c.val_gain for c in found if c.gain is not None and c.val_gain is not None]
    return [len(found), len(gains), within, within / len(gains) if gains else None, max(gains, default=None),
            f"{sum(round(gain, 9) <= tolerance for gain in smoothed)} of {len(smoothed)}" if smoothed else None]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("suite_records", type=Path, nargs="+",
                        help="folders of the suite records the check retrains (read as one)")
    parser.add_argument("cap_records", type=Path, help="records of benchmark/budget/cap.toml")
    parser.add_argument("--suite", type=Path, default=Path(__file__).with_name("cap.toml"),
                        help="the cap check's suite (default: cap.toml beside this script)")
    parser.add_argument("--tolerance", type=float, default=0.01, help="largest |longer - suite| counted as equal")
    parser.add_argument("--markdown", action="store_true", help="GitHub tables instead of plain text")
    args = parser.parse_args(argv)
    suite_records = [record for folder in args.suite_records for record in load_records(folder).records.values()]
    try:
        found = cells(plan(args.suite), suite_records, load_records(args.cap_records).records)
    except ValueError as exc:
        print(f"cap.py: {exc}", file=sys.stderr)
        return 2
    fmt = "github" if args.markdown else "simple"
    # a column of numbers and "pending" is text to tabulate: its numbers are formatted here
    print(tabulate([[c.task, c.rung, c.model, c.seed, c.lr, c.weight_decay, c.cap, c.accuracy, c.longer_cap,
                     "pending" if c.longer is None else f"{c.longer:.3f}", "" if c.gain is None else f"{c.gain:+.3f}",
                     "" if c.val_gain is None else f"{c.val_gain:+.3f}"]
                    for c in found],
                   headers=["task", "rung", "model", "seed", "lr", "weight decay", "cap", "test", "longer cap", "test",
                            "gain", "validation gain"], tablefmt=fmt, floatfmt=("", "", "", "", "g", "g", "", ".3f"),
                   disable_numparse=[1, 9, 10, 11]))
    print()
    print(tabulate([summary(found, args.tolerance)],
                   headers=["cells", "trained", f"within {args.tolerance:g}", "share", "largest gain",
                            f"validation gain <= {args.tolerance:g}"],
                   tablefmt=fmt, floatfmt=".3f", disable_numparse=[5]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
