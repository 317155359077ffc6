"""``tokbench leaderboard``: tables, notes and plots computed from run records only."""
from __future__ import annotations

import argparse
from pathlib import Path

from tokbench.errors import UsageError
from tokbench.leaderboard.publish import FORMATS

DEFAULT_RECORDS = Path("runs")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "leaderboard", help="aggregate run records into tables, notes and plots",
        description="Aggregate run records (mean accuracy over seeds with a 95%% Student's t interval, the "
                    "Bayes optimum, diagnostics) and render them. Reads the records only, never the plugins.")
    parser.add_argument("--records", action="append", type=Path, metavar="DIR",
                        help="folder of run records, searched recursively; repeat to merge "
                             f"(default: {DEFAULT_RECORDS})")
    parser.add_argument("--format", choices=FORMATS, default="terminal",
                        help="terminal (default), md, csv, json, html, latex, or all: every format, the plots "
                             "and a copy of the records, written into --out (the published folder)")
    parser.add_argument("--out", type=Path, metavar="DIR", help="write the file(s) into DIR instead of printing")
    parser.set_defaults(handler=_leaderboard)


def _leaderboard(args: argparse.Namespace) -> int:
    from tokbench.leaderboard import aggregate, publish, records

    if args.format == "all" and args.out is None:
        raise UsageError("--format all writes a folder: give --out DIR")
    if args.format == "terminal" and args.out is not None:
        raise UsageError("--format terminal prints; with --out choose md, csv, json, html, latex or all")
    folders = args.records or [DEFAULT_RECORDS]
    loaded = records.load(folders)
    board = aggregate.build(loaded)
    if args.format == "terminal":
        publish.show(board)
    elif args.format == "all":
        written = publish.publish(board, loaded, folders, args.out)
        print(f"wrote {len(written)} files and {len(loaded)} records into {args.out}")
    elif args.out is not None:
        print(f"wrote {publish.write_format(board, args.format, args.out)}")
    else:
        print(publish.render(board, args.format), end="")
    return 0
