"""Where a run's time went: the training time its records report, per task, with each task's share.

    python benchmark/tools/cost_by_task.py leaderboard/records/tokbench [--by task|model]

Each record's ``train.wall_seconds`` is the time its worker spent on the pairing (sweep
candidates, training and evaluation). With ``--jobs N`` on N idle cores the shares split the
run's wall time; the absolute seconds depend on the machine and its load, the shares much less.
"""
from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

from tabulate import tabulate

from tokbench.results import load_records


def cost_table(folder: Path, by: str) -> list[tuple[str, int, float, float]]:
    """``(name, pairings, seconds, share)`` per task (or model), most expensive first, then a total row."""
    seconds: dict[str, float] = defaultdict(float)
    pairings: dict[str, int] = defaultdict(int)
    for record in load_records(folder).records.values():
        seconds[record[by]] += record.get("train", {}).get("wall_seconds") or 0.0
        pairings[record[by]] += 1
    total = sum(seconds.values())
    rows = [(name, pairings[name], seconds[name], seconds[name] / total if total else 0.0)
            for name in sorted(seconds, key=seconds.get, reverse=True)]
    return [*rows, ("total", sum(pairings.values()), total, 1.0 if total else 0.0)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", type=Path, help="a folder of run records")
    parser.add_argument("--by", choices=("task", "model"), default="task", help="group by task (default) or model")
    args = parser.parse_args()
    rows = cost_table(args.records, args.by)
    print(tabulate([(name, n, f"{s:.0f}", f"{share:.1%}") for name, n, s, share in rows],
                   headers=[args.by, "pairings", "seconds", "share"], colalign=("left", "right", "right", "right")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
