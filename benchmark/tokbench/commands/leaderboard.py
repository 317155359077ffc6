"""``tokbench leaderboard``: tables, notes and plots computed from run records only."""
from __future__ import annotations

import argparse
from pathlib import Path

from tokbench.errors import UsageError
from tokbench.leaderboard.publish import FORMATS
from tokbench.leaderboard.stats import INTERVAL

DEFAULT_RECORDS = Path("runs")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "leaderboard", help="aggregate run records into tables, notes and plots",
        description=f"Aggregate run records (mean accuracy over seeds with its {INTERVAL}; claims from tests; the "
                    "Bayes optimum; diagnostics) and render them. Reads the records only, never the plugins.")
    parser.add_argument("--records", action="append", metavar="[NAME=]DIR",
                        help="folder of run records, searched recursively; repeat to merge folders. NAME=DIR puts "
                             "the folder's records in a section of their own, e.g. one per suite "
                             f"(default: {DEFAULT_RECORDS})")
    parser.add_argument("--format", choices=FORMATS, default="terminal",
                        help="terminal (default), md, csv, json, html, latex, or all: every format, the plots "
                             "and a copy of the records, written into --out (the published folder)")
    parser.add_argument("--out", type=Path, metavar="DIR", help="write the file(s) into DIR instead of printing")
    parser.add_argument("--prune", action="store_true",
                        help="with --format all: also remove the plots, and the records in the published sections' "
                             "own folders, that an earlier publish wrote (the folder's SHA256SUMS lists them) and "
                             "this one did not; files tokbench did not write and other sections' records are kept. "
                             "Without it, publishing only adds or replaces files")
    parser.set_defaults(handler=_leaderboard)


def _leaderboard(args: argparse.Namespace) -> int:
    from tokbench.leaderboard import publish, records

    if args.format == "all" and args.out is None:
        raise UsageError("--format all writes a folder: give --out DIR")
    if args.format == "terminal" and args.out is not None:
        raise UsageError("--format terminal prints; with --out choose md, csv, json, html, latex or all")
    if args.prune and args.format != "all":
        raise UsageError("--prune applies to the published folder: use it with --format all --out DIR")
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out} is a file; --out names a folder to write into")
    sections = records.load_sections(args.records or [str(DEFAULT_RECORDS)])
    if args.out is not None:
        for source in (source for section in sections for source in section.sources):
            if args.out.resolve().is_relative_to(source.resolve()):
                raise UsageError(f"--out {args.out} is inside the records folder {source}: the files written there "
                                 "would be read as records; choose a folder outside it")
    if args.format == "terminal":
        publish.show(sections)
    elif args.format == "all":
        written = publish.publish(sections, args.out, prune=args.prune)
        count = sum(len(s.records) for s in sections)
        print(f"wrote {len(written)} files and {count} records into {args.out}")
    elif args.out is not None:
        print(f"wrote {publish.write_format(sections, args.format, args.out)}")
    else:
        print(publish.render(sections, args.format), end="")
    return 0
