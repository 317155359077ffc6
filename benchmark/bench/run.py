"""tokbench's speed benchmark: ratios measured side by side in one run.

    python benchmark/bench/run.py [--quick] [--only walks,scc,grid,plan,...]

Each section module beside this file exposes ``run(quick) -> [(name, value, note)]``.
Machines are shared and noisy, so every figure is a ratio of two timings taken
in the same run, alternating the two sides and keeping the median.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path

SECTIONS = ("walks", "scc", "grid", "plan", "single", "models", "families", "stack", "cells", "cpucompile", "firstlook")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats and smaller sizes")
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections to run")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    import torch

    # One intra-op thread, as each `tokbench run` worker uses: on 2 shared cores a second thread
    # only waits for the other processes, which made single timings swing by up to 10x.
    torch.set_num_threads(1)
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"tokbench benchmark ({os.cpu_count()} cores{', quick' if args.quick else ''})")
    for column in ("section", "measurement", "value", "note"):
        table.add_column(column, overflow="fold")
    for name in args.only.split(","):
        for measurement, value, note in importlib.import_module(name).run(args.quick):
            table.add_row(name, measurement, f"{value:.3g}", note)
    Console().print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
