"""Compare two folders of run records pairing by pairing: the same metrics, or where they differ.

Written to check that a change of tokbench's internals left every number alone, for example the
move to contract v2, which added recipe keys (and so changed every config hash) but must not change
a single metric. Pairings are matched on what identified them in both versions: task and model with
their versions and parameters, the seed, and the recipe keys that both records have, each at the
value that the older record states (a newer recipe key at its default means the same training). A
newer record with an empty recipe (a model without training, whose identity leaves the recipe out)
matches whatever recipe the older record states.

    python benchmark/tools/compare_records.py BEFORE_DIR AFTER_DIR

Prints one line per pairing that differs and a summary; exits 1 if any metric differs or a
pairing of BEFORE has no counterpart in AFTER, else 0.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tokbench.results import load_records
from tokbench.specs import Recipe

NEW_KEY_DEFAULTS = Recipe().to_json()


def match_key(record: Mapping[str, Any], recipe_keys: set[str]) -> str:
    """The identity of ``record`` restricted to ``recipe_keys``; a missing key stands at its default.
    Without ``recipe_keys`` the recipe is left out."""
    train = {k: record["params"]["train"].get(k, NEW_KEY_DEFAULTS.get(k)) for k in sorted(recipe_keys)}
    ident = {k: record[k] for k in ("task", "task_version", "model", "model_version", "seed")}
    return json.dumps({**ident, "task_params": record["params"]["task"], "model_params": record["params"]["model"],
                       "train": train}, sort_keys=True, default=list)


def compare(before: Mapping[str, dict], after: Mapping[str, dict]) -> tuple[int, list[str]]:
    """Number of pairings compared, and a line per difference."""
    old_keys = set().union(*(r["params"]["train"] for r in before.values())) if before else set()
    by_key = {match_key(r, old_keys if r["params"]["train"] else set()): r for r in after.values()}
    problems, compared = [], 0
    for record in before.values():
        label = f"{record['task']} / {record['model']} seed {record['seed']} ({record['config_hash']})"
        other = by_key.get(match_key(record, old_keys)) or by_key.get(match_key(record, set()))
        if other is None:
            problems.append(f"{label}: no counterpart")
            continue
        compared += 1
        if record["status"] != other["status"]:
            problems.append(f"{label}: status {record['status']} -> {other['status']}")
            continue
        old, new = record["metrics"], other["metrics"]
        for name in sorted(set(old) | set(new)):
            if old.get(name) != new.get(name):
                problems.append(f"{label}: {name} {old.get(name)!r} -> {new.get(name)!r}")
    return compared, problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args(argv)
    before, after = load_records(args.before).records, load_records(args.after).records
    compared, problems = compare(before, after)
    for line in problems:
        print(line)
    print(f"{compared} of {len(before)} pairings compared, {len(problems)} differences")
    return 1 if problems or not compared else 0


if __name__ == "__main__":
    sys.exit(main())
