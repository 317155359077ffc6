"""Subcommands of the ``tokbench`` CLI, one module each (see ``tokbench.cli``)."""
from __future__ import annotations

import sys

from tokbench.plugins import Registry, registry


def loaded_registry(warn: bool = True) -> Registry:
    """The plugin registry; each failed plugin is reported as one warning line on stderr."""
    reg = registry()
    if warn:
        for line in reg.warnings():
            print(f"tokbench: warning: {line}", file=sys.stderr)
    return reg
