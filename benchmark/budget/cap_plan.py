"""Write the cap check's suite for the cells a section's page names "still learning at the cap".

    python benchmark/budget/cap_plan.py RECORDS [RECORDS ...] [--model PATTERN ...] [--factor 2]
                                        [--device cpu|cuda] [--skip-retrained CAP_RECORDS] > SUITE.toml

The leaderboard names a trained cell "still learning at the cap" where a run of it stopped at its step cap and
the cell's mean test accuracy rose by more than 0.02 over the last budget, or where its seeds split, some
stopping at their target and others at the cap (``budgets.still_rising``); its score may be a lower bound. The
cap check (``cap.toml``, ``cap.py``; benchmark/budget/README.md, "The cap check") asks whether it is: for each
such cell it retrains the lowest seed that stopped at the cap with the candidate that seed's sweep chose (its
learning rate and weight decay, one candidate) and every key of its recipe but the cap, which is ``--factor`` times longer, with the schedule's warm-up left to the recipe (it is sized to the cap), the
budgets extended to the new cap and a plateau rule that could not fire (patience at least the cap) kept so.
The same seed gives the same initialisation and batches, and ``cap.py`` pairs each run with the record it
retrains. With ``--skip-retrained`` a cell whose run a folder of cap runs already holds (at any longer cap, as
``cap.paired`` pairs them) is left out, so a later round trains only what is new. One ``[[grid]]`` block per
cell, each stating the record's task and model parameters in full, so the suite reproduces the cell whatever the
defaults of a later version are.
"""
from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import json
import shlex
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from cap import paired
from stopping import device_kind
from tokbench.leaderboard.aggregate import build
from tokbench.leaderboard.budgets import still_rising
from tokbench.results import load_records
from tokbench.specs import Recipe

#: recipe keys the cap run sets itself: the sweep (narrowed to the choice), and the warm-up, which the recipe sizes
#: to the new cap
SET_HERE = ("lr", "lr_grid", "weight_decay", "wd_grid", "warmup_steps")


def retrained(records: Iterable[Mapping[str, Any]], models: Sequence[str] = ("*",),
              device: str | None = None) -> list[Mapping[str, Any]]:
    """Per cell the page names still learning at the cap, of a model matching one of ``models``, the record its cap
    run retrains: the lowest seed that stopped at the cap (with ``device``, ``cpu`` or ``cuda``, the lowest trained
    on that kind of device, since a cap run pairs only with a run on its own kind; a cell with none is left out)."""
    found = []
    for item in still_rising(build(list(records))):
        if not any(fnmatch.fnmatchcase(item.cell.row.model, pattern) for pattern in models):
            continue
        capped = [rec for rec in item.cell.ok if rec["train"].get("stopped_because") == "cap"
                  and (device is None or device_kind(rec) == device)]
        if capped:
            found.append(min(capped, key=lambda rec: rec["seed"]))
    return found


def recipe(record: Mapping[str, Any], factor: int) -> dict[str, Any]:
    """The record's recipe with the cap ``factor`` times longer and its own choice of rate and weight decay."""
    params, train = record["params"]["train"], record["train"]
    cap = params["steps"]
    settable = {field.name for field in dataclasses.fields(Recipe)}  # not an identity-only key (schema 2's early_stop)
    longer = {key: value for key, value in params.items() if key in settable and key not in SET_HERE}
    longer.update(steps=factor * cap, lr=train["lr"], weight_decay=train.get("weight_decay", 0.0))
    if params.get("budgets"):
        longer["budgets"] = [*params["budgets"], factor * cap]
    if params.get("patience", 0) >= cap:  # a plateau rule no run could meet stays one
        longer["patience"] = factor * cap
    return longer


def _toml(value: Any) -> str:
    """A TOML value: JSON's forms of strings, numbers, booleans and arrays of them are TOML's."""
    if isinstance(value, Mapping) or value is None:
        raise ValueError(f"no TOML value for {value!r} in a suite's parameter table")
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    return json.dumps(value)


def _table(name: str, values: Mapping[str, Any]) -> list[str]:
    return [f"[{name}]", *(f"{key} = {_toml(value)}" for key, value in sorted(values.items())), ""]


def suite(records: Sequence[Mapping[str, Any]], factor: int, command: str) -> str:
    """The cap check's suite text: one block per retrained record, under a comment naming the ``command`` that
    wrote it."""
    lines = [f"# Written by `{command}`: regenerate it rather than edit it.", "",
             'description = "Cap check: the cells a page names still learning at the cap, retrained at their chosen '
             f'rate with {factor} times the steps (benchmark/budget/cap_plan.py)."', ""]
    for record in sorted(records, key=lambda r: (r["task"], r["model"], json.dumps(r["params"], sort_keys=True))):
        task, model = record["task"], record["model"]
        lines += ["[[grid]]", f"tasks = [{_toml(task)}]", f"models = [{_toml(model)}]", f"seeds = [{record['seed']}]",
                  ""]
        lines += _table("grid.train", recipe(record, factor))
        lines += _table("grid.sweep", {"lr_factors": [1.0], "weight_decay": [record["train"].get("weight_decay", 0.0)]})
        lines += _table(f'grid.model."{model}"', record["params"]["model"])
        lines += _table(f'grid.task."{task}"', record["params"]["task"])
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records", type=Path, nargs="+", help="folders of a section's records (read as one)")
    parser.add_argument("--model", nargs="+", default=("*",), metavar="PATTERN",
                        help="only cells of these models (glob patterns, e.g. 'attn-*'; default: every model)")
    parser.add_argument("--factor", type=int, default=2, help="the cap run's steps over the record's (default 2)")
    parser.add_argument("--device", choices=("cpu", "cuda"),
                        help="only records trained on this kind of device (a cap run pairs with its own kind only)")
    parser.add_argument("--skip-retrained", type=Path, metavar="CAP_RECORDS",
                        help="leave out the cells a run in this folder already retrains")
    args = parser.parse_args(argv)
    if args.factor < 2:
        parser.error(f"--factor must be 2 or more, not {args.factor}")
    for folder in [*args.records, *([args.skip_retrained] if args.skip_retrained else [])]:
        if not folder.is_dir():
            parser.error(f"no such records folder: {folder}")
    records = [record for folder in args.records for record in load_records(folder).records.values()]
    if not records:
        print(f"cap_plan.py: no records in {' '.join(map(str, args.records))}", file=sys.stderr)
        return 2
    found = retrained(records, args.model, args.device)
    if args.skip_retrained:
        runs = load_records(args.skip_retrained).records.values()
        found = [record for record, cell in zip(found, paired(found, runs)) if cell.longer is None]
    if not found:
        print("cap_plan.py: no cell is still learning at the cap; nothing to retrain", file=sys.stderr)
        return 1
    command = shlex.join(["python", "benchmark/budget/cap_plan.py", *(sys.argv[1:] if argv is None else argv)])
    print(suite(found, args.factor, command))
    return 0


if __name__ == "__main__":
    sys.exit(main())
