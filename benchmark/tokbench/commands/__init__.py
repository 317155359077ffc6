"""Subcommands of the ``tokbench`` CLI, one module each (see ``tokbench.cli``)."""
from __future__ import annotations

import argparse
import os
import sys

from rich.console import Console

from tokbench.plugins import Registry, registry

PIPED_WIDTH = 100_000  # piped output is never folded at 80 columns: names stay whole for grep and scripts


def output_console() -> Console:
    """A rich console on stdout: the terminal's width; piped, the width ``COLUMNS`` sets, else wide enough that
    nothing wraps."""
    console = Console()
    if console.is_terminal:
        return console
    columns = os.environ.get("COLUMNS", "").strip()
    return Console(width=int(columns) if columns.isdigit() and int(columns) > 0 else PIPED_WIDTH, color_system=None)


def loaded_registry(warn: bool = True) -> Registry:
    """The plugin registry; the host's notes (unknown plugin names, old contracts) and, with ``warn``, each
    failed plugin are reported as one warning line each on stderr."""
    reg = registry()
    for line in reg.notes + (reg.warnings() if warn else []):
        print(f"tokbench: warning: {line}", file=sys.stderr)
    return reg


def _at_least(text: str, least: int) -> int:
    """An integer >= ``least`` parsed from ``text``, or argparse's one-line usage error."""
    try:
        value = int(text)
    except ValueError:
        value = least - 1
    if value < least:
        raise argparse.ArgumentTypeError(f"expected an integer >= {least}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    return _at_least(text, 1)


def nonnegative_int(text: str) -> int:
    """An argparse type: an integer >= 0."""
    return _at_least(text, 0)


def thread_count(text: str) -> int:
    """An argparse type: an integer from 1 to the machine's cores (torch would try to start every thread)."""
    value = positive_int(text)
    cores = os.cpu_count() or 1
    if value > cores:
        raise argparse.ArgumentTypeError(f"expected at most {cores} (this machine's cores), got {text!r}")
    return value
