"""A plugin whose hook calls sys.exit(0)."""
import sys

from tokbench import hookimpl

TOKBENCH_CONTRACT = 2


@hookimpl
def register_tasks(register):
    sys.exit(0)
