"""The ``tokbench`` command line: parse, dispatch to a command module, report errors.

Each module in ``tokbench.commands`` adds its subcommands through
``register(subparsers)``; a new module is picked up without editing this file. Command modules import torch and Lightning inside
their handlers only, so ``--help``, ``ls`` and ``plugins`` stay fast.
"""
from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import signal
import sys
from collections.abc import Sequence

from tokbench import __version__, commands
from tokbench.errors import StorageError, UsageError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_STORAGE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE  # what a shell reports for a writer that the closed pipe's SIGPIPE ended
EXIT_CODES = """Exit codes: 0 all ok; 1 some pairing failed (not applicable pairings are not failures); 2 usage error \
(a bad name, flag, value or file content); 3 I/O or environment error (a read-only or full disk, an unwritable \
--out, a FIFO or device where a file should be); 130 interrupted (what finished is kept; rerun to resume); 141 the \
reader of the output left, as in `| head` (stopped quietly)."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line on stderr and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="tokbench",
        description="Benchmark attention models on token-selection tasks (random walks, deterministic walks, "
        "SCC automata and whatever plugins add).",
        epilog="Plugins: TOKBENCH_PLUGINS=a,b loads only the named plugins; TOKBENCH_DISABLE_PLUGINS=a,b skips "
        "them; TOKBENCH_PLUGIN_TIMEOUT=SECONDS bounds each plugin's import and hooks (default 30). " + EXIT_CODES,
    )
    parser.add_argument("--version", action="version", version=f"tokbench {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        importlib.import_module(f"tokbench.commands.{info.name}").register(subparsers)
    return parser


def _terminated(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM (timeout, kill, a batch scheduler) stops like Ctrl+C: workers end, records stay


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        return _handle(args)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _handle(args: argparse.Namespace) -> int:
    try:
        return int(args.handler(args) or 0)
    except UsageError as exc:
        print(f"tokbench: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except StorageError as exc:
        print(f"tokbench: error: {exc}", file=sys.stderr)
        return EXIT_STORAGE
    except BrokenPipeError:  # the reader of our output left (`| head`): stop quietly, as `ls | head` does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit's own flush would raise again
        return EXIT_BROKEN_PIPE
    except OSError as exc:  # any other failed read or write: the environment's, not a bug to show as a traceback
        print(f"tokbench: error: {StorageError.from_os(exc)}", file=sys.stderr)
        return EXIT_STORAGE
    except KeyboardInterrupt:
        print("tokbench: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
